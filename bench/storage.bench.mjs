// Storage benchmark: event appends per second through the adapters, in
// batches of 1 and of 100, against a bare INSERT loop into an equivalent
// table in the same database, with the same batching (one transaction per
// batch), measured in the same run. Target: at least 0.7x the baseline.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { defaultStoragePolicy } from '../dist/storage/policy.js';
import { createLocalRunStorage, DATABASE_FILE } from '../dist/storage/sqlite/index.js';
import { createPostgresRunStorage } from '../dist/storage/postgres/index.js';

const TARGET = 0.7;
const ROUNDS = 5;
const EVENTS = { 1: 1000, 100: 10_000 };

const eventData = (i) => ({ kind: 'node-completed', node: `node-${i % 17}`, attempt: 1, result: { passed: true, tests: i } });

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * Events per second of the adapter and of the baseline: the two runs take
 * turns, round after round, so that load changes on the machine hit both
 * alike; each figure is the median over the rounds.
 */
async function compare(adapterRun, baselineRun, events) {
  const timed = async (run, round) => {
    const started = process.hrtime.bigint();
    await run(round);
    return events / (Number(process.hrtime.bigint() - started) / 1e9);
  };
  const adapter = [];
  const baseline = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    adapter.push(await timed(adapterRun, round));
    baseline.push(await timed(baselineRun, round));
  }
  return { adapter: median(adapter), baseline: median(baseline) };
}

function batches(total, size, prefix) {
  const out = [];
  for (let start = 0; start < total; start += size) {
    out.push(Array.from({ length: size }, (_, j) => ({ id: `${prefix}-${start + j}`, type: 'bench.event', data: eventData(start + j) })));
  }
  return out;
}

function emit(report, name, value, baseline) {
  report({
    name,
    value: Math.round(value),
    unit: 'events/s',
    baseline: Math.round(baseline),
    baselineUnit: 'events/s',
    ratio: Number((value / baseline).toFixed(2)),
    target: TARGET,
  });
}

async function benchSqlite(report) {
  const directory = mkdtempSync(join(tmpdir(), 'proofgate-bench-'));
  try {
    const storage = createLocalRunStorage({ directory, namespace: 'bench', policy: defaultStoragePolicy });
    const db = new Database(join(directory, DATABASE_FILE));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec(`CREATE TABLE bench_baseline_events (
      position INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, stream_id TEXT NOT NULL,
      revision INTEGER NOT NULL, event_id TEXT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, recorded_at TEXT NOT NULL,
      UNIQUE (namespace, stream_id, revision), UNIQUE (namespace, event_id))`);
    db.exec('CREATE INDEX bench_baseline_events_by_position ON bench_baseline_events (namespace, position)');
    const insert = db.prepare(
      'INSERT INTO bench_baseline_events (namespace, stream_id, revision, event_id, type, data, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    const begin = db.prepare('BEGIN');
    const commit = db.prepare('COMMIT');
    for (const size of [1, 100]) {
      const total = EVENTS[size];
      const { adapter, baseline } = await compare(
        (round) => appendThroughAdapter(storage, total, size, round),
        async (round) => {
          let revision = 0;
          for (const batch of batches(total, size, `b${size}-${round}`)) {
            const now = new Date().toISOString();
            begin.run();
            for (const event of batch) {
              revision += 1;
              insert.run('bench', `baseline-${size}-${round}`, revision, event.id, event.type, JSON.stringify(event.data), now);
            }
            commit.run();
          }
        },
        total,
      );
      emit(report, `storage sqlite append, batches of ${size}`, adapter, baseline);
    }
    db.close();
    await storage.close();
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

/** The adapter side of a comparison: `total` events in batches of `size` through `eventStore.append`. */
async function appendThroughAdapter(storage, total, size, round) {
  let revision = 0;
  for (const batch of batches(total, size, `a${size}-${round}`)) {
    revision = (await storage.eventStore.append(`adapter-${size}-${round}`, revision, batch)).revision;
  }
}

async function benchPostgres(report, url) {
  const namespace = `bench-${process.pid}-${Date.now().toString(36)}`;
  const table = `proofgate_bench_baseline_${process.pid}`;
  const storage = await createPostgresRunStorage({ connectionString: url, namespace, policy: defaultStoragePolicy, maxConnections: 1 });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE TABLE ${table} (
      namespace text NOT NULL, position bigserial NOT NULL, stream_id text NOT NULL, revision integer NOT NULL,
      event_id text NOT NULL, type text NOT NULL, data text NOT NULL, recorded_at text NOT NULL,
      PRIMARY KEY (namespace, position), UNIQUE (namespace, stream_id, revision), UNIQUE (namespace, event_id))`);
    const insert = `INSERT INTO ${table} (namespace, stream_id, revision, event_id, type, data, recorded_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`;
    for (const size of [1, 100]) {
      const total = size === 1 ? 500 : 5000;
      const { adapter, baseline } = await compare(
        (round) => appendThroughAdapter(storage, total, size, round),
        async (round) => {
          let revision = 0;
          for (const batch of batches(total, size, `b${size}-${round}`)) {
            const now = new Date().toISOString();
            await client.query('BEGIN');
            for (const event of batch) {
              revision += 1;
              await client.query({
                name: 'bench_insert',
                text: insert,
                values: [namespace, `baseline-${size}-${round}`, revision, event.id, event.type, JSON.stringify(event.data), now],
              });
            }
            await client.query('COMMIT');
          }
        },
        total,
      );
      emit(report, `storage postgres append, batches of ${size}`, adapter, baseline);
    }
  } finally {
    await client.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await client.query('DELETE FROM proofgate_events WHERE namespace = $1', [namespace]).catch(() => undefined);
    await client.query('DELETE FROM proofgate_streams WHERE namespace = $1', [namespace]).catch(() => undefined);
    await client.query('DELETE FROM proofgate_namespaces WHERE namespace = $1', [namespace]).catch(() => undefined);
    await client.end();
    await storage.close();
  }
}

export default async function storageBench(report) {
  await benchSqlite(report);
  const url = process.env.PROOFGATE_TEST_DATABASE_URL ?? process.env.PROOFGATE_DATABASE_URL;
  if (url === undefined || url === '') {
    console.log('storage postgres append: skipped (set PROOFGATE_TEST_DATABASE_URL to measure PostgreSQL)');
    return;
  }
  await benchPostgres(report, url);
}
