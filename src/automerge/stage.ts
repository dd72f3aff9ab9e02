/**
 * The stage of a change, as the observer dashboard shows it: a pure function
 * from what the forge and the automerge ledger say about one change to one of
 * eight stages, with the reason in words where the stage needs one (what a
 * waiting change waits on, why a blocked change is blocked).
 *
 * The order of the rule, first match wins:
 *
 * 1. merged (the forge says so, or the ledger recorded the merge);
 * 2. closed (the forge says so);
 * 3. waiting in its base's merge queue (the queue's fold says so): waiting,
 *    on `merge queue (position N of M, base B)`, with the candidate it is in
 *    and that candidate's checks (code `merge-queued`);
 * 4. a repair dispatched and not finished since the last job ended: repairing;
 * 5. a review dispatched and not finished since the last job ended: proving
 *    when a proof was admitted for its head, else reviewing;
 * 6. the latest step that says where the loop stands: a decision (`block`,
 *    `wait`, `stop`, `review`, `repair`, `merge`), a job's end, a parked or
 *    expired wait, a check run started and not finished, an invalid config;
 * 7. otherwise arriving (automerge requested and nothing decided yet, or no
 *    command at all).
 */
import type { AutomergeLedgerState } from './ledger.js';
import { describeQueueWait, type ChangeQueueView } from './queue/queue.js';

export const CHANGE_STAGES = ['arriving', 'reviewing', 'proving', 'repairing', 'waiting', 'merged', 'blocked', 'closed'] as const;
export type ChangeStage = (typeof CHANGE_STAGES)[number];

/** One step of the change's log (`step` events of its automerge stream): a name, a time, JSON details. */
export interface StageStep {
  readonly step: string;
  readonly at: string;
  readonly [key: string]: unknown;
}

export interface StageFacts {
  /** The change as the forge records it. */
  readonly forgeState: 'open' | 'closed' | 'merged';
  /** The merge commit the forge recorded (null: none). */
  readonly forgeMergeCommit: string | null;
  /** Whether automerge is on (`automergeActive`). */
  readonly automergeOn: boolean;
  readonly ledger: Pick<AutomergeLedgerState, 'reviews' | 'repairs' | 'merged'>;
  /** Every step, oldest first. */
  readonly steps: readonly StageStep[];
  /** The change in its base's merge queue (`changeQueueView`; null or absent: never queued there). */
  readonly queue?: Pick<ChangeQueueView, 'base' | 'status' | 'position' | 'of' | 'paused' | 'candidate'> | null;
}

export interface StageResult {
  readonly stage: ChangeStage;
  /** What it waits on, why it is blocked, what runs; null when the stage says it all. */
  readonly detail: string | null;
  /** The decision's reason code when a decision set the stage. */
  readonly code: string | null;
}

/** Whether `text` is a known stage. Pure. */
export function isChangeStage(text: string): text is ChangeStage {
  return (CHANGE_STAGES as readonly string[]).includes(text);
}

const short = (sha: unknown): string => (typeof sha === 'string' ? sha.slice(0, 12) : '?');
const textOf = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

function timeOf(iso: string): number {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? Number.NEGATIVE_INFINITY : t;
}

const result = (stage: ChangeStage, detail: string | null = null, code: string | null = null): StageResult => ({ stage, detail, code });

/** The stage a decision step puts the change in. */
function fromDecision(step: StageStep, automergeOn: boolean): StageResult | null {
  const reason = textOf(step.reason);
  const code = textOf(step.code);
  switch (step.kind) {
    case 'block':
      return result('blocked', reason ?? 'blocked', code);
    case 'wait':
      return result('waiting', reason ?? 'waiting', code);
    case 'stop':
      return result('arriving', automergeOn ? reason : (reason ?? 'automerge is off'), code);
    case 'review':
      return result('reviewing', reason, code);
    case 'repair':
      return result('repairing', reason, code);
    case 'merge':
      return result('waiting', reason === null ? 'merging' : `merging: ${reason}`, code);
    default:
      return null;
  }
}

/** The stage a job's end puts the change in. */
function fromJobEnd(step: StageStep, automergeOn: boolean): StageResult | null {
  const reason = textOf(step.reason);
  switch (step.outcome) {
    case 'blocked':
      return result('blocked', reason ?? 'blocked');
    case 'waiting':
    case 'parked':
      return result('waiting', reason ?? 'waiting');
    case 'interrupted':
      return result('waiting', reason === null ? 'interrupted: runs again' : `interrupted: ${reason}`);
    case 'stopped':
      return result('arriving', automergeOn ? reason : (reason ?? 'automerge is off'));
    default:
      return null;
  }
}

/** The stage of one change. Pure. */
export function changeStage(facts: StageFacts): StageResult {
  const { ledger, steps, automergeOn } = facts;
  if (facts.forgeState === 'merged' || ledger.merged !== null) {
    const commit = ledger.merged?.mergeCommit ?? facts.forgeMergeCommit;
    return result('merged', commit === null ? null : `as ${short(commit)}`);
  }
  if (facts.forgeState === 'closed') return result('closed');
  const queue = facts.queue ?? null;
  if (queue !== null && queue.status === 'waiting' && queue.position !== null && queue.of !== null) {
    return result('waiting', describeQueueWait(queue.base, queue.position, queue.of, queue.paused, queue.candidate), 'merge-queued');
  }

  // Work in flight counts only when dispatched after the last job ended (a job that ended left nothing running).
  let lastEnd = Number.NEGATIVE_INFINITY;
  for (const step of steps) if (step.step === 'job-finished') lastEnd = Math.max(lastEnd, timeOf(step.at));
  const open = <T extends { readonly status: string; readonly at: string }>(items: readonly T[]): T | null => {
    for (let i = items.length - 1; i >= 0; i -= 1) {
      const item = items[i] as T;
      if (item.status === 'dispatched' && timeOf(item.at) >= lastEnd) return item;
    }
    return null;
  };
  const repair = open(ledger.repairs);
  if (repair !== null) return result('repairing', `${repair.repair} of ${short(repair.head)}: ${repair.reason}`);
  const review = open(ledger.reviews);
  if (review !== null) {
    const proof = steps.find((step) => step.step === 'proof-admitted' && isRecord(step.decision) && step.decision.headSha === review.head);
    if (proof !== undefined) {
      const allowlist =
        isRecord(proof.decision) && Array.isArray(proof.decision.allowlist) ? proof.decision.allowlist.filter((s) => typeof s === 'string') : [];
      return result('proving', `proof of ${short(review.head)}${allowlist.length > 0 ? `: ${allowlist.join(', ')}` : ''}`);
    }
    return result('reviewing', `review of ${short(review.head)}`);
  }

  const finishedChecks = new Set<string>();
  for (let i = steps.length - 1; i >= 0; i -= 1) {
    const step = steps[i] as StageStep;
    switch (step.step) {
      case 'decision': {
        const stage = fromDecision(step, automergeOn);
        if (stage !== null) return stage;
        break;
      }
      case 'job-finished': {
        const stage = fromJobEnd(step, automergeOn);
        if (stage !== null) return stage;
        break;
      }
      case 'wait-parked':
        return result('waiting', textOf(step.reason) ?? `${String(step.window)} wait`);
      case 'wait-expired':
        return result('blocked', textOf(step.reason) ?? 'a wait ran out');
      case 'config-invalid':
        return result('blocked', textOf(step.reason) ?? textOf(step.message) ?? 'the trusted config is invalid');
      case 'checks-finished':
        if (typeof step.head === 'string') finishedChecks.add(step.head);
        break;
      case 'checks-started':
        if (typeof step.head === 'string' && !finishedChecks.has(step.head)) return result('waiting', `checks running on ${short(step.head)}`);
        break;
    }
  }
  return result('arriving', automergeOn ? 'automerge requested' : null);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
