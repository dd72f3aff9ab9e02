/**
 * The job queue in the embedded SQLite store: two tables in the store's own
 * database file (`proofgate_jobs`, `proofgate_job_workers`), reached through
 * a connection of the queue's own (WAL mode, a busy timeout), so that several
 * processes on one machine share it.
 *
 * Every change of a job is one IMMEDIATE transaction: SQLite lets one writer
 * at a time take the write lock, so two processes never take the same job or
 * two jobs of one queue (a job is taken only while no job of its queue is
 * locked). Runners poll every `pollMs`; an `add` in this process wakes the
 * runners of this process on the same file at once.
 *
 * Times: `runAt`, due checks and retry backoff use the queue's clock (tests
 * may pass a manual one); heartbeats and lock times always use the system
 * time, because other processes read them.
 */
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { errorMessage, newId, systemClock, type Clock, type JsonValue } from '../../core/index.js';
import { DATABASE_FILE } from '../../storage/sqlite/constants.js';
import { sqliteFailure } from '../../storage/sqlite/errors.js';
import { openSqliteDatabase } from '../../storage/sqlite/schema.js';
import { ProofgateError } from '../../core/index.js';
import {
  abortAfterGrace,
  stopOnce,
  checkJobSpec,
  closedQueueError,
  failureText,
  notifyObserver,
  retryDelayMs,
  runnerSettings,
  type JobCounts,
  type JobQueue,
  type JobRunner,
  type JobRunnerOptions,
  type JobSpec,
  type ListedJob,
  type RunnerSettings,
  type TakenJob,
} from './port.js';

export interface SqliteJobQueueOptions {
  /** The data directory of the embedded store (created if missing); the tables go into its database file, `proofgate.sqlite`. */
  readonly path: string;
  /** Source of job times: `runAt` defaults, due checks, retry backoff (default: the system clock). */
  readonly clock?: Clock;
  /** How long a write waits for another process's write lock (default 10 s). */
  readonly busyTimeoutMs?: number;
  /** Failures of the runners' own work (a poll, a heartbeat, a write after a job) and of `observe`; the runners go on. Default: ignored. */
  readonly onError?: (error: unknown) => void;
}

/** The version of the job tables this build writes (`proofgate_meta` key `jobs_schema_version`). */
export const SQLITE_JOBS_SCHEMA_VERSION = 1;

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS proofgate_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task TEXT NOT NULL,
    queue TEXT NOT NULL,
    job_key TEXT NOT NULL,
    live_key TEXT UNIQUE,
    payload TEXT NOT NULL,
    run_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    locked_by TEXT,
    locked_at INTEGER,
    last_error TEXT,
    created_at INTEGER NOT NULL
  )`,
  `CREATE INDEX IF NOT EXISTS proofgate_jobs_waiting ON proofgate_jobs (run_at, id) WHERE locked_by IS NULL AND attempts < max_attempts`,
  `CREATE INDEX IF NOT EXISTS proofgate_jobs_locked ON proofgate_jobs (queue, locked_by) WHERE locked_by IS NOT NULL`,
  `CREATE TABLE IF NOT EXISTS proofgate_job_workers (
    worker_id TEXT PRIMARY KEY,
    beat_at INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL
  ) WITHOUT ROWID`,
];

interface JobRow {
  readonly id: number;
  readonly task: string;
  readonly queue: string;
  readonly job_key: string;
  readonly live_key: string | null;
  readonly payload: string;
  readonly run_at: number;
  readonly attempts: number;
  readonly max_attempts: number;
  readonly locked_by: string | null;
  readonly last_error: string | null;
}

/** Runners of this process, by database file: an `add` wakes them at once. */
const wakers = new Map<string, Set<() => void>>();

function wakeAll(file: string): void {
  for (const wake of wakers.get(file) ?? []) wake();
}

function createTables(db: Database.Database, file: string): void {
  db.transaction(() => {
    const stored = db.prepare<[string], { value: string }>('SELECT value FROM proofgate_meta WHERE key = ?').get('jobs_schema_version');
    if (stored !== undefined && Number(stored.value) > SQLITE_JOBS_SCHEMA_VERSION) {
      throw new ProofgateError(
        'UNSUPPORTED_SCHEMA_VERSION',
        `${file} has job tables of version ${stored.value}; this build knows up to ${SQLITE_JOBS_SCHEMA_VERSION}`,
        { file, version: stored.value },
      );
    }
    for (const statement of SCHEMA) db.exec(statement);
    db.prepare('INSERT OR REPLACE INTO proofgate_meta (key, value) VALUES (?, ?)').run('jobs_schema_version', String(SQLITE_JOBS_SCHEMA_VERSION));
  }).immediate();
}

function listed(row: JobRow): ListedJob {
  return Object.freeze({
    id: String(row.id),
    task: row.task,
    queue: row.queue,
    key: row.job_key,
    payload: JSON.parse(row.payload) as JsonValue,
    runAt: new Date(row.run_at),
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    lockedBy: row.locked_by,
    lastError: row.last_error,
    failed: row.locked_by === null && row.attempts >= row.max_attempts,
  });
}

/** The statements a queue and its runners use, prepared once per connection. */
function statements(db: Database.Database) {
  return {
    byLiveKey: db.prepare<[string], JobRow>('SELECT * FROM proofgate_jobs WHERE live_key = ?'),
    replace: db.prepare<[string, string, string, number, number, number]>(
      `UPDATE proofgate_jobs SET task = ?, queue = ?, payload = ?, max_attempts = ?, run_at = min(run_at, ?),
         attempts = 0, last_error = NULL WHERE id = ?`,
    ),
    supersede: db.prepare<[number]>('UPDATE proofgate_jobs SET live_key = NULL, attempts = max_attempts WHERE id = ?'),
    insert: db.prepare<[string, string, string, string, string, number, number, number]>(
      `INSERT INTO proofgate_jobs (task, queue, job_key, live_key, payload, run_at, max_attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    list: db.prepare<[], JobRow>('SELECT * FROM proofgate_jobs ORDER BY run_at, id'),
    counts: db.prepare<[{ now: number }], JobCounts>(
      `SELECT task,
         count(*) FILTER (WHERE locked_by IS NULL AND attempts < max_attempts AND run_at <= @now) AS due,
         count(*) FILTER (WHERE locked_by IS NULL AND attempts < max_attempts AND run_at > @now) AS scheduled,
         count(*) FILTER (WHERE locked_by IS NOT NULL) AS running,
         count(*) FILTER (WHERE locked_by IS NULL AND attempts >= max_attempts) AS failed
       FROM proofgate_jobs GROUP BY task ORDER BY task`,
    ),
    take: db.prepare<[{ now: number; worker: string; tasks: string; wall: number }], JobRow>(
      `UPDATE proofgate_jobs SET attempts = attempts + 1, locked_by = @worker, locked_at = @wall
       WHERE id = (
         SELECT j.id FROM proofgate_jobs j
         WHERE j.locked_by IS NULL AND j.attempts < j.max_attempts AND j.run_at <= @now
           AND j.task IN (SELECT value FROM json_each(@tasks))
           AND NOT EXISTS (SELECT 1 FROM proofgate_jobs r WHERE r.queue = j.queue AND r.locked_by IS NOT NULL)
         ORDER BY j.run_at, j.id LIMIT 1)
       RETURNING *`,
    ),
    complete: db.prepare<[number, string]>('DELETE FROM proofgate_jobs WHERE id = ? AND locked_by = ?'),
    held: db.prepare<[number, string], JobRow>('SELECT * FROM proofgate_jobs WHERE id = ? AND locked_by = ?'),
    fail: db.prepare<[string, number, number]>('UPDATE proofgate_jobs SET last_error = ?, run_at = ?, locked_by = NULL, locked_at = NULL WHERE id = ?'),
    release: db.prepare<[number]>('UPDATE proofgate_jobs SET attempts = max(0, attempts - 1), locked_by = NULL, locked_at = NULL WHERE id = ?'),
    drop: db.prepare<[number]>('DELETE FROM proofgate_jobs WHERE id = ?'),
    heldBy: db.prepare<[string], JobRow>('SELECT * FROM proofgate_jobs WHERE locked_by = ?'),
    beat: db.prepare<[{ worker: string; now: number; host: string; pid: number }]>(
      `INSERT INTO proofgate_job_workers (worker_id, beat_at, started_at, host, pid) VALUES (@worker, @now, @now, @host, @pid)
       ON CONFLICT (worker_id) DO UPDATE SET beat_at = excluded.beat_at`,
    ),
    forget: db.prepare<[string]>('DELETE FROM proofgate_job_workers WHERE worker_id = ?'),
    dead: db.prepare<[{ since: number }], { locked_by: string }>(
      `SELECT DISTINCT j.locked_by FROM proofgate_jobs j
       WHERE j.locked_by IS NOT NULL AND j.locked_at < @since
         AND NOT EXISTS (SELECT 1 FROM proofgate_job_workers w WHERE w.worker_id = j.locked_by AND w.beat_at >= @since)`,
    ),
    unlock: db.prepare<[string, string]>(`UPDATE proofgate_jobs SET locked_by = NULL, locked_at = NULL, last_error = ? WHERE locked_by = ?`),
    forgetStale: db.prepare<[number]>('DELETE FROM proofgate_job_workers WHERE beat_at < ?'),
    ping: db.prepare('SELECT 1'),
  };
}

type Statements = ReturnType<typeof statements>;

interface Shared {
  readonly db: Database.Database;
  readonly sql: Statements;
  readonly file: string;
  readonly clock: Clock;
  readonly onError: (error: unknown) => void;
  /** Runs `fn` in an IMMEDIATE transaction, with SQLite's errors about the file typed. */
  write<T>(fn: () => T): T;
}

/**
 * Open the job queue in the embedded store's database file (creating the
 * store's schema first if the file is new). Synchronous; errors are typed
 * like the store's (`CORRUPT_DATABASE`, `NOT_OUR_DATABASE`,
 * `UNSUPPORTED_SCHEMA_VERSION`, `IO`, `INVALID_INPUT`).
 */
export function createSqliteJobQueue(options: SqliteJobQueueOptions): JobQueue {
  if (typeof options !== 'object' || options === null || typeof options.path !== 'string' || options.path === '') {
    throw new ProofgateError('INVALID_INPUT', 'path must name the data directory');
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? 10_000;
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) throw new ProofgateError('INVALID_INPUT', 'busyTimeoutMs must be an integer >= 0');
  const file = resolve(options.path, DATABASE_FILE);
  let db: Database.Database;
  try {
    db = openSqliteDatabase(options.path, busyTimeoutMs);
  } catch (error) {
    if (error instanceof ProofgateError) throw error;
    throw new ProofgateError('IO', `cannot use ${options.path} as a data directory: ${errorMessage(error)}`, { path: options.path });
  }
  let sql: Statements;
  try {
    createTables(db, file);
    sql = statements(db);
  } catch (error) {
    db.close();
    throw sqliteFailure(error, file);
  }
  const onError = options.onError ?? ((): void => undefined);
  const shared: Shared = {
    db,
    sql,
    file,
    clock: options.clock ?? systemClock,
    onError: (error) => {
      try {
        onError(sqliteFailure(error, file));
      } catch {
        // a failing error sink must not stop the runner
      }
    },
    write: (fn) => {
      try {
        return db.transaction(fn).immediate();
      } catch (error) {
        throw sqliteFailure(error, file);
      }
    },
  };
  const runners = new Set<SqliteRunner>();
  let closing: Promise<void> | null = null;
  const live = (): void => {
    if (closing !== null) throw closedQueueError();
  };

  return Object.freeze({
    kind: 'sqlite' as const,
    async add(spec: JobSpec): Promise<void> {
      live();
      const checked = checkJobSpec(spec);
      const now = shared.clock.now().getTime();
      const runAt = checked.runAt?.getTime() ?? now;
      shared.write(() => {
        const existing = sql.byLiveKey.get(checked.key);
        if (existing !== undefined && existing.locked_by === null && existing.attempts < existing.max_attempts) {
          sql.replace.run(checked.task, checked.queue, checked.payloadText, checked.maxAttempts, runAt, existing.id);
          return;
        }
        // Running (or failed): it keeps running but is not retried; the new job runs after it.
        if (existing !== undefined) sql.supersede.run(existing.id);
        sql.insert.run(checked.task, checked.queue, checked.key, checked.key, checked.payloadText, runAt, checked.maxAttempts, now);
      });
      wakeAll(file);
    },
    async run(runOptions: JobRunnerOptions): Promise<JobRunner> {
      live();
      const settings = runnerSettings(runOptions);
      const runner = new SqliteRunner(shared, settings, () => runners.delete(runner));
      runner.start();
      runners.add(runner);
      return runner;
    },
    async list(): Promise<ListedJob[]> {
      live();
      try {
        return sql.list.all().map(listed);
      } catch (error) {
        throw sqliteFailure(error, file);
      }
    },
    async counts(): Promise<JobCounts[]> {
      live();
      try {
        return sql.counts.all({ now: shared.clock.now().getTime() }).map((row) => Object.freeze({ ...row }));
      } catch (error) {
        throw sqliteFailure(error, file);
      }
    },
    async ping(): Promise<void> {
      live();
      try {
        sql.ping.get();
      } catch (error) {
        throw sqliteFailure(error, file);
      }
    },
    close(): Promise<void> {
      closing ??= (async () => {
        // Runners still going stop at once: their handlers are aborted and awaited, their jobs released.
        await Promise.all([...runners].map((runner) => runner.stop(0)));
        db.close();
      })();
      return closing;
    },
  });
}

interface Active {
  readonly controller: AbortController;
  done: Promise<void>;
}

/** What is left to write about a job whose write failed (retried on every poll). */
type Outcome = { readonly kind: 'completed' } | { readonly kind: 'failed'; readonly error: string } | { readonly kind: 'released' };

class SqliteRunner implements JobRunner {
  private readonly workerId = newId('worker');
  private stopped = false;
  private readonly active = new Map<number, Active>();
  /** Writes that failed (the database was busy past its timeout, say), retried on every poll and at stop. */
  private readonly unwritten = new Map<number, Outcome>();
  private readonly tasks: string;
  /** The stopping under way (`stop` returns it to every caller), or null. */
  stopping: Promise<void> | null = null;
  private pollTimer: NodeJS.Timeout | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private wakePending = false;
  private readonly wake = (): void => {
    if (this.wakePending || this.stopping !== null) return;
    this.wakePending = true;
    setImmediate(() => {
      this.wakePending = false;
      this.fill();
    });
  };

  constructor(
    private readonly shared: Shared,
    private readonly settings: RunnerSettings,
    private readonly onStopped: () => void,
  ) {
    this.tasks = JSON.stringify([...settings.handlers.keys()]);
  }

  /** One id per runner while it runs; none once it stopped (its heartbeat is gone). */
  get workerIds(): readonly string[] {
    return this.stopped ? [] : [this.workerId];
  }

  start(): void {
    this.shared.write(() => this.shared.sql.beat.run({ worker: this.workerId, now: Date.now(), host: hostname(), pid: process.pid }));
    let set = wakers.get(this.shared.file);
    if (set === undefined) wakers.set(this.shared.file, (set = new Set()));
    set.add(this.wake);
    this.pollTimer = setInterval(() => this.fill(), this.settings.pollMs);
    this.beatTimer = setInterval(() => this.heartbeat(), this.settings.heartbeatMs);
    this.heartbeat();
    this.fill();
  }

  private fill(): void {
    if (this.stopping !== null) return;
    this.retryUnwritten();
    while (this.active.size < this.settings.concurrency) {
      let row: JobRow | undefined;
      try {
        row = this.shared.write(() =>
          this.shared.sql.take.get({ now: this.shared.clock.now().getTime(), worker: this.workerId, tasks: this.tasks, wall: Date.now() }),
        );
      } catch (error) {
        this.shared.onError(error);
        return;
      }
      if (row === undefined) return;
      this.launch(row);
    }
  }

  private launch(row: JobRow): void {
    const controller = new AbortController();
    const job: TakenJob = Object.freeze({
      id: String(row.id),
      task: row.task,
      queue: row.queue,
      key: row.job_key,
      payload: JSON.parse(row.payload) as JsonValue,
      attempt: row.attempts,
      workerId: this.workerId,
      signal: controller.signal,
      held: () => Promise.resolve(this.shared.sql.held.get(row.id, this.workerId) !== undefined),
    });
    const entry: Active = { controller, done: Promise.resolve() };
    this.active.set(row.id, entry);
    entry.done = (async () => {
      this.observe({ kind: 'started', job });
      let failure: { readonly error: unknown } | null = null;
      try {
        const handler = this.settings.handlers.get(row.task)!;
        await handler(job);
      } catch (error) {
        failure = { error };
      }
      const outcome: Outcome = controller.signal.aborted
        ? { kind: 'released' }
        : failure === null
          ? { kind: 'completed' }
          : { kind: 'failed', error: failureText(failure.error) };
      this.finish(row.id, job, outcome);
      this.active.delete(row.id);
      wakeAll(this.shared.file);
    })();
  }

  /** Write a job's outcome (only while this worker still holds it) and tell the observer. */
  private finish(id: number, job: TakenJob | null, outcome: Outcome): void {
    const { sql } = this.shared;
    let final = false;
    try {
      this.shared.write(() => {
        const held = sql.held.get(id, this.workerId);
        if (held === undefined) return; // taken from this worker (it was thought dead): the new holder decides
        if (outcome.kind === 'completed') sql.complete.run(id, this.workerId);
        else if (outcome.kind === 'released') {
          // A job whose key was added again meanwhile is dropped: the newer job does its work.
          if (held.live_key === null) sql.drop.run(id);
          else sql.release.run(id);
        } else {
          const now = this.shared.clock.now().getTime();
          sql.fail.run(outcome.error, Math.max(now, held.run_at) + Math.round(retryDelayMs(held.attempts, this.settings.retryBaseMs)), id);
          final = held.attempts >= held.max_attempts;
        }
      });
      this.unwritten.delete(id);
    } catch (error) {
      this.unwritten.set(id, outcome);
      this.shared.onError(error);
    }
    if (job === null) return;
    if (outcome.kind === 'completed') this.observe({ kind: 'completed', job });
    else if (outcome.kind === 'failed') this.observe({ kind: 'failed', job, error: outcome.error, final });
  }

  private retryUnwritten(): void {
    for (const [id, outcome] of [...this.unwritten]) this.finish(id, null, outcome);
  }

  private heartbeat(): void {
    const { sql } = this.shared;
    try {
      const unlocked = this.shared.write(() => {
        const now = Date.now();
        sql.beat.run({ worker: this.workerId, now, host: hostname(), pid: process.pid });
        const since = now - this.settings.retakeMs;
        const dead = sql.dead.all({ since }).map((row) => row.locked_by);
        let jobs = 0;
        for (const workerId of dead) {
          jobs += sql.unlock.run(`worker ${workerId} stopped beating; its job was unlocked`, workerId).changes;
        }
        sql.forgetStale.run(since);
        return { dead, jobs };
      });
      if (unlocked.dead.length > 0) {
        this.observe({ kind: 'unlocked', workerIds: Object.freeze(unlocked.dead), jobs: unlocked.jobs });
        wakeAll(this.shared.file);
      }
    } catch (error) {
      this.shared.onError(error);
    }
  }

  private observe(event: Parameters<typeof notifyObserver>[1]): void {
    notifyObserver(this.settings, event, this.shared.onError);
  }

  stop(graceMs: number): Promise<void> {
    return stopOnce(this, graceMs, (grace) => this.stopNow(grace));
  }

  private async stopNow(graceMs: number): Promise<void> {
    clearInterval(this.pollTimer);
    const set = wakers.get(this.shared.file);
    set?.delete(this.wake);
    if (set?.size === 0) wakers.delete(this.shared.file);
    const abort = (): void => {
      for (const entry of this.active.values()) entry.controller.abort();
    };
    const cancelAbort = abortAfterGrace(graceMs, abort);
    while (this.active.size > 0) await Promise.all([...this.active.values()].map((entry) => entry.done));
    cancelAbort();
    clearInterval(this.beatTimer);
    this.retryUnwritten();
    // Anything still held (a write that keeps failing) is released, then the heartbeat goes.
    try {
      this.shared.write(() => {
        for (const row of this.shared.sql.heldBy.all(this.workerId)) {
          if (row.live_key === null) this.shared.sql.drop.run(row.id);
          else this.shared.sql.release.run(row.id);
        }
        this.shared.sql.forget.run(this.workerId);
      });
    } catch (error) {
      this.shared.onError(error);
    }
    this.stopped = true;
    this.onStopped();
  }
}
