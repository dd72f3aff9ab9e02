/**
 * The service's job queue, as the workers see it. Two adapters implement it:
 * a table in the embedded SQLite store (several processes on one machine) and
 * graphile-worker on PostgreSQL (several machines). Both keep the same rules:
 *
 * - Jobs of one `queue` run one at a time, oldest `runAt` first (a change's
 *   jobs share its queue, so one change never has two jobs running).
 * - At most one job waits per `key`. Adding a key whose job still waits
 *   replaces its task, payload and maxAttempts (its failed attempts are
 *   cleared), and its run time becomes the earlier of the two (an event
 *   wakes a parked change early, and a later poll never delays an earlier
 *   one). Adding a key whose job is running queues a new
 *   job to run after it (the running one is then not retried if it fails:
 *   the new job does its work; graphile-worker's rule, kept by both).
 * - A handler that throws is retried with backoff (the n-th failure waits
 *   e^min(n,10) times `retryBaseMs`, which is one second unless a test
 *   shortens it: graphile-worker's rule, kept by both) until
 *   `maxAttempts`, then kept as failed (never run again, still listed).
 * - Every process beats a heartbeat per worker. A worker whose heartbeat (and
 *   whose locks) are older than `retakeMs` is dead: its jobs are unlocked for
 *   others to take, the dead run counting as an attempt (graphile-worker
 *   alone would keep them locked for hours).
 */
import { ProofgateError, canonicalJson, redactSecrets, type JsonValue } from '../../core/index.js';

export interface JobSpec {
  /** The handler that runs the job. */
  readonly task: string;
  /** Jobs of one queue run one at a time. */
  readonly queue: string;
  /** At most one waiting job per key (see above). */
  readonly key: string;
  readonly payload: JsonValue;
  /** When it may run first (default: now). */
  readonly runAt?: Date;
  /** Runs before it is kept as failed (default 10). */
  readonly maxAttempts?: number;
}

/** A job as its handler receives it. */
export interface TakenJob {
  readonly id: string;
  readonly task: string;
  readonly queue: string;
  readonly key: string;
  readonly payload: JsonValue;
  /** 1 on the first run. */
  readonly attempt: number;
  readonly workerId: string;
  /** Aborted when the runner stops past its grace period: stop at the next safe point. */
  readonly signal: AbortSignal;
  /**
   * Whether this worker still holds the job, read afresh: false once it was
   * taken from a worker thought dead (paused past `retakeMs`), or ended. A
   * handler checks it before each effect, so a worker that wakes up after its
   * job went to another stops instead of repeating the other's work.
   */
  held(): Promise<boolean>;
}

export type JobHandler = (job: TakenJob) => Promise<void>;

export interface JobRunnerOptions {
  readonly handlers: Readonly<Record<string, JobHandler>>;
  /** Jobs run at once in this process (default 1). */
  readonly concurrency?: number;
  /** How long a worker may go without a heartbeat before its jobs are taken from it (default 60000 ms). */
  readonly retakeMs?: number;
  /** Heartbeat and dead-worker sweep interval (default retakeMs / 4). */
  readonly heartbeatMs?: number;
  /** Fallback poll for due jobs (default 1000 ms); adds in this process and (PostgreSQL) LISTEN/NOTIFY wake workers at once. */
  readonly pollMs?: number;
  /** The unit of the retry backoff: the n-th failure of a job waits e^min(n,10) times this (default 1000 ms). */
  readonly retryBaseMs?: number;
  /** Called for each thing a runner does (tests, logs, metrics). */
  readonly observe?: (event: JobEvent) => void;
}

export type JobEvent =
  | { readonly kind: 'started'; readonly job: TakenJob }
  | { readonly kind: 'completed'; readonly job: TakenJob }
  | { readonly kind: 'failed'; readonly job: TakenJob; readonly error: string; readonly final: boolean }
  | { readonly kind: 'unlocked'; readonly workerIds: readonly string[]; readonly jobs: number };

export interface JobRunner {
  /** This process's worker ids (their heartbeats). */
  readonly workerIds: readonly string[];
  /**
   * Take no new job; running jobs get `graceMs` to end, then their signals
   * are aborted and they are awaited; jobs still held are released to run
   * again (not counted as a failed attempt). A handler that ends after its
   * signal was aborted is released too, however it ends: it was told to stop
   * early. Resolves when all ended.
   */
  stop(graceMs: number): Promise<void>;
}

/** A job as listed (tests, the operator). */
export interface ListedJob {
  readonly id: string;
  readonly task: string;
  readonly queue: string;
  readonly key: string;
  readonly payload: JsonValue;
  readonly runAt: Date;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly lockedBy: string | null;
  readonly lastError: string | null;
  /** attempts reached maxAttempts and it is not running: never run again. */
  readonly failed: boolean;
}

/** How many jobs of one task are in each state, as `JobQueue.counts` tells. */
export interface JobCounts {
  readonly task: string;
  /** Waiting, and due (its run time has come): work not started yet. */
  readonly due: number;
  /** Waiting for a later run time (a parked change's resume, the next reconciliation pass, a retry's backoff). */
  readonly scheduled: number;
  /** Held by a worker now. */
  readonly running: number;
  /** Kept as failed (`ListedJob.failed`): never run again. */
  readonly failed: number;
}

export interface JobQueue {
  readonly kind: 'sqlite' | 'postgres';
  add(spec: JobSpec): Promise<void>;
  /** Start workers in this process. */
  run(options: JobRunnerOptions): Promise<JobRunner>;
  /** Every job not yet completed, oldest runAt first. */
  list(): Promise<ListedJob[]>;
  /**
   * The jobs not yet completed, counted per task and state by one grouped
   * query (no payload is read): one entry per task that has any, by task
   * name. Cheap enough for every metrics scrape.
   */
  counts(): Promise<JobCounts[]>;
  /** Resolves when the queue's database answers (for /readyz); rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------
// The checks both adapters make, in one place so that both answer bad input
// alike (and refuse it before anything is stored).

/** Limits (in characters, and bytes for the payload): graphile-worker's columns, kept by both. */
export const JOB_LIMITS = Object.freeze({ task: 128, queue: 128, key: 512, payloadBytes: 1_048_576, maxAttempts: 32_767 });
export const DEFAULT_MAX_ATTEMPTS = 10;
export const RUNNER_DEFAULTS = Object.freeze({ concurrency: 1, retakeMs: 60_000, pollMs: 1_000, retryBaseMs: 1_000 });
/** Longest `lastError` kept (characters). */
export const FAILURE_TEXT_LIMIT = 1_000;
/** The longest timer Node.js keeps (ms); settings above it are refused. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** 9999-12-31T23:59:59.999Z: both databases hold every time up to it. */
const LATEST_RUN_AT = 253_402_300_799_999;
const MAX_CONCURRENCY = 1_000;

/** A job spec after its checks: the payload as its canonical JSON text. */
export interface CheckedJobSpec {
  readonly task: string;
  readonly queue: string;
  readonly key: string;
  readonly payloadText: string;
  readonly runAt: Date | undefined;
  readonly maxAttempts: number;
}

/** Runner options after their checks, defaults filled in. */
export interface RunnerSettings {
  readonly handlers: ReadonlyMap<string, JobHandler>;
  readonly concurrency: number;
  readonly retakeMs: number;
  readonly heartbeatMs: number;
  readonly pollMs: number;
  readonly retryBaseMs: number;
  readonly observe: ((event: JobEvent) => void) | undefined;
}

function invalid(message: string): ProofgateError {
  return new ProofgateError('INVALID_INPUT', message);
}

const CONTROL = /[\u0000-\u001f\u007f]/; // eslint-disable-line no-control-regex
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** A task, queue or key: nonempty, not only blanks, no control characters or lone surrogates, at most `limit` characters. */
function checkName(value: unknown, what: string, limit: number): string {
  if (typeof value !== 'string' || value.trim() === '') throw invalid(`${what} must be a nonempty string`);
  if (CONTROL.test(value)) throw invalid(`${what} must not hold control characters`);
  if (LONE_SURROGATE.test(value)) throw invalid(`${what} must not hold a lone surrogate`);
  if (value.length > limit && [...value].length > limit) throw invalid(`${what} is longer than ${limit} characters`);
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Check a spec (typed `INVALID_INPUT`, or `NON_JSON_VALUE` for a payload that is not JSON). */
export function checkJobSpec(spec: JobSpec): CheckedJobSpec {
  if (!isRecord(spec)) throw invalid('a job spec must be an object');
  const task = checkName(spec.task, 'task', JOB_LIMITS.task);
  const queue = checkName(spec.queue, 'queue', JOB_LIMITS.queue);
  const key = checkName(spec.key, 'key', JOB_LIMITS.key);
  const maxAttempts = spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > JOB_LIMITS.maxAttempts) {
    throw invalid(`maxAttempts must be an integer from 1 to ${JOB_LIMITS.maxAttempts}`);
  }
  const runAt = spec.runAt;
  if (runAt !== undefined) {
    const time = runAt instanceof Date ? runAt.getTime() : Number.NaN;
    if (!(time >= 0 && time <= LATEST_RUN_AT)) throw invalid('runAt must be a valid Date from 1970 to 9999');
  }
  let payloadText: string;
  try {
    payloadText = canonicalJson(spec.payload);
  } catch (error) {
    if (error instanceof RangeError) throw invalid('payload nests too deep');
    throw error;
  }
  if (payloadText.length > JOB_LIMITS.payloadBytes / 3 && Buffer.byteLength(payloadText) > JOB_LIMITS.payloadBytes) {
    throw invalid(`payload is larger than ${JOB_LIMITS.payloadBytes} bytes as JSON`);
  }
  return { task, queue, key, payloadText, runAt: runAt === undefined ? undefined : new Date(runAt.getTime()), maxAttempts };
}

function checkMs(value: unknown, what: string, fallback: number): number {
  const ms = value ?? fallback;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1 || ms > MAX_TIMER_MS) throw invalid(`${what} must be an integer from 1 to ${MAX_TIMER_MS}`);
  return ms;
}

/** Check runner options and fill in the defaults (typed `INVALID_INPUT`). */
export function runnerSettings(options: JobRunnerOptions): RunnerSettings {
  if (!isRecord(options)) throw invalid('runner options must be an object');
  if (!isRecord(options.handlers)) throw invalid('handlers must be an object of task name to function');
  const handlers = new Map<string, JobHandler>();
  for (const [task, handler] of Object.entries(options.handlers)) {
    checkName(task, 'a handler task name', JOB_LIMITS.task);
    if (typeof handler !== 'function') throw invalid(`the handler of task ${JSON.stringify(task.slice(0, 64))} is not a function`);
    handlers.set(task, handler);
  }
  if (handlers.size === 0) throw invalid('handlers must name at least one task');
  const concurrency = options.concurrency ?? RUNNER_DEFAULTS.concurrency;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > MAX_CONCURRENCY)
    throw invalid(`concurrency must be an integer from 1 to ${MAX_CONCURRENCY}`);
  const retakeMs = checkMs(options.retakeMs, 'retakeMs', RUNNER_DEFAULTS.retakeMs);
  const heartbeatMs = checkMs(options.heartbeatMs, 'heartbeatMs', Math.max(1, Math.floor(retakeMs / 4)));
  if (heartbeatMs >= retakeMs) throw invalid('heartbeatMs must be shorter than retakeMs');
  const pollMs = checkMs(options.pollMs, 'pollMs', RUNNER_DEFAULTS.pollMs);
  const retryBaseMs = checkMs(options.retryBaseMs, 'retryBaseMs', RUNNER_DEFAULTS.retryBaseMs);
  if (options.observe !== undefined && typeof options.observe !== 'function') throw invalid('observe must be a function');
  return { handlers, concurrency, retakeMs, heartbeatMs, pollMs, retryBaseMs, observe: options.observe };
}

/** Check `stop`'s grace period (typed `INVALID_INPUT`). */
export function checkGraceMs(graceMs: number): number {
  if (typeof graceMs !== 'number' || !Number.isInteger(graceMs) || graceMs < 0 || graceMs > MAX_TIMER_MS) {
    throw invalid(`graceMs must be an integer from 0 to ${MAX_TIMER_MS}`);
  }
  return graceMs;
}

/**
 * A runner's `stop(graceMs)`, said once for both adapters: the grace period
 * is checked (a bad one rejects, changing nothing), and the first call's
 * stopping is what every later call gets.
 */
export function stopOnce(runner: { stopping: Promise<void> | null }, graceMs: number, stopNow: (graceMs: number) => Promise<void>): Promise<void> {
  try {
    checkGraceMs(graceMs);
  } catch (error) {
    return Promise.reject(error);
  }
  runner.stopping ??= stopNow(graceMs);
  return runner.stopping;
}

/** Call `abort` once `graceMs` has passed (at once for 0); the function returned cancels a call still to come. */
export function abortAfterGrace(graceMs: number, abort: () => void): () => void {
  if (graceMs === 0) {
    abort();
    return () => undefined;
  }
  const timer = setTimeout(abort, graceMs);
  return () => clearTimeout(timer);
}

/** The wait after a job's n-th failure: e^min(n,10) times `baseMs` (graphile-worker's rule, with `RUNNER_DEFAULTS.retryBaseMs`), in ms. */
export function retryDelayMs(failures: number, baseMs: number): number {
  return Math.exp(Math.min(Math.max(failures, 0), 10)) * baseMs;
}

/**
 * What a handler's failure says, for `lastError` and the `failed` event: one
 * line, secret-looking parts redacted, at most FAILURE_TEXT_LIMIT characters.
 * Never throws, whatever was thrown (a value whose `toString` or `message`
 * throws, a revoked proxy, a symbol).
 */
export function failureText(thrown: unknown): string {
  let text: string;
  try {
    if (thrown instanceof ProofgateError) text = `${thrown.code}: ${String(thrown.message)}`;
    else if (thrown instanceof Error) {
      const name = typeof thrown.name === 'string' && thrown.name !== 'Error' ? `${thrown.name}: ` : '';
      text = `${name}${String(thrown.message)}`;
    } else text = typeof thrown === 'string' ? thrown : `a non-Error value was thrown: ${String(thrown)}`;
  } catch {
    text = 'a value that cannot be shown was thrown';
  }
  text = text
    .slice(0, FAILURE_TEXT_LIMIT + 4096)
    .replace(/\s*[\r\n]+\s*/g, ' ')
    .trim();
  text = redactSecrets(text).slice(0, FAILURE_TEXT_LIMIT);
  return text === '' ? 'failed without a message' : text;
}

/** The error every method of a closed queue answers. */
export function closedQueueError(): ProofgateError {
  return new ProofgateError('CLOSED', 'the job queue is closed');
}

/** Call `observe` without letting it break the runner: what it throws goes to `onError`. */
export function notifyObserver(settings: RunnerSettings, event: JobEvent, onError: (error: unknown) => void): void {
  if (settings.observe === undefined) return;
  try {
    settings.observe(event);
  } catch (error) {
    onError(error);
  }
}
