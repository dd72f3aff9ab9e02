import { describe, expect, it } from 'vitest';
import { foldQueue, initialQueue, nextBatch, queuePosition, unattendedQueueHead, type QueueEvent } from '../../../src/automerge/queue/queue.js';
import { queuedReason, queueSettings } from '../../../src/automerge/queue/step.js';
import { unapprovedTrusted } from '../../../src/automerge/queue/runner.js';
import { emptyRepoConfig, parseRepoConfig } from '../../../src/contracts/repo-config.js';

const at = '2026-01-01T00:00:00.000Z';
const sha = (n: number): string => n.toString(16).padStart(40, '0');
const failure = { check: 'test', conclusion: 'failure', log: null };
const enq = (change: string, head = sha(Number(change))): QueueEvent => ({
  type: 'queue-enqueued',
  data: { change, head, title: `change ${change}`, approvedTrusted: [], at },
});

function fold(...events: QueueEvent[]) {
  return foldQueue('main', events);
}

describe('foldQueue (pure)', () => {
  it.each([
    { name: 'enqueued in order', events: [enq('1'), enq('2'), enq('3')], waiting: ['1', '2', '3'] },
    { name: 'enqueuing the same head again changes nothing', events: [enq('1'), enq('2'), enq('1')], waiting: ['1', '2'] },
    { name: 'a new head goes to the back of the line', events: [enq('1'), enq('2'), enq('1', sha(99))], waiting: ['2', '1'] },
    {
      name: 'removed, ejected and landed changes leave',
      events: [
        enq('1'),
        enq('2'),
        enq('3'),
        enq('4'),
        { type: 'queue-removed', data: { change: '2', head: sha(2), code: 'HEAD_MOVED', reason: 'moved', at } },
        { type: 'queue-ejected', data: { change: '3', head: sha(3), reason: 'check failed', check: 'test', log: null, at } },
        { type: 'queue-landed', data: { candidate: 'c', base: sha(100), tip: sha(101), changes: [{ change: '1', head: sha(1), mergeCommit: sha(101) }], at } },
      ] as QueueEvent[],
      waiting: ['4'],
    },
  ])('$name', ({ events, waiting }) => {
    expect(fold(...events).entries.map((entry) => entry.change)).toEqual(waiting);
  });

  it('counts revisions, keeps outcomes and clears an outcome when the change is queued again', () => {
    const ejected: QueueEvent = { type: 'queue-ejected', data: { change: '1', head: sha(1), reason: 'r', check: 'test', log: 'L', at } };
    const state = fold(enq('1'), ejected);
    expect(state.revision).toBe(2);
    expect(queuePosition(state, '1')).toEqual({
      kind: 'left',
      outcome: { kind: 'ejected', change: '1', head: sha(1), reason: 'r', check: 'test', log: 'L', at },
    });
    expect(queuePosition(foldQueue('main', [enq('1')], state), '1')).toEqual({ kind: 'waiting', position: 1, of: 1, head: sha(1) });
    expect(queuePosition(state, '7')).toEqual({ kind: 'absent' });
  });

  it('pause and resume; the lease is the latest lease event', () => {
    const paused = fold({ type: 'queue-paused', data: { by: 'Tess', at } }, { type: 'queue-lease', data: { owner: 'o', until: at, released: false } });
    expect(paused.paused).toEqual({ by: 'Tess', at });
    expect(paused.lease).toEqual({ owner: 'o', until: at, released: false });
    expect(foldQueue('main', [{ type: 'queue-resumed', data: { by: 'Tess', at } }], paused).paused).toBeNull();
  });
});

describe('nextBatch (pure)', () => {
  const four = [enq('1'), enq('2'), enq('3'), enq('4'), enq('5')];
  it.each([
    { name: 'an empty queue builds nothing', events: [], size: 4, batch: null },
    { name: 'the first batchSize changes', events: four, size: 4, batch: ['1', '2', '3', '4'] },
    { name: 'batch size 1: one change at a time', events: four, size: 1, batch: ['1'] },
    { name: 'a paused queue builds nothing', events: [...four, { type: 'queue-paused', data: { by: 'T', at } }], size: 4, batch: null },
    {
      name: 'while bisecting: the first half of the suspects',
      events: [...four, { type: 'queue-bisect', data: { changes: ['1', '2', '3', '4'], failure, at } }],
      size: 4,
      batch: ['1', '2'],
    },
    {
      name: 'after the first half landed: the first half of what is left',
      events: [
        ...four,
        { type: 'queue-bisect', data: { changes: ['1', '2', '3', '4'], failure, at } },
        {
          type: 'queue-landed',
          data: {
            candidate: 'c',
            base: sha(100),
            tip: sha(101),
            changes: [
              { change: '1', head: sha(1), mergeCommit: sha(101) },
              { change: '2', head: sha(2), mergeCommit: sha(102) },
            ],
            at,
          },
        },
      ],
      size: 4,
      batch: ['3'],
    },
    {
      name: 'after the culprit was ejected: a normal batch again',
      events: [
        ...four,
        { type: 'queue-bisect', data: { changes: ['1', '2'], failure, at } },
        { type: 'queue-ejected', data: { change: '1', head: sha(1), reason: 'r', check: 'test', log: null, at } },
      ],
      size: 4,
      batch: ['2', '3', '4', '5'],
    },
    {
      name: 'a flaky report ends the bisection',
      events: [
        ...four,
        { type: 'queue-bisect', data: { changes: ['1', '2'], failure, at } },
        { type: 'queue-flaky', data: { changes: ['1', '2'], failure, at } },
      ],
      size: 2,
      batch: ['1', '2'],
    },
  ] as { name: string; events: QueueEvent[]; size: number; batch: string[] | null }[])('$name', ({ events, size, batch }) => {
    expect(nextBatch(fold(...events), size)?.map((entry) => entry.change) ?? null).toEqual(batch);
  });

  it('an initial queue is empty and unpaused', () => {
    expect(initialQueue('main')).toMatchObject({ base: 'main', revision: 0, entries: [], paused: null, suspects: null });
  });
});

describe('unattendedQueueHead (pure): who should run a queue nobody runs', () => {
  const now = Date.parse(at);
  const lease = (owner: string, until: number, released = false): QueueEvent => ({
    type: 'queue-lease',
    data: { owner, until: new Date(until).toISOString(), released },
  });
  const alive = (): boolean => false;
  it.each([
    { name: 'an empty queue: nobody', events: [] as QueueEvent[], head: null },
    { name: 'waiting, never leased: the first in line', events: [enq('1'), enq('2')], head: '1' },
    { name: 'a live lease: the holder runs it', events: [enq('1'), enq('2'), lease('h:1:x', now + 10_000)], head: null },
    { name: 'a released lease: the first in line', events: [enq('1'), lease('h:1:x', now + 10_000, true)], head: '1' },
    { name: 'a lease run out: the first in line', events: [enq('1'), lease('h:1:x', now - 1)], head: '1' },
    { name: 'paused: nobody', events: [enq('1'), { type: 'queue-paused', data: { by: 'm', at } }] as QueueEvent[], head: null },
  ])('$name', ({ events, head }) => {
    expect(unattendedQueueHead(fold(...events), now, alive)).toBe(head);
  });

  it('a live lease whose holder is gone (a killed process of this host): the first in line', () => {
    const state = fold(enq('3'), lease('h:42:x', now + 10_000));
    expect(unattendedQueueHead(state, now, (held) => held.owner === 'h:42:x')).toBe('3');
  });
});

describe('queue settings and the trust rule in the queue (pure)', () => {
  it.each([
    [{}, { enabled: true, batchSize: 4 }],
    [{ automerge: { queue: { batchSize: 1 } } }, { enabled: true, batchSize: 1 }],
    [{ automerge: { queue: { enabled: false } } }, { enabled: false, batchSize: 4 }],
    [{ automerge: { mergeMethod: 'merge' } }, { enabled: false, batchSize: 4 }],
  ])('%j -> %j', (raw, settings) => {
    expect(queueSettings(parseRepoConfig(raw, 'test'))).toEqual(settings);
  });

  it('the position line', () => {
    expect(queuedReason('main', 2, 5, false)).toBe('in the merge queue of main: position 2 of 5');
    expect(queuedReason('main', 1, 1, true)).toContain('paused');
  });

  it('a squash touching trusted paths needs them approved for that entry', () => {
    const config = parseRepoConfig({ checks: [{ name: 'test', run: 'node check.mjs' }] }, 'test');
    const candidate = {
      baseRef: 'main',
      baseSha: sha(1),
      tip: sha(3),
      tree: sha(4),
      configKey: 'none',
      commits: [
        { changeId: '1', headSha: sha(11), commit: sha(2), tree: sha(5), paths: ['a.txt'] },
        { changeId: '2', headSha: sha(12), commit: sha(3), tree: sha(4), paths: ['check.mjs', '.proofgate.yml'] },
      ],
    };
    const entry = (change: string, approvedTrusted: string[]) => ({ change, head: sha(10 + Number(change)), title: '', approvedTrusted, at });
    expect(unapprovedTrusted(candidate, [entry('1', []), entry('2', [])], config)).toEqual({
      change: '2',
      head: sha(12),
      paths: ['.proofgate.yml', 'check.mjs'],
    });
    expect(unapprovedTrusted(candidate, [entry('1', []), entry('2', ['check.mjs', '.proofgate.yml'])], config)).toBeNull();
    expect(unapprovedTrusted(candidate, [entry('1', []), entry('2', ['check.mjs'])], emptyRepoConfig())).toEqual({
      change: '2',
      head: sha(12),
      paths: ['.proofgate.yml'],
    });
  });
});
