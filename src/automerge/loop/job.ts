/**
 * One active job per change. In this process a second dispatch joins the job
 * that runs (and makes it look once more before it ends, so a command that
 * arrived as it was finishing is not lost). Across processes the job holds a
 * lease: an event appended at the revision it read, so of two processes only
 * one wins; the lease is renewed while the job runs and released at its end.
 * A lease whose holder was a process of this host that no longer exists (it
 * was killed) is taken over at once, and the new job first closes what the
 * dead one left half done (recover.ts).
 *
 * A job is fenced by its lease: every ledger write it makes (steps, records,
 * renewals) goes through the store's fenced view and every forge write
 * through the fenced forge (fence.ts), so a job whose process was paused past
 * its lease, and whose change another process took over meanwhile, stops
 * before its next effect and ends `lease-lost` (it writes no `job-finished`
 * step and releases nothing: the lease is not its own any more). A renewal
 * that finds the lease taken aborts the job at once.
 */
import { hostname } from 'node:os';
import { ProofgateError, isProofgateError, newId, systemClock, type Clock } from '../../core/index.js';
import { processGone } from '../../host/index.js';
import type { FactsCache } from './facts.js';
import { fencedForge } from './fence.js';
import { runAutomergeLoop, type LoopOutcome, type ManualCommand } from './loop.js';
import { recoverInterrupted } from './recover.js';
import { StatusWriter } from './status.js';
import { leaseLost, leaseLostHolder, type Lease, type LedgerStore } from './ledger-store.js';
import type { AutomergeEnvironment } from './types.js';

/**
 * How a job ended: it ran the loop to an outcome; another process holds the
 * change's lease (nothing ran); or it lost its lease while it ran (`holder`
 * took it over) and stopped before its next effect.
 */
export type JobResult =
  | { readonly kind: 'ran'; readonly outcome: LoopOutcome }
  | { readonly kind: 'held-elsewhere'; readonly holder: Lease }
  | { readonly kind: 'lease-lost'; readonly holder: Lease };

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
  /**
   * Jobs do not wait in this process (`LoopOptions.park`): a wait whose
   * window is open ends the job `parked` with `wakeAt`, for a job queue to
   * run the change again then (or sooner, on an event). Default false.
   */
  readonly park?: boolean;
  /** The clock whose timer paces lease renewals (default: the system clock; the lease's times come from the store's clock). */
  readonly renewalClock?: Clock;
}

interface JobState {
  rerun: boolean;
  readonly abort: AbortController;
  /** The holder that took the lease over, once the job learned it lost it. */
  lost: Lease | null;
}

/** A job's view of the environment: the store and the forge fenced by its lease, and the status writer writing through that forge. */
interface FencedJob {
  readonly env: AutomergeEnvironment;
  readonly writer: StatusWriter;
}

/** Fenced views kept per change (least recently used first out). */
const MAX_FENCED_CHANGES = 256;

interface ActiveJob {
  readonly job: JobState;
  readonly done: Promise<JobResult>;
}

/** A change's lease when `ChangeJobsOptions.leaseMs` does not say (renewed every third of it). */
export const DEFAULT_LEASE_MS = 60_000;

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
  readonly #park: boolean;
  readonly #renewalClock: Clock;
  readonly #fenced = new Map<string, FencedJob>();
  /** Each change's live facts across its runs (`LoopOptions.facts`), for as many changes as fenced views. */
  readonly #facts = new Map<string, FactsCache>();
  #taking = true;

  constructor(env: AutomergeEnvironment, options: ChangeJobsOptions = {}) {
    this.env = env;
    this.#onJob = options.onJob;
    this.writer = new StatusWriter(env.forge, env.secret, env.intent);
    this.owner = options.owner ?? `${hostname()}:${process.pid}:${newId('job')}`;
    this.#leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.#maxReruns = options.maxReruns ?? 3;
    this.#park = options.park ?? false;
    this.#renewalClock = options.renewalClock ?? systemClock;
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
    const job: JobState = { rerun: false, abort: new AbortController(), lost: null };
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

  /** The job's fenced view of the environment for `changeId` (kept per change, so a job's views are the same objects across its runs). */
  #fencedFor(changeId: string): FencedJob {
    let fenced = this.#fenced.get(changeId);
    if (fenced === undefined) {
      const store = this.env.store.fenced(changeId, this.owner);
      const forge = fencedForge(this.env.forge, store, changeId, this.owner);
      fenced = { env: { ...this.env, store, forge }, writer: this.writer.through(forge) };
    }
    this.#fenced.delete(changeId);
    this.#fenced.set(changeId, fenced);
    if (this.#fenced.size > MAX_FENCED_CHANGES) {
      const oldest = this.#fenced.keys().next().value;
      if (oldest !== undefined) this.#fenced.delete(oldest);
    }
    return fenced;
  }

  /** The change's facts cache (least recently used changes dropped first). */
  #factsOf(changeId: string): FactsCache {
    const facts = this.#facts.get(changeId) ?? new Map();
    this.#facts.delete(changeId);
    this.#facts.set(changeId, facts);
    if (this.#facts.size > MAX_FENCED_CHANGES) this.#facts.delete(this.#facts.keys().next().value as string);
    return facts;
  }

  /** The job learned it lost its lease: remember who holds it now and abort what it runs. */
  #lose(job: JobState, holder: Lease | null, changeId: string): void {
    if (job.lost !== null) return;
    job.lost = holder ?? { owner: '(nobody)', until: this.env.store.now(), released: true };
    job.abort.abort(new ProofgateError('LEASE_LOST', `change ${changeId}: the lease was taken over by ${job.lost.owner}`));
  }

  /**
   * Renew the lease every third of its time to live, on the renewal clock; a
   * renewal that finds the lease taken over aborts the job. Returns the stop.
   */
  #renew(changeId: string, store: LedgerStore, job: JobState): () => void {
    const every = Math.max(1_000, Math.floor(this.#leaseMs / 3));
    let stopped = false;
    let cancel = (): void => undefined;
    const renewal = async (): Promise<void> => {
      try {
        if (await store.updateLease(changeId, this.owner, this.#leaseMs)) return;
        const { lease } = await store.load(changeId);
        if (leaseLost(changeId, lease, this.owner) !== null) this.#lose(job, lease, changeId);
      } catch (error) {
        if (isProofgateError(error, 'LEASE_LOST')) this.#lose(job, leaseLostHolder(error), changeId);
        // Any other failure: the store may answer at the next renewal.
      }
    };
    const schedule = (): void => {
      if (stopped || job.lost !== null) return;
      cancel = this.#renewalClock.timer(every, () => void renewal().finally(schedule));
    };
    schedule();
    return () => {
      stopped = true;
      cancel();
    };
  }

  async #run(changeId: string, job: JobState): Promise<JobResult> {
    const lease = await this.env.store.acquireLease(changeId, this.owner, this.#leaseMs, leaseHolderGone);
    if (!lease.acquired) {
      await this.env.store.step(changeId, 'job-joined-elsewhere', { holder: lease.holder.owner, until: lease.holder.until });
      return { kind: 'held-elsewhere', holder: lease.holder };
    }
    // From here on every write of the job is fenced by the lease it just took.
    const { env, writer } = this.#fencedFor(changeId);
    const { store } = env;
    const stopRenewing = this.#renew(changeId, store, job);
    try {
      await store.step(changeId, 'job-started', { owner: this.owner, ...(lease.tookOver === null ? {} : { tookOverFrom: lease.tookOver }) });
      const recovery = await recoverInterrupted(env, changeId, { checks: lease.unclean });
      const rerunChecks = new Set(recovery.rerunChecks);
      let outcome: LoopOutcome;
      let rounds = 0;
      do {
        job.rerun = false;
        outcome = await runAutomergeLoop(env, changeId, {
          signal: job.abort.signal,
          writer,
          takeManual: () => this.#take(changeId),
          rerunChecks,
          background: (work) => this.#keep(work),
          park: this.#park,
          facts: this.#factsOf(changeId),
        });
        rounds += 1;
      } while (
        job.lost === null &&
        (job.rerun || (this.#manual.get(changeId)?.length ?? 0) > 0) &&
        outcome.kind !== 'merged' &&
        outcome.kind !== 'interrupted' &&
        rounds <= this.#maxReruns
      );
      if (job.lost !== null) return this.#leaseLost(changeId, job.lost);
      await store.step(changeId, 'job-finished', {
        owner: this.owner,
        outcome: outcome.kind,
        reason: outcome.reason,
        ...(outcome.wakeAt === undefined ? {} : { wakeAt: outcome.wakeAt }),
      });
      return { kind: 'ran', outcome };
    } catch (error) {
      // Lost while it ran: whatever failed (a fenced write, or a step the renewal's abort cut short), the job just stops.
      if (isProofgateError(error, 'LEASE_LOST')) this.#lose(job, leaseLostHolder(error), changeId);
      if (job.lost === null) throw error;
      return this.#leaseLost(changeId, job.lost);
    } finally {
      stopRenewing();
      // A lost lease is someone else's now: nothing to release.
      if (job.lost === null) await store.updateLease(changeId, this.owner, 'release').catch(() => undefined);
    }
  }

  #leaseLost(changeId: string, holder: Lease): JobResult {
    this.env.onProgress?.({
      changeId,
      at: this.env.store.now(),
      text: `lease lost to ${holder.owner}: this job stopped before its next effect`,
    });
    return { kind: 'lease-lost', holder };
  }
}

/**
 * Whether a lease holder is a process of this host that is gone. Owners are
 * `<host>:<pid>:<job id>`; only a holder on this host with a pid that no
 * longer exists counts (a pid reused since is taken for alive, the lease then
 * simply runs out).
 */
export function leaseHolderGone(holder: Pick<Lease, 'owner'>): boolean {
  const match = /^(.*):(\d+):[^:]+$/.exec(holder.owner);
  if (match === null || match[1] !== hostname()) return false;
  return processGone(Number(match[2]));
}
