/**
 * The job queue on PostgreSQL, on graphile-worker 0.17: its tables and
 * functions in a schema of proofgate's own (default `proofgate_jobs`), its
 * runner (LISTEN/NOTIFY wakes workers when a job is added; `pollMs` is the
 * fallback), its `queue_name` for serial lanes, its `job_key` for the one
 * waiting job per key, and its attempts and backoff. What graphile-worker does
 * not do, done here in a few SQL steps on its tables:
 *
 * - earlier-runAt-wins: `job_key_mode` 'replace' takes the new run time and
 *   'preserve_run_at' keeps the old one; neither keeps the earlier of the two.
 *   `add` therefore locks the key's waiting job (FOR UPDATE, under an
 *   advisory lock per key so that two first adds do not race) and passes the
 *   earlier time to `add_job` in the same transaction.
 * - heartbeats: table `proofgate_workers` in the same schema, one row per
 *   graphile-worker pool (graphile-worker locks jobs in the pool's name, so
 *   the pool id is the worker id). Each runner beats, then sweeps: a worker
 *   whose locks are older than `retakeMs` and whose heartbeat is too is dead,
 *   and `force_unlock_workers` frees its jobs and queues.
 * - the end of a job is written by the runner itself (completion, failure with
 *   graphile-worker's backoff, or release on stop), each conditioned on the
 *   job still being locked by this pool; graphile-worker's own write that
 *   follows then finds nothing to do. This way an event is sent only once its
 *   write is committed, and a job released on stop gets its attempt back (the
 *   same step as graphile-worker's `returnJobs`) instead of being failed.
 * - graphile-worker stops every pool in the database when any schema in it is
 *   migrated with a breaking migration (the notification names no schema); a
 *   runner whose pool stops without being asked starts a new one, after
 *   checking that its own schema is still one this build can run.
 */
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { JobHelpers, Logger, TaskList, WorkerEvents, WorkerPool } from 'graphile-worker';
import { ProofgateError, errorMessage, lazyModule, type JsonValue } from '../../core/index.js';
import { inTransaction, loadPg } from '../../storage/postgres/index.js';
import {
  abortAfterGrace,
  stopOnce,
  checkJobSpec,
  closedQueueError,
  failureText,
  notifyObserver,
  runnerSettings,
  type JobCounts,
  type JobEvent,
  type JobQueue,
  type JobRunner,
  type JobRunnerOptions,
  type JobSpec,
  type ListedJob,
  type RunnerSettings,
  type TakenJob,
} from './port.js';

export interface PostgresJobQueueOptions {
  readonly connectionString: string;
  /** The schema holding graphile-worker's tables and proofgate's heartbeat table (default `proofgate_jobs`); created and migrated at open. */
  readonly schema?: string;
  /** Connections of the queue itself, for `add`, `list` and `ping` (default 4); each runner has its own pool of `concurrency + 3`. */
  readonly maxConnections?: number;
  /** Failures of the runners' own work (a heartbeat, a sweep, a write after a job, graphile-worker's errors) and of `observe`. Default: ignored. */
  readonly onError?: (error: unknown) => void;
}

export const DEFAULT_POSTGRES_JOB_SCHEMA = 'proofgate_jobs';
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
/** graphile-worker's exit code when it sees a breaking migration. */
const BREAKING_MIGRATION_EXIT_CODE = 57;

/** What proofgate stores as graphile-worker's payload: the key and queue survive graphile-worker clearing its own key column. */
interface StoredPayload {
  readonly key: string;
  readonly queue: string;
  readonly payload: JsonValue;
}

function storedPayloadText(key: string, queue: string, payloadText: string): string {
  return `{"key":${JSON.stringify(key)},"queue":${JSON.stringify(queue)},"payload":${payloadText}}`;
}

function readStored(raw: unknown, fallbackKey: string | null, fallbackQueue: string | null): StoredPayload {
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw) && 'payload' in raw && typeof (raw as { key?: unknown }).key === 'string') {
    const stored = raw as { key: string; queue?: unknown; payload: JsonValue };
    return { key: stored.key, queue: typeof stored.queue === 'string' ? stored.queue : (fallbackQueue ?? ''), payload: stored.payload };
  }
  return { key: fallbackKey ?? '', queue: fallbackQueue ?? '', payload: (raw ?? null) as JsonValue };
}

function databaseFailure(error: unknown): unknown {
  if (error instanceof ProofgateError) return error;
  return new ProofgateError('IO', `PostgreSQL job queue: ${errorMessage(error)}`, undefined, { cause: error });
}

/** graphile-worker, loaded when a PostgreSQL job queue is first opened. */
const loadWorker = lazyModule<typeof import('graphile-worker')>('graphile-worker');

function quietLogger(onError: (error: unknown) => void): Logger {
  return new (loadWorker().Logger)(() => (level, message, meta) => {
    if (level !== 'error' && level !== 'warning') return;
    // A job's failure: the runner has already written and observed it.
    if ((meta as { failure?: unknown } | undefined)?.failure === true) return;
    onError(new Error(`graphile-worker: ${message.replace(/\s*\n\s*/g, ' ')}`));
  });
}

function newPool(connectionString: string, max: number, onError: (error: unknown) => void): pg.Pool {
  const pool = new (loadPg().Pool)({ connectionString, max });
  pool.on('error', (error) => onError(error));
  pool.on('connect', (client) => client.on('error', (error) => onError(error)));
  return pool;
}

interface Shared {
  readonly connectionString: string;
  readonly schema: string;
  /** The schema, quoted for SQL text. */
  readonly s: string;
  readonly logger: Logger;
  readonly onError: (error: unknown) => void;
}

async function migrate(pool: pg.Pool, shared: Shared): Promise<void> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new ProofgateError('IO', `cannot connect to PostgreSQL: ${errorMessage(error)}`, undefined, { cause: error });
  }
  const lock = `proofgate_jobs:migrate:${shared.schema}`;
  try {
    await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [lock]);
    try {
      await loadWorker().runMigrations({ pgPool: pool, schema: shared.schema, logger: shared.logger });
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${shared.s}.proofgate_workers (
           worker_id text PRIMARY KEY,
           beat_at timestamptz NOT NULL,
           started_at timestamptz NOT NULL,
           host text NOT NULL,
           pid integer NOT NULL
         )`,
      );
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lock]);
    }
  } catch (error) {
    throw databaseFailure(error);
  } finally {
    client.release();
  }
}

interface ListedRow {
  readonly id: string;
  readonly task: string;
  readonly payload: unknown;
  readonly run_at: Date;
  readonly attempts: number;
  readonly max_attempts: number;
  readonly locked_by: string | null;
  readonly last_error: string | null;
  readonly key: string | null;
  readonly queue_name: string | null;
}

/**
 * Open the job queue in PostgreSQL: creates the schema and runs
 * graphile-worker's migrations (under an advisory lock, so processes that
 * start together do not race), then adds the heartbeat table. An unreachable
 * server is `IO`; bad options are `INVALID_INPUT`.
 */
export async function createPostgresJobQueue(options: PostgresJobQueueOptions): Promise<JobQueue> {
  if (typeof options !== 'object' || options === null || typeof options.connectionString !== 'string' || options.connectionString === '') {
    throw new ProofgateError('INVALID_INPUT', 'connectionString must be a postgres:// URL');
  }
  const schema = options.schema ?? DEFAULT_POSTGRES_JOB_SCHEMA;
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema)) {
    throw new ProofgateError('INVALID_INPUT', 'schema must be a lower-case SQL name (letters, digits, underscores; at most 63)');
  }
  const maxConnections = options.maxConnections ?? 4;
  if (!Number.isInteger(maxConnections) || maxConnections < 2) throw new ProofgateError('INVALID_INPUT', 'maxConnections must be an integer >= 2');
  const sink = options.onError;
  const onError = (error: unknown): void => {
    try {
      sink?.(error);
    } catch {
      // a failing error sink must not stop the runner
    }
  };
  const shared: Shared = {
    connectionString: options.connectionString,
    schema,
    s: loadPg().Client.prototype.escapeIdentifier(schema),
    logger: quietLogger(onError),
    onError,
  };
  const pool = newPool(options.connectionString, maxConnections, onError);
  try {
    await migrate(pool, shared);
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
  const { s } = shared;
  const runners = new Set<PostgresRunner>();
  let closing: Promise<void> | null = null;
  const live = (): void => {
    if (closing !== null) throw closedQueueError();
  };

  return Object.freeze({
    kind: 'postgres' as const,
    async add(spec: JobSpec): Promise<void> {
      live();
      const checked = checkJobSpec(spec);
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        throw databaseFailure(error);
      }
      try {
        await inTransaction(client, async () => {
          // One add per key at a time; the waiting job (if any) is locked so no worker takes it meanwhile.
          await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`proofgate_jobs:key:${schema}:${checked.key}`]);
          const waiting = await client.query<{ run_at: Date }>(
            `SELECT run_at FROM ${s}._private_jobs WHERE key = $1 AND locked_at IS NULL AND attempts < max_attempts FOR UPDATE`,
            [checked.key],
          );
          await client.query(
            `SELECT ${s}.add_job($1::text, $2::json, $3::text, least($4::timestamptz, coalesce($5::timestamptz, now())), $6::integer, $7::text, 0, NULL, 'replace')`,
            [
              checked.task,
              storedPayloadText(checked.key, checked.queue, checked.payloadText),
              checked.queue,
              waiting.rows[0]?.run_at ?? null,
              checked.runAt ?? null,
              checked.maxAttempts,
              checked.key,
            ],
          );
        });
      } catch (error) {
        throw databaseFailure(error);
      }
    },
    async run(runOptions: JobRunnerOptions): Promise<JobRunner> {
      live();
      const settings = runnerSettings(runOptions);
      const runner = new PostgresRunner(shared, settings, () => runners.delete(runner));
      runners.add(runner);
      try {
        await runner.start();
      } catch (error) {
        await runner.stop(0).catch(() => undefined);
        throw databaseFailure(error);
      }
      return runner;
    },
    async list(): Promise<ListedJob[]> {
      live();
      let rows: ListedRow[];
      try {
        rows = (
          await pool.query<ListedRow>(
            `SELECT j.id::text AS id, t.identifier AS task, j.payload, j.run_at, j.attempts, j.max_attempts, j.locked_by, j.last_error, j.key, q.queue_name
             FROM ${s}._private_jobs j
             JOIN ${s}._private_tasks t ON t.id = j.task_id
             LEFT JOIN ${s}._private_job_queues q ON q.id = j.job_queue_id
             ORDER BY j.run_at, j.id`,
          )
        ).rows;
      } catch (error) {
        throw databaseFailure(error);
      }
      return rows.map((row) => {
        const stored = readStored(row.payload, row.key, row.queue_name);
        return Object.freeze({
          id: row.id,
          task: row.task,
          queue: stored.queue,
          key: stored.key,
          payload: stored.payload,
          runAt: row.run_at,
          attempts: row.attempts,
          maxAttempts: row.max_attempts,
          lockedBy: row.locked_by,
          lastError: row.last_error,
          failed: row.locked_by === null && row.attempts >= row.max_attempts,
        });
      });
    },
    async counts(): Promise<JobCounts[]> {
      live();
      try {
        const { rows } = await pool.query<JobCounts>(
          `SELECT t.identifier AS task,
             count(*) FILTER (WHERE j.locked_by IS NULL AND j.attempts < j.max_attempts AND j.run_at <= now())::int AS due,
             count(*) FILTER (WHERE j.locked_by IS NULL AND j.attempts < j.max_attempts AND j.run_at > now())::int AS scheduled,
             count(*) FILTER (WHERE j.locked_by IS NOT NULL)::int AS running,
             count(*) FILTER (WHERE j.locked_by IS NULL AND j.attempts >= j.max_attempts)::int AS failed
           FROM ${s}._private_jobs j
           JOIN ${s}._private_tasks t ON t.id = j.task_id
           GROUP BY t.identifier ORDER BY t.identifier`,
        );
        return rows.map((row) => Object.freeze({ ...row }));
      } catch (error) {
        throw databaseFailure(error);
      }
    },
    async ping(): Promise<void> {
      live();
      try {
        await pool.query('SELECT 1');
      } catch (error) {
        throw databaseFailure(error);
      }
    },
    close(): Promise<void> {
      closing ??= (async () => {
        await Promise.all([...runners].map((runner) => runner.stop(0).catch(onError)));
        await pool.end();
      })();
      return closing;
    },
  });
}

/** Thrown to graphile-worker after the runner wrote a job's end itself: its own write then matches nothing. */
class Written extends Error {
  constructor(what: string) {
    super(`proofgate: ${what} (already written)`);
  }
}

interface Active {
  readonly controller: AbortController;
}

class PostgresRunner implements JobRunner {
  private readonly pgPool: pg.Pool;
  private readonly pools = new Map<string, WorkerPool>();
  /** Pools that graphile-worker itself is shutting down (a new one replaces them). */
  private readonly leaving = new Set<WorkerPool>();
  private readonly active = new Set<Active>();
  private readonly taskList: TaskList;
  /** The stopping under way (`stop` returns it to every caller), or null. */
  stopping: Promise<void> | null = null;
  /** The grace period is over: a job that starts now is aborted at once. */
  private aborted = false;
  private beatTimer: NodeJS.Timeout | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Restarts that failed in a row: each waits twice as long as the last (at most a minute). */
  private restartFailures = 0;
  private beating: Promise<void> = Promise.resolve();

  constructor(
    private readonly shared: Shared,
    private readonly settings: RunnerSettings,
    private readonly onStopped: () => void,
  ) {
    this.pgPool = newPool(shared.connectionString, settings.concurrency + 3, shared.onError);
    const taskList: TaskList = {};
    for (const task of settings.handlers.keys()) taskList[task] = (payload, helpers) => this.runJob(task, payload, helpers);
    this.taskList = taskList;
  }

  get workerIds(): readonly string[] {
    return Object.freeze([...this.pools.keys()]);
  }

  async start(): Promise<void> {
    await this.pgPool.query('SELECT 1');
    this.startPool();
    await this.beat();
    this.beatTimer = setInterval(() => {
      this.beating = this.beat();
    }, this.settings.heartbeatMs);
  }

  private startPool(): void {
    if (this.stopping !== null) return;
    const events: WorkerEvents = new EventEmitter();
    let exitCodeBefore: typeof process.exitCode;
    events.on('pool:listen:notification', ({ message }) => {
      if (message.channel === 'worker:migrate') exitCodeBefore = process.exitCode;
    });
    const pool = loadWorker().runTaskList(
      {
        schema: this.shared.schema,
        logger: this.shared.logger,
        events,
        noHandleSignals: true,
        concurrency: this.settings.concurrency,
        pollInterval: this.settings.pollMs,
        // Graphile-worker's own end-of-job writes (no-ops after the runner's) are flushed before its pool ends.
        preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      },
      this.taskList,
      this.pgPool,
    );
    events.on('pool:gracefulShutdown', ({ workerPool }) => {
      if (workerPool !== pool || this.stopping !== null) return;
      this.leaving.add(pool);
      // Not asked for: most often another schema's migration in the same database (see the file comment).
      if (process.exitCode === BREAKING_MIGRATION_EXIT_CODE && exitCodeBefore !== BREAKING_MIGRATION_EXIT_CODE) process.exitCode = exitCodeBefore;
      this.restartSoon();
    });
    this.pools.set(pool.id, pool);
    pool.promise.then(
      () => this.poolEnded(pool),
      (error: unknown) => {
        this.shared.onError(error);
        this.poolEnded(pool);
      },
    );
  }

  private poolEnded(pool: WorkerPool): void {
    this.pools.delete(pool.id);
    this.leaving.delete(pool);
    this.pgPool.query(`DELETE FROM ${this.shared.s}.proofgate_workers WHERE worker_id = $1`, [pool.id]).catch((error: unknown) => {
      if (this.stopping === null) this.shared.onError(error);
    });
    if (this.stopping === null && this.pools.size === 0) this.restartSoon();
  }

  private restartSoon(): void {
    if (this.restartTimer !== undefined || this.stopping !== null) return;
    this.restartTimer = setTimeout(
      () => {
        void (async () => {
          try {
            // Refuses a schema migrated past what this build knows: then this runner takes no more jobs.
            await loadWorker().runMigrations({ pgPool: this.pgPool, schema: this.shared.schema, logger: this.shared.logger });
            this.restartTimer = undefined;
            this.restartFailures = 0;
            this.startPool();
          } catch (error) {
            this.restartTimer = undefined;
            this.restartFailures += 1;
            this.shared.onError(error);
            if (this.pools.size === 0) this.restartSoon();
          }
        })();
      },
      Math.min(60_000, this.settings.pollMs * 2 ** Math.min(this.restartFailures, 16)),
    );
  }

  /** Beat for every live pool, then free the jobs of dead workers. */
  private async beat(): Promise<void> {
    const { s } = this.shared;
    const ids = [...this.pools.keys()];
    try {
      if (ids.length > 0) {
        await this.pgPool.query(
          `INSERT INTO ${s}.proofgate_workers (worker_id, beat_at, started_at, host, pid)
           SELECT id, now(), now(), $2, $3 FROM unnest($1::text[]) AS id
           ON CONFLICT (worker_id) DO UPDATE SET beat_at = now()`,
          [ids, hostname(), process.pid],
        );
      }
      const unlocked = await this.sweep();
      if (unlocked !== null) this.observe({ kind: 'unlocked', workerIds: Object.freeze(unlocked.workerIds), jobs: unlocked.jobs });
    } catch (error) {
      this.shared.onError(error);
    }
  }

  /**
   * One sweep, under a transaction-scoped advisory lock so that one process
   * sweeps at a time. A process stopped (SIGSTOP, a debugger, a frozen VM)
   * inside its sweep would hold that lock, and with it every other process's
   * sweep, for as long as it stays stopped: the transaction therefore tells
   * the server to end the session once it sits idle for the sweep's idle
   * limit, which frees the lock. A healthy sweep has no such pause.
   */
  private async sweep(): Promise<{ workerIds: string[]; jobs: number } | null> {
    const { s, schema } = this.shared;
    const client = await this.pgPool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL idle_in_transaction_session_timeout = ${sweepIdleLimitMs(this.settings.retakeMs)}`);
      const got = await client.query<{ got: boolean }>('SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS got', [`proofgate_jobs:sweep:${schema}`]);
      if (got.rows[0]?.got !== true) {
        await client.query('COMMIT');
        return null;
      }
      if (process.env[STOP_IN_SWEEP_ENV] === '1') process.kill(process.pid, 'SIGSTOP');
      const retake = [this.settings.retakeMs];
      const dead = await client.query<{ ids: string[] }>(
        `SELECT coalesce(array_agg(DISTINCT worker_id), '{}') AS ids FROM (
           SELECT locked_by AS worker_id, locked_at FROM ${s}._private_jobs WHERE locked_by IS NOT NULL
           UNION ALL
           SELECT locked_by, locked_at FROM ${s}._private_job_queues WHERE locked_by IS NOT NULL
         ) locks
         WHERE locked_at < now() - $1 * interval '1 millisecond'
           AND NOT EXISTS (SELECT 1 FROM ${s}.proofgate_workers w WHERE w.worker_id = locks.worker_id AND w.beat_at >= now() - $1 * interval '1 millisecond')`,
        retake,
      );
      const workerIds = dead.rows[0]?.ids ?? [];
      let jobs = 0;
      if (workerIds.length > 0) {
        const marked = await client.query(
          `UPDATE ${s}._private_jobs SET last_error = 'worker ' || locked_by || ' stopped beating; its job was unlocked' WHERE locked_by = ANY($1::text[])`,
          [workerIds],
        );
        jobs = marked.rowCount ?? 0;
        await client.query(`SELECT ${s}.force_unlock_workers($1::text[])`, [workerIds]);
        // Wakes every pool listening (graphile-worker nudges its workers on this channel).
        await client.query(`SELECT pg_notify('jobs:insert', $1)`, [JSON.stringify({ count: Math.max(jobs, 1) })]);
      }
      await client.query(`DELETE FROM ${s}.proofgate_workers WHERE beat_at < now() - $1 * interval '1 millisecond'`, retake);
      await client.query('COMMIT');
      return workerIds.length > 0 ? { workerIds, jobs } : null;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollback: unknown) => {
        // The session is gone (ended by the idle limit, or the server restarted): the client is dropped, not pooled.
        broken = rollback instanceof Error ? rollback : new Error(String(rollback));
      });
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** graphile-worker's task for every handler: runs it, then writes the job's end itself. */
  private async runJob(task: string, rawPayload: unknown, helpers: JobHelpers): Promise<void> {
    const raw = helpers.job;
    const poolId = raw.locked_by ?? '';
    const stored = readStored(rawPayload, raw.key, null);
    const entry: Active = { controller: new AbortController() };
    // A job a pool took after the runner was told to stop (its take was already on its way to the database) is given
    // back unrun, its attempt returned: a stopping runner starts nothing.
    const unrun = this.stopping !== null;
    if (this.aborted || unrun) entry.controller.abort();
    const job: TakenJob = Object.freeze({
      id: String(raw.id),
      task,
      queue: stored.queue,
      key: stored.key,
      payload: stored.payload,
      attempt: raw.attempts,
      workerId: poolId,
      signal: entry.controller.signal,
      held: async () => {
        const { rowCount } = await this.pgPool.query(`SELECT 1 FROM ${this.shared.s}._private_jobs WHERE id = $1 AND locked_by = $2`, [raw.id, poolId]);
        return rowCount === 1;
      },
    });
    this.active.add(entry);
    try {
      let failure: { readonly error: unknown } | null = null;
      if (!unrun) {
        this.observe({ kind: 'started', job });
        try {
          await this.settings.handlers.get(task)!(job);
        } catch (error) {
          failure = { error };
        }
      }
      const { s } = this.shared;
      if (entry.controller.signal.aborted) {
        // Released: the attempt is given back (graphile-worker's returnJobs step); a job whose key was added again is dropped.
        await this.pgPool.query(
          `WITH dropped AS (
             DELETE FROM ${s}._private_jobs WHERE id = $1 AND locked_by = $2 AND key IS NULL RETURNING job_queue_id
           ), released AS (
             UPDATE ${s}._private_jobs SET attempts = greatest(0, attempts - 1), locked_by = NULL, locked_at = NULL
             WHERE id = $1 AND locked_by = $2 AND key IS NOT NULL RETURNING job_queue_id
           )
           UPDATE ${s}._private_job_queues q SET locked_by = NULL, locked_at = NULL
           FROM (SELECT job_queue_id FROM dropped UNION ALL SELECT job_queue_id FROM released) j
           WHERE q.id = j.job_queue_id AND q.locked_by = $2`,
          [raw.id, poolId],
        );
        throw new Written('released');
      }
      if (failure === null) {
        const done = await this.pgPool.query<{ n: number }>(
          `WITH j AS (DELETE FROM ${s}._private_jobs WHERE id = $1 AND locked_by = $2 RETURNING job_queue_id),
           q AS (UPDATE ${s}._private_job_queues q SET locked_by = NULL, locked_at = NULL FROM j WHERE q.id = j.job_queue_id AND q.locked_by = $2)
           SELECT count(*)::int AS n FROM j`,
          [raw.id, poolId],
        );
        this.observe({ kind: 'completed', job });
        // Taken from this pool meanwhile (it was thought dead): graphile-worker's own completion deletes by id
        // alone and would delete the new holder's job, so it is told the job failed (its failure write is
        // conditioned on this pool's lock and matches nothing).
        if (done.rows[0]?.n !== 1) throw new Written('completed, but the job had been taken from this worker');
        return;
      }
      const error = failureText(failure.error);
      const failed = await this.pgPool.query<{ final: boolean }>(
        `WITH j AS (
           UPDATE ${s}._private_jobs SET last_error = $3,
             run_at = greatest(now(), run_at) + (exp(least(attempts, 10)) * $4::float8 * interval '1 millisecond'),
             locked_by = NULL, locked_at = NULL
           WHERE id = $1 AND locked_by = $2 RETURNING job_queue_id, attempts >= max_attempts AS final
         ), q AS (
           UPDATE ${s}._private_job_queues q SET locked_by = NULL, locked_at = NULL FROM j WHERE q.id = j.job_queue_id AND q.locked_by = $2
         )
         SELECT final FROM j`,
        [raw.id, poolId, error, this.settings.retryBaseMs],
      );
      this.observe({ kind: 'failed', job, error, final: failed.rows[0]?.final ?? false });
      throw new Written('failed');
    } catch (error) {
      if (!(error instanceof Written)) this.shared.onError(error);
      throw error;
    } finally {
      this.active.delete(entry);
    }
  }

  private observe(event: JobEvent): void {
    notifyObserver(this.settings, event, this.shared.onError);
  }

  stop(graceMs: number): Promise<void> {
    return stopOnce(this, graceMs, (grace) => this.stopNow(grace));
  }

  private async stopNow(graceMs: number): Promise<void> {
    clearTimeout(this.restartTimer);
    const abort = (): void => {
      this.aborted = true;
      for (const entry of this.active) entry.controller.abort();
    };
    const cancelAbort = abortAfterGrace(graceMs, abort);
    const pools = [...this.pools.values()];
    const results = await Promise.allSettled(
      pools.filter((pool) => !this.leaving.has(pool)).map(async (pool) => pool.gracefulShutdown('proofgate: the runner stops')),
    );
    for (const result of results) if (result.status === 'rejected') this.shared.onError(result.reason);
    await Promise.allSettled(pools.map((pool) => pool.promise));
    cancelAbort();
    clearInterval(this.beatTimer);
    await this.beating;
    try {
      await this.pgPool.query(`DELETE FROM ${this.shared.s}.proofgate_workers WHERE worker_id = ANY($1::text[])`, [pools.map((pool) => pool.id)]);
    } catch (error) {
      this.shared.onError(error);
    }
    await this.pgPool.end().catch((error: unknown) => this.shared.onError(error));
    this.onStopped();
  }
}

/**
 * Test seam: with `PROOFGATE_TEST_STOP_IN_SWEEP=1` a runner stops itself
 * (SIGSTOP) inside its first sweep, holding the sweep lock, as a process
 * frozen at the worst moment would.
 */
export const STOP_IN_SWEEP_ENV = 'PROOFGATE_TEST_STOP_IN_SWEEP';

/** How long a sweep's transaction may sit idle before the server ends its session: the retake delay, at least 5 s. Pure. */
export function sweepIdleLimitMs(retakeMs: number): number {
  return Math.max(5_000, Math.floor(retakeMs));
}
