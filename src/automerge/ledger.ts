/**
 * The automerge ledger of one change, as pure functions: what commands were
 * processed (keyed by comment id + updated_at) and what the router did about them
 * (reviews, repairs, merge attempts). Every record has a key and applying a key
 * twice changes nothing, so redeliveries, retries and unchanged edits run nothing
 * twice. The effectful store that persists these records lives elsewhere.
 */
import type { ForgeComment } from '../forge/port.js';
import { commandText, type ParsedCommand } from './commands.js';
import type { Verdict } from './markers.js';

export type RepairKind = 'rebase' | 'fix-checks' | 'fix-findings';

export interface CommandStamp {
  readonly commentId: string;
  readonly actor: string;
  /** When the command text came to be: the comment's updated_at. */
  readonly at: string;
  /** 1-based line of the command in that comment version (orders commands of one comment). */
  readonly line?: number;
}

export interface ReviewRecord {
  readonly id: string;
  readonly head: string;
  readonly status: 'dispatched' | 'finished' | 'failed';
  readonly verdict: Verdict | null;
  readonly at: string;
}

export interface RepairRecord {
  readonly id: string;
  /** The head the repair started from. */
  readonly head: string;
  readonly repair: RepairKind;
  /** Dispatched by the loop (counts against the caps) rather than by a human command. */
  readonly automatic: boolean;
  readonly reason: string;
  readonly status: 'dispatched' | 'pushed' | 'no-change' | 'failed';
  readonly newHead: string | null;
  readonly commits: readonly string[];
  readonly at: string;
}

export interface MergeFailure {
  readonly id: string;
  readonly head: string;
  readonly code: string;
  readonly at: string;
}

export interface TimelineEntry {
  readonly at: string;
  readonly text: string;
}

/**
 * The ledger keys a state has applied: a persistent set. The states of one
 * history share one append-only log of keys and each state sees the first
 * `size` of them, so adding a key to the newest state costs the same however
 * long the history is (the fold of a long-running change stays linear).
 * Adding a key to an older state that differs from the key its successor
 * added copies that state's keys into a log of its own, so no state ever
 * sees a key it did not apply.
 */
export class AppliedKeys implements Iterable<string> {
  readonly #keys: string[];
  readonly #index: Map<string, number>;
  readonly size: number;

  private constructor(keys: string[], index: Map<string, number>, size: number) {
    this.#keys = keys;
    this.#index = index;
    this.size = size;
    Object.freeze(this);
  }

  static empty(): AppliedKeys {
    return new AppliedKeys([], new Map(), 0);
  }

  has(key: string): boolean {
    const at = this.#index.get(key);
    return at !== undefined && at < this.size;
  }

  /** This set plus `key` (the same object when it holds `key` already). */
  with(key: string): AppliedKeys {
    if (this.has(key)) return this;
    const keys = this.#keys;
    if (keys.length === this.size) {
      keys.push(key);
      this.#index.set(key, this.size);
      return new AppliedKeys(keys, this.#index, this.size + 1);
    }
    // A later state of this history added the same key next: share the log.
    if (keys[this.size] === key) return new AppliedKeys(keys, this.#index, this.size + 1);
    const own = keys.slice(0, this.size);
    own.push(key);
    return new AppliedKeys(own, new Map(own.map((k, i) => [k, i])), this.size + 1);
  }

  *[Symbol.iterator](): Iterator<string> {
    for (let i = 0; i < this.size; i += 1) yield this.#keys[i] as string;
  }

  toJSON(): string[] {
    return [...this];
  }
}

export interface AutomergeLedgerState {
  readonly changeId: string;
  /** Ledger keys already applied. */
  readonly processed: AppliedKeys;
  /** Latest processed version of each command comment and its commands. */
  readonly comments: Readonly<Record<string, { readonly updatedAt: string; readonly commands: readonly string[] }>>;
  /** Latest automerge request (by time). */
  readonly automerge: CommandStamp | null;
  /** Latest stop (by time). */
  readonly stop: CommandStamp | null;
  readonly reviews: readonly ReviewRecord[];
  readonly repairs: readonly RepairRecord[];
  readonly mergeFailures: readonly MergeFailure[];
  readonly merged: { readonly head: string; readonly mergeCommit: string; readonly at: string } | null;
  readonly timeline: readonly TimelineEntry[];
}

/** A comment's commands, already authorized (refused ones left out). */
export interface CommandDelivery {
  readonly comment: Pick<ForgeComment, 'id' | 'author' | 'updatedAt'>;
  readonly commands: readonly ParsedCommand[];
}

export type LedgerOutcome =
  | { readonly type: 'review-dispatched'; readonly id: string; readonly head: string; readonly at: string }
  /** `verdict: null`: the review ended without a verdict (transport failure). */
  | { readonly type: 'review-finished'; readonly id: string; readonly head: string; readonly verdict: Verdict | null; readonly at: string }
  | {
      readonly type: 'repair-dispatched';
      readonly id: string;
      readonly head: string;
      readonly repair: RepairKind;
      readonly automatic: boolean;
      readonly reason: string;
      readonly at: string;
    }
  | {
      readonly type: 'repair-finished';
      readonly id: string;
      readonly result: 'pushed' | 'no-change' | 'failed';
      readonly newHead: string | null;
      readonly commits: readonly string[];
      readonly at: string;
    }
  | { readonly type: 'merge-failed'; readonly id: string; readonly head: string; readonly code: string; readonly at: string }
  | { readonly type: 'merged'; readonly id: string; readonly head: string; readonly mergeCommit: string; readonly at: string }
  /** A timeline line (a decision's reason, a note); repeated lines are kept once. */
  | { readonly type: 'note'; readonly id: string; readonly text: string; readonly at: string };

export type LedgerRecord = { readonly type: 'commands'; readonly delivery: CommandDelivery } | LedgerOutcome;

export type SkipReason = 'redelivery' | 'older-version' | 'unchanged-edit';

export interface CommandApplication {
  readonly state: AutomergeLedgerState;
  /** Commands to act on now (empty when skipped). */
  readonly run: readonly ParsedCommand[];
  readonly skipped: SkipReason | null;
}

/** The ledger key of one comment version: comment id + updated_at. */
export function ledgerKey(comment: Pick<ForgeComment, 'id' | 'updatedAt'>): string {
  return `comment:${comment.id}@${comment.updatedAt}`;
}

export function outcomeKey(outcome: LedgerOutcome): string {
  return `${outcome.type}:${outcome.id}`;
}

export function initialLedger(changeId: string): AutomergeLedgerState {
  return {
    changeId,
    processed: AppliedKeys.empty(),
    comments: {},
    automerge: null,
    stop: null,
    reviews: [],
    repairs: [],
    mergeFailures: [],
    merged: null,
    timeline: [],
  };
}

/** Milliseconds of an ISO time; unreadable times sort first. */
export function timeOf(iso: string): number {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? Number.NEGATIVE_INFINITY : t;
}

/** The later of two stamps: by time, then (equal times, so the order of arrival cannot matter) by comment id and line. */
function later(current: CommandStamp | null, candidate: CommandStamp): CommandStamp {
  if (current === null) return candidate;
  const byTime = timeOf(candidate.at) - timeOf(current.at);
  if (byTime !== 0) return byTime > 0 ? candidate : current;
  if (candidate.commentId !== current.commentId) return candidate.commentId > current.commentId ? candidate : current;
  return (candidate.line ?? 0) >= (current.line ?? 0) ? candidate : current;
}

function appendTimeline(timeline: readonly TimelineEntry[], entry: TimelineEntry): readonly TimelineEntry[] {
  const last = timeline[timeline.length - 1];
  return last !== undefined && last.text === entry.text ? timeline : timeline.concat([entry]);
}

/** Commands of `next` that `previous` did not hold (as a multiset, by canonical text). */
function newCommands(previous: readonly string[], next: readonly ParsedCommand[]): ParsedCommand[] {
  const remaining = [...previous];
  return next.filter((command) => {
    const at = remaining.indexOf(commandText(command));
    if (at < 0) return true;
    remaining.splice(at, 1);
    return false;
  });
}

/**
 * Apply one delivered comment version. A redelivery (same key), a version older
 * than one already processed, or an edit that left the commands unchanged runs
 * nothing; an edit that adds commands runs only the added ones, at the edit's time.
 */
export function applyCommand(state: AutomergeLedgerState, delivery: CommandDelivery): CommandApplication {
  const { comment } = delivery;
  const key = ledgerKey(comment);
  if (state.processed.has(key)) return { state, run: [], skipped: 'redelivery' };
  const processed = state.processed.with(key);
  const previous = state.comments[comment.id];
  if (previous !== undefined && timeOf(comment.updatedAt) < timeOf(previous.updatedAt)) {
    return { state: { ...state, processed }, run: [], skipped: 'older-version' };
  }
  const texts = delivery.commands.map(commandText);
  const comments = { ...state.comments, [comment.id]: { updatedAt: comment.updatedAt, commands: texts } };
  const run = previous === undefined ? [...delivery.commands] : newCommands(previous.commands, delivery.commands);
  if (run.length === 0) {
    return { state: { ...state, processed, comments }, run: [], skipped: previous === undefined ? null : 'unchanged-edit' };
  }
  let next: AutomergeLedgerState = { ...state, processed, comments };
  for (const command of run) {
    const stamp: CommandStamp = { commentId: comment.id, actor: comment.author, at: comment.updatedAt, line: command.line };
    if (command.kind === 'automerge') next = { ...next, automerge: later(next.automerge, stamp) };
    if (command.kind === 'stop') next = { ...next, stop: later(next.stop, stamp) };
    next = { ...next, timeline: appendTimeline(next.timeline, { at: comment.updatedAt, text: `${comment.author}: ${command.source}` }) };
  }
  return { state: next, run, skipped: null };
}

function replaceById<T extends { readonly id: string }>(items: readonly T[], id: string, update: (item: T) => T): readonly T[] {
  return items.map((item) => (item.id === id ? update(item) : item));
}

function short(sha: string): string {
  return sha.slice(0, 12);
}

/** Apply one outcome the router recorded; a key seen before changes nothing. */
export function applyOutcome(state: AutomergeLedgerState, outcome: LedgerOutcome): AutomergeLedgerState {
  const key = outcomeKey(outcome);
  if (state.processed.has(key)) return state;
  const base = { ...state, processed: state.processed.with(key) };
  const note = (text: string): readonly TimelineEntry[] => appendTimeline(state.timeline, { at: outcome.at, text });
  switch (outcome.type) {
    case 'review-dispatched': {
      const record: ReviewRecord = { id: outcome.id, head: outcome.head, status: 'dispatched', verdict: null, at: outcome.at };
      return { ...base, reviews: [...state.reviews, record], timeline: note(`review of ${short(outcome.head)} dispatched`) };
    }
    case 'review-finished': {
      const status: ReviewRecord['status'] = outcome.verdict === null ? 'failed' : 'finished';
      const known = state.reviews.some((r) => r.id === outcome.id);
      const reviews = known
        ? replaceById(state.reviews, outcome.id, (r) => ({ ...r, status, verdict: outcome.verdict }))
        : [...state.reviews, { id: outcome.id, head: outcome.head, status, verdict: outcome.verdict, at: outcome.at }];
      const text =
        outcome.verdict === null ? `review of ${short(outcome.head)} ended without a verdict` : `review of ${short(outcome.head)}: ${outcome.verdict}`;
      return { ...base, reviews, timeline: note(text) };
    }
    case 'repair-dispatched': {
      const record: RepairRecord = {
        id: outcome.id,
        head: outcome.head,
        repair: outcome.repair,
        automatic: outcome.automatic,
        reason: outcome.reason,
        status: 'dispatched',
        newHead: null,
        commits: [],
        at: outcome.at,
      };
      return { ...base, repairs: [...state.repairs, record], timeline: note(`repair (${outcome.repair}) of ${short(outcome.head)}: ${outcome.reason}`) };
    }
    case 'repair-finished': {
      const repairs = replaceById(state.repairs, outcome.id, (r) => ({
        ...r,
        status: outcome.result,
        newHead: outcome.newHead,
        commits: [...outcome.commits],
      }));
      const text =
        outcome.result === 'pushed' && outcome.newHead !== null
          ? `repair pushed ${short(outcome.newHead)} (${outcome.commits.length} commit${outcome.commits.length === 1 ? '' : 's'})`
          : `repair ${outcome.result === 'no-change' ? 'made no change' : 'failed'}`;
      return { ...base, repairs, timeline: note(text) };
    }
    case 'merge-failed': {
      const failure: MergeFailure = { id: outcome.id, head: outcome.head, code: outcome.code, at: outcome.at };
      return { ...base, mergeFailures: [...state.mergeFailures, failure], timeline: note(`merge of ${short(outcome.head)} refused: ${outcome.code}`) };
    }
    case 'merged':
      return {
        ...base,
        merged: { head: outcome.head, mergeCommit: outcome.mergeCommit, at: outcome.at },
        timeline: note(`merged ${short(outcome.head)} as ${short(outcome.mergeCommit)}`),
      };
    case 'note':
      return { ...base, timeline: note(outcome.text) };
  }
}

/** Apply one record of either kind. */
export function applyRecord(state: AutomergeLedgerState, record: LedgerRecord): AutomergeLedgerState {
  return record.type === 'commands' ? applyCommand(state, record.delivery).state : applyOutcome(state, record);
}

/** The ledger state after `records`, in order. */
export function foldLedger(changeId: string, records: readonly LedgerRecord[]): AutomergeLedgerState {
  return records.reduce(applyRecord, initialLedger(changeId));
}

/**
 * Whether automerge is on: requested, and not stopped since. The later command
 * wins: by time; within one comment version (same comment, same time) by line,
 * since a comment reads top to bottom; a stop wins a tie between two comments
 * with the same time.
 */
export function automergeActive(state: AutomergeLedgerState): boolean {
  const { automerge, stop } = state;
  if (automerge === null) return false;
  if (stop === null) return true;
  const requested = timeOf(automerge.at);
  const stopped = timeOf(stop.at);
  if (requested !== stopped) return requested > stopped;
  return automerge.commentId === stop.commentId && (automerge.line ?? 0) > (stop.line ?? 0);
}
