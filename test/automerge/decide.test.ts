import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AUTOMERGE_REASON_CODES,
  decideAutomerge,
  defaultAutomergePolicy,
  foldLedger,
  parseCommands,
  type AutomergeDecision,
  type AutomergeLedgerState,
  type AutomergePolicy,
  type AutomergeReasonCode,
  type LedgerRecord,
  type ReviewFacts,
  type TrustedVerdict,
} from '../../src/automerge/index.js';
import type { ChangeSnapshot, ForgeCheck, Mergeable, MergeStateStatus } from '../../src/forge/port.js';
import { BASE, CHANGE, CONFIG, HEAD, OLD_HEAD, check, facts, snapshot, verdicts } from './builders.js';

/** A digest other than the live ones of `facts()`. */
const OTHER = `sha256:${'9'.repeat(64)}`;

const T0 = '2024-05-01T09:00:00Z';
const T1 = '2024-05-01T09:30:00Z';

function cmd(id: string, body: string, at: string, author = 'maintainer'): LedgerRecord {
  return { type: 'commands', delivery: { comment: { id, author, updatedAt: at }, commands: parseCommands(body) } };
}

/** Ledger with automerge requested, then `records`. */
function ledger(...records: LedgerRecord[]): AutomergeLedgerState {
  return foldLedger(CHANGE, [cmd('100', '/proofgate automerge', T0), ...records]);
}

function repair(id: string, head: string, automatic = true, finished = true): LedgerRecord[] {
  const records: LedgerRecord[] = [{ type: 'repair-dispatched', id, head, repair: 'fix-checks', automatic, reason: 'x', at: T1 }];
  if (finished) records.push({ type: 'repair-finished', id, result: 'pushed', newHead: null, commits: [], at: T1 });
  return records;
}

const failing = (name: string, head = HEAD): ForgeCheck => check(name, { conclusion: 'failure', headSha: head });
const running = (name: string): ForgeCheck => check(name, { status: 'in_progress', conclusion: null, completedAt: null });
const confirmed = (): TrustedVerdict[] => verdicts({ verdict: 'CONFIRMED' });

interface Row {
  name: string;
  snap?: Partial<ChangeSnapshot>;
  led?: AutomergeLedgerState;
  marks?: TrustedVerdict[];
  policy?: Partial<AutomergePolicy>;
  facts?: Partial<ReviewFacts>;
  kind: 'wait' | 'review' | 'repair' | 'merge' | 'block' | 'stop';
  code: AutomergeReasonCode;
  /** Names (ids, check names, paths) the prose reason must carry. */
  mentions?: string[];
  repair?: 'rebase' | 'fix-checks' | 'fix-findings';
}

const mergeable = (m: Mergeable, s: MergeStateStatus): Partial<ChangeSnapshot> => ({ mergeable: m, mergeStateStatus: s });

const rows: Row[] = [
  // terminal states and the request itself
  {
    name: 'merged change stops',
    snap: { state: 'merged', mergeCommitSha: 'e'.repeat(40) },
    marks: confirmed(),
    kind: 'stop',
    code: 'change-merged',
    mentions: ['eeeeeeeeeeee'],
  },
  { name: 'closed change stops', snap: { state: 'closed' }, marks: confirmed(), kind: 'stop', code: 'change-closed' },
  {
    name: 'ledger says merged while the forge lags',
    led: ledger({ type: 'merged', id: 'm', head: HEAD, mergeCommit: 'f'.repeat(40), at: T1 }),
    marks: confirmed(),
    kind: 'stop',
    code: 'already-merged',
  },
  { name: 'automerge never requested', led: foldLedger(CHANGE, []), marks: confirmed(), kind: 'stop', code: 'not-requested' },
  { name: 'only a stop, never a request', led: foldLedger(CHANGE, [cmd('1', '/proofgate stop', T0)]), marks: confirmed(), kind: 'stop', code: 'not-requested' },
  { name: 'stop wins', led: ledger(cmd('101', '/proofgate stop', T1, 'bob')), marks: confirmed(), kind: 'stop', code: 'stopped', mentions: ['bob', '101'] },
  {
    name: 'stop delivered before an earlier automerge still wins',
    led: foldLedger(CHANGE, [cmd('2', '/proofgate stop', T1), cmd('1', '/proofgate automerge', T0)]),
    marks: confirmed(),
    kind: 'stop',
    code: 'stopped',
  },
  {
    name: 'a later human automerge clears the stop',
    led: ledger(cmd('101', '/proofgate stop', T1), cmd('102', '/proofgate automerge', '2024-05-01T10:00:00Z')),
    marks: confirmed(),
    kind: 'merge',
    code: 'ready',
  },
  { name: 'draft waits', snap: { draft: true }, marks: confirmed(), kind: 'wait', code: 'draft' },
  // merge gates
  { name: 'happy path merges the reviewed head', marks: confirmed(), kind: 'merge', code: 'ready', mentions: ['MERGEABLE/CLEAN'] },
  { name: 'HAS_HOOKS merges', snap: mergeable('MERGEABLE', 'HAS_HOOKS'), marks: confirmed(), kind: 'merge', code: 'ready' },
  // BEHIND: the forge reports it only when the base requires up-to-date heads, and the rebase fast path repairs it
  {
    name: 'BEHIND is rebased',
    snap: mergeable('MERGEABLE', 'BEHIND'),
    marks: confirmed(),
    kind: 'repair',
    repair: 'rebase',
    code: 'behind',
    mentions: ['aaaaaaaaaaaa', 'main'],
  },
  { name: 'BEHIND is rebased before any review', snap: mergeable('MERGEABLE', 'BEHIND'), kind: 'repair', repair: 'rebase', code: 'behind' },
  {
    name: 'BEHIND is rebased before a failing check is repaired',
    snap: { ...mergeable('MERGEABLE', 'BEHIND'), checks: [failing('lint')] },
    marks: confirmed(),
    kind: 'repair',
    repair: 'rebase',
    code: 'behind',
  },
  {
    name: 'a BEHIND rebase counts against the cap per head',
    snap: mergeable('MERGEABLE', 'BEHIND'),
    led: ledger(...repair('p1', HEAD), ...repair('p2', HEAD)),
    marks: confirmed(),
    kind: 'block',
    code: 'repair-cap-per-head',
    mentions: ['is behind main'],
  },
  {
    name: 'a BEHIND rebase counts against the cap per change',
    snap: mergeable('MERGEABLE', 'BEHIND'),
    led: ledger(...repair('p1', 'd'.repeat(40)), ...repair('p2', 'e'.repeat(40)), ...repair('p3', OLD_HEAD)),
    marks: confirmed(),
    kind: 'block',
    code: 'repair-cap-per-change',
  },
  {
    name: 'a human rebase does not use up the cap for BEHIND',
    snap: mergeable('MERGEABLE', 'BEHIND'),
    led: ledger(...repair('p1', HEAD, false), ...repair('p2', HEAD, false)),
    marks: confirmed(),
    kind: 'repair',
    repair: 'rebase',
    code: 'behind',
  },
  {
    name: 'mergeable UNKNOWN waits',
    snap: mergeable('UNKNOWN', 'CLEAN'),
    marks: confirmed(),
    kind: 'wait',
    code: 'mergeability-pending',
    mentions: ['UNKNOWN/CLEAN'],
  },
  { name: 'merge state UNKNOWN waits', snap: mergeable('MERGEABLE', 'UNKNOWN'), marks: confirmed(), kind: 'wait', code: 'mergeability-pending' },
  { name: 'UNSTABLE waits', snap: mergeable('MERGEABLE', 'UNSTABLE'), marks: confirmed(), kind: 'wait', code: 'mergeability-pending' },
  { name: 'BLOCKED waits', snap: mergeable('MERGEABLE', 'BLOCKED'), marks: confirmed(), kind: 'wait', code: 'mergeability-pending' },
  {
    name: "BLOCKED on a base that requires the forge's merge queue is ready (the queue merges it)",
    snap: { ...mergeable('MERGEABLE', 'BLOCKED'), forgeQueue: { required: true, entry: null, lastRemoval: null } },
    marks: confirmed(),
    kind: 'merge',
    code: 'ready',
  },
  {
    name: 'BLOCKED for missing approvals on a merge-queue base still waits for them',
    snap: { reviewDecision: 'REVIEW_REQUIRED', ...mergeable('MERGEABLE', 'BLOCKED'), forgeQueue: { required: true, entry: null, lastRemoval: null } },
    marks: confirmed(),
    kind: 'wait',
    code: 'review-required',
  },
  { name: 'CONFLICTING is rebased', snap: mergeable('CONFLICTING', 'DIRTY'), marks: confirmed(), kind: 'repair', repair: 'rebase', code: 'merge-conflict' },
  { name: 'DIRTY is rebased', snap: mergeable('UNKNOWN', 'DIRTY'), kind: 'repair', repair: 'rebase', code: 'merge-conflict' },
  { name: 'conflict is repaired before any review', snap: mergeable('CONFLICTING', 'UNKNOWN'), kind: 'repair', repair: 'rebase', code: 'merge-conflict' },
  // verdicts and the exact head
  { name: 'no verdict: review the head', kind: 'review', code: 'no-verdict' },
  { name: 'pass for an older head: review the new head', marks: verdicts({ head: OLD_HEAD }), kind: 'review', code: 'head-moved', mentions: ['bbbbbbbbbbbb'] },
  {
    name: 'pass for an older head while the new head review runs: wait',
    marks: verdicts({ head: OLD_HEAD }),
    led: ledger({ type: 'review-dispatched', id: 'r9', head: HEAD, at: T1 }),
    kind: 'wait',
    code: 'review-in-progress',
    mentions: ['r9'],
  },
  {
    name: 'a dispatched review answered by its marker no longer waits',
    marks: verdicts({ review: 'r9' }),
    led: ledger({ type: 'review-dispatched', id: 'r9', head: HEAD, at: T1 }),
    kind: 'merge',
    code: 'ready',
  },
  {
    name: 'a re-review in flight holds an earlier pass',
    marks: verdicts({ review: 'r1' }),
    led: ledger({ type: 'review-dispatched', id: 'r2', head: HEAD, at: T1 }),
    kind: 'wait',
    code: 'review-in-progress',
    mentions: ['r2'],
  },
  {
    name: 'a review dispatched for an old head does not make the new head wait',
    marks: confirmed(),
    led: ledger({ type: 'review-dispatched', id: 'r0', head: OLD_HEAD, at: T1 }),
    kind: 'merge',
    code: 'ready',
  },
  { name: 'pass for another change does not count', marks: verdicts({ change: '43' }), kind: 'review', code: 'no-verdict' },
  {
    name: 'latest verdict wins: pass then refuted',
    marks: verdicts({ verdict: 'CONFIRMED' }, { verdict: 'REFUTED', findings: 2 }),
    kind: 'repair',
    repair: 'fix-findings',
    code: 'review-refuted',
  },
  {
    name: 'latest verdict wins: refuted then pass',
    marks: verdicts({ verdict: 'REFUTED', findings: 2 }, { verdict: 'CONFIRMED' }),
    kind: 'merge',
    code: 'ready',
  },
  { name: 'HOLD blocks for a human', marks: verdicts({ verdict: 'HOLD' }), kind: 'block', code: 'review-hold' },
  {
    name: 'HOLD blocks even with conflicts',
    marks: verdicts({ verdict: 'HOLD' }),
    snap: mergeable('CONFLICTING', 'DIRTY'),
    kind: 'block',
    code: 'review-hold',
  },
  { name: 'HOLD on an older head does not block the new head', marks: verdicts({ head: OLD_HEAD, verdict: 'HOLD' }), kind: 'review', code: 'head-moved' },
  { name: 'REFUTED without findings blocks', marks: verdicts({ verdict: 'REFUTED', findings: 0 }), kind: 'block', code: 'refuted-without-findings' },
  {
    name: 'REFUTED with findings is repaired',
    marks: verdicts({ verdict: 'REFUTED', findings: 1 }),
    kind: 'repair',
    repair: 'fix-findings',
    code: 'review-refuted',
  },
  {
    name: 'REFUTED on an older head means review, not repair',
    marks: verdicts({ head: OLD_HEAD, verdict: 'REFUTED', findings: 3 }),
    kind: 'review',
    code: 'head-moved',
  },
  {
    name: 'reviews that keep ending without a verdict block',
    led: ledger(
      ...['r1', 'r2', 'r3'].flatMap((id): LedgerRecord[] => [
        { type: 'review-dispatched', id, head: HEAD, at: T1 },
        { type: 'review-finished', id, head: HEAD, verdict: null, at: T1 },
      ]),
    ),
    kind: 'block',
    code: 'review-cap',
  },
  // checks
  {
    name: 'pending checks wait, never repair',
    snap: { checks: [check('build'), running('test')] },
    marks: confirmed(),
    kind: 'wait',
    code: 'checks-pending',
    mentions: ['CI / test'],
  },
  { name: 'no checks yet wait', snap: { checks: [] }, marks: confirmed(), kind: 'wait', code: 'checks-pending' },
  {
    name: 'no checks needed when the policy expects none',
    snap: { checks: [] },
    marks: confirmed(),
    policy: { checks: { ignored: [], expectChecks: false } },
    kind: 'merge',
    code: 'ready',
  },
  {
    name: 'checks of an older head do not count',
    snap: { checks: [check('build', { headSha: OLD_HEAD })] },
    marks: confirmed(),
    kind: 'wait',
    code: 'checks-pending',
  },
  {
    name: 'failed check on an older head is not repaired',
    snap: { checks: [failing('lint', OLD_HEAD), check('lint')] },
    marks: confirmed(),
    kind: 'merge',
    code: 'ready',
  },
  {
    name: 'failed check is repaired',
    snap: { checks: [failing('lint'), running('test')] },
    marks: confirmed(),
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
    mentions: ['CI / lint'],
  },
  { name: 'failed check is repaired before the review', snap: { checks: [failing('lint')] }, kind: 'repair', repair: 'fix-checks', code: 'checks-failed' },
  {
    name: 'failed checks win over findings',
    snap: { checks: [failing('lint')] },
    marks: verdicts({ verdict: 'REFUTED', findings: 1 }),
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'cancelled check blocks for a re-run',
    snap: { checks: [check('deploy', { conclusion: 'cancelled' })] },
    marks: confirmed(),
    kind: 'block',
    code: 'checks-need-rerun',
    mentions: ['CI / deploy'],
  },
  {
    name: 'stale check blocks for a re-run',
    snap: { checks: [check('deploy', { conclusion: 'stale' })] },
    marks: confirmed(),
    kind: 'block',
    code: 'checks-need-rerun',
  },
  {
    name: 'ignored failing check does not block',
    snap: { checks: [check('build'), check('Labeler', { conclusion: 'failure' })] },
    marks: confirmed(),
    kind: 'merge',
    code: 'ready',
  },
  // a check that also fails on the base: the base is blocked, the change is not charged
  {
    name: 'a check failing on the head and on the base: the base is blocked',
    snap: { checks: [failing('lint'), failing('lint', BASE)] },
    marks: confirmed(),
    kind: 'block',
    code: 'base-blocked',
    mentions: ['CI / lint', 'main', BASE.slice(0, 12)],
  },
  { name: 'the base is blocked before the head is reviewed', snap: { checks: [failing('lint'), failing('lint', BASE)] }, kind: 'block', code: 'base-blocked' },
  {
    name: 'the base is blocked even when the repair caps are spent',
    snap: { checks: [failing('lint'), failing('lint', BASE)] },
    led: ledger(...repair('p1', HEAD), ...repair('p2', HEAD)),
    kind: 'block',
    code: 'base-blocked',
  },
  {
    name: 'a timed-out run on the base also counts as failing there',
    snap: { checks: [failing('lint'), check('lint', { conclusion: 'timed_out', headSha: BASE })] },
    kind: 'block',
    code: 'base-blocked',
  },
  {
    name: "a check passing on the base is the change's to repair",
    snap: { checks: [failing('lint'), check('lint', { headSha: BASE })] },
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'no result on the base (unknown): repaired as before',
    snap: { checks: [failing('lint'), check('build', { conclusion: 'failure', headSha: BASE })] },
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'a base run still pending is no result',
    snap: { checks: [failing('lint'), check('lint', { status: 'in_progress', conclusion: null, completedAt: null, headSha: BASE })] },
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'a cancelled base run is no result',
    snap: { checks: [failing('lint'), check('lint', { conclusion: 'cancelled', headSha: BASE })] },
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'the newest base run decides: failed, then fixed on the base',
    snap: {
      checks: [
        failing('lint'),
        check('lint', { conclusion: 'failure', headSha: BASE, startedAt: '2024-05-01T09:00:00Z' }),
        check('lint', { headSha: BASE, startedAt: '2024-05-01T09:30:00Z' }),
      ],
    },
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: "only some failures shared with the base: the change's own are repaired, the shared ones named",
    snap: { checks: [failing('lint'), failing('test'), failing('lint', BASE), check('test', { headSha: BASE })] },
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
    mentions: ['CI / test', 'also failing on main'],
  },
  {
    name: 'a failure on the base alone does not block a green head',
    snap: { checks: [check('lint'), failing('lint', BASE)] },
    marks: confirmed(),
    kind: 'merge',
    code: 'ready',
  },
  {
    name: 'required check not reported yet waits',
    snap: { checks: [check('build')] },
    policy: { checks: { ignored: [], required: ['security'] } },
    marks: confirmed(),
    kind: 'wait',
    code: 'checks-pending',
    mentions: ['security'],
  },
  // repairs and caps
  {
    name: 'a repair in progress on this head waits',
    snap: { checks: [failing('lint')] },
    led: ledger(...repair('p1', HEAD, true, false)),
    kind: 'wait',
    code: 'repair-in-progress',
    mentions: ['p1'],
  },
  {
    name: 'an unfinished repair of an older head does not wait',
    snap: { checks: [failing('lint')] },
    led: ledger(...repair('p1', OLD_HEAD, true, false)),
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'cap per change reached blocks',
    snap: { checks: [failing('lint')] },
    led: ledger(...repair('p1', 'd'.repeat(40)), ...repair('p2', 'e'.repeat(40)), ...repair('p3', OLD_HEAD)),
    kind: 'block',
    code: 'repair-cap-per-change',
  },
  {
    name: 'cap per head reached blocks',
    snap: mergeable('CONFLICTING', 'DIRTY'),
    led: ledger(...repair('p1', HEAD), ...repair('p2', HEAD)),
    kind: 'block',
    code: 'repair-cap-per-head',
  },
  {
    name: 'cap applies to findings repairs',
    marks: verdicts({ verdict: 'REFUTED', findings: 4 }),
    led: ledger(...repair('p1', HEAD)),
    policy: { maxRepairsPerHead: 1 },
    kind: 'block',
    code: 'repair-cap-per-head',
  },
  {
    name: 'human-requested repairs do not count against caps',
    snap: { checks: [failing('lint')] },
    led: ledger(...repair('p1', HEAD, false), ...repair('p2', HEAD, false), ...repair('p3', HEAD, false)),
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'below both caps repairs',
    snap: { checks: [failing('lint')] },
    led: ledger(...repair('p1', OLD_HEAD)),
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'refused merges of this head block',
    led: ledger(
      { type: 'merge-failed', id: 'm1', head: HEAD, code: 'NOT_MERGEABLE', at: T1 },
      { type: 'merge-failed', id: 'm2', head: HEAD, code: 'NOT_MERGEABLE', at: T1 },
    ),
    marks: confirmed(),
    kind: 'block',
    code: 'merge-refused',
    mentions: ['NOT_MERGEABLE'],
  },
  {
    name: 'a refused merge of an older head does not count',
    led: ledger(
      { type: 'merge-failed', id: 'm1', head: OLD_HEAD, code: 'HEAD_MOVED', at: T1 },
      { type: 'merge-failed', id: 'm2', head: OLD_HEAD, code: 'HEAD_MOVED', at: T1 },
    ),
    marks: confirmed(),
    kind: 'merge',
    code: 'ready',
  },
  // bindings: a verdict is taken only while everything it was judged on is unchanged
  {
    name: 'config changed since the review: re-review, never a pass',
    marks: verdicts({ review: 'r1', config: OTHER }),
    kind: 'review',
    code: 'bindings-changed',
    mentions: ['config', 'r1'],
  },
  {
    name: 'acceptance contract changed since the review: re-review',
    marks: verdicts({ review: 'r1', contract: OTHER }),
    kind: 'review',
    code: 'bindings-changed',
    mentions: ['acceptance contract'],
  },
  {
    name: 'diff changed since the review: re-review',
    marks: verdicts({ review: 'r1', diff: OTHER }),
    kind: 'review',
    code: 'bindings-changed',
    mentions: ['diff'],
  },
  {
    name: 'every changed binding is named',
    marks: verdicts({ review: 'r1', config: OTHER, diff: OTHER }),
    kind: 'review',
    code: 'bindings-changed',
    mentions: ['config', 'diff'],
  },
  {
    name: 'a REFUTED verdict under the old config is reviewed again, not repaired',
    marks: verdicts({ verdict: 'REFUTED', findings: 2, config: OTHER }),
    kind: 'review',
    code: 'bindings-changed',
  },
  {
    name: 'a HOLD under the old config is reviewed again, not blocked',
    marks: verdicts({ verdict: 'HOLD', config: OTHER }),
    kind: 'review',
    code: 'bindings-changed',
  },
  {
    name: 'a pass under the old config does not merge even when a new review runs',
    marks: verdicts({ review: 'r1', config: OTHER }),
    led: ledger({ type: 'review-dispatched', id: 'r2', head: HEAD, at: T1 }),
    kind: 'wait',
    code: 'review-in-progress',
  },
  {
    name: 'the re-review under the new config decides',
    marks: verdicts({ review: 'r1', config: OTHER }, { review: 'r2', verdict: 'REFUTED', findings: 0 }),
    kind: 'block',
    code: 'refuted-without-findings',
  },
  {
    name: 'an earlier verdict that still binds is taken when a later one went stale',
    marks: verdicts({ review: 'r1' }, { review: 'r2', verdict: 'REFUTED', findings: 1, config: OTHER }),
    kind: 'merge',
    code: 'ready',
  },
  {
    name: 'a verdict whose stored record resolves merges',
    marks: verdicts({ review: 'r1', run: 'review-1' }),
    facts: { records: { r1: { kind: 'accepted' } } },
    kind: 'merge',
    code: 'ready',
  },
  {
    name: 'a verdict whose stored record does not hold is reviewed again',
    marks: verdicts({ review: 'r1', run: 'review-1' }),
    facts: { records: { r1: { kind: 'wait', reason: 'inputHashes changed' } } },
    kind: 'review',
    code: 'record-unverified',
    mentions: ['inputHashes changed'],
  },
  {
    name: 'a verdict naming a record nobody checked is not taken',
    marks: verdicts({ review: 'r1', run: 'review-1' }),
    kind: 'review',
    code: 'record-unverified',
  },
  {
    name: 'live bindings that cannot be read make a verdict wait',
    marks: verdicts({ review: 'r1' }),
    facts: { live: { problem: 'git exploded' } },
    kind: 'wait',
    code: 'bindings-unreadable',
    mentions: ['git exploded'],
  },
  {
    name: 'live bindings that cannot be read: a head without a verdict is still reviewed',
    facts: { live: { problem: 'git exploded' } },
    kind: 'review',
    code: 'no-verdict',
  },
  {
    name: 'reviews outdated by a config change do not count against the review cap',
    marks: verdicts({ review: 'r1', config: OTHER }, { review: 'r2', config: OTHER }, { review: 'r3', config: OTHER }),
    led: ledger(
      ...['r1', 'r2', 'r3'].flatMap((id): LedgerRecord[] => [
        { type: 'review-dispatched', id, head: HEAD, at: T1 },
        { type: 'review-finished', id, head: HEAD, verdict: 'CONFIRMED', at: T1 },
      ]),
    ),
    kind: 'review',
    code: 'bindings-changed',
    mentions: ['r3'],
  },
  {
    name: 'reviews whose records never hold count against the review cap',
    marks: verdicts({ review: 'r1', run: 'x1' }, { review: 'r2', run: 'x2' }, { review: 'r3', run: 'x3' }),
    facts: { records: { r1: { kind: 'wait', reason: 'gone' }, r2: { kind: 'wait', reason: 'gone' }, r3: { kind: 'wait', reason: 'gone' } } },
    led: ledger(
      ...['r1', 'r2', 'r3'].flatMap((id): LedgerRecord[] => [
        { type: 'review-dispatched', id, head: HEAD, at: T1 },
        { type: 'review-finished', id, head: HEAD, verdict: 'CONFIRMED', at: T1 },
      ]),
    ),
    kind: 'block',
    code: 'review-cap',
    mentions: ['r3'],
  },
  {
    name: 'reviews whose verdict a later review of the head replaced (the comment is edited in place) do not count against the review cap',
    marks: verdicts({ review: 'r4', config: OTHER }),
    led: ledger(
      ...['r1', 'r2', 'r3', 'r4'].flatMap((id): LedgerRecord[] => [
        { type: 'review-dispatched', id, head: HEAD, at: T1 },
        { type: 'review-finished', id, head: HEAD, verdict: 'CONFIRMED', at: T1 },
      ]),
    ),
    kind: 'review',
    code: 'bindings-changed',
    mentions: ['r4'],
  },
  // changes to what proofgate trusts
  {
    name: 'a trust change with a pass waits for a maintainer',
    marks: confirmed(),
    facts: { touchesTrusted: ['.proofgate.yml'] },
    kind: 'wait',
    code: 'approval-required',
    mentions: ['.proofgate.yml'],
  },
  {
    name: 'a long list of trusted paths is cut short',
    marks: confirmed(),
    facts: { touchesTrusted: ['a.mjs', 'b.mjs', 'c.mjs', 'd.mjs', 'e.mjs', 'f.mjs', 'g.mjs'] },
    kind: 'wait',
    code: 'approval-required',
    mentions: ['a.mjs', 'e.mjs', '2 more'],
  },
  {
    name: 'an approved trust change merges and says who approved it',
    marks: confirmed(),
    facts: { touchesTrusted: ['.proofgate.yml'], approval: { by: 'tess' } },
    kind: 'merge',
    code: 'ready',
    mentions: ['tess'],
  },
  {
    name: 'an approval does not replace the review',
    facts: { touchesTrusted: ['.proofgate.yml'], approval: { by: 'tess' } },
    kind: 'review',
    code: 'no-verdict',
  },
  {
    name: 'an approval does not outweigh a REFUTED verdict',
    marks: verdicts({ verdict: 'REFUTED', findings: 1 }),
    facts: { touchesTrusted: ['.proofgate.yml'], approval: { by: 'tess' } },
    kind: 'repair',
    repair: 'fix-findings',
    code: 'review-refuted',
  },
  // the forge's review decision (asked last: review, checks and repair come first)
  {
    name: 'missing required approvals wait',
    marks: confirmed(),
    snap: { reviewDecision: 'REVIEW_REQUIRED' },
    kind: 'wait',
    code: 'review-required',
    mentions: ['/proofgate approve', HEAD.slice(0, 12)],
  },
  {
    name: 'missing required approvals explain a forge that shows the change BLOCKED',
    marks: confirmed(),
    snap: { reviewDecision: 'REVIEW_REQUIRED', ...mergeable('MERGEABLE', 'BLOCKED') },
    kind: 'wait',
    code: 'review-required',
  },
  { name: 'requested changes block for a human', marks: confirmed(), snap: { reviewDecision: 'CHANGES_REQUESTED' }, kind: 'block', code: 'changes-requested' },
  {
    name: 'requested changes on a forge that shows the change BLOCKED block too',
    marks: confirmed(),
    snap: { reviewDecision: 'CHANGES_REQUESTED', ...mergeable('MERGEABLE', 'BLOCKED') },
    kind: 'block',
    code: 'changes-requested',
  },
  {
    name: 'given approvals merge and say so',
    marks: confirmed(),
    snap: { reviewDecision: 'APPROVED' },
    kind: 'merge',
    code: 'ready',
    mentions: ['required approvals given'],
  },
  { name: 'no required review merges', marks: confirmed(), snap: { reviewDecision: null }, kind: 'merge', code: 'ready' },
  { name: 'missing approvals: a head without a verdict is reviewed first', snap: { reviewDecision: 'REVIEW_REQUIRED' }, kind: 'review', code: 'no-verdict' },
  { name: 'requested changes: a head without a verdict is reviewed first', snap: { reviewDecision: 'CHANGES_REQUESTED' }, kind: 'review', code: 'no-verdict' },
  {
    name: 'missing approvals: failed checks are repaired first',
    marks: confirmed(),
    snap: { reviewDecision: 'REVIEW_REQUIRED', checks: [failing('build')] },
    kind: 'repair',
    repair: 'fix-checks',
    code: 'checks-failed',
  },
  {
    name: 'requested changes: a conflict is repaired first',
    marks: confirmed(),
    snap: { reviewDecision: 'CHANGES_REQUESTED', ...mergeable('CONFLICTING', 'DIRTY') },
    kind: 'repair',
    repair: 'rebase',
    code: 'merge-conflict',
  },
  {
    name: 'missing approvals: pending checks are waited for first',
    marks: confirmed(),
    snap: { reviewDecision: 'REVIEW_REQUIRED', checks: [running('build')] },
    kind: 'wait',
    code: 'checks-pending',
  },
  {
    name: 'missing approvals: unknown mergeability is waited for first',
    marks: confirmed(),
    snap: { reviewDecision: 'REVIEW_REQUIRED', ...mergeable('UNKNOWN', 'UNKNOWN') },
    kind: 'wait',
    code: 'mergeability-pending',
  },
  {
    name: 'missing approvals: a trust change waits for its maintainer first',
    marks: confirmed(),
    snap: { reviewDecision: 'REVIEW_REQUIRED' },
    facts: { touchesTrusted: ['.proofgate.yml'] },
    kind: 'wait',
    code: 'approval-required',
  },
  {
    name: 'missing approvals: a REFUTED verdict is repaired first',
    marks: verdicts({ verdict: 'REFUTED', findings: 1 }),
    snap: { reviewDecision: 'REVIEW_REQUIRED' },
    kind: 'repair',
    repair: 'fix-findings',
    code: 'review-refuted',
  },
];

function decide(row: Row): AutomergeDecision {
  return decideAutomerge(snapshot(row.snap), row.led ?? ledger(), { ...defaultAutomergePolicy, ...row.policy }, row.marks ?? [], facts(row.facts));
}

describe('decideAutomerge', () => {
  it.each(rows.map((row) => [row.name, row] as const))('%s', (_name, row) => {
    const decision = decide(row);
    expect({ kind: decision.kind, code: decision.code }).toEqual({ kind: row.kind, code: row.code });
    for (const mention of row.mentions ?? []) expect(decision.reason).toContain(mention);
    if (decision.kind === 'merge' || decision.kind === 'review') expect(decision.head).toBe(HEAD);
    if (decision.kind === 'repair') {
      expect(decision.repair).toBe(row.repair);
      expect(decision.head).toBe(HEAD);
    }
    // Pending is never worded as a failure (only terminal failures are).
    if (decision.kind === 'wait') expect(decision.reason).not.toMatch(/failed/);
  });
});

/** Codes given by `gateDecision` (src/automerge/loop/policy.ts) and the merge queue (src/automerge/queue/); `stopped` is also decideAutomerge's. */
const LOOP_CODES: readonly AutomergeReasonCode[] = [
  'merge-queued',
  'queue-ejected',
  'new-head-pending',
  'no-agent-fix',
  'no-repair-worker',
  'fork-no-repair',
  'repair-made-no-change',
  'stopped',
];

describe('reason codes', () => {
  it('are distinct and kebab-case', () => {
    expect(new Set(AUTOMERGE_REASON_CODES).size).toBe(AUTOMERGE_REASON_CODES.length);
    for (const code of AUTOMERGE_REASON_CODES) expect(code).toMatch(/^[a-z]+(?:-[a-z]+)*$/);
  });

  it("every code is reached by a row of the table, except those the loop's gate and the router give", () => {
    const reached = new Set<AutomergeReasonCode>(rows.map((row) => row.code));
    expect(AUTOMERGE_REASON_CODES.filter((code) => !reached.has(code) && !LOOP_CODES.includes(code))).toEqual([]);
    // The loop's own codes are never decideAutomerge's (test/automerge/loop/pure.test.ts reaches them).
    expect(LOOP_CODES.filter((code) => reached.has(code) && code !== 'stopped')).toEqual([]);
  });

  it.each(AUTOMERGE_REASON_CODES.filter((code) => !LOOP_CODES.includes(code) || code === 'stopped'))('%s comes with a prose reason', (code) => {
    const row = rows.find((candidate) => candidate.code === code);
    if (row === undefined) throw new Error(`no row reaches ${code}`);
    const decision = decide(row);
    expect(decision.code).toBe(code);
    expect(typeof decision.reason).toBe('string');
    expect(decision.reason.trim()).not.toBe('');
  });
});

const HEADS = [HEAD, OLD_HEAD, 'd'.repeat(40)];
const MERGEABLES: Mergeable[] = ['MERGEABLE', 'CONFLICTING', 'UNKNOWN'];
const STATES: MergeStateStatus[] = ['CLEAN', 'BEHIND', 'BLOCKED', 'DIRTY', 'HAS_HOOKS', 'UNKNOWN', 'UNSTABLE'];

const arbVerdictSpec = fc.record({
  head: fc.constantFrom(...HEADS),
  verdict: fc.constantFrom<'CONFIRMED' | 'REFUTED' | 'HOLD'>('CONFIRMED', 'REFUTED', 'HOLD'),
  findings: fc.integer({ min: 0, max: 3 }),
  review: fc.constantFrom<string | null>(null, 'r1', 'r2'),
  config: fc.constantFrom(CONFIG, CONFIG, OTHER),
});

const arbCheck = fc.record({
  name: fc.constantFrom('build', 'lint', 'Labeler'),
  head: fc.constantFrom(HEAD, OLD_HEAD, BASE),
  status: fc.constantFrom<'completed' | 'in_progress' | 'queued'>('completed', 'in_progress', 'queued'),
  conclusion: fc.constantFrom<'success' | 'failure' | 'cancelled' | null>('success', 'failure', 'cancelled', null),
});

const arbOutcome: fc.Arbitrary<LedgerRecord> = fc.oneof(
  fc
    .record({ id: fc.constantFrom('r1', 'r2', 'r3'), head: fc.constantFrom(...HEADS) })
    .map(({ id, head }): LedgerRecord => ({ type: 'review-dispatched', id, head, at: T1 })),
  fc
    .record({ id: fc.constantFrom('p1', 'p2', 'p3'), head: fc.constantFrom(...HEADS), automatic: fc.boolean() })
    .map(({ id, head, automatic }): LedgerRecord => ({ type: 'repair-dispatched', id, head, repair: 'rebase', automatic, reason: 'x', at: T1 })),
  fc.constantFrom<LedgerRecord>(
    { type: 'repair-finished', id: 'p1', result: 'pushed', newHead: HEAD, commits: [], at: T1 },
    { type: 'merge-failed', id: 'm1', head: HEAD, code: 'NOT_MERGEABLE', at: T1 },
    cmd('200', '/proofgate stop', T1),
    cmd('201', '/proofgate automerge', '2024-05-01T11:00:00Z'),
  ),
);

describe('decideAutomerge: properties', () => {
  it('merge is only ever returned for the current head with a verified pass marker for that sha under the live config', () => {
    let seen = new Map<string, number>();
    const codeKinds = new Map<AutomergeReasonCode, string>();
    const property = fc.property(
      fc.array(arbVerdictSpec, { maxLength: 4 }),
      fc.array(arbCheck, { maxLength: 6 }),
      fc.array(arbOutcome, { maxLength: 6 }),
      fc.record({
        head: fc.constantFrom(...HEADS),
        mergeable: fc.constantFrom(...MERGEABLES),
        status: fc.constantFrom(...STATES),
        draft: fc.boolean(),
        state: fc.constantFrom<'open' | 'closed' | 'merged'>('open', 'open', 'open', 'closed', 'merged'),
      }),
      fc.boolean(),
      (specs, checks, outcomes, drawn, tidy) => {
        // Half of the cases are tidied towards a mergeable change so that merges are frequent.
        const live = tidy ? { ...drawn, mergeable: 'MERGEABLE' as const, status: 'CLEAN' as const, draft: false, state: 'open' as const } : drawn;
        const allSpecs = tidy ? [...specs, { head: live.head, verdict: 'CONFIRMED' as const, findings: 0, review: null, config: CONFIG }] : specs;
        const liveChecks = tidy
          ? [check('build', { headSha: live.head })]
          : checks.map((c) => check(c.name, { headSha: c.head, status: c.status, conclusion: c.status === 'completed' ? c.conclusion : null }));
        const marks = allSpecs.length === 0 ? [] : verdicts(...allSpecs);
        const snap = snapshot({
          head: { ref: 'feature', sha: live.head },
          mergeable: live.mergeable,
          mergeStateStatus: live.status,
          draft: live.draft,
          state: live.state,
          checks: liveChecks,
        });
        const decision = decideAutomerge(snap, ledger(...outcomes), defaultAutomergePolicy, marks, facts());
        seen.set(decision.kind, (seen.get(decision.kind) ?? 0) + 1);
        // Every decision carries a listed code and prose; a code always comes with the same kind of decision.
        expect(AUTOMERGE_REASON_CODES).toContain(decision.code);
        expect(decision.reason.trim()).not.toBe('');
        const kindOfCode = codeKinds.get(decision.code) ?? decision.kind;
        expect(kindOfCode).toBe(decision.kind);
        codeKinds.set(decision.code, decision.kind);
        if (decision.kind === 'merge') {
          expect(decision.head).toBe(snap.head.sha);
          // Only verdicts bound to the live config count: the latest of them is the pass.
          const forHead = marks.filter((m) => m.fields.head === snap.head.sha && m.fields.change === snap.id && m.fields.config === CONFIG);
          expect(forHead.length).toBeGreaterThan(0);
          expect(forHead[forHead.length - 1]?.fields.verdict).toBe('CONFIRMED');
          expect(snap.state).toBe('open');
          expect(snap.mergeable).toBe('MERGEABLE');
        }
        if (decision.kind === 'review' || decision.kind === 'repair') expect(decision.head).toBe(snap.head.sha);
      },
    );
    // A fresh random sample each run looks for counterexamples.
    fc.assert(property, { numRuns: 400 });
    // The generators reach every kind of decision, merges included, so the property is not vacuous. How often a
    // rare kind is drawn depends on the sample, so the count is taken on a fixed seed: a random one missed
    // `block` once in CI.
    seen = new Map();
    fc.assert(property, { numRuns: 400, seed: 20261202 });
    expect([...seen.keys()].sort()).toEqual(['block', 'merge', 'repair', 'review', 'stop', 'wait']);
    expect(seen.get('merge') ?? 0).toBeGreaterThan(10);
  });
});
