/**
 * The merge queue of one protected base, pure: its events, the fold of its
 * stream (`foldQueue`), and which changes the next candidate holds
 * (`nextBatch`). The store (store.ts) appends these events at the revision
 * they were decided on; the runner (runner.ts) acts on what this file says.
 */
import type { QueueEventData, QueueEventType } from '../../contracts/automerge-steps.js';
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
  | { readonly kind: 'landed'; readonly change: string; readonly head: string; readonly mergeCommit: string; readonly at: string }
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
