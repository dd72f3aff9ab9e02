/**
 * What the dashboard shows of one change, as pure functions: its row (the
 * stage by `changeStage`, the reason, the head), its timeline (forge events,
 * commands, ledger outcomes and steps, merge queue events, oldest first),
 * where it stands in its base's merge queue, the verdicts and
 * checks of each head, and its reviews' spans. The projection
 * (src/service/projection.ts) stores what these return.
 */
import { parseCommands } from '../../automerge/commands.js';
import { automergeActive, type AutomergeLedgerState } from '../../automerge/ledger.js';
import type { LoadedLedger, StepEvent } from '../../automerge/loop/ledger-store.js';
import { describeQueueItem, type ChangeQueueView, type QueueHistoryItem } from '../../automerge/queue/queue.js';
import { changeStage, type ChangeStage } from '../../automerge/stage.js';
import type { ChangeRecord } from '../../forge/local/records.js';
import type { ForgeCheck } from '../../forge/port.js';
import type { StoredEvent } from '../../storage/ports.js';

/** Most timeline entries kept per change (the newest). */
export const MAX_TIMELINE = 500;
/** Longest title kept in a row (the write API's limit; a title taken from a commit subject may be longer). */
export const MAX_TITLE = 1000;
/** Longest text of a timeline entry, a stage's reason or an actor (untrusted text: a command line, a reason). */
export const MAX_TEXT = 1000;

/** `text` cut to `max` characters, the last one `…` when cut (never half of a surrogate pair). Pure. */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

/** An entry with its text and actor clipped. */
function bounded(item: TimelineItem): TimelineItem {
  const text = clip(item.text, MAX_TEXT);
  const actor = item.actor === undefined ? undefined : clip(item.actor, MAX_TEXT);
  return text === item.text && actor === item.actor ? item : { ...item, text, ...(actor === undefined ? {} : { actor }) };
}

/** One change as the board lists it. */
export interface ChangeRow {
  readonly id: string;
  readonly repo: string;
  readonly number: number;
  readonly title: string;
  readonly state: ChangeRecord['state'];
  readonly stage: ChangeStage;
  readonly stageDetail: string | null;
  readonly stageCode: string | null;
  readonly base: string;
  readonly head: string;
  readonly headSha: string;
  readonly author: string;
  readonly openedAt: string;
  /** The time of the newest thing known about the change. */
  readonly updatedAt: string;
  readonly automergeOn: boolean;
  /** The latest `/proofgate automerge` (null: none). */
  readonly automergeAt: string | null;
  readonly mergedAt: string | null;
  readonly mergeCommit: string | null;
}

/** What a verdict was bound to. */
export interface VerdictBindings {
  readonly head: string;
  readonly diff: string;
  readonly contract: string;
  readonly config: string;
}

export type TimelineKind =
  | 'opened'
  | 'push'
  | 'command'
  | 'command-refused'
  | 'review'
  | 'verdict'
  | 'review-failed'
  | 'proof'
  | 'checks'
  | 'check'
  | 'repair'
  | 'repair-result'
  | 'decision'
  | 'wait'
  | 'merge-attempt'
  | 'merge-failed'
  | 'merged'
  | 'closed'
  | 'job'
  | 'queue';

/** One entry of a change's timeline. */
export interface TimelineItem {
  readonly at: string;
  readonly kind: TimelineKind;
  /** What happened, in words (may hold untrusted text: shown as text only). */
  readonly text: string;
  readonly actor?: string;
  readonly head?: string;
  readonly verdict?: string;
  /** A verdict's bindings, as its signed marker states them (null: no trusted marker found). */
  readonly bindings?: VerdictBindings | null;
  readonly commit?: string;
  readonly conclusion?: string;
  /** A `queue` entry's event: enqueued, candidate, checks, bisect, flaky, landed, removed, ejected. */
  readonly queueEvent?: QueueHistoryItem['kind'];
  /** The merge queue candidate a `queue` entry names. */
  readonly candidate?: string;
}

/** Where a change stands in its base's merge queue, as the change page shows it (`ChangeQueueView` without the history, which is in the timeline). */
export type QueueSummary = Omit<ChangeQueueView, 'history'>;

/** The verdicts and checks of one head. */
export interface HeadRecord {
  readonly head: string;
  readonly verdicts: readonly { readonly review: string; readonly verdict: string | null; readonly at: string; readonly bindings: VerdictBindings | null }[];
  readonly checks: readonly { readonly name: string; readonly conclusion: string | null; readonly at: string | null }[];
}

export interface ReviewSpan {
  readonly reviewId: string;
  readonly head: string;
  readonly startedAt: string;
  readonly finishedAt: string | null;
  readonly verdict: string | null;
}

/** Everything the projection keeps of one change. */
export interface ProjectedChange {
  readonly row: ChangeRow;
  readonly timeline: readonly TimelineItem[];
  readonly heads: readonly HeadRecord[];
  readonly reviews: readonly ReviewSpan[];
  /** The change in its base's merge queue (null: never queued there). */
  readonly queue: QueueSummary | null;
}

/** What `projectChange` reads (plain data). */
export interface ChangeFacts {
  readonly repo: string;
  readonly record: ChangeRecord;
  /** The change stream's events (head pushes, merge, close), in order. */
  readonly forgeEvents: readonly Pick<StoredEvent, 'type' | 'data' | 'recordedAt'>[];
  /** The head branch's sha now (null: the branch is gone). */
  readonly branchSha: string | null;
  readonly ledger: Pick<LoadedLedger, 'state' | 'steps'>;
  /** Check runs of the heads the loop ran checks on. */
  readonly checks: readonly ForgeCheck[];
  /** Bindings of the change's trusted verdict markers, by review id. */
  readonly bindings: ReadonlyMap<string, VerdictBindings>;
  /** The change in its base's merge queue (null or absent: never queued there). */
  readonly queue?: ChangeQueueView | null;
  /** What happened to the change in merge queues (of any base it had), oldest first. */
  readonly queueHistory?: readonly QueueHistoryItem[];
  /**
   * The commands the ledger applied, oldest first, when the forge's comments are not at hand (the GitHub service keeps
   * no comments): shown instead of the commands parsed from `record.comments`. Refused ones are the ledger's
   * `command-refused` steps.
   */
  readonly commands?: readonly { readonly at: string; readonly actor: string; readonly text: string }[];
}

const short = (sha: unknown): string => (typeof sha === 'string' ? sha.slice(0, 12) : '?');
const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);

function timeOf(iso: string | null | undefined): number {
  const t = iso == null ? NaN : Date.parse(iso);
  return Number.isNaN(t) ? Number.NEGATIVE_INFINITY : t;
}

function stepItem(step: StepEvent, bindings: ReadonlyMap<string, VerdictBindings>): TimelineItem | null {
  const { at } = step;
  const head = str(step.head) ?? undefined;
  const withHead = head === undefined ? {} : { head };
  switch (step.step) {
    case 'review-verdict': {
      const review = str(step.review) ?? '';
      const verdict = str(step.verdict) ?? 'HOLD';
      return { at, kind: 'verdict', text: `${verdict} on ${short(head)}`, verdict, bindings: bindings.get(review) ?? null, ...withHead };
    }
    case 'review-failed':
      return { at, kind: 'review-failed', text: `review of ${short(head)} ended without a verdict: ${str(step.reason) ?? ''}`, ...withHead };
    case 'proof-admitted': {
      const decision = typeof step.decision === 'object' && step.decision !== null && !Array.isArray(step.decision) ? step.decision : {};
      const allow = Array.isArray(decision.allowlist) ? decision.allowlist.filter((s): s is string => typeof s === 'string') : [];
      const on = str(decision.headSha);
      return {
        at,
        kind: 'proof',
        text: `proof admitted for ${short(on)}${allow.length > 0 ? `: ${allow.join(', ')}` : ''}`,
        ...(str(decision.requestedBy) === null ? {} : { actor: str(decision.requestedBy) as string }),
        ...(on === null ? {} : { head: on }),
      };
    }
    case 'proof-refused':
      return { at, kind: 'proof', text: `proof refused: ${str(step.reason) ?? ''}`, ...(str(step.actor) === null ? {} : { actor: str(step.actor) as string }) };
    case 'command-refused':
      return { at, kind: 'command-refused', text: `command refused: ${str(step.reason) ?? ''}` };
    case 'checks-started':
      return { at, kind: 'checks', text: `checks started on ${short(head)}`, ...withHead };
    case 'checks-finished':
      return { at, kind: 'checks', text: `checks finished on ${short(head)}`, ...withHead };
    case 'repair-result': {
      const kind = str(step.kind) ?? 'ended';
      const newHead = str(step.newHead);
      return {
        at,
        kind: 'repair-result',
        text: newHead === null ? `repair ${kind}` : `repair pushed ${short(newHead)}`,
        ...(newHead === null ? {} : { head: newHead }),
      };
    }
    case 'decision':
      return { at, kind: 'decision', text: `${str(step.kind) ?? 'decision'}: ${str(step.reason) ?? ''}`, ...withHead };
    case 'wait-parked':
      return { at, kind: 'wait', text: `waiting (${str(step.window) ?? 'wait'}): ${str(step.reason) ?? ''}`, ...withHead };
    case 'wait-expired':
      return { at, kind: 'wait', text: `wait ran out (${str(step.window) ?? 'wait'}): ${str(step.reason) ?? ''}` };
    case 'merge-attempt':
      return { at, kind: 'merge-attempt', text: `merge of ${short(head)} attempted`, ...withHead };
    case 'job-finished':
      return { at, kind: 'job', text: `run ended ${str(step.outcome) ?? ''}: ${str(step.reason) ?? ''}` };
    case 'config-invalid':
      return { at, kind: 'decision', text: `config invalid: ${str(step.reason) ?? ''}` };
    default:
      return null;
  }
}

function ledgerItems(state: AutomergeLedgerState): TimelineItem[] {
  const items: TimelineItem[] = [];
  for (const review of state.reviews) items.push({ at: review.at, kind: 'review', text: `review of ${short(review.head)} dispatched`, head: review.head });
  for (const repair of state.repairs) {
    items.push({ at: repair.at, kind: 'repair', text: `repair (${repair.repair}) of ${short(repair.head)}: ${repair.reason}`, head: repair.head });
  }
  for (const failure of state.mergeFailures) {
    items.push({ at: failure.at, kind: 'merge-failed', text: `merge of ${short(failure.head)} refused: ${failure.code}`, head: failure.head });
  }
  if (state.merged !== null) {
    const { merged } = state;
    items.push({
      at: merged.at,
      kind: 'merged',
      text: `merged ${short(merged.head)} as ${short(merged.mergeCommit)}`,
      head: merged.head,
      commit: merged.mergeCommit,
    });
  }
  return items;
}

/** `command-refused` steps by comment id and command line: their reasons. */
function refusalsOf(steps: readonly StepEvent[]): Map<string, string> {
  const refusals = new Map<string, string>();
  for (const step of steps) {
    const comment = str(step.comment);
    const command = str(step.command);
    if (step.step === 'command-refused' && comment !== null && command !== null) refusals.set(`${comment}\n${command}`, str(step.reason) ?? 'refused');
  }
  return refusals;
}

/**
 * The forge's entries. A command the router refused (its author may not give it) is a `command-refused` entry that
 * says so, never a `command` one: whoever types `/proofgate automerge` shows as asking, not as having given it.
 * The keys of `refusals` shown this way are added to `shown`.
 */
function forgeItems(facts: ChangeFacts, refusals: ReadonlyMap<string, string>, shown: Set<string>): TimelineItem[] {
  const { record } = facts;
  const items: TimelineItem[] = [
    { at: record.openedAt, kind: 'opened', text: `opened ${record.headRef} onto ${record.baseRef}`, actor: record.author, head: record.openedHeadSha },
  ];
  for (const event of facts.forgeEvents) {
    const data = (typeof event.data === 'object' && event.data !== null && !Array.isArray(event.data) ? event.data : {}) as Record<string, unknown>;
    const at = str(data.at) ?? event.recordedAt;
    if (event.type === 'head-pushed') {
      const head = str(data.headSha) ?? '';
      items.push({ at, kind: 'push', text: `pushed ${short(head)}${str(data.before) === null ? '' : ` over ${short(data.before)}`}`, head });
    } else if (event.type === 'change-merged' && facts.ledger.state.merged === null) {
      const commit = str(data.mergeCommitSha) ?? '';
      items.push({
        at,
        kind: 'merged',
        text: `merged as ${short(commit)}`,
        commit,
        ...(str(data.reviewedHeadSha) === null ? {} : { head: str(data.reviewedHeadSha) as string }),
      });
    } else if (event.type === 'change-closed') {
      items.push({ at, kind: 'closed', text: 'closed' });
    }
  }
  // Only the newest MAX_TIMELINE commands can be in the timeline: a comment of thousands of command lines, or thousands of comments, keep no more.
  let commands: TimelineItem[] = (facts.commands ?? []).slice(-MAX_TIMELINE).map((command) => ({
    at: command.at,
    kind: 'command' as const,
    text: clip(command.text, MAX_TEXT),
    actor: clip(command.actor, MAX_TEXT),
  }));
  for (const comment of record.comments) {
    for (const command of parseCommands(comment.body).slice(-MAX_TIMELINE)) {
      const key = `${comment.id}\n${command.source}`;
      const refused = refusals.get(key);
      if (refused !== undefined) shown.add(key);
      const text = refused === undefined ? command.source : `${command.source} (refused: ${refused})`;
      commands.push({
        at: comment.updatedAt,
        kind: refused === undefined ? 'command' : 'command-refused',
        text: clip(text, MAX_TEXT),
        actor: clip(comment.author, MAX_TEXT),
      });
    }
    if (commands.length > 2 * MAX_TIMELINE) commands = newest(commands, MAX_TIMELINE);
  }
  items.push(...newest(commands, MAX_TIMELINE));
  for (const check of facts.checks) {
    if (check.status !== 'completed') continue;
    items.push({
      at: check.completedAt ?? check.startedAt ?? record.openedAt,
      kind: 'check',
      text: `check ${check.name}: ${check.conclusion ?? 'unknown'}`,
      head: check.headSha,
      conclusion: check.conclusion ?? 'unknown',
    });
  }
  return items;
}

/** A merge queue event of the change as a timeline entry. Pure. */
export function queueItem(item: QueueHistoryItem): TimelineItem {
  const base = { at: item.at, kind: 'queue' as const, text: describeQueueItem(item), queueEvent: item.kind };
  switch (item.kind) {
    case 'enqueued':
    case 'removed':
      return { ...base, head: item.head };
    case 'ejected':
      return { ...base, head: item.head, conclusion: 'failure' };
    case 'candidate':
      return { ...base, candidate: item.candidate, commit: item.tip };
    case 'checks':
      return { ...base, candidate: item.candidate, conclusion: item.passed ? 'success' : 'failure' };
    case 'landed':
      return { ...base, head: item.head, commit: item.commit, candidate: item.candidate };
    default:
      return base;
  }
}

/** The newest `count` items, oldest first (stable: equal times keep their order). */
function newest(items: readonly TimelineItem[], count: number): TimelineItem[] {
  const ordered = items.map((item, index) => ({ item, index, t: timeOf(item.at) })).sort((a, b) => a.t - b.t || a.index - b.index);
  return ordered.slice(-count).map((entry) => entry.item);
}

/** One change's row, timeline, per-head records and review spans. Pure. */
export function projectChange(facts: ChangeFacts): ProjectedChange {
  const { record, ledger } = facts;
  const { state, steps } = ledger;
  const automergeOn = automergeActive(state);
  const stage = changeStage({
    forgeState: record.state,
    forgeMergeCommit: record.merge?.mergeCommitSha ?? null,
    automergeOn,
    ledger: state,
    steps,
    queue: facts.queue ?? null,
  });
  const refusals = refusalsOf(steps);
  const shown = new Set<string>();
  const fromForge = forgeItems(facts, refusals, shown);
  // A refusal already shown on its command is not shown twice.
  const stepItems = steps
    .filter((step) => !(step.step === 'command-refused' && shown.has(`${str(step.comment) ?? ''}\n${str(step.command) ?? ''}`)))
    .map((step) => stepItem(step, facts.bindings))
    .filter((item): item is TimelineItem => item !== null);
  const all = [...fromForge, ...ledgerItems(state), ...stepItems, ...(facts.queueHistory ?? []).map(queueItem)];
  // Stable: equal times keep the order above (forge, ledger, steps; each in its own order).
  const timeline = newest(all, MAX_TIMELINE).map(bounded);

  const finished = new Map<string, { at: string; verdict: string | null }>();
  for (const step of steps) {
    const review = str(step.review);
    if (review === null) continue;
    if (step.step === 'review-verdict') finished.set(review, { at: step.at, verdict: str(step.verdict) });
    if (step.step === 'review-failed') finished.set(review, { at: step.at, verdict: null });
  }
  const reviews: ReviewSpan[] = state.reviews.map((review) => {
    const end = finished.get(review.id);
    return {
      reviewId: review.id,
      head: review.head,
      startedAt: review.at,
      finishedAt: end?.at ?? null,
      verdict: end?.verdict ?? review.verdict ?? null,
    };
  });

  const heads = new Map<string, { verdicts: HeadRecord['verdicts'][number][]; checks: HeadRecord['checks'][number][] }>();
  const headOf = (sha: string) => {
    let entry = heads.get(sha);
    if (entry === undefined) heads.set(sha, (entry = { verdicts: [], checks: [] }));
    return entry;
  };
  for (const review of reviews) {
    headOf(review.head).verdicts.push({
      review: review.reviewId,
      verdict: review.verdict,
      at: review.finishedAt ?? review.startedAt,
      bindings: facts.bindings.get(review.reviewId) ?? null,
    });
  }
  for (const check of facts.checks)
    headOf(check.headSha).checks.push({ name: check.name, conclusion: check.conclusion, at: check.completedAt ?? check.startedAt });

  const headSha = record.state === 'merged' && record.merge !== null ? record.merge.reviewedHeadSha : (facts.branchSha ?? record.openedHeadSha);
  const mergedAt = state.merged?.at ?? timeline.find((item) => item.kind === 'merged')?.at ?? null;
  const times = [
    record.openedAt,
    ...timeline.map((item) => item.at),
    ...record.comments.map((comment) => comment.updatedAt),
    ...facts.forgeEvents.map((event) => event.recordedAt),
  ];
  const updatedAt = times.reduce((latest, at) => (timeOf(at) > timeOf(latest) ? at : latest), record.openedAt);
  const row: ChangeRow = {
    id: record.changeId,
    repo: facts.repo,
    number: record.number,
    title: clip(record.title, MAX_TITLE),
    state: record.state,
    stage: stage.stage,
    stageDetail: stage.detail === null ? null : clip(stage.detail, MAX_TEXT),
    stageCode: stage.code,
    base: record.baseRef,
    head: record.headRef,
    headSha,
    author: record.author,
    openedAt: record.openedAt,
    updatedAt,
    automergeOn,
    automergeAt: state.automerge?.at ?? null,
    mergedAt,
    mergeCommit: state.merged?.mergeCommit ?? record.merge?.mergeCommitSha ?? null,
  };
  let queue: QueueSummary | null = null;
  if (facts.queue != null) {
    const { history: _history, ...summary } = facts.queue;
    queue = summary;
  }
  return { row, timeline, heads: [...heads].map(([head, entry]) => ({ head, ...entry })), reviews, queue };
}
