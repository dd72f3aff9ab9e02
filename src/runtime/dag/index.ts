import type { GraphType } from '../graph/contract.js';
import { decideDag } from './decide.js';
import { dagIndex, indexDag, type DagGraphData, type DagNodeData } from './definition.js';
import { initialDagState, reduceDag, type DagState } from './state.js';

export type { DagGraphData, DagNodeData, DagNodeKind, DagDefinition } from './definition.js';
export { dagPosition, parseDagPosition } from './definition.js';
export { dagNodeState, type DagState, type DagNodeState } from './state.js';
export { classifyDag, type DagNodeView } from './decide.js';

/**
 * The DAG graph type: edges are dependencies, nodes are required, optional or
 * finalizers, positions are `dag/<node>/<attempt>`.
 */
const dag: GraphType<DagGraphData, DagNodeData, DagState> = {
  id: 'dag',
  version: 1,
  validate: (definition) => {
    indexDag(definition);
  },
  initialState: initialDagState,
  reduce: reduceDag,
  decide: decideDag,
  describe: (definition, definitionDigest) => {
    const index = dagIndex(definition);
    return {
      typeId: 'dag',
      typeVersion: 1,
      graphId: definition.id,
      definitionVersion: definition.definitionVersion,
      definitionDigest,
      nodes: index.order.map((id) => {
        const data = index.data.get(id);
        return { id, summary: { kind: data?.kind ?? 'required', key: data?.key ?? null }, dependsOn: [...(index.dependsOn.get(id) ?? [])] };
      }),
    };
  },
};

export const dagGraphType: GraphType<DagGraphData, DagNodeData, DagState> = Object.freeze(dag);
