/**
 * Real worker processes for the race attacks: github-races-worker.ts bundled
 * from the current source (rolldown, a few hundred ms; the built package in
 * dist/ may be older than the source), started as children on a fresh
 * PostgreSQL database, each behind a proxy of the rig. Their stdout lines
 * (job events, log lines, `pausing`) are kept for the test to wait on.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { rolldown } from 'rolldown';
import { LedgerStore, type LoadedLedger } from '../../src/automerge/loop/index.js';
import { createPostgresJobQueue, type JobQueue } from '../../src/service/jobs/index.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import type { RunStorage } from '../../src/storage/policy-types.js';
import { createPostgresRunStorage } from '../../src/storage/postgres/index.js';
import { startTestProcess } from '../support/processes.js';
import { until } from '../support/wait.js';
import { APP_ID, LEDGER_NAMESPACE, WEBHOOK_SECRET, type Proxy, type RaceRig } from './github-races-rig.js';
import type { RaceWorkerConfig } from './github-races-worker.js';

const REPO_ROOT = join(import.meta.dirname, '..', '..');

/** Bundle the worker entry into a directory of its own (its packages resolve through a node_modules link); returns the script. */
export async function bundleWorker(): Promise<{ readonly script: string; cleanup(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-races-worker-'));
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const script = join(dir, 'worker.mjs');
  const bundle = await rolldown({
    input: join(import.meta.dirname, 'github-races-worker.ts'),
    platform: 'node',
    // Our own code is bundled; every package stays outside and is loaded from node_modules.
    external: (id) => !id.startsWith('.') && !id.startsWith('/') && !id.startsWith('\0'),
    resolve: { extensionAlias: { '.js': ['.ts', '.js'] } },
    logLevel: 'warn',
  });
  try {
    await bundle.write({ file: script, format: 'esm' });
  } finally {
    await bundle.close();
  }
  return { script, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A fresh database on the server of `url`, dropped by `drop`. */
export async function freshDatabase(url: string): Promise<{ readonly url: string; drop(): Promise<void> }> {
  const name = `proofgate_races_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string): Promise<void> => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return { url: parsed.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

export interface WorkerLine {
  readonly kind: string;
  readonly pid: number;
  readonly task?: string;
  readonly queue?: string;
  readonly key?: string;
  readonly msg?: string;
  readonly url?: string;
  readonly jobs?: number;
  /** `performance.now()` in the test process when the line arrived. */
  at: number;
}

export interface RaceWorker {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly proxy: Proxy;
  /** The webhook endpoint. */
  readonly url: string;
  readonly lines: WorkerLine[];
  readonly exited: Promise<void>;
}

export interface WorkerSettings {
  readonly databaseUrl: string;
  readonly retakeMs: number;
  readonly leaseMs: number;
  readonly pause?: RaceWorkerConfig['pause'];
}

export async function startWorker(rig: RaceRig, script: string, name: string, settings: WorkerSettings): Promise<RaceWorker> {
  const proxy = await rig.proxy(name);
  const config: RaceWorkerConfig = {
    appId: APP_ID,
    privateKey: rig.privateKey,
    webhookSecret: WEBHOOK_SECRET,
    apiUrl: proxy.url,
    databaseUrl: settings.databaseUrl,
    workDir: join(rig.root, `worker-${name}`),
    remote: rig.remote,
    retakeMs: settings.retakeMs,
    leaseMs: settings.leaseMs,
    pollMs: 100,
    ...(settings.pause === undefined ? {} : { pause: settings.pause }),
  };
  const child = startTestProcess(process.execPath, [script], {
    env: { ...process.env, PROOFGATE_RACES_WORKER: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: WorkerLine[] = [];
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (text) => {
      const parsed = { ...(JSON.parse(text) as WorkerLine), at: performance.now() };
      lines.push(parsed);
      if (parsed.kind === 'ready') resolve(parsed.url ?? '');
    });
    void exited.then(() => reject(new Error(`worker ${name} exited before it was ready: ${stderr.slice(-2000)}`)));
  });
  const url = await ready;
  return { name, child, pid: child.pid!, proxy, url: `${url}/webhooks`, lines, exited };
}

/** Wait for a line of the worker (after index `from`) that matches. */
export async function lineOf(worker: RaceWorker, from: number, match: (line: WorkerLine) => boolean, what: string): Promise<WorkerLine> {
  let found: WorkerLine | undefined;
  await until(() => (found = worker.lines.slice(from).find(match)) !== undefined, what);
  return found as WorkerLine;
}

export { isStopped } from '../support/processes.js';

/** The test's own view of the workers' database: the job queue and the repository's ledger. */
export interface Shared {
  readonly queue: JobQueue;
  ledger(pr: number): Promise<LoadedLedger>;
  close(): Promise<void>;
}

export async function openShared(databaseUrl: string): Promise<Shared> {
  const queue = await createPostgresJobQueue({ connectionString: databaseUrl });
  let storage: RunStorage | null = null;
  let store: LedgerStore | null = null;
  return {
    queue,
    async ledger(pr) {
      storage ??= await createPostgresRunStorage({ connectionString: databaseUrl, namespace: LEDGER_NAMESPACE, policy: defaultStoragePolicy });
      store ??= new LedgerStore(storage.eventStore);
      return store.load(String(pr));
    },
    async close() {
      await queue.close();
      await storage?.close();
    },
  };
}
