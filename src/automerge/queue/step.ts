/**
 * The change's side of the merge queue, called by the loop where it would
 * merge on its own: record the merge attempt (a stop recorded since the
 * decision wins), put the reviewed head in its base's queue, and wait for
 * its outcome there, running the queue whenever this process can take the
 * base's lease (so any number of one-shot processes need no server). The
 * status comment says where the change is in line.
 */
import { isProofgateError } from '../../core/index.js';
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, Forge } from '../../forge/port.js';
import type { AutomergeDecision } from '../decide.js';
import { automergeActive, type AutomergeLedgerState } from '../ledger.js';
import { renderStatusComment } from '../status-comment.js';
import type { StatusWriter } from '../loop/status.js';
import type { AutomergeEnvironment } from '../loop/types.js';
import { queuePosition, untestedChecksText, type QueueState } from './queue.js';
import { leaseHolderGone } from '../loop/job.js';
import { FINAL_REMOVALS, queueOwnerId, runQueue } from './runner.js';
import { QueueStore } from './store.js';

/** The queue settings of a base's trusted config (pure): batches of 4 unless set. */
export interface QueueSettings {
  readonly enabled: boolean;
  readonly batchSize: number;
}

export const DEFAULT_BATCH_SIZE = 4;

/**
 * Whether proofgate's own queue runs for a base, and its batch size (pure).
 * On the local forge it is on unless `automerge.queue.enabled` is false. On
 * GitHub it is opt-in: only `automerge.queue.enabled: true` turns it on,
 * because it needs the repository's CI to run on the staging branches
 * (`proofgate-staging/<base>`); without it a change merges on its own. The
 * queue lands squash commits only: with `automerge.mergeMethod` `merge` or
 * `rebase` a change merges on its own, as without a queue.
 */
export function queueSettings(config: RepoConfig, forgeKind: Forge['kind'] = 'local'): QueueSettings {
  const queue = config.automerge?.queue;
  const squash = (config.automerge?.mergeMethod ?? 'squash') === 'squash';
  const byDefault = forgeKind === 'local';
  return { enabled: (queue?.enabled ?? byDefault) && squash, batchSize: queue?.batchSize ?? DEFAULT_BATCH_SIZE };
}

export type QueueStepResult =
  | { readonly kind: 'merged'; readonly mergeCommit: string; readonly state: AutomergeLedgerState }
  /** The change left the queue for a reason the loop re-decides on (a moved head, a conflict, a stop). */
  | { readonly kind: 'left'; readonly code: string; readonly reason: string }
  /** The change left the queue for good for this head: a check failed on its candidate, or something no re-decision cures. */
  | { readonly kind: 'blocked'; readonly reason: string; readonly decision: AutomergeDecision }
  | { readonly kind: 'interrupted' };

/** How long a waiting change sleeps between looks at its queue when no event wakes it. */
const POLL_MS = 200;

const stores = new WeakMap<object, QueueStore>();
/** One queue store per event store in this process (its folds are shared). */
export function queueStoreOf(env: Pick<AutomergeEnvironment, 'store' | 'clock'>): QueueStore {
  let store = stores.get(env.store.events);
  if (store === undefined) {
    store = new QueueStore(env.store.events, env.clock);
    stores.set(env.store.events, store);
  }
  return store;
}

/** The status line of a change waiting in the queue (pure). */
export function queuedReason(base: string, position: number, of: number, paused: boolean): string {
  return `in the merge queue of ${base}: position ${position} of ${of}${paused ? ' (the queue is paused by a maintainer)' : ''}`;
}

export interface QueueStepOptions {
  readonly writer: StatusWriter;
  readonly timeline: () => AutomergeLedgerState['timeline'];
  readonly progress: (text: string) => void;
  /** Trusted paths the change touches whose change a maintainer approved for this head. */
  readonly approvedTrusted: readonly string[];
  readonly signal?: AbortSignal;
}

export async function runQueueStep(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  head: string,
  config: RepoConfig,
  options: QueueStepOptions,
): Promise<QueueStepResult> {
  const changeId = snapshot.id;
  const base = snapshot.base.ref;
  const settings = queueSettings(config, env.forge.kind);
  const queues = queueStoreOf(env);
  const refused = await env.store.stepUnless(changeId, 'merge-attempt', { attempt: `queue-${head.slice(0, 12)}`, head }, ({ state }) =>
    state.merged !== null ? 'the change is merged already' : automergeActive(state) ? null : 'automerge was stopped after the merge was decided',
  );
  if (refused !== null) return { kind: 'left', code: 'ABORTED', reason: refused };
  const requestedAt = (await env.store.load(changeId)).state.automerge?.at ?? '';
  // Enqueue, unless this head already left for good after the latest /proofgate automerge (a new request puts it back).
  const early = await queues.appendWith(base, (state) => {
    const position = queuePosition(state, changeId);
    if (position.kind === 'waiting' && position.head === head) return { events: [], result: null };
    if (position.kind === 'left' && position.outcome.head === head) {
      if (position.outcome.kind === 'landed') return { events: [], result: position };
      if (position.outcome.kind === 'ejected' && Date.parse(position.outcome.at) >= Date.parse(requestedAt)) return { events: [], result: position };
    }
    const title = `${snapshot.title} (#${snapshot.number})`;
    return {
      events: [{ type: 'queue-enqueued', data: { change: changeId, head, title, approvedTrusted: [...options.approvedTrusted], at: queues.now() } }],
      result: null,
    };
  });
  if (early === null) {
    await env.store.step(changeId, 'queue-enqueued', { base, head });
    options.progress(`queued for ${base} at ${head.slice(0, 12)}`);
  }
  const owner = queueOwnerId();
  let shown = '';
  for (;;) {
    if (options.signal?.aborted === true) return { kind: 'interrupted' };
    const state: QueueState = await queues.load(base);
    const position = queuePosition(state, changeId);
    if (position.kind === 'left' && position.outcome.head === head) {
      const outcome = position.outcome;
      if (outcome.kind === 'landed') {
        if (outcome.untested !== undefined) {
          // Said on the change (its final comment's timeline) before the merge is recorded: the tree that landed was not the tested one.
          await env.store.record(changeId, {
            type: 'note',
            id: `queue-untested-${outcome.mergeCommit.slice(0, 12)}`,
            text: `merge queue: the landed tree was not the tested one: ${outcome.untested}${outcome.untestedChecks === undefined ? '' : `; the landed tree's ${untestedChecksText(outcome.untestedChecks)}`}`,
            at: env.store.now(),
          });
        }
        const recorded = await env.store.load(changeId);
        const merged =
          recorded.state.merged ??
          (
            await env.store.record(changeId, {
              type: 'merged',
              id: `queue-${outcome.mergeCommit.slice(0, 12)}`,
              head,
              mergeCommit: outcome.mergeCommit,
              at: env.store.now(),
            })
          ).merged;
        env.observe?.({ kind: 'merge', outcome: 'merged' });
        const state = (await env.store.load(changeId)).state;
        return { kind: 'merged', mergeCommit: merged?.mergeCommit ?? outcome.mergeCommit, state };
      }
      if (outcome.kind === 'ejected') {
        return {
          kind: 'blocked',
          reason: outcome.reason,
          decision: { kind: 'block', code: 'queue-ejected', reason: `left the merge queue of ${base}: ${outcome.reason}` },
        };
      }
      if (FINAL_REMOVALS.has(outcome.code)) {
        return {
          kind: 'blocked',
          reason: outcome.reason,
          decision: { kind: 'block', code: 'merge-refused', reason: `left the merge queue of ${base}: ${outcome.reason}` },
        };
      }
      return { kind: 'left', code: outcome.code, reason: outcome.reason };
    }
    if (position.kind !== 'waiting' || position.head !== head)
      return { kind: 'left', code: 'HEAD_MOVED', reason: 'the change is no longer queued at this head' };
    // A stop since it was queued: take it out here at once (the runner would too).
    const ledger = await env.store.load(changeId);
    if (!automergeActive(ledger.state)) {
      await queues.append(base, [
        { type: 'queue-removed', data: { change: changeId, head, code: 'stopped', reason: 'automerge was stopped', at: queues.now() } },
      ]);
      continue;
    }
    const reason = queuedReason(base, position.position, position.of, state.paused !== null);
    if (reason !== shown) {
      shown = reason;
      options.progress(reason);
      const decision: AutomergeDecision = { kind: 'wait', code: 'merge-queued', reason };
      await options.writer.writeComment(
        snapshot,
        renderStatusComment({ changeId, intent: options.writer.intent, head, decision, timeline: options.timeline() }, env.secret),
      );
    }
    if (state.paused === null) {
      try {
        if (await queues.acquireLease(base, owner, 30_000, leaseHolderGone)) {
          await runQueue(
            {
              queues,
              forge: env.forge,
              ledger: env.store,
              owner,
              batchSize: settings.batchSize,
              ...(options.signal === undefined ? {} : { signal: options.signal }),
              progress: options.progress,
              // This process runs the queue while its own change waits in it; then the next waiting process does.
              handOver: (current) => queuePosition(current, changeId).kind !== 'waiting',
            },
            base,
          );
          continue;
        }
      } catch (error) {
        if (!isProofgateError(error, 'LEASE_LOST')) throw error;
      }
    }
    if ((await env.signals.wait(changeId, POLL_MS, options.signal)) === 'aborted') return { kind: 'interrupted' };
  }
}
