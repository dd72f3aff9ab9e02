import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decideAutomerge,
  defaultAutomergePolicy,
  foldLedger,
  parseCommands,
  type AutomergeLedgerState,
  type AutomergePolicy,
  type LedgerRecord,
  type ReviewFacts,
  type TrustedVerdict,
} from '../../src/automerge/index.js';
import type { ChangeSnapshot, ForgeCheck, Mergeable, MergeStateStatus } from '../../src/forge/port.js';
import { CHANGE, CONFIG, HEAD, OLD_HEAD, check, facts, snapshot, verdicts } from './builders.js';

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
  reason: RegExp;
  repair?: 'rebase' | 'fix-checks' | 'fix-findings';
}

const mergeable = (m: Mergeable, s: MergeStateStatus): Partial<ChangeSnapshot> => ({ mergeable: m, mergeStateStatus: s });

const rows: Row[] = [
  // terminal states and the request itself
  { name: 'merged change stops', snap: { state: 'merged', mergeCommitSha: 'e'.repeat(40) }, marks: confirmed(), kind: 'stop', reason: /merged \(eeeeeeeeeeee\)/ },
  { name: 'closed change stops', snap: { state: 'closed' }, marks: confirmed(), kind: 'stop', reason: /closed/ },
  { name: 'ledger says merged while the forge lags', led: ledger({ type: 'merged', id: 'm', head: HEAD, mergeCommit: 'f'.repeat(40), at: T1 }), marks: confirmed(), kind: 'stop', reason: /already merged/ },
  { name: 'automerge never requested', led: foldLedger(CHANGE, []), marks: confirmed(), kind: 'stop', reason: /not requested/ },
  { name: 'only a stop, never a request', led: foldLedger(CHANGE, [cmd('1', '/proofgate stop', T0)]), marks: confirmed(), kind: 'stop', reason: /not requested/ },
  { name: 'stop wins', led: ledger(cmd('101', '/proofgate stop', T1, 'bob')), marks: confirmed(), kind: 'stop', reason: /stopped by bob \(comment 101/ },
  { name: 'stop delivered before an earlier automerge still wins', led: foldLedger(CHANGE, [cmd('2', '/proofgate stop', T1), cmd('1', '/proofgate automerge', T0)]), marks: confirmed(), kind: 'stop', reason: /stopped/ },
  { name: 'a later human automerge clears the stop', led: ledger(cmd('101', '/proofgate stop', T1), cmd('102', '/proofgate automerge', '2024-05-01T10:00:00Z')), marks: confirmed(), kind: 'merge', reason: /CONFIRMED/ },
  { name: 'draft waits', snap: { draft: true }, marks: confirmed(), kind: 'wait', reason: /draft/ },
  // merge gates
  { name: 'happy path merges the reviewed head', marks: confirmed(), kind: 'merge', reason: /CONFIRMED .*MERGEABLE\/CLEAN/ },
  { name: 'HAS_HOOKS merges', snap: mergeable('MERGEABLE', 'HAS_HOOKS'), marks: confirmed(), kind: 'merge', reason: /HAS_HOOKS/ },
  { name: 'BEHIND merges when up to date is not required', snap: mergeable('MERGEABLE', 'BEHIND'), marks: confirmed(), kind: 'merge', reason: /BEHIND/ },
  { name: 'BEHIND is rebased when up to date is required', snap: mergeable('MERGEABLE', 'BEHIND'), marks: confirmed(), policy: { requireUpToDate: true }, kind: 'repair', repair: 'rebase', reason: /behind main/ },
  { name: 'mergeable UNKNOWN waits', snap: mergeable('UNKNOWN', 'CLEAN'), marks: confirmed(), kind: 'wait', reason: /UNKNOWN\/CLEAN/ },
  { name: 'merge state UNKNOWN waits', snap: mergeable('MERGEABLE', 'UNKNOWN'), marks: confirmed(), kind: 'wait', reason: /MERGEABLE\/UNKNOWN/ },
  { name: 'UNSTABLE waits', snap: mergeable('MERGEABLE', 'UNSTABLE'), marks: confirmed(), kind: 'wait', reason: /UNSTABLE/ },
  { name: 'BLOCKED waits', snap: mergeable('MERGEABLE', 'BLOCKED'), marks: confirmed(), kind: 'wait', reason: /BLOCKED/ },
  { name: 'CONFLICTING is rebased', snap: mergeable('CONFLICTING', 'DIRTY'), marks: confirmed(), kind: 'repair', repair: 'rebase', reason: /conflicts with main/ },
  { name: 'DIRTY is rebased', snap: mergeable('UNKNOWN', 'DIRTY'), kind: 'repair', repair: 'rebase', reason: /conflicts/ },
  { name: 'conflict is repaired before any review', snap: mergeable('CONFLICTING', 'UNKNOWN'), kind: 'repair', repair: 'rebase', reason: /conflicts/ },
  // verdicts and the exact head
  { name: 'no verdict: review the head', kind: 'review', reason: /needs an exact-head review: no verdict yet/ },
  { name: 'pass for an older head: review the new head', marks: verdicts({ head: OLD_HEAD }), kind: 'review', reason: /older heads \(bbbbbbbbbbbb\)/ },
  { name: 'pass for an older head while the new head review runs: wait', marks: verdicts({ head: OLD_HEAD }), led: ledger({ type: 'review-dispatched', id: 'r9', head: HEAD, at: T1 }), kind: 'wait', reason: /review r9 of head aaaaaaaaaaaa in progress/ },
  { name: 'a dispatched review answered by its marker no longer waits', marks: verdicts({ review: 'r9' }), led: ledger({ type: 'review-dispatched', id: 'r9', head: HEAD, at: T1 }), kind: 'merge', reason: /CONFIRMED/ },
  { name: 'a re-review in flight holds an earlier pass', marks: verdicts({ review: 'r1' }), led: ledger({ type: 'review-dispatched', id: 'r2', head: HEAD, at: T1 }), kind: 'wait', reason: /review r2/ },
  { name: 'a review dispatched for an old head does not make the new head wait', marks: confirmed(), led: ledger({ type: 'review-dispatched', id: 'r0', head: OLD_HEAD, at: T1 }), kind: 'merge', reason: /CONFIRMED/ },
  { name: 'pass for another change does not count', marks: verdicts({ change: '43' }), kind: 'review', reason: /no verdict yet/ },
  { name: 'latest verdict wins: pass then refuted', marks: verdicts({ verdict: 'CONFIRMED' }, { verdict: 'REFUTED', findings: 2 }), kind: 'repair', repair: 'fix-findings', reason: /REFUTED with 2 finding/ },
  { name: 'latest verdict wins: refuted then pass', marks: verdicts({ verdict: 'REFUTED', findings: 2 }, { verdict: 'CONFIRMED' }), kind: 'merge', reason: /CONFIRMED/ },
  { name: 'HOLD blocks for a human', marks: verdicts({ verdict: 'HOLD' }), kind: 'block', reason: /HOLD: a human must review/ },
  { name: 'HOLD blocks even with conflicts', marks: verdicts({ verdict: 'HOLD' }), snap: mergeable('CONFLICTING', 'DIRTY'), kind: 'block', reason: /HOLD/ },
  { name: 'HOLD on an older head does not block the new head', marks: verdicts({ head: OLD_HEAD, verdict: 'HOLD' }), kind: 'review', reason: /older heads/ },
  { name: 'REFUTED without findings blocks', marks: verdicts({ verdict: 'REFUTED', findings: 0 }), kind: 'block', reason: /without actionable findings/ },
  { name: 'REFUTED with findings is repaired', marks: verdicts({ verdict: 'REFUTED', findings: 1 }), kind: 'repair', repair: 'fix-findings', reason: /REFUTED with 1 finding/ },
  { name: 'REFUTED on an older head means review, not repair', marks: verdicts({ head: OLD_HEAD, verdict: 'REFUTED', findings: 3 }), kind: 'review', reason: /older heads/ },
  { name: 'reviews that keep ending without a verdict block', led: ledger(...['r1', 'r2', 'r3'].flatMap((id): LedgerRecord[] => [{ type: 'review-dispatched', id, head: HEAD, at: T1 }, { type: 'review-finished', id, head: HEAD, verdict: null, at: T1 }])), kind: 'block', reason: /3 reviews of head .* without a verdict/ },
  // checks
  { name: 'pending checks wait, never repair', snap: { checks: [check('build'), running('test')] }, marks: confirmed(), kind: 'wait', reason: /checks pending .*pending: CI \/ test \(in_progress\)/ },
  { name: 'no checks yet wait', snap: { checks: [] }, marks: confirmed(), kind: 'wait', reason: /no checks reported yet/ },
  { name: 'no checks needed when the policy expects none', snap: { checks: [] }, marks: confirmed(), policy: { checks: { ignored: [], expectChecks: false } }, kind: 'merge', reason: /CONFIRMED/ },
  { name: 'checks of an older head do not count', snap: { checks: [check('build', { headSha: OLD_HEAD })] }, marks: confirmed(), kind: 'wait', reason: /no checks reported yet/ },
  { name: 'failed check on an older head is not repaired', snap: { checks: [failing('lint', OLD_HEAD), check('lint')] }, marks: confirmed(), kind: 'merge', reason: /CONFIRMED/ },
  { name: 'failed check is repaired', snap: { checks: [failing('lint'), running('test')] }, marks: confirmed(), kind: 'repair', repair: 'fix-checks', reason: /failed checks on aaaaaaaaaaaa: CI \/ lint \(failure\)$/ },
  { name: 'failed check is repaired before the review', snap: { checks: [failing('lint')] }, kind: 'repair', repair: 'fix-checks', reason: /CI \/ lint/ },
  { name: 'failed checks win over findings', snap: { checks: [failing('lint')] }, marks: verdicts({ verdict: 'REFUTED', findings: 1 }), kind: 'repair', repair: 'fix-checks', reason: /lint/ },
  { name: 'cancelled check blocks for a re-run', snap: { checks: [check('deploy', { conclusion: 'cancelled' })] }, marks: confirmed(), kind: 'block', reason: /need a re-run: CI \/ deploy \(cancelled\)/ },
  { name: 'stale check blocks for a re-run', snap: { checks: [check('deploy', { conclusion: 'stale' })] }, marks: confirmed(), kind: 'block', reason: /stale/ },
  { name: 'ignored failing check does not block', snap: { checks: [check('build'), check('Labeler', { conclusion: 'failure' })] }, marks: confirmed(), kind: 'merge', reason: /CONFIRMED/ },
  { name: 'required check not reported yet waits', snap: { checks: [check('build')] }, policy: { checks: { ignored: [], required: ['security'] } }, marks: confirmed(), kind: 'wait', reason: /required, not reported yet: security/ },
  // repairs and caps
  { name: 'a repair in progress on this head waits', snap: { checks: [failing('lint')] }, led: ledger(...repair('p1', HEAD, true, false)), kind: 'wait', reason: /repair p1 \(fix-checks\)/ },
  { name: 'an unfinished repair of an older head does not wait', snap: { checks: [failing('lint')] }, led: ledger(...repair('p1', OLD_HEAD, true, false)), kind: 'repair', repair: 'fix-checks', reason: /lint/ },
  { name: 'cap per change reached blocks', snap: { checks: [failing('lint')] }, led: ledger(...repair('p1', 'd'.repeat(40)), ...repair('p2', 'e'.repeat(40)), ...repair('p3', OLD_HEAD)), kind: 'block', reason: /repair cap reached: 3 automatic repairs on this change \(max 3\)/ },
  { name: 'cap per head reached blocks', snap: mergeable('CONFLICTING', 'DIRTY'), led: ledger(...repair('p1', HEAD), ...repair('p2', HEAD)), kind: 'block', reason: /conflicts.*repair cap reached: 2 automatic repairs from head aaaaaaaaaaaa \(max 2\)/ },
  { name: 'cap applies to findings repairs', marks: verdicts({ verdict: 'REFUTED', findings: 4 }), led: ledger(...repair('p1', HEAD)), policy: { maxRepairsPerHead: 1 }, kind: 'block', reason: /REFUTED.*repair cap reached/ },
  { name: 'human-requested repairs do not count against caps', snap: { checks: [failing('lint')] }, led: ledger(...repair('p1', HEAD, false), ...repair('p2', HEAD, false), ...repair('p3', HEAD, false)), kind: 'repair', repair: 'fix-checks', reason: /lint/ },
  { name: 'below both caps repairs', snap: { checks: [failing('lint')] }, led: ledger(...repair('p1', OLD_HEAD)), kind: 'repair', repair: 'fix-checks', reason: /lint/ },
  { name: 'refused merges of this head block', led: ledger({ type: 'merge-failed', id: 'm1', head: HEAD, code: 'NOT_MERGEABLE', at: T1 }, { type: 'merge-failed', id: 'm2', head: HEAD, code: 'NOT_MERGEABLE', at: T1 }), marks: confirmed(), kind: 'block', reason: /refused 2 times \(last: NOT_MERGEABLE\)/ },
  { name: 'a refused merge of an older head does not count', led: ledger({ type: 'merge-failed', id: 'm1', head: OLD_HEAD, code: 'HEAD_MOVED', at: T1 }, { type: 'merge-failed', id: 'm2', head: OLD_HEAD, code: 'HEAD_MOVED', at: T1 }), marks: confirmed(), kind: 'merge', reason: /CONFIRMED/ },
  // bindings: a verdict is taken only while everything it was judged on is unchanged
  { name: 'config changed since the review: re-review, never a pass', marks: verdicts({ review: 'r1', config: OTHER }), kind: 'review', reason: /needs a re-review: config changed since review r1/ },
  { name: 'acceptance contract changed since the review: re-review', marks: verdicts({ review: 'r1', contract: OTHER }), kind: 'review', reason: /acceptance contract changed since review r1/ },
  { name: 'diff changed since the review: re-review', marks: verdicts({ review: 'r1', diff: OTHER }), kind: 'review', reason: /diff changed since review r1/ },
  { name: 'every changed binding is named', marks: verdicts({ review: 'r1', config: OTHER, diff: OTHER }), kind: 'review', reason: /config, diff changed since review r1/ },
  { name: 'a REFUTED verdict under the old config is reviewed again, not repaired', marks: verdicts({ verdict: 'REFUTED', findings: 2, config: OTHER }), kind: 'review', reason: /config changed/ },
  { name: 'a HOLD under the old config is reviewed again, not blocked', marks: verdicts({ verdict: 'HOLD', config: OTHER }), kind: 'review', reason: /config changed/ },
  { name: 'a pass under the old config does not merge even when a new review runs', marks: verdicts({ review: 'r1', config: OTHER }), led: ledger({ type: 'review-dispatched', id: 'r2', head: HEAD, at: T1 }), kind: 'wait', reason: /review r2 .* in progress/ },
  { name: 'the re-review under the new config decides', marks: verdicts({ review: 'r1', config: OTHER }, { review: 'r2', verdict: 'REFUTED', findings: 0 }), kind: 'block', reason: /REFUTED without actionable findings/ },
  { name: 'an earlier verdict that still binds is taken when a later one went stale', marks: verdicts({ review: 'r1' }, { review: 'r2', verdict: 'REFUTED', findings: 1, config: OTHER }), kind: 'merge', reason: /CONFIRMED/ },
  { name: 'a verdict whose stored record resolves merges', marks: verdicts({ review: 'r1', run: 'review-1' }), facts: { records: { r1: { kind: 'accepted' } } }, kind: 'merge', reason: /CONFIRMED/ },
  { name: 'a verdict whose stored record does not hold is reviewed again', marks: verdicts({ review: 'r1', run: 'review-1' }), facts: { records: { r1: { kind: 'wait', reason: 'inputHashes changed' } } }, kind: 'review', reason: /stored record of review r1 does not hold: inputHashes changed/ },
  { name: 'a verdict naming a record nobody checked is not taken', marks: verdicts({ review: 'r1', run: 'review-1' }), kind: 'review', reason: /stored record of review r1 was not checked/ },
  { name: 'live bindings that cannot be read make a verdict wait', marks: verdicts({ review: 'r1' }), facts: { live: { problem: 'git exploded' } }, kind: 'wait', reason: /bindings of review r1 cannot be checked: git exploded/ },
  { name: 'live bindings that cannot be read: a head without a verdict is still reviewed', facts: { live: { problem: 'git exploded' } }, kind: 'review', reason: /no verdict yet/ },
  { name: 'reviews outdated by a config change do not count against the review cap', marks: verdicts({ review: 'r1', config: OTHER }, { review: 'r2', config: OTHER }, { review: 'r3', config: OTHER }), led: ledger(...['r1', 'r2', 'r3'].flatMap((id): LedgerRecord[] => [{ type: 'review-dispatched', id, head: HEAD, at: T1 }, { type: 'review-finished', id, head: HEAD, verdict: 'CONFIRMED', at: T1 }])), kind: 'review', reason: /config changed since review r3/ },
  { name: 'reviews whose records never hold count against the review cap', marks: verdicts({ review: 'r1', run: 'x1' }, { review: 'r2', run: 'x2' }, { review: 'r3', run: 'x3' }), facts: { records: { r1: { kind: 'wait', reason: 'gone' }, r2: { kind: 'wait', reason: 'gone' }, r3: { kind: 'wait', reason: 'gone' } } }, led: ledger(...['r1', 'r2', 'r3'].flatMap((id): LedgerRecord[] => [{ type: 'review-dispatched', id, head: HEAD, at: T1 }, { type: 'review-finished', id, head: HEAD, verdict: 'CONFIRMED', at: T1 }])), kind: 'block', reason: /3 reviews of head .* without a verdict that holds .*last: the stored record of review r3/ },
  // changes to what proofgate trusts
  { name: 'a trust change with a pass waits for a maintainer', marks: confirmed(), facts: { touchesTrusted: ['.proofgate.yml'] }, kind: 'wait', reason: /^needs a maintainer's approval: touches \.proofgate\.yml/ },
  { name: 'a long list of trusted paths is cut short', marks: confirmed(), facts: { touchesTrusted: ['a.mjs', 'b.mjs', 'c.mjs', 'd.mjs', 'e.mjs', 'f.mjs', 'g.mjs'] }, kind: 'wait', reason: /touches a\.mjs, b\.mjs, c\.mjs, d\.mjs, e\.mjs and 2 more/ },
  { name: 'an approved trust change merges and says who approved it', marks: confirmed(), facts: { touchesTrusted: ['.proofgate.yml'], approval: { by: 'tess' } }, kind: 'merge', reason: /CONFIRMED .*trust change approved by tess/ },
  { name: 'an approval does not replace the review', facts: { touchesTrusted: ['.proofgate.yml'], approval: { by: 'tess' } }, kind: 'review', reason: /no verdict yet/ },
  { name: 'an approval does not outweigh a REFUTED verdict', marks: verdicts({ verdict: 'REFUTED', findings: 1 }), facts: { touchesTrusted: ['.proofgate.yml'], approval: { by: 'tess' } }, kind: 'repair', repair: 'fix-findings', reason: /REFUTED/ },
];

describe('decideAutomerge', () => {
  it.each(rows.map((row) => [row.name, row] as const))('%s', (_name, row) => {
    const decision = decideAutomerge(
      snapshot(row.snap),
      row.led ?? ledger(),
      { ...defaultAutomergePolicy, ...row.policy },
      row.marks ?? [],
      facts(row.facts),
    );
    expect(decision.kind).toBe(row.kind);
    expect(decision.reason).toMatch(row.reason);
    if (decision.kind === 'merge' || decision.kind === 'review') expect(decision.head).toBe(HEAD);
    if (decision.kind === 'repair') {
      expect(decision.repair).toBe(row.repair);
      expect(decision.head).toBe(HEAD);
    }
    if (decision.kind === 'wait') expect(decision.reason).not.toMatch(/failed/);
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
  head: fc.constantFrom(HEAD, OLD_HEAD),
  status: fc.constantFrom<'completed' | 'in_progress' | 'queued'>('completed', 'in_progress', 'queued'),
  conclusion: fc.constantFrom<'success' | 'failure' | 'cancelled' | null>('success', 'failure', 'cancelled', null),
});

const arbOutcome: fc.Arbitrary<LedgerRecord> = fc.oneof(
  fc.record({ id: fc.constantFrom('r1', 'r2', 'r3'), head: fc.constantFrom(...HEADS) }).map(({ id, head }): LedgerRecord => ({ type: 'review-dispatched', id, head, at: T1 })),
  fc.record({ id: fc.constantFrom('p1', 'p2', 'p3'), head: fc.constantFrom(...HEADS), automatic: fc.boolean() }).map(
    ({ id, head, automatic }): LedgerRecord => ({ type: 'repair-dispatched', id, head, repair: 'rebase', automatic, reason: 'x', at: T1 }),
  ),
  fc.constantFrom<LedgerRecord>(
    { type: 'repair-finished', id: 'p1', result: 'pushed', newHead: HEAD, commits: [], at: T1 },
    { type: 'merge-failed', id: 'm1', head: HEAD, code: 'NOT_MERGEABLE', at: T1 },
    cmd('200', '/proofgate stop', T1),
    cmd('201', '/proofgate automerge', '2024-05-01T11:00:00Z'),
  ),
);

describe('decideAutomerge: properties', () => {
  it('merge is only ever returned for the current head with a verified pass marker for that sha under the live config', () => {
    const seen = new Map<string, number>();
    fc.assert(
      fc.property(
        fc.array(arbVerdictSpec, { maxLength: 4 }),
        fc.array(arbCheck, { maxLength: 6 }),
        fc.array(arbOutcome, { maxLength: 6 }),
        fc.record({
          head: fc.constantFrom(...HEADS),
          mergeable: fc.constantFrom(...MERGEABLES),
          status: fc.constantFrom(...STATES),
          draft: fc.boolean(),
          state: fc.constantFrom<'open' | 'closed' | 'merged'>('open', 'open', 'open', 'closed', 'merged'),
          requireUpToDate: fc.boolean(),
        }),
        fc.boolean(),
        (specs, checks, outcomes, drawn, tidy) => {
          // Half of the cases are tidied towards a mergeable change so that merges are frequent.
          const live = tidy ? { ...drawn, mergeable: 'MERGEABLE' as const, status: 'CLEAN' as const, draft: false, state: 'open' as const } : drawn;
          const allSpecs = tidy ? [...specs, { head: live.head, verdict: 'CONFIRMED' as const, findings: 0, review: null, config: CONFIG }] : specs;
          const liveChecks = tidy ? [check('build', { headSha: live.head })] : checks.map((c) => check(c.name, { headSha: c.head, status: c.status, conclusion: c.status === 'completed' ? c.conclusion : null }));
          const marks = allSpecs.length === 0 ? [] : verdicts(...allSpecs);
          const snap = snapshot({
            head: { ref: 'feature', sha: live.head },
            mergeable: live.mergeable,
            mergeStateStatus: live.status,
            draft: live.draft,
            state: live.state,
            checks: liveChecks,
          });
          const decision = decideAutomerge(snap, ledger(...outcomes), { ...defaultAutomergePolicy, requireUpToDate: live.requireUpToDate }, marks, facts());
          seen.set(decision.kind, (seen.get(decision.kind) ?? 0) + 1);
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
      ),
      { numRuns: 400 },
    );
    // The generators reach every kind of decision, merges included, so the property is not vacuous.
    expect([...seen.keys()].sort()).toEqual(['block', 'merge', 'repair', 'review', 'stop', 'wait']);
    expect(seen.get('merge') ?? 0).toBeGreaterThan(10);
  });
});
