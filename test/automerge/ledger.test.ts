import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  applyCommand,
  applyOutcome,
  automergeActive,
  foldLedger,
  initialLedger,
  ledgerKey,
  parseCommands,
  type AutomergeLedgerState,
  type CommandDelivery,
  type LedgerOutcome,
  type LedgerRecord,
} from '../../src/automerge/index.js';
import { CHANGE, HEAD, OLD_HEAD } from './builders.js';

function delivery(id: string, body: string, updatedAt: string, author = 'maintainer'): CommandDelivery {
  return { comment: { id, author, updatedAt }, commands: parseCommands(body) };
}

const T1 = '2024-05-01T10:00:00Z';
const T2 = '2024-05-01T10:01:00Z';
const T3 = '2024-05-01T10:02:00.000Z';

describe('ledgerKey', () => {
  const rows: [string, string, string][] = [
    ['123', T1, `comment:123@${T1}`],
    ['IC_kwDO', T2, `comment:IC_kwDO@${T2}`],
  ];
  it.each(rows)('%s @ %s', (id, updatedAt, key) => {
    expect(ledgerKey({ id, updatedAt })).toBe(key);
  });
});

describe('applyCommand', () => {
  type Step = [CommandDelivery, string[], string | null];
  const rows: [string, Step[], boolean][] = [
    ['first delivery runs its commands', [[delivery('1', '/proofgate automerge', T1), ['automerge'], null]], true],
    [
      'redelivery runs nothing',
      [
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
        [delivery('1', '/proofgate automerge', T1), [], 'redelivery'],
      ],
      true,
    ],
    [
      'an edit that leaves the commands unchanged runs nothing',
      [
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
        [delivery('1', 'typo fixed\n/proofgate automerge', T2), [], 'unchanged-edit'],
      ],
      true,
    ],
    [
      'an edit runs only the added commands',
      [
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
        [delivery('1', '/proofgate automerge\n/proofgate status', T2), ['status'], null],
      ],
      true,
    ],
    [
      'an edit to stop stops',
      [
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
        [delivery('1', '/proofgate stop', T2), ['stop'], null],
      ],
      false,
    ],
    [
      'an older version delivered late runs nothing',
      [
        [delivery('1', '/proofgate stop', T2), ['stop'], null],
        [delivery('1', '/proofgate automerge', T1), [], 'older-version'],
      ],
      false,
    ],
    [
      'stop after automerge stops',
      [
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
        [delivery('2', '/proofgate stop', T2), ['stop'], null],
      ],
      false,
    ],
    [
      'a later automerge overrides an earlier stop',
      [
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
        [delivery('2', '/proofgate stop', T2), ['stop'], null],
        [delivery('3', '/proofgate automerge', T3), ['automerge'], null],
      ],
      true,
    ],
    [
      'an earlier automerge delivered after a stop does not override it',
      [
        [delivery('2', '/proofgate stop', T2), ['stop'], null],
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
      ],
      false,
    ],
    ['automerge then stop in one comment: the later line (stop) wins', [[delivery('1', '/proofgate automerge\n/proofgate stop', T1), ['automerge', 'stop'], null]], false],
    ['stop then automerge in one comment: the later line (automerge) wins', [[delivery('1', '/proofgate stop\ntext\n/proofgate automerge', T1), ['stop', 'automerge'], null]], true],
    [
      'stop then automerge in one comment, after an earlier stop: automerge wins',
      [
        [delivery('1', '/proofgate stop', T1), ['stop'], null],
        [delivery('2', '/proofgate stop\n/proofgate automerge', T2), ['stop', 'automerge'], null],
      ],
      true,
    ],
    [
      'automerge and stop in two comments with the same time: stop wins the tie',
      [
        [delivery('2', '/proofgate stop', T1), ['stop'], null],
        [delivery('1', '/proofgate automerge', T1), ['automerge'], null],
      ],
      false,
    ],
    ['stop without automerge', [[delivery('1', '/proofgate stop', T1), ['stop'], null]], false],
    [
      'other commands are recorded but do not enable automerge',
      [[delivery('1', '/proofgate review\n/proofgate rebase\n@proofgate proof smoke\n/proofgate nope', T1), ['review', 'rebase', 'proof', 'unknown'], null]],
      false,
    ],
    ['a comment without commands runs nothing', [[delivery('1', 'just text', T1), [], null]], false],
  ];
  it.each(rows)('%s', (_name, steps, active) => {
    let state = initialLedger(CHANGE);
    for (const [d, run, skipped] of steps) {
      const result = applyCommand(state, d);
      expect(result.run.map((c) => c.kind)).toEqual(run);
      expect(result.skipped).toBe(skipped);
      expect(result.state.processed[ledgerKey(d.comment)]).toBe(true);
      state = result.state;
    }
    expect(automergeActive(state)).toBe(active);
  });

  it('records who asked and when, and a timeline line per command', () => {
    const { state } = applyCommand(initialLedger(CHANGE), delivery('9', '/proofgate automerge', T1, 'alice'));
    expect(state.automerge).toEqual({ commentId: '9', actor: 'alice', at: T1, line: 1 });
    expect(state.timeline).toEqual([{ at: T1, text: 'alice: /proofgate automerge' }]);
  });

  it('returns the same state object for a redelivery', () => {
    const first = applyCommand(initialLedger(CHANGE), delivery('1', '/proofgate automerge', T1)).state;
    expect(applyCommand(first, delivery('1', '/proofgate automerge', T1)).state).toBe(first);
  });
});

const outcomes: LedgerOutcome[] = [
  { type: 'review-dispatched', id: 'r1', head: OLD_HEAD, at: T1 },
  { type: 'review-finished', id: 'r1', head: OLD_HEAD, verdict: 'REFUTED', at: T1 },
  { type: 'repair-dispatched', id: 'p1', head: OLD_HEAD, repair: 'fix-findings', automatic: true, reason: 'REFUTED with 1 finding', at: T2 },
  { type: 'repair-finished', id: 'p1', result: 'pushed', newHead: HEAD, commits: [HEAD], at: T2 },
  { type: 'review-dispatched', id: 'r2', head: HEAD, at: T2 },
  { type: 'review-finished', id: 'r2', head: HEAD, verdict: null, at: T3 },
  { type: 'note', id: 'n1', text: 'checks pending', at: T3 },
  { type: 'note', id: 'n2', text: 'checks pending', at: T3 },
  { type: 'merge-failed', id: 'm1', head: HEAD, code: 'NOT_MERGEABLE', at: T3 },
  { type: 'merged', id: 'm2', head: HEAD, mergeCommit: 'd'.repeat(40), at: T3 },
];

describe('applyOutcome', () => {
  it('folds outcomes into reviews, repairs, merge state and timeline', () => {
    const state = outcomes.reduce(applyOutcome, initialLedger(CHANGE));
    expect(state.reviews.map((r) => [r.id, r.head, r.status, r.verdict])).toEqual([
      ['r1', OLD_HEAD, 'finished', 'REFUTED'],
      ['r2', HEAD, 'failed', null],
    ]);
    expect(state.repairs.map((r) => [r.id, r.status, r.newHead, r.commits, r.automatic])).toEqual([['p1', 'pushed', HEAD, [HEAD], true]]);
    expect(state.mergeFailures.map((f) => f.code)).toEqual(['NOT_MERGEABLE']);
    expect(state.merged).toEqual({ head: HEAD, mergeCommit: 'd'.repeat(40), at: T3 });
    expect(state.timeline.map((t) => t.text)).toEqual([
      `review of ${OLD_HEAD.slice(0, 12)} dispatched`,
      `review of ${OLD_HEAD.slice(0, 12)}: REFUTED`,
      `repair (fix-findings) of ${OLD_HEAD.slice(0, 12)}: REFUTED with 1 finding`,
      `repair pushed ${HEAD.slice(0, 12)} (1 commit)`,
      `review of ${HEAD.slice(0, 12)} dispatched`,
      `review of ${HEAD.slice(0, 12)} ended without a verdict`,
      'checks pending',
      `merge of ${HEAD.slice(0, 12)} refused: NOT_MERGEABLE`,
      `merged ${HEAD.slice(0, 12)} as ${'d'.repeat(12)}`,
    ]);
  });

  const rows: [string, LedgerOutcome][] = outcomes.map((o) => [`${o.type} ${o.id}`, o]);
  it.each(rows)('applying %s twice changes nothing', (_name, outcome) => {
    const once = applyOutcome(initialLedger(CHANGE), outcome);
    expect(applyOutcome(once, outcome)).toBe(once);
  });

  it('a finished review the ledger never saw dispatched is still recorded', () => {
    const state = applyOutcome(initialLedger(CHANGE), { type: 'review-finished', id: 'x', head: HEAD, verdict: 'CONFIRMED', at: T1 });
    expect(state.reviews).toEqual([{ id: 'x', head: HEAD, status: 'finished', verdict: 'CONFIRMED', at: T1 }]);
  });

  it('repair outcomes: no change and failure', () => {
    let state = applyOutcome(initialLedger(CHANGE), { type: 'repair-dispatched', id: 'p', head: HEAD, repair: 'rebase', automatic: false, reason: 'asked', at: T1 });
    state = applyOutcome(state, { type: 'repair-finished', id: 'p', result: 'no-change', newHead: null, commits: [], at: T2 });
    expect(state.repairs[0]?.status).toBe('no-change');
    state = applyOutcome(state, { type: 'repair-dispatched', id: 'q', head: HEAD, repair: 'fix-checks', automatic: true, reason: 'lint', at: T2 });
    state = applyOutcome(state, { type: 'repair-finished', id: 'q', result: 'failed', newHead: null, commits: [], at: T3 });
    expect(state.timeline.slice(-1)[0]?.text).toBe('repair failed');
  });
});

const arbRecord: fc.Arbitrary<LedgerRecord> = fc.oneof(
  fc
    .record({
      id: fc.constantFrom('1', '2', '3'),
      body: fc.constantFrom('/proofgate automerge', '/proofgate stop', '/proofgate status', 'text', '/proofgate automerge\n/proofgate stop'),
      minute: fc.integer({ min: 0, max: 5 }),
    })
    .map(({ id, body, minute }): LedgerRecord => ({ type: 'commands', delivery: delivery(id, body, `2024-05-01T10:0${minute}:00Z`) })),
  fc.constantFrom(...outcomes),
);

describe('ledger properties', () => {
  it('redelivering any records again, anywhere later, changes nothing', () => {
    fc.assert(
      fc.property(fc.array(arbRecord, { maxLength: 12 }), fc.array(fc.nat(), { maxLength: 12 }), (records, picks) => {
        const withRepeats: LedgerRecord[] = [...records];
        for (const pick of picks) {
          if (records.length === 0) break;
          const index = pick % records.length;
          const record = records[index] as LedgerRecord;
          const firstSeen = withRepeats.indexOf(record);
          const at = firstSeen + 1 + (pick % (withRepeats.length - firstSeen));
          withRepeats.splice(at, 0, record);
        }
        expect(foldLedger(CHANGE, withRepeats)).toEqual(foldLedger(CHANGE, records));
      }),
      { numRuns: 300 },
    );
  });

  it('whether automerge is on does not depend on the order distinct comments arrive in', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(
          fc.record({
            id: fc.string({ minLength: 1, maxLength: 4 }),
            body: fc.constantFrom('/proofgate stop', '/proofgate automerge', '/proofgate stop\n/proofgate automerge', '/proofgate automerge\n/proofgate stop'),
            minute: fc.integer({ min: 0, max: 3 }),
          }),
          { selector: (r) => r.id, maxLength: 8 },
        ),
        fc.nat(),
        (comments, seed) => {
          const records: LedgerRecord[] = comments.map((c) => ({
            type: 'commands',
            delivery: delivery(c.id, c.body, `2024-05-01T10:0${c.minute}:00Z`),
          }));
          const shuffled = [...records].sort((a, b) => ((JSON.stringify(a).length * 31 + seed) % 7) - ((JSON.stringify(b).length * 31 + seed) % 7));
          const a: AutomergeLedgerState = foldLedger(CHANGE, records);
          const b: AutomergeLedgerState = foldLedger(CHANGE, shuffled.reverse());
          expect(automergeActive(a)).toBe(automergeActive(b));
        },
      ),
      { numRuns: 300 },
    );
  });
});
