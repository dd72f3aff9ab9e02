/**
 * The loop and the forge's own merge queue (GitHub's merge queue, required
 * by a ruleset on the base). Where the base requires it, the merge step puts
 * the reviewed head in the queue (`Forge.enqueue`, pinned to that head)
 * instead of merging, and the change waits (`merge-queued`, parked in a
 * service) until GitHub merges it or lets it go; webhooks wake it, and each
 * run reads what happened from the snapshot:
 *
 * - merged: the iteration records `merged` from the forge (the reviewed head
 *   was queued), and the status comment becomes the final comment;
 * - removed without a merge: `queueRemovalRecords` turns GitHub's removal of
 *   the queued head into a `merge-failed` record (code `QUEUE_CHECKS_FAILED`
 *   when its merge group's checks failed, which blocks that head, else
 *   `QUEUE_REMOVED`, which counts against the merge attempts per head) and a
 *   timeline note with GitHub's reason; a head that moved is reviewed again;
 * - `/proofgate stop` while queued: the loop takes it out (`Forge.dequeue`).
 */
import { isProofgateError, newId } from '../../core/index.js';
import type { StepEvent } from './ledger-store.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import { queueRemovalCode, type AutomergeDecision } from '../decide.js';
import { automergeActive, timeOf, type LedgerOutcome } from '../ledger.js';
import type { AutomergeEnvironment } from './types.js';

/** Step names: proofgate put `head` in the forge's queue (with the forge's `enqueuedAt`), or took it out. */
export const FORGE_QUEUE_ENQUEUED = 'forge-queue-enqueued';
export const FORGE_QUEUE_DEQUEUED = 'forge-queue-dequeued';

const short = (sha: string): string => sha.slice(0, 12);

/** Whether the merge step must enqueue on the forge's queue rather than merge (pure). */
export function usesForgeQueue(snapshot: ChangeSnapshot, forge: Pick<AutomergeEnvironment['forge'], 'enqueue'>): boolean {
  return snapshot.forgeQueue?.required === true && forge.enqueue !== undefined;
}

/** The index of the latest `forge-queue-enqueued` step for `head`, or -1. */
function lastEnqueue(steps: readonly StepEvent[], head: string): number {
  for (let i = steps.length - 1; i >= 0; i -= 1) {
    const step = steps[i] as StepEvent;
    if (step.step === FORGE_QUEUE_ENQUEUED && step.head === head) return i;
  }
  return -1;
}

/** Whether proofgate put `head` in the forge's queue at some point (pure). */
export function enqueuedHead(steps: readonly StepEvent[], head: string): boolean {
  return lastEnqueue(steps, head) >= 0;
}

/**
 * Whether a removal from the forge's queue is one of `head` (pure): it names
 * that head, or names none (GitHub's `beforeCommit` may be null); callers
 * still require it at or after proofgate queued the head, and a head that
 * moved since is seen by its own synchronize, never through this removal.
 */
function removalOf(removal: { readonly headSha: string | null }, head: string): boolean {
  return removal.headSha === head || removal.headSha === null;
}

/**
 * The ledger records a removal from the forge's queue calls for (pure): none
 * unless the snapshot's latest removal is of the current head, happened at or
 * after proofgate last queued that head (both times are the forge's), and
 * proofgate did not take it out itself since (a stop). Their ids come from
 * the removal's time, so recording them again changes nothing.
 */
export function queueRemovalRecords(snapshot: ChangeSnapshot, steps: readonly StepEvent[]): LedgerOutcome[] {
  const removal = snapshot.forgeQueue?.lastRemoval ?? null;
  const head = snapshot.head.sha;
  if (removal === null || !removalOf(removal, head) || snapshot.state !== 'open') return [];
  const at = lastEnqueue(steps, head);
  if (at < 0) return [];
  const enqueuedAt = steps[at]?.enqueuedAt;
  if (typeof enqueuedAt !== 'string' || timeOf(removal.at) < timeOf(enqueuedAt)) return [];
  if (steps.slice(at + 1).some((step) => step.step === FORGE_QUEUE_DEQUEUED && step.head === head)) return [];
  const id = `queue-removed-${removal.at}`;
  const code = queueRemovalCode(removal.reason);
  return [
    { type: 'note', id, text: `GitHub's merge queue removed ${short(head)}: ${removal.reason}`, at: removal.at },
    { type: 'merge-failed', id, head, code, at: removal.at },
  ];
}

/**
 * A `merge` decision for a head proofgate queued and GitHub neither shows in
 * its queue nor shows removed since (it answers a moment later): a wait, so
 * the head is not queued twice (pure).
 */
export function forgeQueueGate(decision: AutomergeDecision, snapshot: ChangeSnapshot, steps: readonly StepEvent[]): AutomergeDecision {
  if (decision.kind !== 'merge' || snapshot.forgeQueue?.required !== true) return decision;
  const at = lastEnqueue(steps, decision.head);
  if (at < 0) return decision;
  const enqueuedAt = steps[at]?.enqueuedAt;
  const removal = snapshot.forgeQueue.lastRemoval;
  const removedSince = removal !== null && removalOf(removal, decision.head) && typeof enqueuedAt === 'string' && timeOf(removal.at) >= timeOf(enqueuedAt);
  const leftSince = steps.slice(at + 1).some((step) => step.step === FORGE_QUEUE_DEQUEUED && step.head === decision.head);
  if (removedSince || leftSince) return decision;
  return {
    kind: 'wait',
    code: 'merge-queued',
    reason: `queued in GitHub's merge queue of ${snapshot.base.ref} at head ${short(decision.head)}; waiting for GitHub to show it`,
  };
}

export type ForgeQueueStepResult =
  { readonly kind: 'queued'; readonly enqueuedAt: string } | { readonly kind: 'refused'; readonly code: string; readonly reason: string };

/** Refusals an enqueue may meet that change nothing: recorded, and the loop decides again. */
const REFUSALS = new Set(['HEAD_MOVED', 'NOT_MERGEABLE']);

/**
 * Put `head` in the forge's merge queue: `merge-attempt` first (refused once
 * a stop was recorded, as for a merge), then `Forge.enqueue` pinned to
 * `head`, then the `forge-queue-enqueued` step. A refusal is a
 * `merge-failed` record.
 */
export async function runForgeQueueStep(env: AutomergeEnvironment, snapshot: ChangeSnapshot, head: string): Promise<ForgeQueueStepResult> {
  const changeId = snapshot.id;
  const id = newId('mrg');
  const refused = await env.store.stepUnless(changeId, 'merge-attempt', { attempt: id, head }, ({ state }) =>
    state.merged !== null ? 'the change is merged already' : automergeActive(state) ? null : 'automerge was stopped after the merge was decided',
  );
  if (refused !== null) return { kind: 'refused', code: 'ABORTED', reason: refused };
  const enqueue = env.forge.enqueue;
  if (enqueue === undefined) return { kind: 'refused', code: 'NOT_MERGEABLE', reason: 'this forge has no merge queue of its own' };
  try {
    const { enqueuedAt } = await enqueue.call(env.forge, changeId, { expectedHeadSha: head });
    await env.store.step(changeId, FORGE_QUEUE_ENQUEUED, { head, enqueuedAt, base: snapshot.base.ref });
    return { kind: 'queued', enqueuedAt };
  } catch (error) {
    if (!isProofgateError(error) || !REFUSALS.has(error.code)) throw error;
    await env.store.record(changeId, { type: 'merge-failed', id, head, code: error.code, at: env.store.now() });
    env.observe?.({ kind: 'merge', outcome: error.code === 'HEAD_MOVED' ? 'head-moved' : 'not-mergeable' });
    return { kind: 'refused', code: error.code, reason: error.message };
  }
}

/**
 * Whether the change may be in the forge's queue as far as proofgate knows
 * (pure): the snapshot shows its entry, or proofgate queued the current head
 * and neither took it out nor saw it removed since (the forge may not show
 * an entry it made a moment ago).
 */
export function mayBeInForgeQueue(snapshot: ChangeSnapshot, steps: readonly StepEvent[]): boolean {
  if (snapshot.forgeQueue?.entry != null) return true;
  const head = snapshot.head.sha;
  const at = lastEnqueue(steps, head);
  if (at < 0) return false;
  if (steps.slice(at + 1).some((step) => step.step === FORGE_QUEUE_DEQUEUED && step.head === head)) return false;
  const removal = snapshot.forgeQueue?.lastRemoval ?? null;
  const enqueuedAt = steps[at]?.enqueuedAt;
  return !(removal !== null && removalOf(removal, head) && typeof enqueuedAt === 'string' && timeOf(removal.at) >= timeOf(enqueuedAt));
}

/**
 * A stop while the change may be in the forge's queue: record the intent,
 * then take it out (taking out a change that is not queued does nothing), so
 * the removal it causes is never read as a failed merge.
 */
export async function leaveForgeQueue(env: AutomergeEnvironment, snapshot: ChangeSnapshot, steps: readonly StepEvent[], reason: string): Promise<boolean> {
  if (!mayBeInForgeQueue(snapshot, steps) || env.forge.dequeue === undefined) return false;
  await env.store.step(snapshot.id, FORGE_QUEUE_DEQUEUED, { head: snapshot.head.sha, reason });
  await env.forge.dequeue(snapshot.id);
  return true;
}
