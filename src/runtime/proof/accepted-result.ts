import { ProofgateError, canonicalBytes, canonicalJson, deepFreeze, digestHex, digestJson, isProofgateError, sha256Digest } from '../../core/index.js';
import type { JsonValue } from '../../core/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import type { GraphPlan } from '../plan/types.js';
import { checkRunId, readRunEvents, runStartedOf, runStreamId, type RunEvent } from '../run/stream.js';
import { checkBindingShape, checkStoredRecord, graphMatchesPlan, judgeAcceptedResult } from './accepted-check.js';
import type { AcceptedResultBinding, AcceptedResultQuery, AcceptedResultRecord, AcceptedResultResolution } from './accepted-types.js';
import { completionAt, sameJson } from './completion.js';

export const ACCEPTED_RESULT_EVENT = 'accepted-result-recorded';

export function acceptedStreamId(runId: string, position: string): string {
  return `${runStreamId(runId)}/accepted/${position}`;
}

async function loadRun(storage: RunStorage, runId: string): Promise<{ events: RunEvent[]; plan: GraphPlan; planDigest: string }> {
  const events = await readRunEvents(storage.eventStore, runId);
  const started = runStartedOf(events, runId);
  return { events, plan: started.data.resolvedPlan.plan as GraphPlan, planDigest: started.data.resolvedPlan.digest };
}

function invalid(message: string): never {
  throw new ProofgateError('INVALID_STORED_VALUE', message);
}

/**
 * Store the record that binds a completed node result to its proof, inputs,
 * graph, workspace and reviewer. Refused (`INVALID_STORED_VALUE`) unless the
 * graph is the stored plan's and the position has exactly one dispatch and one
 * completed event with this result. The same record again is a no-op; another
 * binding at the same position is `REVISION_CONFLICT`.
 */
export async function createAcceptedResultRecord(
  storage: RunStorage,
  runId: string,
  position: string,
  binding: AcceptedResultBinding,
): Promise<AcceptedResultRecord> {
  checkRunId(runId);
  checkBindingShape(binding);
  if (binding.result === undefined) throw new ProofgateError('INVALID_INPUT', 'binding.result is required');
  const { events, plan, planDigest } = await loadRun(storage, runId);
  if (!graphMatchesPlan(binding.graph, plan.graph)) invalid(`graph ${binding.graph.definitionDigest}@${binding.graph.typeVersion} is not the stored plan's graph`);
  const completion = completionAt(events, position);
  if (completion.kind !== 'completed') invalid(completion.reason);
  if (!sameJson(completion.result, binding.result)) invalid(`the result at ${position} is not the completed result`);
  const scope = { namespace: storage.record.namespace, runId };
  if (!(await storage.artifactStore.has(scope, binding.proofArtifact.digest))) {
    throw new ProofgateError('INVALID_INPUT', `proof artifact ${binding.proofArtifact.digest} is not stored for run ${runId}`);
  }
  const body = JSON.parse(canonicalJson({
    schemaVersion: 1,
    runId,
    position,
    nodeId: completion.nodeId,
    planDigest,
    resultDigest: sha256Digest(canonicalBytes(binding.result)),
    binding: {
      inputHashes: binding.inputHashes,
      proofScope: binding.proofScope,
      proofArtifact: binding.proofArtifact,
      graph: { definitionDigest: binding.graph.definitionDigest, typeVersion: binding.graph.typeVersion },
      workspaceAnchor: binding.workspaceAnchor,
      result: binding.result,
      reviewerIdentity: binding.reviewerIdentity,
      reviewerFingerprint: digestJson(binding.reviewerIdentity),
    },
  })) as Omit<AcceptedResultRecord, 'digest'>;
  const record: AcceptedResultRecord = { ...body, digest: digestJson(body) };
  const streamId = acceptedStreamId(runId, position);
  try {
    await storage.eventStore.append(streamId, 0, [{
      id: `accepted:${runId}:${position}:${digestHex(record.digest)}`,
      type: ACCEPTED_RESULT_EVENT,
      data: record as unknown as JsonValue,
    }]);
  } catch (error) {
    if (isProofgateError(error, 'REVISION_CONFLICT') || isProofgateError(error, 'DUPLICATE_EVENT_ID')) {
      throw new ProofgateError('REVISION_CONFLICT', `another accepted result is already recorded at ${position} of run ${runId}`, { runId, position });
    }
    throw error;
  }
  return deepFreeze(record);
}

/**
 * `accepted` with the stored record while the stored graph, the completed
 * result and every bound value still match `query`; otherwise `wait`.
 */
export async function resolveAcceptedResult(
  storage: RunStorage,
  runId: string,
  position: string,
  query: AcceptedResultQuery,
): Promise<AcceptedResultResolution> {
  checkRunId(runId);
  checkBindingShape(query);
  const stored = await storage.eventStore.read(acceptedStreamId(runId, position));
  const first = stored[0];
  if (!first) return { kind: 'wait', reason: `no accepted result is recorded at ${position}` };
  if (first.type !== ACCEPTED_RESULT_EVENT || stored.length !== 1) invalid(`accepted-result stream of ${position} is malformed`);
  const record = checkStoredRecord(first.data, runId, position);
  const { events, plan, planDigest } = await loadRun(storage, runId);
  const artifactPresent = await storage.artifactStore.has({ namespace: storage.record.namespace, runId }, record.binding.proofArtifact.digest);
  const verdict = judgeAcceptedResult({ record, query, planGraph: plan.graph, planDigest, completion: completionAt(events, position), artifactPresent });
  return verdict.kind === 'accepted' ? { kind: 'accepted', record: deepFreeze(record) } : verdict;
}
