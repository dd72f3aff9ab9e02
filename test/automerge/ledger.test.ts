import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
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
import { LedgerStore, automergeStream } from '../../src/automerge/loop/index.js';
import { isProofgateError } from '../../src/core/index.js';
import type { EventStore, NewEvent, ReadOptions, StoredEvent } from '../../src/storage/ports.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import type { RunStorage } from '../../src/storage/policy-types.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
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
    [
      'automerge then stop in one comment: the later line (stop) wins',
      [[delivery('1', '/proofgate automerge\n/proofgate stop', T1), ['automerge', 'stop'], null]],
      false,
    ],
    [
      'stop then automerge in one comment: the later line (automerge) wins',
      [[delivery('1', '/proofgate stop\ntext\n/proofgate automerge', T1), ['stop', 'automerge'], null]],
      true,
    ],
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
      expect(result.state.processed.has(ledgerKey(d.comment))).toBe(true);
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
    let state = applyOutcome(initialLedger(CHANGE), {
      type: 'repair-dispatched',
      id: 'p',
      head: HEAD,
      repair: 'rebase',
      automatic: false,
      reason: 'asked',
      at: T1,
    });
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

describe('applied keys are persistent', () => {
  const note = (id: string): LedgerOutcome => ({ type: 'note', id, text: `note ${id}`, at: T1 });

  it('an older state never sees a key applied after it, and a branch from it stays apart', () => {
    const base = [note('a'), note('b')].reduce(applyOutcome, initialLedger(CHANGE));
    const later = applyOutcome(base, note('c'));
    const branch = applyOutcome(base, note('d'));
    expect([...base.processed]).toEqual(['note:a', 'note:b']);
    expect([...later.processed]).toEqual(['note:a', 'note:b', 'note:c']);
    expect([...branch.processed]).toEqual(['note:a', 'note:b', 'note:d']);
    expect(base.processed.has('note:c')).toBe(false);
    expect(branch.processed.has('note:c')).toBe(false);
    expect(later.processed.has('note:d')).toBe(false);
    // Applying to the older state what the later one applied is the later state's history again.
    expect(applyOutcome(base, note('c'))).toEqual(later);
    expect(applyOutcome(later, note('c'))).toBe(later);
  });

  it('folding in any order of branches gives what a fresh fold gives', () => {
    fc.assert(
      fc.property(fc.array(arbRecord, { maxLength: 10 }), fc.array(arbRecord, { maxLength: 4 }), fc.nat(), (records, other, cut) => {
        const at = records.length === 0 ? 0 : cut % (records.length + 1);
        const full = foldLedger(CHANGE, records);
        const prefix = foldLedger(CHANGE, records.slice(0, at));
        // Branch off an earlier state after the full fold has grown the shared log.
        const branched = other.reduce(
          (state, record) => (record.type === 'commands' ? applyCommand(state, record.delivery).state : applyOutcome(state, record)),
          prefix,
        );
        expect(branched).toEqual(foldLedger(CHANGE, [...records.slice(0, at), ...other]));
        expect(full).toEqual(foldLedger(CHANGE, records));
        expect(prefix).toEqual(foldLedger(CHANGE, records.slice(0, at)));
      }),
      { numRuns: 300 },
    );
  });
});

/** The typed error a promise rejects with (fails the test when it resolves or throws something else). */
async function rejection(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (isProofgateError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a typed error');
}

/** An event store that runs `before` once ahead of the next append (another writer getting in first). */
function racing(inner: EventStore): EventStore & { before: (() => Promise<void>) | null; reads: { fromRevision: number; returned: number }[] } {
  const store = {
    before: null as (() => Promise<void>) | null,
    reads: [] as { fromRevision: number; returned: number }[],
    async append(streamId: string, expectedRevision: number, events: readonly NewEvent[]) {
      const before = store.before;
      store.before = null;
      if (before !== null) await before();
      return inner.append(streamId, expectedRevision, events);
    },
    async read(streamId: string, options?: ReadOptions): Promise<StoredEvent[]> {
      const events = await inner.read(streamId, options);
      store.reads.push({ fromRevision: options?.fromRevision ?? 0, returned: events.length });
      return events;
    },
    revision: (streamId: string) => inner.revision(streamId),
    listStreams: (prefix?: string) => inner.listStreams(prefix),
    readAll: (...args: Parameters<EventStore['readAll']>) => inner.readAll(...args),
  };
  return store;
}

describe('LedgerStore (real SQLite)', () => {
  let dir: string;
  let storage: RunStorage;
  const stream = automergeStream(CHANGE);
  const command = (id: string, body: string, at: string): CommandDelivery => delivery(id, body, at);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'proofgate-ledger-'));
    storage = createLocalRunStorage({ directory: dir, namespace: 'automerge-ledger-test', policy: defaultStoragePolicy });
  });
  afterEach(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("two stores on one event store see each other's interleaved appends", async () => {
    const a = new LedgerStore(storage.eventStore);
    const b = new LedgerStore(storage.eventStore);
    // Both hold a fold of the change before the other writes.
    await a.load(CHANGE);
    await b.load(CHANGE);
    expect((await a.applyCommands(CHANGE, command('1', '/proofgate automerge', T1))).run.map((c) => c.kind)).toEqual(['automerge']);
    // b never read that append itself: a redelivery of the same comment version is still skipped.
    expect((await b.applyCommands(CHANGE, command('1', '/proofgate automerge', T1))).skipped).toBe('redelivery');
    await b.record(CHANGE, { type: 'review-dispatched', id: 'r1', head: HEAD, at: T1 });
    await a.step(CHANGE, 'checks-started', { head: HEAD });
    // The same outcome recorded by a after b did: not appended twice.
    const before = await storage.eventStore.revision(stream);
    await a.record(CHANGE, { type: 'review-dispatched', id: 'r1', head: HEAD, at: T1 });
    expect(await storage.eventStore.revision(stream)).toBe(before);
    await b.step(CHANGE, 'checks-finished', { head: HEAD });
    await a.record(CHANGE, { type: 'review-finished', id: 'r1', head: HEAD, verdict: 'CONFIRMED', at: T2 });
    await b.applyCommands(CHANGE, command('2', '/proofgate stop', T3));
    await a.step(CHANGE, 'decision', { kind: 'stop', code: 'stopped', reason: 'stopped by maintainer', head: HEAD });

    const [seenByA, seenByB, fresh] = await Promise.all([a.load(CHANGE), b.load(CHANGE), new LedgerStore(storage.eventStore).load(CHANGE)]);
    // Seven appends, and each that applied commands also recorded the lines its route is to run (`commands-routed`).
    expect(fresh.revision).toBe(9);
    for (const seen of [seenByA, seenByB]) {
      expect(seen.revision).toBe(fresh.revision);
      expect(seen.state).toEqual(fresh.state);
      expect(seen.steps).toEqual(fresh.steps);
      expect(seen.typedSteps).toEqual(fresh.typedSteps);
    }
    expect(fresh.state.reviews).toEqual([{ id: 'r1', head: HEAD, status: 'finished', verdict: 'CONFIRMED', at: T1 }]);
    expect(automergeActive(fresh.state)).toBe(false);
    expect(fresh.steps.map((step) => step.step)).toEqual(['commands-routed', 'checks-started', 'checks-finished', 'commands-routed', 'decision']);
    expect(fresh.steps.filter((step) => step.step === 'commands-routed').map((step) => [step.comment, step.lines])).toEqual([
      ['1', [1]],
      ['2', [1]],
    ]);
    expect(fresh.typedSteps.map((step) => step.step)).toEqual(['checks-started', 'checks-finished']);
  });

  it('reads only the events after the last revision it saw', async () => {
    const events = racing(storage.eventStore);
    const a = new LedgerStore(events);
    const b = new LedgerStore(storage.eventStore);
    for (let i = 0; i < 20; i += 1) await b.record(CHANGE, { type: 'note', id: `n${i}`, text: `note ${i}`, at: T1 });
    await a.load(CHANGE);
    expect(events.reads).toEqual([{ fromRevision: 0, returned: 20 }]);
    await b.step(CHANGE, 'checks-started', { head: HEAD });
    await a.step(CHANGE, 'checks-finished', { head: HEAD });
    const loaded = await a.load(CHANGE);
    // One read before the append (b's step) and one after it (a's own step, read back as stored).
    expect(events.reads.slice(1)).toEqual([
      { fromRevision: 20, returned: 1 },
      { fromRevision: 21, returned: 1 },
    ]);
    expect(loaded.revision).toBe(22);
    expect(loaded.state.timeline).toHaveLength(20);
  });

  it('an append decided on a revision another writer moved is refused and decided again on fresh state', async () => {
    const events = racing(storage.eventStore);
    const a = new LedgerStore(events);
    const b = new LedgerStore(storage.eventStore);
    await a.record(CHANGE, { type: 'note', id: 'n0', text: 'first', at: T1 });
    const seen: number[] = [];
    events.before = async () => {
      await b.record(CHANGE, { type: 'review-dispatched', id: 'r1', head: HEAD, at: T1 });
    };
    const state = await a.appendWith(CHANGE, (loaded) => {
      seen.push(loaded.revision);
      return { events: [{ id: `ams_${seen.length}`, type: 'step', data: { step: 'note-taken', at: T2 } }], result: loaded.state };
    });
    // The first decision was made at revision 1 and lost to b's append; the second saw b's record.
    expect(seen).toEqual([1, 2]);
    expect(state.reviews.map((r) => r.id)).toEqual(['r1']);
    const loaded = await a.load(CHANGE);
    expect(loaded.revision).toBe(3);
    expect(loaded.steps.map((step) => step.step)).toEqual(['note-taken']);

    // The store itself still fences: an append at a stale revision is REVISION_CONFLICT and stores nothing.
    const stale = await rejection(storage.eventStore.append(stream, 1, [{ id: 'late', type: 'step', data: { step: 'late', at: T3 } }]));
    expect(stale.code).toBe('REVISION_CONFLICT');
    expect(await storage.eventStore.revision(stream)).toBe(3);
  });

  it('gives up with REVISION_CONFLICT when every attempt loses the race', async () => {
    const events = racing(storage.eventStore);
    const a = new LedgerStore(events);
    const b = new LedgerStore(storage.eventStore);
    let attempts = 0;
    const result = a.appendWith(CHANGE, () => {
      attempts += 1;
      events.before = () => b.step(CHANGE, 'other-writer');
      return { events: [{ id: `mine_${attempts}`, type: 'step', data: { step: 'mine', at: T1 } }], result: null };
    });
    expect((await rejection(result)).code).toBe('REVISION_CONFLICT');
    expect(attempts).toBe(50);
    const loaded = await b.load(CHANGE);
    expect(loaded.steps.every((step) => step.step === 'other-writer')).toBe(true);
  });

  it('two stores recording the same outcome at once append it once', async () => {
    const a = new LedgerStore(storage.eventStore);
    const b = new LedgerStore(storage.eventStore);
    await Promise.all([a.load(CHANGE), b.load(CHANGE)]);
    const outcome: LedgerOutcome = { type: 'merge-failed', id: 'm1', head: HEAD, code: 'NOT_MERGEABLE', at: T1 };
    await Promise.all([a.record(CHANGE, outcome), b.record(CHANGE, outcome)]);
    expect(await storage.eventStore.revision(stream)).toBe(1);
    expect((await a.load(CHANGE)).state.mergeFailures).toHaveLength(1);
  });

  it('what a reader loaded does not change when the store reads later events', async () => {
    const a = new LedgerStore(storage.eventStore);
    await a.step(CHANGE, 'checks-started', { head: HEAD });
    const first = await a.load(CHANGE);
    await a.step(CHANGE, 'checks-finished', { head: HEAD });
    await a.record(CHANGE, { type: 'note', id: 'n1', text: 'later', at: T2 });
    const second = await a.load(CHANGE);
    expect(first.steps.map((step) => step.step)).toEqual(['checks-started']);
    expect(first.typedSteps.map((step) => step.step)).toEqual(['checks-started']);
    expect(first.state.timeline).toEqual([]);
    expect(first.revision).toBe(1);
    expect(second.steps.map((step) => step.step)).toEqual(['checks-started', 'checks-finished']);
    expect(second.state.timeline.map((entry) => entry.text)).toEqual(['later']);
  });

  const malformed: [string, NewEvent, RegExp][] = [
    [
      'a ledger record with a wrong field',
      { id: 'bad-note', type: 'ledger', data: { record: { type: 'note', id: 'n', text: 5, at: T1 } } },
      /ledger event bad-note \(change 42, revision 2\) is malformed at record\.text/,
    ],
    [
      'a ledger record of an unknown type',
      { id: 'bad-type', type: 'ledger', data: { record: { type: 'teleported', id: 'x', at: T1 } } },
      /ledger event bad-type .* is malformed at record\.type/,
    ],
    [
      'a command with a missing field',
      { id: 'bad-cmd', type: 'ledger', data: { record: { type: 'commands', delivery: { comment: { id: '1', author: 'm' }, commands: [] } } } },
      /malformed at record\.delivery\.comment\.updatedAt/,
    ],
    [
      'a lease with a wrong field',
      { id: 'bad-lease', type: 'lease', data: { owner: 'o', until: T1, released: 'yes' } },
      /lease event bad-lease .* is malformed at released/,
    ],
    [
      'a push intent whose new sha is not a sha',
      { id: 'bad-push', type: 'step', data: { step: 'repair-push', at: T1, repair: 'p1', branch: 'feature', oldSha: OLD_HEAD, newSha: 'HEAD~1', commits: [] } },
      /step event bad-push .* is malformed at newSha/,
    ],
    [
      'a verdict step without findings',
      {
        id: 'bad-verdict',
        type: 'step',
        data: { step: 'review-verdict', at: T1, review: 'r', head: HEAD, verdict: 'CONFIRMED', comment: 'c', reviewRef: 'r', run: null },
      },
      /malformed at findings/,
    ],
    ['a step without a time', { id: 'bad-step', type: 'step', data: { step: 'decision' } }, /step event bad-step .* is malformed at at/],
    ['an event of an unknown type', { id: 'bad-event', type: 'gossip', data: {} }, /event bad-event .* has unknown type gossip/],
  ];
  it.each(malformed)('%s is a typed error naming the event and the field, and nothing is appended after it', async (_name, event, message) => {
    const a = new LedgerStore(storage.eventStore);
    await a.step(CHANGE, 'checks-started', { head: HEAD });
    await storage.eventStore.append(stream, 1, [event]);
    for (const store of [a, new LedgerStore(storage.eventStore)]) {
      const error = await rejection(store.load(CHANGE));
      expect(error.code).toBe('INVALID_STORED_VALUE');
      expect(error.message).toMatch(message);
      expect(error.message).not.toContain('\n');
      // Nothing is decided on a stream that cannot be read.
      expect((await rejection(store.record(CHANGE, { type: 'note', id: 'n', text: 'x', at: T1 }))).code).toBe('INVALID_STORED_VALUE');
    }
    expect(await storage.eventStore.revision(stream)).toBe(2);
  });

  it('an event that would not read back is refused before it is stored', async () => {
    const a = new LedgerStore(storage.eventStore);
    const error = await rejection(a.step(CHANGE, 'repair-push', { repair: 'p1', branch: 'feature', oldSha: OLD_HEAD, newSha: 'not-a-sha', commits: [] }));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/step event for change 42 is malformed at newSha/);
    expect(await storage.eventStore.revision(stream)).toBe(0);
  });
});
