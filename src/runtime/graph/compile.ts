import { ProofgateError, canonicalJson, deepFreeze, digestJson, isProofgateError } from '../../core/index.js';
import type { CompiledGraph, GraphCommand, GraphDefinition, GraphDefinitionInput, GraphType } from './contract.js';

/** Graph ids, node ids: letters, digits, `.`, `_`, `-`; no `/` so positions stay unambiguous. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function fail(message: string): never {
  throw new ProofgateError('INVALID_INPUT', `graph definition: ${message}`);
}

function checkShape<D, N>(definition: GraphDefinitionInput<D, N>): void {
  if (definition === null || typeof definition !== 'object') fail('must be an object');
  const keys = Object.keys(definition).sort().join(',');
  if (keys !== 'data,definitionVersion,edges,id,nodes') fail(`expected keys data, definitionVersion, edges, id, nodes (got ${keys})`);
  if (typeof definition.id !== 'string' || !NAME.test(definition.id)) fail('id must match [A-Za-z0-9][A-Za-z0-9._-]*');
  if (!Number.isSafeInteger(definition.definitionVersion) || definition.definitionVersion < 1) fail('definitionVersion must be a positive integer');
  if (!Array.isArray(definition.nodes) || definition.nodes.length === 0) fail('nodes must be a nonempty array');
  if (!Array.isArray(definition.edges)) fail('edges must be an array');
  const ids = new Set<string>();
  for (const node of definition.nodes) {
    if (node === null || typeof node !== 'object') fail('each node must be an object');
    if (Object.keys(node).sort().join(',') !== 'data,id') fail('each node has exactly the keys id and data');
    if (typeof node.id !== 'string' || !NAME.test(node.id)) fail(`node id ${JSON.stringify(node.id)} must match [A-Za-z0-9][A-Za-z0-9._-]*`);
    if (ids.has(node.id)) fail(`node id ${node.id} is declared twice`);
    ids.add(node.id);
  }
  const edges = new Set<string>();
  for (const edge of definition.edges) {
    if (edge === null || typeof edge !== 'object' || Object.keys(edge).sort().join(',') !== 'from,to') fail('each edge has exactly the keys from and to');
    if (!ids.has(edge.from)) fail(`edge from unknown node ${JSON.stringify(edge.from)}`);
    if (!ids.has(edge.to)) fail(`edge to unknown node ${JSON.stringify(edge.to)}`);
    if (edge.from === edge.to) fail(`node ${edge.from} depends on itself`);
    const key = `${edge.from}\u0000${edge.to}`;
    if (edges.has(key)) fail(`edge ${edge.from} -> ${edge.to} is declared twice`);
    edges.add(key);
  }
}

function checkCommands(graphId: string, commands: readonly GraphCommand[]): readonly GraphCommand[] {
  const positions = new Set<string>();
  let terminal = 0;
  for (const command of commands) {
    if (command.kind === 'dispatch') {
      if (positions.has(command.position)) {
        throw new ProofgateError('INTERNAL', `graph ${graphId}: decide returned position ${command.position} twice`);
      }
      positions.add(command.position);
    } else {
      terminal += 1;
    }
  }
  if (terminal > 0 && (terminal !== 1 || commands.length !== 1)) {
    throw new ProofgateError('INTERNAL', `graph ${graphId}: decide must return dispatches or exactly one pause/complete/fail`);
  }
  return deepFreeze(commands);
}

/**
 * Validate a definition against its graph type, deep-freeze a private copy and
 * bind the type's pure functions to it. The definition digest is the sha256 of
 * its RFC 8785 bytes, so key order never changes it.
 */
export function compileGraph<D, N, S>(type: GraphType<D, N, S>, definition: GraphDefinitionInput<D, N>): CompiledGraph<D, N, S> {
  checkShape(definition);
  let copy: GraphDefinition<D, N>;
  try {
    copy = deepFreeze(JSON.parse(canonicalJson(definition)) as GraphDefinition<D, N>);
  } catch (error) {
    if (isProofgateError(error, 'NON_JSON_VALUE')) fail(error.message);
    throw error;
  }
  type.validate(copy);
  const definitionDigest = digestJson(copy);
  const nodeIds = new Set(copy.nodes.map((node) => node.id));
  const description = deepFreeze(type.describe(copy, definitionDigest));
  return Object.freeze({
    type: Object.freeze({ id: type.id, version: type.version }),
    definition: copy,
    definitionDigest,
    initialState: () => type.initialState(copy),
    reduce: (state: S, event: Parameters<GraphType<D, N, S>['reduce']>[2]) => type.reduce(copy, state, event),
    decide: (state: S) => checkCommands(copy.id, type.decide(copy, state)),
    describe: () => description,
    hasNode: (nodeId: string) => nodeIds.has(nodeId),
  });
}
