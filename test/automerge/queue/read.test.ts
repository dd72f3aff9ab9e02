/**
 * The merge queue's read helpers (pure, tables): a change's queue history,
 * the candidate it is in and its checks, its view, and the stage a waiting
 * change shows on the dashboard.
 */
import { describe, expect, it } from 'vitest';
import {
  changeQueueView,
  describeQueueWait,
  foldQueue,
  parseQueueEvent,
  queueCandidateNow,
  queueCandidateOf,
  queueHistory,
  type QueueEvent,
} from '../../../src/automerge/queue/queue.js';
import { changeStage } from '../../../src/automerge/stage.js';
import { initialLedger } from '../../../src/automerge/ledger.js';

const at = '2026-01-01T00:00:00.000Z';
const sha = (n: number): string => n.toString(16).padStart(40, '0');
const failure = { check: 'test', conclusion: 'failure', log: 'artifact://x' };
const enq = (change: string, head = sha(Number(change))): QueueEvent => ({
  type: 'queue-enqueued',
  data: { change, head, title: `change ${change}`, approvedTrusted: [], at },
});
const candidate = (id: string, changes: string[]): QueueEvent => ({
  type: 'queue-candidate',
  data: { candidate: id, changes, base: sha(100), tip: sha(101), tree: sha(102), at },
});
const checked = (id: string, passed: boolean): QueueEvent => ({
  type: 'queue-checked',
  data: { candidate: id, tree: `cfg|${sha(102)}`, passed, reused: false, failure: passed ? null : failure, at },
});

/** A failing batch of three bisected: the first two land, the third is ejected. */
const STREAM: QueueEvent[] = [
  enq('1'),
  enq('2'),
  enq('1'), // the same head again: the fold ignores it, and so does the history
  enq('3'),
  { type: 'queue-lease', data: { owner: 'o', until: at, released: false } },
  candidate('c1', ['1', '2', '3']),
  checked('c1', false),
  { type: 'queue-bisect', data: { changes: ['1', '2', '3'], failure, at } },
  candidate('c2', ['1', '2']),
  checked('c2', true),
  {
    type: 'queue-landed',
    data: {
      candidate: 'c2',
      base: sha(100),
      tip: sha(103),
      changes: [
        { change: '1', head: sha(1), mergeCommit: sha(104) },
        { change: '2', head: sha(2), mergeCommit: sha(103) },
      ],
      at,
    },
  },
  candidate('c3', ['3']),
  checked('c3', false),
  { type: 'queue-ejected', data: { change: '3', head: sha(3), reason: 'check "test" failed; log: artifact://x', check: 'test', log: 'artifact://x', at } },
];

describe('queueHistory (pure)', () => {
  it.each([
    { change: '1', kinds: ['enqueued', 'candidate', 'checks', 'bisect', 'candidate', 'checks', 'landed'] },
    { change: '3', kinds: ['enqueued', 'candidate', 'checks', 'bisect', 'candidate', 'checks', 'ejected'] },
    { change: '9', kinds: [] },
  ])('change $change: $kinds', ({ change, kinds }) => {
    expect(queueHistory('main', STREAM, change).map((item) => item.kind)).toEqual(kinds);
  });

  it('names the candidate, its size and the place in it; checks per candidate; the commit landed', () => {
    const history = queueHistory('main', STREAM, '2');
    expect(history[1]).toMatchObject({ kind: 'candidate', candidate: 'c1', size: 3, index: 2 });
    expect(history[2]).toMatchObject({ kind: 'checks', candidate: 'c1', passed: false, failure });
    expect(history[6]).toMatchObject({ kind: 'landed', commit: sha(103), candidate: 'c2' });
  });
});

describe('queueCandidateOf (pure)', () => {
  const items = queueHistory('main', STREAM, '3');
  it.each([
    { name: 'queued, no candidate yet', upTo: 1, expected: null },
    { name: 'in a candidate whose checks run', upTo: 2, expected: { candidate: 'c1', size: 3, index: 3, checks: 'running', failure: null } },
    { name: 'its candidate failed', upTo: 3, expected: { candidate: 'c1', checks: 'failed', failure } },
    { name: 'in the next candidate, alone', upTo: 5, expected: { candidate: 'c3', size: 1, index: 1, checks: 'running' } },
    { name: 'ejected: in no candidate', upTo: 7, expected: null },
  ])('$name', ({ upTo, expected }) => {
    const found = queueCandidateOf(items.slice(0, upTo));
    if (expected === null) expect(found).toBeNull();
    else expect(found).toMatchObject(expected);
  });
});

describe('queueCandidateNow (pure)', () => {
  it.each([
    { upTo: 5, expected: null },
    { upTo: 6, expected: { candidate: 'c1', changes: ['1', '2', '3'], checks: 'running', failure: null } },
    { upTo: 7, expected: { candidate: 'c1', checks: 'failed', failure } },
    { upTo: 10, expected: { candidate: 'c2', changes: ['1', '2'], checks: 'passed' } },
    { upTo: 11, expected: null },
    { upTo: 13, expected: { candidate: 'c3', changes: ['3'], checks: 'failed' } },
    { upTo: 14, expected: null },
  ])('after $upTo events: $expected', ({ upTo, expected }) => {
    const events = STREAM.slice(0, upTo);
    const found = queueCandidateNow(foldQueue('main', events), events);
    if (expected === null) expect(found).toBeNull();
    else expect(found).toMatchObject(expected);
  });
});

describe('changeQueueView and the stage of a queued change (pure)', () => {
  const waiting = foldQueue('main', STREAM.slice(0, 7));
  it.each([
    { change: '2', state: waiting, view: { status: 'waiting', position: 2, of: 3, candidate: { candidate: 'c1', checks: 'failed' } } },
    { change: '1', state: foldQueue('main', STREAM), view: { status: 'landed', position: null, of: null, candidate: null } },
    { change: '9', state: waiting, view: null },
  ])('change $change', ({ change, state, view }) => {
    const found = changeQueueView(state, change, queueHistory('main', STREAM.slice(0, 7), change));
    if (view === null) expect(found).toBeNull();
    else expect(found).toMatchObject(view);
  });

  it('a change waiting in the queue is waiting on its place in line, before any other rule', () => {
    const view = changeQueueView(waiting, '2', queueHistory('main', STREAM.slice(0, 7), '2'));
    const stage = changeStage({
      forgeState: 'open',
      forgeMergeCommit: null,
      automergeOn: true,
      ledger: initialLedger('2'),
      steps: [{ step: 'decision', at, kind: 'merge', reason: 'ready' }],
      queue: view,
    });
    expect(stage).toEqual({ stage: 'waiting', detail: 'merge queue (position 2 of 3, base main); in candidate c1, checks failed', code: 'merge-queued' });
    expect(changeStage({ forgeState: 'open', forgeMergeCommit: null, automergeOn: true, ledger: initialLedger('2'), steps: [], queue: null }).stage).toBe(
      'arriving',
    );
  });

  it.each([
    [1, 1, false, null, 'merge queue (position 1 of 1, base main)'],
    [2, 5, true, null, 'merge queue (position 2 of 5, base main); the queue is paused'],
  ] as const)('describeQueueWait(%d, %d, paused %s)', (position, of, paused, inCandidate, text) => {
    expect(describeQueueWait('main', position, of, paused, inCandidate)).toBe(text);
  });
});

describe('parseQueueEvent (pure)', () => {
  it.each([
    ['queue-paused', { by: 'tess', at }, true],
    ['queue-paused', { by: 'tess' }, false],
    ['queue-unknown', {}, false],
  ] as const)('%s %j: %s', (type, data, valid) => {
    expect(parseQueueEvent(type, data) !== null).toBe(valid);
  });
});
