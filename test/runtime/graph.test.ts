import { describe, expect, it } from 'vitest';
import { compileGraph, dagGraphType, resolveGraphPlan } from '../../src/runtime/index.js';
import { dag, pkg, planFor, required } from './fixtures.js';

describe('compileGraph', () => {
  it('digests the canonical definition: key order does not matter, content does', () => {
    const a = dag([required('x'), required('y')]);
    const reordered = compileGraph(dagGraphType, {
      edges: [],
      nodes: [
        { data: { key: null, kind: 'required' }, id: 'x' },
        { id: 'y', data: { kind: 'required', key: null } },
      ],
      definitionVersion: 1,
      data: { retryCapPerNode: 0, stopOnError: true, keyedConcurrency: {}, globalConcurrency: 4 },
      id: 'test-graph',
    });
    expect(reordered.definitionDigest).toBe(a.definitionDigest);
    expect(dag([required('y'), required('x')]).definitionDigest).not.toBe(a.definitionDigest);
    expect(a.definitionDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('freezes a private copy of the definition', () => {
    const nodes = [required('x')];
    const graph = dag(nodes);
    expect(Object.isFrozen(graph.definition)).toBe(true);
    expect(Object.isFrozen(graph.definition.nodes[0]?.data)).toBe(true);
    expect(() => {
      (graph.definition.nodes as unknown as unknown[]).push(required('z'));
    }).toThrow(TypeError);
    expect(graph.type).toEqual({ id: 'dag', version: 1 });
  });

  it('describes the graph for planning', () => {
    const graph = dag([required('x'), required('y')], [{ from: 'x', to: 'y' }]);
    expect(graph.describe()).toMatchObject({
      typeId: 'dag',
      typeVersion: 1,
      graphId: 'test-graph',
      definitionDigest: graph.definitionDigest,
      nodes: [
        { id: 'x', dependsOn: [] },
        { id: 'y', dependsOn: ['x'] },
      ],
    });
  });

  it('refuses non-JSON definitions', () => {
    expect(() =>
      compileGraph(dagGraphType, {
        id: 'g',
        definitionVersion: 1,
        data: { globalConcurrency: 1, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: Number.NaN },
        nodes: [required('x')],
        edges: [],
      }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });
});

describe('resolveGraphPlan', () => {
  it('binds the graph digest and type version and digests the plan', () => {
    const graph = dag([required('x')]);
    const plan = planFor(graph);
    expect(plan.plan.graph.definitionDigest).toBe(graph.definitionDigest);
    expect(plan.plan.graph.typeVersion).toBe(1);
    expect(plan.digest).toMatch(/^sha256:/);
    expect(planFor(graph).digest).toBe(plan.digest);
    expect(planFor(graph, []).digest).not.toBe(plan.digest);
  });

  it('refuses an admission for another package, unknown lane nodes and duplicate permissions', () => {
    const graph = dag([required('x')]);
    const other = { ...pkg, version: '2.0.0' };
    expect(() => resolveGraphPlan(graph.describe(), { package: pkg, admission: { package: other, permissions: [] }, executionLanes: [] })).toThrow(
      /admission.package/,
    );
    expect(() =>
      resolveGraphPlan(graph.describe(), {
        package: pkg,
        admission: { package: pkg, permissions: [] },
        executionLanes: [{ id: 'l', engineId: 'e', nodeIds: ['nope'] }],
      }),
    ).toThrow(/unknown node/);
    const p = { name: 'n', scope: { a: 1, b: 2 } };
    expect(() =>
      resolveGraphPlan(graph.describe(), {
        package: pkg,
        admission: { package: pkg, permissions: [p, { name: 'n', scope: { b: 2, a: 1 } }] },
        executionLanes: [],
      }),
    ).toThrow(/repeats/);
  });
});
