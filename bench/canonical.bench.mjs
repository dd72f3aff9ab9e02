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

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export default async function run(report) {
  for (const [label, size] of [
    ['10 KiB', 10 * 1024],
    ['1 MiB', 1024 * 1024],
  ]) {
    const value = makeValue(size);
    const bytes = Buffer.byteLength(JSON.stringify(value));
    // Alternate the two measurements over several rounds and take medians, so a
    // burst of load on the machine cannot fall on one side only.
    const baselines = [];
    const ours = [];
    for (let round = 0; round < 5; round += 1) {
      baselines.push(throughput(() => createHash('sha256').update(JSON.stringify(value)).digest('hex'), bytes, 300));
      ours.push(throughput(() => digestJson(value), bytes, 300));
    }
    const baseline = median(baselines);
    const measured = median(ours);
    report({
      name: `digestJson ${label} (median of 5 alternating rounds)`,
      value: measured,
      unit: 'MiB/s',
      baseline,
      baselineUnit: 'MiB/s (JSON.stringify + sha256)',
      ratio: measured / baseline,
      target: { min: 0.5 },
    });
  }
}
