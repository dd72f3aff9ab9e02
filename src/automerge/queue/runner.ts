/**
 * The runner of one base's merge queue: whoever holds the queue's lease runs
 * it, one candidate at a time, until the queue is empty or paused, then
 * releases the lease (the next process whose change waits takes it). Every
 * append it makes is fenced by the lease, and so is the one effect on the
 * base (`landCandidate`, a compare-and-swap). The judgments are pure
 * (queue.ts, bisect.ts, `trustedPathsTouched`); this file reads, acts and
 * records.
 */
import { hostname } from 'node:os';
import { ProofgateError, errorMessage, isProofgateError, newId } from '../../core/index.js';
import { loadRepoConfigAt, type RepoConfig } from '../../contracts/repo-config.js';
import type { CandidateCheckResult, CandidateLanding, Forge, MergeCandidate, MergeQueuePort } from '../../forge/port.js';
import { automergeActive } from '../ledger.js';
import { crashPoint } from '../loop/crash-seam.js';
import type { LedgerStore } from '../loop/ledger-store.js';
import { trustedPathsTouched } from '../trusted-paths.js';
import { planAfterCheck } from './bisect.js';
import { nextBatch, type QueueEntry, type QueueState } from './queue.js';
import type { NewQueueEvent, QueueStore } from './store.js';

/** A base's queue lease when not told otherwise; renewed every third of it. */
export const DEFAULT_QUEUE_LEASE_MS = 30_000;

/**
 * Test seam (the loop's `PROOFGATE_TEST_CRASH_AT`): SIGKILL at the first
 * occurrence of a queue effect boundary. Unset, nothing.
 */
export type QueueCrashPoint = 'queue-candidate-built' | 'queue-checks-recorded' | 'queue-landed-recorded';
export function queueCrashPoint(point: QueueCrashPoint): void {
  if (process.env.PROOFGATE_TEST_CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}

/** A lease owner id: `<host>:<pid>:<random>`, so a dead holder on this host is recognised. */
export function queueOwnerId(): string {
  return `${hostname()}:${process.pid}:${newId('mq')}`;
}

export interface QueueRunContext {
  readonly queues: QueueStore;
  readonly forge: Forge;
  /** The automerge ledgers: a change whose automerge was stopped leaves the queue. */
  readonly ledger: LedgerStore;
  readonly owner: string;
  readonly batchSize: number;
  readonly leaseMs?: number;
  readonly signal?: AbortSignal;
  readonly progress?: (text: string) => void;
  /**
   * Hand the queue over (release the lease between two candidates) once this
   * says so: a change's own process stops running the queue when its change
   * has left it, and the next waiting process takes the lease.
   */
  readonly handOver?: (state: QueueState) => boolean;
}

/** Why the runner stopped running the queue. */
export type QueueRunEnd = 'empty' | 'paused' | 'aborted' | 'lease-lost' | 'handed-over';

/** Queue removal codes a change's loop cannot cure by deciding again (it ends blocked). */
export const FINAL_REMOVALS: ReadonlySet<string> = new Set(['trusted-paths', 'EMPTY', 'PROTECTED_BRANCH']);

async function baseConfig(forge: Forge, baseRef: string, baseSha: string): Promise<RepoConfig> {
  return (await loadRepoConfigAt((ref, path) => forge.readFile(ref, path), baseSha, baseRef)).config;
}

/** The entries whose automerge is off now (a stop since they were queued): they leave first. */
async function stoppedEntries(ledger: LedgerStore, entries: readonly QueueEntry[]): Promise<QueueEntry[]> {
  const stopped: QueueEntry[] = [];
  for (const entry of entries) {
    const { state } = await ledger.load(entry.change);
    // A change its ledger already calls merged is not stopped: the candidate build finds its landing (a crash's).
    if (state.merged === null && !automergeActive(state)) stopped.push(entry);
  }
  return stopped;
}

/** Paths of the candidate's squashes that the base's trust rule covers and the change's loop did not see approved (pure). */
export function unapprovedTrusted(
  candidate: MergeCandidate,
  entries: readonly QueueEntry[],
  config: RepoConfig,
): { change: string; head: string; paths: string[] } | null {
  for (const commit of candidate.commits) {
    const entry = entries.find((e) => e.change === commit.changeId);
    const touched = trustedPathsTouched(commit.paths, config);
    const missing = touched.filter((path) => !(entry?.approvedTrusted ?? []).includes(path));
    if (missing.length > 0) return { change: commit.changeId, head: commit.headSha, paths: missing };
  }
  return null;
}

/**
 * Run the queue of `base` while `context.owner` holds its lease (the caller
 * took it); the lease is released at the end unless it was lost.
 */
export async function runQueue(context: QueueRunContext, base: string): Promise<QueueRunEnd> {
  const { queues, forge, owner } = context;
  const port: MergeQueuePort | undefined = forge.mergeQueue;
  if (port === undefined) throw new ProofgateError('CONFIG', `the ${forge.kind} forge has no merge queue`);
  const leaseMs = context.leaseMs ?? DEFAULT_QUEUE_LEASE_MS;
  const progress = (text: string): void => context.progress?.(`[queue ${base}] ${text}`);
  const append = (events: readonly NewQueueEvent[]): Promise<void> => queues.append(base, events, owner);
  let lost = false;
  const renewal = setInterval(
    () => {
      void queues.updateLease(base, owner, leaseMs).then(
        (held) => {
          if (!held) lost = true;
        },
        () => undefined,
      );
    },
    Math.max(1_000, Math.floor(leaseMs / 3)),
  );
  renewal.unref();
  const now = (): string => queues.now();
  /** The port's checks of `candidate`, or `aborted` when the caller's signal stopped them. */
  const checkUnlessAborted = async (candidate: MergeCandidate, passedTrees: readonly string[]): Promise<CandidateCheckResult | 'aborted'> => {
    try {
      return await port.checkCandidate(candidate, {
        passedTrees,
        ...(context.signal === undefined ? {} : { signal: context.signal }),
        onProgress: progress,
      });
    } catch (error) {
      if (isProofgateError(error, 'ABORTED')) return 'aborted';
      throw error;
    }
  };
  try {
    for (;;) {
      if (context.signal?.aborted === true) return 'aborted';
      if (lost) return 'lease-lost';
      const state: QueueState = await queues.load(base);
      if (state.paused !== null) return 'paused';
      if (context.handOver?.(state) === true) return 'handed-over';
      const batch = nextBatch(state, context.batchSize);
      if (batch === null) return 'empty';
      const stopped = await stoppedEntries(context.ledger, batch);
      if (stopped.length > 0) {
        await append(
          stopped.map((entry) => ({
            type: 'queue-removed',
            data: { change: entry.change, head: entry.head, code: 'stopped', reason: 'automerge was stopped', at: now() },
          })),
        );
        continue;
      }
      const build = await port.buildCandidate(
        base,
        batch.map((entry) => ({ changeId: entry.change, headSha: entry.head, title: entry.title })),
      );
      if (build.kind === 'refused') {
        const entry = batch.find((e) => e.change === build.changeId);
        if (entry === undefined) throw new ProofgateError('INTERNAL', `candidate refused change ${build.changeId}, which is not in the batch`);
        if (build.code === 'MERGED' && build.merged !== undefined && build.merged.head === entry.head) {
          // A merge a crash left unrecorded (the base holds its squash): it landed.
          const landed = { change: entry.change, head: entry.head, mergeCommit: build.merged.mergeCommit };
          await append([
            {
              type: 'queue-landed',
              data: { candidate: 'recovered', base: build.merged.mergeCommit, tip: build.merged.mergeCommit, changes: [landed], at: now() },
            },
          ]);
        } else {
          progress(`change ${entry.change} leaves the queue (${build.code}): ${build.reason}`);
          await append([{ type: 'queue-removed', data: { change: entry.change, head: entry.head, code: build.code, reason: build.reason, at: now() } }]);
        }
        continue;
      }
      const candidate = build.candidate;
      const config = await baseConfig(forge, base, candidate.baseSha);
      const unapproved = unapprovedTrusted(candidate, batch, config);
      if (unapproved !== null) {
        const reason = `its patch touches trusted paths without an approval of this head: ${unapproved.paths.map((p) => JSON.stringify(p)).join(', ')}`;
        progress(`change ${unapproved.change} leaves the queue: ${reason}`);
        await append([{ type: 'queue-removed', data: { change: unapproved.change, head: unapproved.head, code: 'trusted-paths', reason, at: now() } }]);
        continue;
      }
      const candidateId = newId('cand');
      const changes = candidate.commits.map((commit) => commit.changeId);
      await append([
        { type: 'queue-candidate', data: { candidate: candidateId, changes, base: candidate.baseSha, tip: candidate.tip, tree: candidate.tree, at: now() } },
      ]);
      queueCrashPoint('queue-candidate-built');
      progress(`candidate ${candidate.tip.slice(0, 12)}: ${changes.map((id) => `#${id}`).join(' ')} on ${candidate.baseSha.slice(0, 12)}`);
      const checked = await checkUnlessAborted(candidate, state.passedTrees);
      if (checked === 'aborted') return 'aborted';
      await append([
        {
          type: 'queue-checked',
          data: { candidate: candidateId, tree: checked.key, passed: checked.passed, reused: checked.reused, failure: checked.failure, at: now() },
        },
      ]);
      queueCrashPoint('queue-checks-recorded');
      const plan = planAfterCheck(
        changes,
        checked.passed ? { passed: true } : { passed: false, failure: checked.failure ?? { check: null, conclusion: null, log: null } },
        state.suspects,
      );
      if (plan.kind === 'bisect') {
        progress(`candidate failed (${plan.failure.check ?? 'checks'}): bisecting ${plan.changes.map((id) => `#${id}`).join(' ')}`);
        await append([{ type: 'queue-bisect', data: { changes: [...plan.changes], failure: plan.failure, at: now() } }]);
        continue;
      }
      if (plan.kind === 'eject') {
        const entry = batch.find((e) => e.change === plan.change);
        if (entry === undefined) throw new ProofgateError('INTERNAL', `ejecting change ${plan.change}, which is not in the batch`);
        const what = plan.failure.check === null ? 'the checks' : `check ${JSON.stringify(plan.failure.check)}`;
        const reason = `${what} failed (${plan.failure.conclusion ?? 'error'}) on the merge candidate ${candidate.tip.slice(0, 12)} (this change on ${candidate.baseSha.slice(0, 12)})${plan.failure.log === null ? '' : `; log: ${plan.failure.log}`}`;
        progress(`change ${entry.change} ejected: ${reason}`);
        await append([
          { type: 'queue-ejected', data: { change: entry.change, head: entry.head, reason, check: plan.failure.check, log: plan.failure.log, at: now() } },
        ]);
        continue;
      }
      // A stop recorded while the checks ran wins over the landing, as it does over a direct merge.
      const stoppedSince = await stoppedEntries(context.ledger, batch);
      if (stoppedSince.length > 0) {
        await append(
          stoppedSince.map((entry) => ({
            type: 'queue-removed',
            data: { change: entry.change, head: entry.head, code: 'stopped', reason: 'automerge was stopped', at: now() },
          })),
        );
        continue;
      }
      await queues.requireLease(base, owner);
      let landing: CandidateLanding;
      try {
        landing = await port.landCandidate(candidate);
      } catch (error) {
        if (isProofgateError(error, 'BASE_MOVED')) {
          progress(`${base} moved outside the queue: the candidate is built again (${errorMessage(error)})`);
          continue;
        }
        if (isProofgateError(error, 'HEAD_MOVED')) {
          progress(`a head moved before landing: ${errorMessage(error)}`);
          continue;
        }
        const refused = isProofgateError(error, 'NOT_MERGEABLE') ? batch.find((e) => e.change === error.details?.changeId) : undefined;
        if (refused !== undefined) {
          // The forge will not merge it now: it leaves, and its loop decides again on what the forge shows.
          progress(`change ${refused.change} leaves the queue (NOT_MERGEABLE): ${errorMessage(error)}`);
          await append([
            { type: 'queue-removed', data: { change: refused.change, head: refused.head, code: 'NOT_MERGEABLE', reason: errorMessage(error), at: now() } },
          ]);
          continue;
        }
        throw error;
      }
      const landed = landing.landed.map((commit) => ({ change: commit.changeId, head: commit.headSha, mergeCommit: commit.mergeCommit }));
      const lastLanded = landed[landed.length - 1];
      const events: NewQueueEvent[] = [];
      if (lastLanded !== undefined) {
        events.push({
          type: 'queue-landed',
          data: { candidate: candidateId, base: candidate.baseSha, tip: lastLanded.mergeCommit, changes: landed, at: now() },
        });
      }
      if (landing.untested !== null && lastLanded !== undefined) {
        const { tip, tree, testedTree, reason, staged } = landing.untested;
        progress(
          `the landed tree is not the tested one (${reason})${staged === null ? '' : `: its checks run on ${staged.ref} at ${staged.sha.slice(0, 12)}`}`,
        );
        events.push({
          type: 'queue-untested',
          data: { candidate: candidateId, changes: [lastLanded.change], tip, tree, testedTree, reason, staged, at: now() },
        });
      }
      if (landing.stopped !== null) {
        const { code, reason, changeId } = landing.stopped;
        progress(`landing stopped after ${landed.length} change(s) (${code}): ${reason}`);
        const refused = code === 'NOT_MERGEABLE' ? batch.find((e) => e.change === changeId) : undefined;
        if (refused !== undefined) events.push({ type: 'queue-removed', data: { change: refused.change, head: refused.head, code, reason, at: now() } });
      }
      if (plan.flaky !== null) {
        progress(`the failure of ${plan.flaky.failure.check ?? 'the checks'} did not come back while bisecting: reported flaky, charged to no change`);
        events.push({ type: 'queue-flaky', data: { changes: [...plan.flaky.changes], failure: plan.flaky.failure, at: now() } });
      }
      if (events.length > 0) await append(events);
      queueCrashPoint('queue-landed-recorded');
      // The loop's own boundary: the forge merged, no change's ledger says so yet.
      crashPoint('merge-returned');
      if (lastLanded !== undefined) progress(`landed ${landed.map((l) => `#${l.change}`).join(' ')}: ${base} is ${lastLanded.mergeCommit.slice(0, 12)}`);
      if (landing.untested !== null && landing.untested.staged !== null && lastLanded !== undefined) {
        // The landed tree was not the tested one: its checks run on the staging ref now, and the queue waits for them (as bors does).
        const { tip, tree, staged } = landing.untested;
        const commit = candidate.commits.find((c) => c.changeId === lastLanded.change);
        const landedTip: MergeCandidate = {
          baseRef: candidate.baseRef,
          baseSha: tip,
          commits: commit === undefined ? [] : [{ ...commit, commit: tip, tree }],
          tip,
          tree,
          configKey: candidate.configKey,
        };
        progress(`checking the landed tip ${tip.slice(0, 12)} on ${staged.ref}`);
        const result = await checkUnlessAborted(landedTip, []);
        if (result === 'aborted') return 'aborted';
        await append([
          {
            type: 'queue-untested-checked',
            data: { candidate: candidateId, changes: [lastLanded.change], tip, key: result.key, passed: result.passed, failure: result.failure, at: now() },
          },
        ]);
      }
    }
  } catch (error) {
    if (isProofgateError(error, 'LEASE_LOST')) {
      lost = true;
      return 'lease-lost';
    }
    throw error;
  } finally {
    clearInterval(renewal);
    if (!lost) await queues.updateLease(base, owner, 'release').catch(() => undefined);
  }
}
