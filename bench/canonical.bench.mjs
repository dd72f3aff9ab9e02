// Canonical digest (RFC 8785 + sha256) against JSON.stringify + sha256 of the same value.
import { createHash } from 'node:crypto';
import { digestJson } from '../dist/core/index.js';

function makeValue(targetBytes) {
  const items = [];
  let size = 2;
  let i = 0;
  while (size < targetBytes) {
    const item = {
      id: `item-${i}`,
      sha: createHash('sha256').update(String(i)).digest('hex'),
      count: i * 7,
      ratio: i / 3,
      ok: i % 2 === 0,
      tags: ['alpha', 'beta', `t${i % 13}`],
      note: `line ${i} with "quotes" and a tab\t`,
      nested: { z: i, a: null, m: [1, 2, 3] },
    };
    size += JSON.stringify(item).length + 1;
    items.push(item);
    i += 1;
  }
  return { kind: 'bench', items };
}

function throughput(fn, bytes, minMs) {
  for (let i = 0; i < 3; i += 1) fn();
  let runs = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < minMs) {
    fn();
    runs += 1;
    elapsed = Number(process.hrtime.bigint() - start) / 1e6;
  }
  return (bytes * runs) / (elapsed / 1000) / (1024 * 1024);
}

export default async function run(report) {
  for (const [label, size] of [['10 KiB', 10 * 1024], ['1 MiB', 1024 * 1024]]) {
    const value = makeValue(size);
    const bytes = Buffer.byteLength(JSON.stringify(value));
    const baseline = throughput(() => createHash('sha256').update(JSON.stringify(value)).digest('hex'), bytes, 700);
    const ours = throughput(() => digestJson(value), bytes, 700);
    report({
      name: `digestJson ${label}`,
      value: ours,
      unit: 'MiB/s',
      baseline,
      baselineUnit: 'MiB/s (JSON.stringify + sha256)',
      ratio: ours / baseline,
      target: { min: 0.5 },
    });
  }
}
