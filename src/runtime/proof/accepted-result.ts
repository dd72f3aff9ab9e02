import { ProofgateError, deepFreeze, digestHex, digestJson, isProofgateError } from '../../core/index.js';
import type { JsonValue } from '../../core/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import { policyRefusal } from '../../storage/sensitive.js';
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
 * The bound values in the form the storage keeps them (free text redacted as
 * its policy says). Records are built from, and queries compared as, this
 * form, so digests match the stored bytes and a live value that the store
 * redacts still matches its stored copy. Refused content is the storage's
 * typed error (`KNOWN_SECRET`, `POLICY_VIOLATION`).
 */
function storedForm<B extends AcceptedResultQuery>(storage: RunStorage, binding: B, what: string): B {
  const { result, ...rest } = binding;
  const fields = {
    inputHashes: rest.inputHashes,
    proofScope: rest.proofScope,
    proofArtifact: rest.proofArtifact,
    graph: { definitionDigest: rest.graph.definitionDigest, typeVersion: rest.graph.typeVersion },
    workspaceAnchor: rest.workspaceAnchor,
    reviewerIdentity: rest.reviewerIdentity,
    ...(result === undefined ? {} : { result }),
  };
  return storage.prepareJson(fields, what) as unknown as B;
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
  const live = storedForm(storage, binding, 'accepted-result binding');
  const { events, plan, planDigest } = await loadRun(storage, runId);
  if (!graphMatchesPlan(live.graph, plan.graph)) invalid(`graph ${live.graph.definitionDigest}@${live.graph.typeVersion} is not the stored plan's graph`);
  const completion = completionAt(events, position);
  if (completion.kind !== 'completed') invalid(completion.reason);
  if (!sameJson(completion.result, live.result)) invalid(`the result at ${position} is not the completed result`);
  const scope = { namespace: storage.record.namespace, runId };
  if (!(await storage.artifactStore.has(scope, live.proofArtifact.digest))) {
    throw new ProofgateError('INVALID_INPUT', `proof artifact ${live.proofArtifact.digest} is not stored for run ${runId}`);
  }
  // Every digest below is of stored-form values, and the record digest is of
  // the body exactly as the event store will keep it.
  const body = storage.prepareJson(
    {
      schemaVersion: 1,
      runId,
      position,
      nodeId: completion.nodeId,
      planDigest,
      resultDigest: digestJson(live.result),
      binding: {
        inputHashes: live.inputHashes,
        proofScope: live.proofScope,
        proofArtifact: live.proofArtifact,
        graph: live.graph,
        workspaceAnchor: live.workspaceAnchor,
        result: live.result,
        reviewerIdentity: live.reviewerIdentity,
        reviewerFingerprint: digestJson(live.reviewerIdentity),
      },
    },
    'accepted-result record',
  ) as unknown as Omit<AcceptedResultRecord, 'digest'>;
  const record: AcceptedResultRecord = { ...body, digest: digestJson(body) };
  const streamId = acceptedStreamId(runId, position);
  try {
    await storage.eventStore.append(streamId, 0, [
      {
        id: `accepted:${runId}:${position}:${digestHex(record.digest)}`,
        type: ACCEPTED_RESULT_EVENT,
        data: record as unknown as JsonValue,
      },
    ]);
  } catch (error) {
    if (isProofgateError(error, 'REVISION_CONFLICT') || isProofgateError(error, 'DUPLICATE_EVENT_ID')) {
      throw new ProofgateError('REVISION_CONFLICT', `another accepted result is already recorded at ${position} of run ${runId}`, { runId, position });
    }
    throw error;
  }
  return deepFreeze(record);
}

/**
 * The accepted-result record stored at `position` of a run, checked against
 * its own digest and place, or null when none is stored. Reading a record is
 * not accepting it: only `resolveAcceptedResult` says whether it still holds.
 */
export async function readAcceptedResult(storage: RunStorage, runId: string, position: string): Promise<AcceptedResultRecord | null> {
  checkRunId(runId);
  const stored = await storage.eventStore.read(acceptedStreamId(runId, position));
  const first = stored[0];
  if (!first) return null;
  if (first.type !== ACCEPTED_RESULT_EVENT || stored.length !== 1) invalid(`accepted-result stream of ${position} is malformed`);
  return deepFreeze(checkStoredRecord(first.data, runId, position));
}

/**
 * `accepted` with the stored record while the stored graph, the completed
 * result and every bound value still match `query`; otherwise `wait`. The
 * query is compared in its stored form (the storage policy applied), so text
 * the store redacted still matches; a query holding content the policy
 * refuses (a known secret, say) cannot match any stored record: `wait`.
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
  let live: AcceptedResultQuery;
  try {
    live = storedForm(storage, query, 'accepted-result query');
  } catch (error) {
    const refusal = policyRefusal(error, 'accepted-result query');
    if (refusal === null) throw error;
    return { kind: 'wait', reason: `the query holds content the storage policy refuses (${refusal}); no stored record can match it` };
  }
  const { events, plan, planDigest } = await loadRun(storage, runId);
  const artifactPresent = await storage.artifactStore.has({ namespace: storage.record.namespace, runId }, record.binding.proofArtifact.digest);
  const verdict = judgeAcceptedResult({ record, query: live, planGraph: plan.graph, planDigest, completion: completionAt(events, position), artifactPresent });
  return verdict.kind === 'accepted' ? { kind: 'accepted', record: deepFreeze(record) } : verdict;
}
