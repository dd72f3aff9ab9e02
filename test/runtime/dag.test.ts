import { describe, expect, it } from 'vitest';
import { compileGraph, dagGraphType, type GraphCommand, type GraphEvent } from '../../src/runtime/index.js';
import { dag, finalizer, optional, required, type DagGraph } from './fixtures.js';

type Step = ['d', string, number] | ['ok', string, number] | ['fail', string, number] | ['pause', string, number] | ['int', string, number];

function replay(graph: DagGraph, steps: readonly Step[]) {
  let state = graph.initialState();
  for (const [kind, nodeId, attempt] of steps) {
    const position = `dag/${nodeId}/${attempt}`;
    const event: GraphEvent =
      kind === 'd'
        ? { kind: 'dispatched', position, nodeId }
        : kind === 'ok'
          ? { kind: 'completed', position, nodeId, result: { ok: true } }
          : kind === 'fail'
            ? { kind: 'failed', position, nodeId, reason: 'boom' }
            : kind === 'pause'
              ? { kind: 'paused', position, nodeId, reason: 'needs a human' }
              : { kind: 'interrupted', position, nodeId, reason: 'aborted' };
    state = graph.reduce(state, event);
  }
  return state;
}

function summary(commands: readonly GraphCommand[]): string[] {
  return commands.map((command) => (command.kind === 'dispatch' ? command.position : `${command.kind}: ${command.reason}`));
}

const chain = dag(
  [required('a'), required('b'), required('c')],
  [
    { from: 'a', to: 'b' },
    { from: 'b', to: 'c' },
  ],
);
const fan = dag([required('a'), required('b'), required('c'), required('d')], [], { globalConcurrency: 2 });
const keyed = dag([required('a', 'gpu'), required('b', 'gpu'), required('c', null), required('d', 'gpu')], [], {
  globalConcurrency: 3,
  keyedConcurrency: { gpu: 1 },
});
const withFinal = dag([required('a'), optional('o'), finalizer('f')], []);
const retrying = dag([required('a')], [], { retryCapPerNode: 1 });
const noStop = dag([required('a'), required('b'), required('c')], [{ from: 'a', to: 'c' }], { stopOnError: false, globalConcurrency: 1 });
const stopping = dag([required('a'), required('b'), finalizer('f')], [], { stopOnError: true, globalConcurrency: 1 });

describe('dag decide (table)', () => {
  const cases: { name: string; graph: DagGraph; steps: Step[]; expected: string[] }[] = [
    { name: 'chain starts at its root', graph: chain, steps: [], expected: ['dag/a/1'] },
    { name: 'nothing while the root runs', graph: chain, steps: [['d', 'a', 1]], expected: [] },
    {
      name: 'dependent follows completion',
      graph: chain,
      steps: [
        ['d', 'a', 1],
        ['ok', 'a', 1],
      ],
      expected: ['dag/b/1'],
    },
    {
      name: 'dependent of a failed node is skipped, run fails',
      graph: chain,
      steps: [
        ['d', 'a', 1],
        ['fail', 'a', 1],
      ],
      expected: ['fail: a failed: boom; b skipped: dependency a did not complete; c skipped: dependency b did not complete'],
    },
    { name: 'global limit in declaration order', graph: fan, steps: [], expected: ['dag/a/1', 'dag/b/1'] },
    {
      name: 'freed slot goes to the next declared node',
      graph: fan,
      steps: [
        ['d', 'a', 1],
        ['d', 'b', 1],
        ['ok', 'b', 1],
      ],
      expected: ['dag/c/1'],
    },
    { name: 'keyed limit skips to an unkeyed node', graph: keyed, steps: [], expected: ['dag/a/1', 'dag/c/1'] },
    {
      name: 'keyed slot reopens',
      graph: keyed,
      steps: [
        ['d', 'a', 1],
        ['d', 'c', 1],
        ['ok', 'a', 1],
      ],
      expected: ['dag/b/1'],
    },
    { name: 'finalizer waits for the others', graph: withFinal, steps: [], expected: ['dag/a/1', 'dag/o/1'] },
    {
      name: 'finalizer runs after an optional failure',
      graph: withFinal,
      steps: [
        ['d', 'a', 1],
        ['d', 'o', 1],
        ['ok', 'a', 1],
        ['fail', 'o', 1],
      ],
      expected: ['dag/f/1'],
    },
    {
      name: 'optional failure still completes',
      graph: withFinal,
      steps: [
        ['d', 'a', 1],
        ['d', 'o', 1],
        ['ok', 'a', 1],
        ['fail', 'o', 1],
        ['d', 'f', 1],
        ['ok', 'f', 1],
      ],
      expected: ['complete: all required nodes completed (optional not completed: o)'],
    },
    {
      name: 'retry gets the next attempt position',
      graph: retrying,
      steps: [
        ['d', 'a', 1],
        ['fail', 'a', 1],
      ],
      expected: ['dag/a/2'],
    },
    {
      name: 'retry cap exhausted fails',
      graph: retrying,
      steps: [
        ['d', 'a', 1],
        ['fail', 'a', 1],
        ['d', 'a', 2],
        ['fail', 'a', 2],
      ],
      expected: ['fail: a failed: boom'],
    },
    {
      name: 'interruption does not count against the cap',
      graph: chain,
      steps: [
        ['d', 'a', 1],
        ['int', 'a', 1],
      ],
      expected: ['dag/a/2'],
    },
    {
      name: 'pause when only a paused node remains',
      graph: chain,
      steps: [
        ['d', 'a', 1],
        ['pause', 'a', 1],
      ],
      expected: ['pause: paused nodes (a: needs a human)'],
    },
    {
      name: 'stopOnError false keeps independent work going',
      graph: noStop,
      steps: [
        ['d', 'a', 1],
        ['fail', 'a', 1],
      ],
      expected: ['dag/b/1'],
    },
    {
      name: 'stopOnError skips the rest but runs finalizers',
      graph: stopping,
      steps: [
        ['d', 'a', 1],
        ['fail', 'a', 1],
      ],
      expected: ['dag/f/1'],
    },
    {
      name: 'stopped run fails after finalizers',
      graph: stopping,
      steps: [
        ['d', 'a', 1],
        ['fail', 'a', 1],
        ['d', 'f', 1],
        ['ok', 'f', 1],
      ],
      expected: ['fail: a failed: boom; b skipped: stopped after a failed'],
    },
    {
      name: 'all done completes',
      graph: chain,
      steps: [
        ['d', 'a', 1],
        ['ok', 'a', 1],
        ['d', 'b', 1],
        ['ok', 'b', 1],
        ['d', 'c', 1],
        ['ok', 'c', 1],
      ],
      expected: ['complete: all required nodes completed'],
    },
  ];
  for (const { name, graph, steps, expected } of cases) {
    it(name, () => {
      expect(summary(graph.decide(replay(graph, steps)))).toEqual(expected);
    });
  }

  it('never re-issues a recorded dispatch', () => {
    const state = replay(fan, [['d', 'a', 1]]);
    expect(summary(fan.decide(state))).toEqual(['dag/b/1']);
  });

  it('refuses facts that do not follow the record', () => {
    expect(() => replay(chain, [['ok', 'a', 1]])).toThrow(expect.objectContaining({ code: 'INVALID_STORED_VALUE' }));
    expect(() => replay(chain, [['d', 'a', 2]])).toThrow(expect.objectContaining({ code: 'INVALID_STORED_VALUE' }));
    expect(() =>
      replay(chain, [
        ['d', 'a', 1],
        ['d', 'a', 1],
      ]),
    ).toThrow(expect.objectContaining({ code: 'INVALID_STORED_VALUE' }));
  });
});

describe('dag compile errors', () => {
  const base = { id: 'g', definitionVersion: 1, data: { globalConcurrency: 1, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: 0 } };
  const cases: { name: string; definition: Parameters<typeof compileGraph<unknown, unknown, unknown>>[1]; message: RegExp }[] = [
    {
      name: 'cycle',
      definition: {
        ...base,
        nodes: [required('a'), required('b')],
        edges: [
          { from: 'a', to: 'b' },
          { from: 'b', to: 'a' },
        ],
      },
      message: /cycle/,
    },
    { name: 'key without limit', definition: { ...base, nodes: [required('a', 'gpu')], edges: [] }, message: /no limit/ },
    { name: 'unknown edge node', definition: { ...base, nodes: [required('a')], edges: [{ from: 'a', to: 'x' }] }, message: /unknown node/ },
    { name: 'duplicate node', definition: { ...base, nodes: [required('a'), required('a')], edges: [] }, message: /twice/ },
    { name: 'slash in node id', definition: { ...base, nodes: [required('a/b')], edges: [] }, message: /must match/ },
    {
      name: 'zero concurrency',
      definition: { ...base, data: { ...base.data, globalConcurrency: 0 }, nodes: [required('a')], edges: [] },
      message: /globalConcurrency/,
    },
    { name: 'bad kind', definition: { ...base, nodes: [{ id: 'a', data: { kind: 'sometimes', key: null } }], edges: [] }, message: /kind/ },
    { name: 'depends on finalizer', definition: { ...base, nodes: [finalizer('f'), required('a')], edges: [{ from: 'f', to: 'a' }] }, message: /finalizer/ },
    { name: 'extra data key', definition: { ...base, data: { ...base.data, extra: 1 }, nodes: [required('a')], edges: [] }, message: /exactly/ },
  ];
  for (const { name, definition, message } of cases) {
    it(name, () => {
      let caught: unknown;
      try {
        compileGraph(dagGraphType, definition as never);
      } catch (error) {
        caught = error;
      }
      expect(caught).toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(message) });
    });
  }
});
