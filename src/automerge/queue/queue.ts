/**
 * The merge queue of one protected base, pure: its events, the fold of its
 * stream (`foldQueue`), and which changes the next candidate holds
 * (`nextBatch`). The store (store.ts) appends these events at the revision
 * they were decided on; the runner (runner.ts) acts on what this file says.
 */
import { QUEUE_EVENT_SCHEMAS, type QueueEventData, type QueueEventType } from '../../contracts/automerge-steps.js';
import { bisectBatch } from './bisect.js';

/** One change waiting in the queue, in queue order. */
export interface QueueEntry {
  readonly change: string;
  /** The reviewed head that was ready when it was enqueued: the queue never lands another. */
  readonly head: string;
  readonly title: string;
  /** Trusted paths the change's loop saw approved for this head (the runner refuses any other). */
  readonly approvedTrusted: readonly string[];
  readonly at: string;
}

/** How a change left the queue. */
export type QueueOutcome =
  | {
      readonly kind: 'landed';
      readonly change: string;
      readonly head: string;
      readonly mergeCommit: string;
      readonly at: string;
      /** Set (the why) when the tree it landed in was not the tree the checks passed on: the base moved while it landed. */
      readonly untested?: string;
      /** The checks of that landed tree, run afterwards on the staging ref, once they ended. */
      readonly untestedChecks?: { readonly passed: boolean; readonly failure: QueueFailure | null };
    }
  | { readonly kind: 'removed'; readonly change: string; readonly head: string; readonly code: string; readonly reason: string; readonly at: string }
  | {
      readonly kind: 'ejected';
      readonly change: string;
      readonly head: string;
      readonly reason: string;
      readonly check: string | null;
      readonly log: string | null;
      readonly at: string;
    };

/** The failure a bisection is narrowing down. */
export interface QueueFailure {
  readonly check: string | null;
  readonly conclusion: string | null;
  readonly log: string | null;
}

export interface QueueLease {
  readonly owner: string;
  readonly until: string;
  readonly released: boolean;
}

export interface QueueState {
  readonly base: string;
  readonly revision: number;
  /** Waiting changes, first in line first. */
  readonly entries: readonly QueueEntry[];
  /** Each change's latest way out of the queue (cleared when it is enqueued again). */
  readonly outcomes: Readonly<Record<string, QueueOutcome>>;
  /** The changes of a failed candidate still under suspicion, in queue order, and that failure. */
  readonly suspects: { readonly changes: readonly string[]; readonly failure: QueueFailure } | null;
  readonly paused: { readonly by: string; readonly at: string } | null;
  readonly lease: QueueLease | null;
  /** `<config key>|<tree>` of candidates whose checks passed (newest last, bounded). */
  readonly passedTrees: readonly string[];
  readonly stats: { readonly candidates: number; readonly landed: number; readonly ejected: number; readonly bisections: number; readonly flaky: number };
}

/** Trees remembered as passed (oldest forgotten first). */
export const MAX_PASSED_TREES = 256;

export function initialQueue(base: string): QueueState {
  return {
    base,
    revision: 0,
    entries: [],
    outcomes: {},
    suspects: null,
    paused: null,
    lease: null,
    passedTrees: [],
    stats: { candidates: 0, landed: 0, ejected: 0, bisections: 0, flaky: 0 },
  };
}

/** A queue event as the fold reads it. */
export type QueueEvent = { readonly [T in QueueEventType]: { readonly type: T; readonly data: QueueEventData<T> } }[QueueEventType];

function leave(state: QueueState, outcome: QueueOutcome): QueueState {
  const entries = state.entries.filter((entry) => entry.change !== outcome.change);
  const suspects = state.suspects === null ? null : { ...state.suspects, changes: state.suspects.changes.filter((id) => id !== outcome.change) };
  return { ...state, entries, outcomes: { ...state.outcomes, [outcome.change]: outcome }, suspects: suspects?.changes.length === 0 ? null : suspects };
}

/** Apply one event (pure). */
export function reduceQueue(state: QueueState, event: QueueEvent): QueueState {
  switch (event.type) {
    case 'queue-enqueued': {
      const { change, head, title, approvedTrusted, at } = event.data;
      const present = state.entries.find((entry) => entry.change === change);
      if (present !== undefined && present.head === head) return state;
      const outcomes = { ...state.outcomes };
      delete outcomes[change];
      const entries = [...state.entries.filter((entry) => entry.change !== change), { change, head, title, approvedTrusted, at }];
      return { ...state, entries, outcomes };
    }
    case 'queue-removed':
      return leave(state, { kind: 'removed', ...event.data });
    case 'queue-ejected': {
      const next = leave(state, { kind: 'ejected', ...event.data });
      // The culprit is found: the others of the failed candidate are no longer suspects.
      return { ...next, suspects: null, stats: { ...next.stats, ejected: next.stats.ejected + 1 } };
    }
    case 'queue-landed': {
      let next = state;
      for (const landed of event.data.changes) next = leave(next, { kind: 'landed', ...landed, at: event.data.at });
      return { ...next, stats: { ...next.stats, landed: next.stats.landed + event.data.changes.length } };
    }
    case 'queue-untested': {
      const outcomes = { ...state.outcomes };
      for (const change of event.data.changes) {
        const outcome = outcomes[change];
        if (outcome?.kind === 'landed') outcomes[change] = { ...outcome, untested: event.data.reason };
      }
      return { ...state, outcomes };
    }
    case 'queue-untested-checked': {
      const outcomes = { ...state.outcomes };
      for (const change of event.data.changes) {
        const outcome = outcomes[change];
        if (outcome?.kind === 'landed') outcomes[change] = { ...outcome, untestedChecks: { passed: event.data.passed, failure: event.data.failure } };
      }
      // Not remembered in passedTrees: the key is the landed candidate's config, which the push that moved the base may have changed.
      return { ...state, outcomes };
    }
    case 'queue-candidate':
      return { ...state, stats: { ...state.stats, candidates: state.stats.candidates + 1 } };
    case 'queue-checked': {
      if (!event.data.passed) return state;
      const key = event.data.tree;
      const passedTrees = [...state.passedTrees.filter((entry) => entry !== key), key].slice(-MAX_PASSED_TREES);
      return { ...state, passedTrees };
    }
    case 'queue-bisect':
      return {
        ...state,
        suspects: { changes: event.data.changes, failure: event.data.failure },
        stats: { ...state.stats, bisections: state.stats.bisections + 1 },
      };
    case 'queue-flaky':
      return { ...state, suspects: null, stats: { ...state.stats, flaky: state.stats.flaky + 1 } };
    case 'queue-paused':
      return { ...state, paused: { by: event.data.by, at: event.data.at } };
    case 'queue-resumed':
      return { ...state, paused: null };
    case 'queue-lease':
      return { ...state, lease: event.data };
  }
}

/** Fold a queue stream (pure). */
export function foldQueue(base: string, events: readonly QueueEvent[], from: QueueState = initialQueue(base)): QueueState {
  let state = from;
  for (const event of events) state = reduceQueue(state, event);
  return { ...state, revision: from.revision + events.length };
}

/** Where a change stands in the queue: its 1-based position among the waiting changes, or how it left. */
export type QueuePosition =
  | { readonly kind: 'waiting'; readonly position: number; readonly of: number; readonly head: string }
  | { readonly kind: 'left'; readonly outcome: QueueOutcome }
  | { readonly kind: 'absent' };

export function queuePosition(state: QueueState, change: string): QueuePosition {
  const index = state.entries.findIndex((entry) => entry.change === change);
  const entry = state.entries[index];
  if (entry !== undefined) return { kind: 'waiting', position: index + 1, of: state.entries.length, head: entry.head };
  const outcome = state.outcomes[change];
  return outcome === undefined ? { kind: 'absent' } : { kind: 'left', outcome };
}

/**
 * The change whose loop should run the queue because nobody runs it (pure):
 * the first waiting change, while the queue is not paused and its lease is
 * free (none, released, run out at `nowMs`, or held by an owner
 * `holderGone` says is dead). Null when the queue is empty, paused or run.
 */
export function unattendedQueueHead(state: QueueState, nowMs: number, holderGone: (lease: QueueLease) => boolean): string | null {
  const first = state.entries[0];
  if (first === undefined || state.paused !== null) return null;
  const lease = state.lease;
  const held = lease !== null && !lease.released && Date.parse(lease.until) > nowMs && !holderGone(lease);
  return held ? null : first.change;
}

/**
 * The changes of the next candidate, in queue order (pure), or null when
 * there is nothing to build (empty or paused). While a failed candidate is
 * being bisected, the batch is the first half of the changes still under
 * suspicion; otherwise the first `batchSize` waiting changes.
 */
export function nextBatch(state: QueueState, batchSize: number): readonly QueueEntry[] | null {
  if (state.paused !== null || state.entries.length === 0) return null;
  const size = Math.max(1, Math.floor(batchSize));
  if (state.suspects !== null) {
    const waiting = state.suspects.changes.filter((id) => state.entries.some((entry) => entry.change === id));
    if (waiting.length > 0) {
      const half = new Set(bisectBatch(waiting));
      // Suspects are always the first waiting changes in order: earlier changes landed or left before the split.
      const batch = state.entries.filter((entry) => half.has(entry.change));
      if (batch.length > 0) return batch;
    }
  }
  return state.entries.slice(0, size);
}

// ------------------------------------------------------------ read helpers

/** One thing that happened to one change in its base's queue, as the CLI and the dashboard show it. */
export type QueueHistoryItem =
  | { readonly kind: 'enqueued'; readonly change: string; readonly base: string; readonly at: string; readonly head: string }
  | {
      readonly kind: 'candidate';
      readonly change: string;
      readonly base: string;
      readonly at: string;
      readonly candidate: string;
      /** How many changes the candidate holds, and this change's place among them (1-based). */
      readonly size: number;
      readonly index: number;
      readonly tip: string;
    }
  | {
      readonly kind: 'checks';
      readonly change: string;
      readonly base: string;
      readonly at: string;
      readonly candidate: string;
      readonly passed: boolean;
      readonly reused: boolean;
      readonly failure: QueueFailure | null;
    }
  | { readonly kind: 'bisect'; readonly change: string; readonly base: string; readonly at: string; readonly suspects: number; readonly failure: QueueFailure }
  | { readonly kind: 'flaky'; readonly change: string; readonly base: string; readonly at: string; readonly failure: QueueFailure }
  | {
      readonly kind: 'landed';
      readonly change: string;
      readonly base: string;
      readonly at: string;
      readonly head: string;
      readonly commit: string;
      readonly candidate: string;
    }
  | {
      /** It landed, but not in the tree its checks passed on (the base moved while it landed); `staged`: where that tree's checks run. */
      readonly kind: 'untested';
      readonly change: string;
      readonly base: string;
      readonly at: string;
      readonly candidate: string;
      readonly tip: string;
      readonly tree: string;
      readonly testedTree: string;
      readonly reason: string;
      readonly staged: { readonly ref: string; readonly sha: string } | null;
    }
  | {
      /** The checks of an untested landing's tree, run afterwards on the staging ref. */
      readonly kind: 'untested-checked';
      readonly change: string;
      readonly base: string;
      readonly at: string;
      readonly candidate: string;
      readonly tip: string;
      readonly passed: boolean;
      readonly failure: QueueFailure | null;
    }
  | {
      readonly kind: 'removed';
      readonly change: string;
      readonly base: string;
      readonly at: string;
      readonly head: string;
      readonly code: string;
      readonly reason: string;
    }
  | {
      readonly kind: 'ejected';
      readonly change: string;
      readonly base: string;
      readonly at: string;
      readonly head: string;
      readonly reason: string;
      readonly check: string | null;
      readonly log: string | null;
    };

/**
 * What one queue event says about each change it concerns (pure), given the
 * queue before it (an enqueue the fold ignores, the same head already
 * waiting, says nothing) and the changes of each candidate built so far
 * (`candidateChanges`: a check result names only its candidate).
 */
export function queueHistoryItems(before: QueueState, event: QueueEvent, candidateChanges: (candidate: string) => readonly string[]): QueueHistoryItem[] {
  const base = before.base;
  switch (event.type) {
    case 'queue-enqueued': {
      const { change, head, at } = event.data;
      if (before.entries.some((entry) => entry.change === change && entry.head === head)) return [];
      return [{ kind: 'enqueued', change, base, at, head }];
    }
    case 'queue-candidate': {
      const { candidate, changes, tip, at } = event.data;
      return changes.map((change, index) => ({ kind: 'candidate', change, base, at, candidate, size: changes.length, index: index + 1, tip }));
    }
    case 'queue-checked': {
      const { candidate, passed, reused, failure, at } = event.data;
      return candidateChanges(candidate).map((change) => ({ kind: 'checks', change, base, at, candidate, passed, reused, failure }));
    }
    case 'queue-bisect':
      return event.data.changes.map((change) => ({
        kind: 'bisect',
        change,
        base,
        at: event.data.at,
        suspects: event.data.changes.length,
        failure: event.data.failure,
      }));
    case 'queue-flaky':
      return event.data.changes.map((change) => ({ kind: 'flaky', change, base, at: event.data.at, failure: event.data.failure }));
    case 'queue-landed':
      return event.data.changes.map((landed) => ({
        kind: 'landed',
        change: landed.change,
        base,
        at: event.data.at,
        head: landed.head,
        commit: landed.mergeCommit,
        candidate: event.data.candidate,
      }));
    case 'queue-untested': {
      const { candidate, changes, tip, tree, testedTree, reason, staged, at } = event.data;
      return changes.map((change) => ({ kind: 'untested', change, base, at, candidate, tip, tree, testedTree, reason, staged }));
    }
    case 'queue-untested-checked': {
      const { candidate, changes, tip, passed, failure, at } = event.data;
      return changes.map((change) => ({ kind: 'untested-checked', change, base, at, candidate, tip, passed, failure }));
    }
    case 'queue-removed': {
      const { change, head, code, reason, at } = event.data;
      return [{ kind: 'removed', change, base, at, head, code, reason }];
    }
    case 'queue-ejected': {
      const { change, head, reason, check, log, at } = event.data;
      return [{ kind: 'ejected', change, base, at, head, reason, check, log }];
    }
    case 'queue-paused':
    case 'queue-resumed':
    case 'queue-lease':
      return [];
  }
}

/** Every change's queue history in a whole stream, oldest first (pure); with `change`, that change's only. */
export function queueHistory(base: string, events: readonly QueueEvent[], change?: string): QueueHistoryItem[] {
  const candidates = new Map<string, readonly string[]>();
  const items: QueueHistoryItem[] = [];
  let state = initialQueue(base);
  for (const event of events) {
    for (const item of queueHistoryItems(state, event, (id) => candidates.get(id) ?? [])) if (change === undefined || item.change === change) items.push(item);
    if (event.type === 'queue-candidate') candidates.set(event.data.candidate, event.data.changes);
    state = reduceQueue(state, event);
  }
  return items;
}

/** The candidate a waiting change is in now, and its checks: the latest one built since it was last queued (pure). */
export interface QueueCandidateView {
  readonly candidate: string;
  readonly size: number;
  readonly index: number;
  readonly tip: string;
  readonly at: string;
  /** running: built, no result yet; passed: about to land (or built again when the base moved); failed: its changes are being bisected or ejected. */
  readonly checks: 'running' | 'passed' | 'failed';
  readonly failure: QueueFailure | null;
}

export function queueCandidateOf(history: readonly QueueHistoryItem[]): QueueCandidateView | null {
  const step = (found: QueueCandidateView | null, item: QueueHistoryItem): QueueCandidateView | null => {
    switch (item.kind) {
      case 'enqueued':
      case 'landed':
      case 'removed':
      case 'ejected':
        return null;
      case 'candidate':
        return { candidate: item.candidate, size: item.size, index: item.index, tip: item.tip, at: item.at, checks: 'running', failure: null };
      case 'checks':
        return found !== null && item.candidate === found.candidate ? { ...found, checks: item.passed ? 'passed' : 'failed', failure: item.failure } : found;
      default:
        return found;
    }
  };
  return history.reduce<QueueCandidateView | null>(step, null);
}

const shortSha = (sha: string): string => sha.slice(0, 12);
const failureText = (failure: QueueFailure | null): string =>
  failure === null ? '' : `${failure.check ?? 'a check'}${failure.conclusion === null ? '' : ` (${failure.conclusion})`}`;

/** An untested landing in words (pure): what landed, what was tested, and where the landed tree's checks run. */
export function untestedText(
  item: Pick<Extract<QueueHistoryItem, { kind: 'untested' }>, 'base' | 'tip' | 'tree' | 'testedTree' | 'reason' | 'staged'>,
): string {
  const staged = item.staged === null ? 'no test of it was started' : `its checks run on ${item.staged.ref} at ${shortSha(item.staged.sha)}`;
  return `the landed tree was not the tested one: ${item.base} is ${shortSha(item.tip)} (tree ${shortSha(item.tree)}), the checks passed on tree ${shortSha(item.testedTree)} (${item.reason}); ${staged}`;
}

/** The result of an untested landing's checks in words (pure). */
export function untestedChecksText(result: { readonly passed: boolean; readonly failure: QueueFailure | null }): string {
  if (result.passed) return 'checks passed';
  return `checks failed: ${failureText(result.failure)}${result.failure?.log == null ? '' : ` (log ${result.failure.log})`}`;
}

/** One history item in words (pure; holds untrusted text: the caller shows it inert). */
export function describeQueueItem(item: QueueHistoryItem): string {
  switch (item.kind) {
    case 'enqueued':
      return `queued for ${item.base} at ${shortSha(item.head)}`;
    case 'candidate':
      return `in candidate ${item.candidate} (${item.index} of ${item.size}) on ${item.base}, tip ${shortSha(item.tip)}`;
    case 'checks':
      return item.passed
        ? `candidate ${item.candidate}: checks passed${item.reused ? ' (reused)' : ''}`
        : `candidate ${item.candidate}: checks failed${item.failure === null ? '' : `: ${failureText(item.failure)}`}`;
    case 'bisect':
      return `bisecting ${item.suspects} suspects after ${failureText(item.failure)} failed`;
    case 'flaky':
      return `the failure of ${failureText(item.failure)} did not come back (flaky); nobody charged`;
    case 'landed':
      return `landed on ${item.base} as ${shortSha(item.commit)} (candidate ${item.candidate})`;
    case 'untested':
      return untestedText(item);
    case 'untested-checked':
      return `the landed tree ${shortSha(item.tip)} was checked afterwards: ${untestedChecksText(item)}`;
    case 'removed':
      return `removed from the merge queue of ${item.base}: ${item.code}: ${item.reason}`;
    case 'ejected':
      // The runner's reason names the check and its log already; they are added only when it does not.
      return `ejected from the merge queue of ${item.base}: ${item.reason}${item.log === null || item.reason.includes(item.log) ? '' : ` (log ${item.log})`}`;
  }
}

/** Where a change stands, in words: `merge queue (position N of M, base B)` and its candidate (pure). */
export function describeQueueWait(base: string, position: number, of: number, paused: boolean, candidate: QueueCandidateView | null): string {
  const where = `merge queue (position ${position} of ${of}, base ${base})`;
  const pause = paused ? '; the queue is paused' : '';
  const inCandidate = candidate === null ? '' : `; in candidate ${candidate.candidate}, checks ${candidate.checks}`;
  return `${where}${pause}${inCandidate}`;
}

/** The schema of queue events of `type`, or undefined for a type that is no queue event. */
export function queueEventSchema(type: string): (typeof QUEUE_EVENT_SCHEMAS)[QueueEventType] | undefined {
  return (QUEUE_EVENT_SCHEMAS as Record<string, (typeof QUEUE_EVENT_SCHEMAS)[QueueEventType] | undefined>)[type];
}

/** A stored event of a queue stream as the fold reads it, or null when it is not a valid queue event (pure). */
export function parseQueueEvent(type: string, data: unknown): QueueEvent | null {
  const schema = queueEventSchema(type);
  if (schema === undefined) return null;
  const parsed = schema.safeParse(data);
  return parsed.success ? ({ type, data: parsed.data } as QueueEvent) : null;
}

/** One change's place in its base's queue, its candidate and its queue history, as the CLI and the dashboard show them (pure). */
export interface ChangeQueueView {
  readonly base: string;
  /** waiting: in line now; otherwise how it last left. */
  readonly status: 'waiting' | QueueOutcome['kind'];
  /** 1-based place in line and the line's length (null unless waiting). */
  readonly position: number | null;
  readonly of: number | null;
  readonly paused: boolean;
  readonly head: string;
  /** The candidate it is in now (null: none built since it was queued, or it left). */
  readonly candidate: QueueCandidateView | null;
  readonly history: readonly QueueHistoryItem[];
}

/** The view of `change` in `state` given its history in that queue; null when it never was in this queue. */
export function changeQueueView(state: QueueState, change: string, history: readonly QueueHistoryItem[]): ChangeQueueView | null {
  const position = queuePosition(state, change);
  const paused = state.paused !== null;
  if (position.kind === 'waiting') {
    return {
      base: state.base,
      status: 'waiting',
      position: position.position,
      of: position.of,
      paused,
      head: position.head,
      candidate: queueCandidateOf(history),
      history,
    };
  }
  if (position.kind === 'left') {
    return { base: state.base, status: position.outcome.kind, position: null, of: null, paused, head: position.outcome.head, candidate: null, history };
  }
  return null;
}

/**
 * The queue's latest candidate while it matters (pure): built, not landed,
 * and holding a change still waiting in `state`, with its checks; null
 * otherwise.
 */
export interface QueueCandidateNow {
  readonly candidate: string;
  readonly changes: readonly string[];
  readonly tip: string;
  readonly at: string;
  readonly checks: QueueCandidateView['checks'];
  readonly failure: QueueFailure | null;
}

export function queueCandidateNow(state: Pick<QueueState, 'entries'>, events: readonly QueueEvent[]): QueueCandidateNow | null {
  const step = (found: QueueCandidateNow | null, event: QueueEvent): QueueCandidateNow | null => {
    if (event.type === 'queue-candidate') {
      const { candidate, changes, tip, at } = event.data;
      return { candidate, changes, tip, at, checks: 'running', failure: null };
    }
    if (found === null) return null;
    if (event.type === 'queue-checked' && found.candidate === event.data.candidate) {
      return { ...found, checks: event.data.passed ? 'passed' : 'failed', failure: event.data.failure };
    }
    if (event.type === 'queue-landed' && found.candidate === event.data.candidate) return null;
    return found;
  };
  const latest = events.reduce<QueueCandidateNow | null>(step, null);
  return latest !== null && latest.changes.some((change) => state.entries.some((entry) => entry.change === change)) ? latest : null;
}
