// Evidence bundles: verifying a 16 MiB bundle of 64 entries against `sha256sum`
// plus `unzip -t` of the same file, and how fast and how cheaply ZIP bombs are
// refused.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants, crc32, deflateRawSync } from 'node:zlib';
import { packEvidenceBundle, verifyEvidenceBundle } from '../dist/proof/index.js';

const MiB = 1024 * 1024;
const HEAD = 'c0ffee'.padEnd(40, '0');
const PLAN = `sha256:${'ab'.repeat(32)}`;

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function ms(start) {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

function onPath(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).status === 0;
}

/** 64 observation files that pack to about 16 MiB: 32 that do not compress (screenshots) and 32 text logs that compress about 4:1. */
function writeObservations(dir) {
  const words = ['request', 'reply', 'rendered', 'gateway', 'status=200', 'latency', 'ms', 'chat', 'message', 'user', 'bot', 'ok'];
  let seed = 7;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed;
  };
  for (let i = 0; i < 32; i += 1) writeFileSync(join(dir, `screens/shot-${String(i).padStart(2, '0')}.png`), randomBytes(432 * 1024));
  for (let i = 0; i < 32; i += 1) {
    const lines = [];
    let size = 0;
    while (size < 500 * 1024) {
      const line = `${String(next() % 100000).padStart(6, '0')} ${Array.from({ length: 8 }, () => words[next() % words.length]).join(' ')} ${next().toString(36)}\n`;
      lines.push(line);
      size += line.length;
    }
    writeFileSync(join(dir, `logs/run-${String(i).padStart(2, '0')}.log`), lines.join(''));
  }
}

/** `mebibytes` MiB of zeros as one raw deflate stream of about a KiB per MiB. */
function zerosDeflated(mebibytes) {
  const block = deflateRawSync(Buffer.alloc(MiB), { level: 9, finishFlush: constants.Z_SYNC_FLUSH });
  return Buffer.concat([...Array.from({ length: mebibytes }, () => block), Buffer.from([0x03, 0x00])]);
}

/**
 * A minimal ZIP writer for hostile archives: `records` central records, all
 * pointing at the one local header of `name0` whose data is `kernel`, each
 * declaring `declared` bytes with CRC `crc`.
 */
function forge(kernel, records, declared, crc, manifest) {
  const parts = [];
  const central = [];
  let at = 0;
  const local = (name, data, size, sum, method) => {
    const header = Buffer.alloc(30);
    header.writeUInt32LE(0x04034b50, 0);
    header.writeUInt16LE(20, 4);
    header.writeUInt16LE(0x0800, 6);
    header.writeUInt16LE(method, 8);
    header.writeUInt32LE(sum >>> 0, 14);
    header.writeUInt32LE(data.length, 18);
    header.writeUInt32LE(size, 22);
    header.writeUInt16LE(Buffer.byteLength(name), 26);
    const offset = at;
    parts.push(header, Buffer.from(name), data);
    at += 30 + Buffer.byteLength(name) + data.length;
    return offset;
  };
  const record = (name, offset, compressed, size, sum, method) => {
    const header = Buffer.alloc(46);
    header.writeUInt32LE(0x02014b50, 0);
    header.writeUInt16LE((3 << 8) | 20, 4);
    header.writeUInt16LE(20, 6);
    header.writeUInt16LE(0x0800, 8);
    header.writeUInt16LE(method, 10);
    header.writeUInt32LE(sum >>> 0, 16);
    header.writeUInt32LE(compressed, 20);
    header.writeUInt32LE(size, 24);
    header.writeUInt16LE(Buffer.byteLength(name), 28);
    header.writeUInt32LE((0o100644 << 16) >>> 0, 38);
    header.writeUInt32LE(offset, 42);
    central.push(header, Buffer.from(name));
  };
  const manifestBytes = Buffer.from(JSON.stringify(manifest));
  const manifestAt = local('manifest.json', manifestBytes, manifestBytes.length, crc32(manifestBytes), 0);
  const kernelAt = local('b0', kernel, declared, crc, 8);
  record('manifest.json', manifestAt, manifestBytes.length, manifestBytes.length, crc32(manifestBytes), 0);
  for (let i = 0; i < records; i += 1) record(`b${i}`, kernelAt, kernel.length, declared, crc, 8);
  const centralBytes = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(records + 1, 8);
  end.writeUInt16LE(records + 1, 10);
  end.writeUInt32LE(centralBytes.length, 12);
  end.writeUInt32LE(at, 16);
  return Buffer.concat([...parts, centralBytes, end]);
}

/** Time and added memory of one refusal: peak RSS and ArrayBuffer memory sampled while it runs, above what was in use before. */
async function refusal(bytes, expect) {
  const before = process.memoryUsage();
  let peakRss = before.rss;
  let peakBuffers = before.arrayBuffers;
  const sample = () => {
    const now = process.memoryUsage();
    peakRss = Math.max(peakRss, now.rss);
    peakBuffers = Math.max(peakBuffers, now.arrayBuffers);
  };
  const timer = setInterval(sample, 1);
  const start = process.hrtime.bigint();
  let reason = 'ACCEPTED';
  try {
    await verifyEvidenceBundle(bytes, expect);
  } catch (error) {
    reason = error.details?.reason ?? error.code ?? String(error);
  }
  const elapsed = ms(start);
  clearInterval(timer);
  sample();
  return { elapsed, rss: (peakRss - before.rss) / MiB, buffers: (peakBuffers - before.arrayBuffers) / MiB, reason };
}

async function bombs(report) {
  const kernel = zerosDeflated(36);
  const records = 114;
  const declared = 36 * MiB;
  const crc = crc32(Buffer.alloc(declared));
  const manifest = {
    schema: 'evidence-manifest.v1',
    scenario: 'bench',
    planDigest: PLAN,
    headSha: HEAD,
    observations: [],
  };
  const overlapBomb = forge(kernel, records, declared, crc, manifest);
  const expands = (records * declared) / (1024 * MiB);
  const liar = (claimed) => forge(kernel, 1, claimed, crc, { ...manifest, observations: [{ path: 'b0', sha256: `sha256:${'0'.repeat(64)}`, bytes: claimed }] });
  const smallLiar = liar(MiB);
  const largeLiar = liar(2 * MiB);
  const cases = [
    [`${(overlapBomb.length / 1024).toFixed(1)} KiB archive, ${records} entries sharing one kernel, ${expands.toFixed(2)} GiB declared`, overlapBomb, {}],
    ['same, ratio cap off (refused on the total cap)', overlapBomb, { limits: { maxRatio: Number.POSITIVE_INFINITY } }],
    ['same, ratio and total caps off (refused on the overlap)', overlapBomb, { limits: { maxRatio: Number.POSITIVE_INFINITY, maxTotalBytes: 2 ** 40 } }],
    [`${(smallLiar.length / 1024).toFixed(1)} KiB archive, one entry of 36 MiB declaring 1 MiB (inflated in one step, bounded to 1 MiB + 1)`, smallLiar, {}],
    [`${(largeLiar.length / 1024).toFixed(1)} KiB archive, one entry of 36 MiB declaring 2 MiB (streamed, stopped one piece past it)`, largeLiar, {}],
  ];
  for (const [label, bytes, expect] of cases) {
    await refusal(bytes, expect); // warm-up
    const runs = [];
    for (let i = 0; i < 15; i += 1) runs.push(await refusal(bytes, expect));
    const time = median(runs.map((run) => run.elapsed));
    const memory = Math.max(...runs.map((run) => Math.max(run.rss, run.buffers)));
    const reason = runs[0].reason;
    report({
      name: `bomb refused: ${label} (median of 15)`,
      value: time,
      unit: 'ms',
      baseline: 100,
      baselineUnit: 'ms (limit)',
      ratio: 100 / time,
      target: { min: 1 },
      note: reason,
    });
    report({
      name: `bomb refused: ${label}: added memory (largest of 15, RSS or ArrayBuffers, sampled every ms)`,
      value: memory,
      unit: 'MiB',
      baseline: 64,
      baselineUnit: 'MiB (limit)',
      ratio: 64 / Math.max(memory, 0.01),
      target: { min: 1 },
    });
  }
}

async function throughput(report) {
  const root = mkdtempSync(join(tmpdir(), 'pg-bench-evidence-'));
  try {
    const obs = join(root, 'obs');
    mkdirSync(join(obs, 'screens'), { recursive: true });
    mkdirSync(join(obs, 'logs'), { recursive: true });
    writeObservations(obs);
    const bundle = join(root, 'bundle.zip');
    await packEvidenceBundle({ dir: obs, scenario: 'bench', planDigest: PLAN, headSha: HEAD, out: bundle });
    const size = statSync(bundle).size;
    const unzip = onPath('unzip');
    const baselineRun = () => {
      const start = process.hrtime.bigint();
      const sum = spawnSync('sha256sum', [bundle], { encoding: 'utf8' });
      if (sum.status !== 0) throw new Error(`sha256sum failed: ${sum.stderr}`);
      if (unzip) {
        const test = spawnSync('unzip', ['-tqq', bundle], { encoding: 'utf8' });
        if (test.status !== 0) throw new Error(`unzip -t failed: ${test.stdout}${test.stderr}`);
      }
      return ms(start);
    };
    const ourRun = async () => {
      const start = process.hrtime.bigint();
      await verifyEvidenceBundle(bundle, { headSha: HEAD, planDigest: PLAN, scenario: 'bench' });
      return ms(start);
    };
    baselineRun();
    await ourRun();
    const baselines = [];
    const ours = [];
    for (let round = 0; round < 7; round += 1) {
      baselines.push(baselineRun());
      ours.push(await ourRun());
    }
    const base = median(baselines);
    const mine = median(ours);
    const mibs = size / MiB;
    report({
      name: `verify a ${mibs.toFixed(1)} MiB bundle of 64 entries (median of 7 alternating rounds)`,
      value: mibs / (mine / 1000),
      unit: 'MiB/s',
      baseline: mibs / (base / 1000),
      baselineUnit: unzip ? 'MiB/s (sha256sum + unzip -t, same file)' : 'MiB/s (sha256sum alone: unzip is not installed)',
      ratio: base / mine,
      target: { min: 0.8 },
      note: `${mine.toFixed(0)} ms against ${base.toFixed(0)} ms`,
    });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

export default async function run(report) {
  await throughput(report);
  await bombs(report);
}
