/**
 * One active job per change. In this process a second dispatch joins the job
 * that runs (and makes it look once more before it ends, so a command that
 * arrived as it was finishing is not lost). Across processes the job holds a
 * lease: an event appended at the revision it read, so of two processes only
 * one wins; the lease is renewed while the job runs and released at its end.
 * A lease whose holder was a process of this host that no longer exists (it
 * was killed) is taken over at once, and the new job first closes what the
 * dead one left half done (recover.ts).
 */
import { hostname } from 'node:os';
import { ProofgateError, newId } from '../../core/index.js';
import { runAutomergeLoop, type LoopOutcome, type ManualCommand } from './loop.js';
import { recoverInterrupted } from './recover.js';
import { StatusWriter } from './status.js';
import type { Lease } from './ledger-store.js';
import type { AutomergeEnvironment } from './types.js';

export type JobResult = { readonly kind: 'ran'; readonly outcome: LoopOutcome } | { readonly kind: 'held-elsewhere'; readonly holder: Lease };

export interface Dispatch {
  /** True when the change already had a running job and this dispatch joined it. */
  readonly joined: boolean;
  readonly done: Promise<JobResult>;
}

export interface ChangeJobsOptions {
  /** Lease owner id (default: host, pid and a random part). */
  readonly owner?: string;
  /** Lease time to live (default 60000 ms); renewed every third of it. */
  readonly leaseMs?: number;
  /** How many extra rounds a job makes for dispatches that joined it late (default 3). */
  readonly maxReruns?: number;
  /** Called when a job starts in this process (not for a dispatch that joins one), with its result to come. */
  readonly onJob?: (changeId: string, done: Promise<JobResult>) => void;
}

interface JobState {
  rerun: boolean;
  readonly abort: AbortController;
}

interface ActiveJob {
  readonly job: JobState;
  readonly done: Promise<JobResult>;
}

export class ChangeJobs {
  readonly env: AutomergeEnvironment;
  readonly writer: StatusWriter;
  readonly owner: string;
  readonly #leaseMs: number;
  readonly #maxReruns: number;
  readonly #active = new Map<string, ActiveJob>();
  /** Check runs the loops started and left running when they ended (awaited by `close`). */
  readonly #background = new Set<Promise<void>>();
  readonly #manual = new Map<string, ManualCommand[]>();
  readonly #onJob: ChangeJobsOptions['onJob'];
  #taking = true;

  constructor(env: AutomergeEnvironment, options: ChangeJobsOptions = {}) {
    this.env = env;
    this.#onJob = options.onJob;
    this.writer = new StatusWriter(env.forge, env.secret, env.intent);
    this.owner = options.owner ?? `${hostname()}:${process.pid}:${newId('job')}`;
    this.#leaseMs = options.leaseMs ?? 60_000;
    this.#maxReruns = options.maxReruns ?? 3;
  }

  /** Is a job of this change running in this process? */
  active(changeId: string): boolean {
    return this.#active.has(changeId);
  }

  /** Queue a human command for the change's job (it runs between the loop's own steps). */
  enqueue(changeId: string, command: ManualCommand): void {
    const queue = this.#manual.get(changeId) ?? [];
    queue.push(command);
    this.#manual.set(changeId, queue);
  }

  #take(changeId: string): ManualCommand[] {
    const queue = this.#manual.get(changeId) ?? [];
    this.#manual.delete(changeId);
    return queue;
  }

  /**
   * Start the change's job, or join the one that runs. After `stopTaking`, a
   * dispatch that would start a job is a `CLOSED` error (joining one is not).
   */
  dispatch(changeId: string): Dispatch {
    const running = this.#active.get(changeId);
    if (running !== undefined) {
      running.job.rerun = true;
      this.env.signals.notify(changeId);
      return { joined: true, done: running.done };
    }
    if (!this.#taking) throw new ProofgateError('CLOSED', `no new job for change ${changeId}: this process is stopping`, { changeId });
    const job: JobState = { rerun: false, abort: new AbortController() };
    const done = this.#run(changeId, job).finally(() => this.#active.delete(changeId));
    this.#active.set(changeId, { job, done });
    this.#onJob?.(changeId, done);
    return { joined: false, done };
  }

  /** Start no new job from now on (a service that stops lets the running ones end first). */
  stopTaking(): void {
    this.#taking = false;
  }

  /** The results to come of the jobs running in this process. */
  running(): Promise<JobResult>[] {
    return [...this.#active.values()].map((active) => active.done);
  }

  /**
   * Abort every running job (they end as `interrupted`, cancelling the checks
   * they started) and wait for them and for the check runs they left.
   */
  async close(): Promise<void> {
    const jobs = [...this.#active.values()];
    for (const active of jobs) active.job.abort.abort();
    await Promise.allSettled(jobs.map((job) => job.done));
    await Promise.allSettled([...this.#background]);
  }

  #keep(work: Promise<void>): void {
    const tracked = work.catch(() => undefined).finally(() => this.#background.delete(tracked));
    this.#background.add(tracked);
  }

  async #run(changeId: string, job: JobState): Promise<JobResult> {
    const { store } = this.env;
    const lease = await store.acquireLease(changeId, this.owner, this.#leaseMs, leaseHolderGone);
    if (!lease.acquired) {
      await store.step(changeId, 'job-joined-elsewhere', { holder: lease.holder.owner, until: lease.holder.until });
      return { kind: 'held-elsewhere', holder: lease.holder };
    }
    const renew = setInterval(
      () => {
        void store.updateLease(changeId, this.owner, this.#leaseMs).catch(() => undefined);
      },
      Math.max(1_000, Math.floor(this.#leaseMs / 3)),
    );
    try {
      await store.step(changeId, 'job-started', { owner: this.owner, ...(lease.tookOver === null ? {} : { tookOverFrom: lease.tookOver }) });
      const recovery = await recoverInterrupted(this.env, changeId, { checks: lease.unclean });
      const rerunChecks = new Set(recovery.rerunChecks);
      let outcome: LoopOutcome;
      let rounds = 0;
      do {
        job.rerun = false;
        outcome = await runAutomergeLoop(this.env, changeId, {
          signal: job.abort.signal,
          writer: this.writer,
          takeManual: () => this.#take(changeId),
          rerunChecks,
          background: (work) => this.#keep(work),
        });
        rounds += 1;
      } while (
        (job.rerun || (this.#manual.get(changeId)?.length ?? 0) > 0) &&
        outcome.kind !== 'merged' &&
        outcome.kind !== 'interrupted' &&
        rounds <= this.#maxReruns
      );
      await store.step(changeId, 'job-finished', { owner: this.owner, outcome: outcome.kind, reason: outcome.reason });
      return { kind: 'ran', outcome };
    } finally {
      clearInterval(renew);
      await store.updateLease(changeId, this.owner, 'release').catch(() => undefined);
    }
  }
}

/**
 * Whether a lease holder is a process of this host that is gone. Owners are
 * `<host>:<pid>:<job id>`; only a holder on this host with a pid that no
 * longer exists counts (a pid reused since is taken for alive, the lease then
 * simply runs out).
 */
export function leaseHolderGone(holder: Lease): boolean {
  const match = /^(.*):(\d+):[^:]+$/.exec(holder.owner);
  if (match === null || match[1] !== hostname()) return false;
  const pid = Number(match[2]);
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
