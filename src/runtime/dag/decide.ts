import type { GraphCommand } from '../graph/contract.js';
import { dagIndex, dagPosition, type DagDefinition } from './definition.js';
import { DAG_CHUNK_SIZE, dagNodeState, type DagState } from './state.js';

export type DagNodeView =
  { readonly status: 'ready' | 'blocked' | 'running' | 'completed' | 'paused' } | { readonly status: 'failed' | 'skipped'; readonly reason: string };

const TERMINAL = new Set(['completed', 'failed', 'skipped']);

/** Derive each node's current standing from the recorded facts (pure). */
export function classifyDag(definition: DagDefinition, state: DagState): ReadonlyMap<string, DagNodeView> {
  const index = dagIndex(definition);
  const views = new Map<string, DagNodeView>();
  const resolve = (id: string): DagNodeView => {
    const known = views.get(id);
    if (known) return known;
    const view = classifyNode(id);
    views.set(id, view);
    return view;
  };
  const classifyNode = (id: string): DagNodeView => {
    const node = dagNodeState(definition, state, id);
    const kind = index.data.get(id)?.kind;
    if (!node) return { status: 'blocked' };
    if (node.status === 'failed') return { status: 'failed', reason: node.reason ?? 'failed' };
    if (node.status !== 'idle') return { status: node.status };
    const deps = (index.dependsOn.get(id) ?? []).map((dep) => ({ dep, view: resolve(dep) }));
    if (kind === 'finalizer') {
      const othersDone = index.order.every((other) => index.data.get(other)?.kind === 'finalizer' || TERMINAL.has(resolve(other).status));
      const depsDone = deps.every(({ view }) => TERMINAL.has(view.status));
      return { status: othersDone && depsDone ? 'ready' : 'blocked' };
    }
    const broken = deps.find(({ view }) => view.status === 'failed' || view.status === 'skipped');
    if (broken) return { status: 'skipped', reason: `dependency ${broken.dep} did not complete` };
    if (state.stoppedBy !== null) return { status: 'skipped', reason: `stopped after ${state.stoppedBy} failed` };
    return { status: deps.every(({ view }) => view.status === 'completed') ? 'ready' : 'blocked' };
  };
  for (const id of index.order) resolve(id);
  return views;
}

/**
 * Next commands: ready nodes in declaration order within the global and keyed
 * limits; else nothing while attempts run; else pause, complete or fail.
 *
 * While some non-finalizer node is still running, paused or ready, no
 * finalizer can be ready, so the ready nodes are exactly the state's ready
 * candidates (when no node stopped the run) and the counters kept by `reduce`
 * answer without looking at every node. Otherwise every node is classified.
 */
export function decideDag(definition: DagDefinition, state: DagState): readonly GraphCommand[] {
  const index = dagIndex(definition);
  const candidates = state.stoppedBy === null ? state.candidates : 0;
  if (index.hasFinalizers && state.activeNonFinalizers === 0 && candidates === 0) return decideByClassification(definition, state);
  const { globalConcurrency, keyedConcurrency } = definition.data;
  let running = state.running;
  let perKey: number[] | null = null;
  const dispatches: GraphCommand[] = [];
  for (let c = 0; c < state.chunks.length && candidates > 0 && running < globalConcurrency; c += 1) {
    const chunk = state.chunks[c];
    if (!chunk || chunk.candidates === 0) continue;
    for (let at = 0; at < chunk.nodes.length && running < globalConcurrency; at += 1) {
      const node = chunk.nodes[at];
      const slot = index.slots[c * DAG_CHUNK_SIZE + at];
      if (!node || !slot || node.status !== 'idle' || chunk.waiting[at] !== 0 || slot.kind === 'finalizer') continue;
      if (slot.keySlot >= 0) {
        perKey ??= [...state.runningByKey];
        const busy = perKey[slot.keySlot] ?? 0;
        if (busy >= (keyedConcurrency[index.keys[slot.keySlot] ?? ''] ?? 0)) continue;
        perKey[slot.keySlot] = busy + 1;
      }
      const attempt = node.attempt + 1;
      dispatches.push({ kind: 'dispatch', position: dagPosition(slot.id, attempt), nodeId: slot.id, attempt });
      running += 1;
    }
  }
  if (dispatches.length > 0 || running > 0) return dispatches;
  return decideByClassification(definition, state);
}

/** `decideDag` from a classification of every node. */
function decideByClassification(definition: DagDefinition, state: DagState): readonly GraphCommand[] {
  const index = dagIndex(definition);
  const views = classifyDag(definition, state);
  const { globalConcurrency, keyedConcurrency } = definition.data;
  let running = 0;
  const perKey = new Map<string, number>();
  for (const id of index.order) {
    if (views.get(id)?.status !== 'running') continue;
    running += 1;
    const key = index.data.get(id)?.key;
    if (key != null) perKey.set(key, (perKey.get(key) ?? 0) + 1);
  }
  const dispatches: GraphCommand[] = [];
  for (const id of index.order) {
    if (running >= globalConcurrency) break;
    if (views.get(id)?.status !== 'ready') continue;
    const key = index.data.get(id)?.key ?? null;
    if (key !== null && (perKey.get(key) ?? 0) >= (keyedConcurrency[key] ?? 0)) continue;
    const attempt = (dagNodeState(definition, state, id)?.attempt ?? 0) + 1;
    dispatches.push({ kind: 'dispatch', position: dagPosition(id, attempt), nodeId: id, attempt });
    running += 1;
    if (key !== null) perKey.set(key, (perKey.get(key) ?? 0) + 1);
  }
  if (dispatches.length > 0 || running > 0) return dispatches;
  const paused = index.order.filter((id) => views.get(id)?.status === 'paused');
  if (paused.length > 0) {
    const reasons = paused.map((id) => `${id}: ${dagNodeState(definition, state, id)?.reason ?? 'paused'}`);
    return [{ kind: 'pause', reason: `paused nodes (${reasons.join('; ')})` }];
  }
  const broken: string[] = [];
  for (const id of index.order) {
    const view = views.get(id);
    const kind = index.data.get(id)?.kind;
    if (kind === 'optional' || !view || (view.status !== 'failed' && view.status !== 'skipped')) continue;
    broken.push(`${id} ${view.status}: ${view.reason}`);
  }
  if (broken.length > 0) return [{ kind: 'fail', reason: broken.join('; ') }];
  const optionalLost = index.order.filter((id) => {
    const status = views.get(id)?.status;
    return status === 'failed' || status === 'skipped';
  });
  const note = optionalLost.length > 0 ? ` (optional not completed: ${optionalLost.join(', ')})` : '';
  return [{ kind: 'complete', reason: `all required nodes completed${note}` }];
}
