import { ProofgateError, assertSha256Digest, digestJson } from '../../core/index.js';
import { isJsonObject, requireJsonObject } from '../json-types.js';
import type { PlanGraph } from '../plan/types.js';
import { PROOF_MEDIA_TYPE, PROOF_PURPOSE } from './artifact.js';
import type { AcceptedResultQuery, AcceptedResultRecord } from './accepted-types.js';
import { sameJson, type Completion } from './completion.js';

/** Shape checks shared by create and resolve; a bad binding is `INVALID_INPUT`. */
export function checkBindingShape(binding: AcceptedResultQuery): void {
  requireJsonObject(binding, 'accepted-result binding');
  const hashes = requireJsonObject(binding.inputHashes, 'inputHashes');
  for (const [name, value] of Object.entries(hashes)) assertSha256Digest(value, `inputHashes.${name}`);
  requireJsonObject(binding.proofScope, 'proofScope');
  const artifact = requireJsonObject(binding.proofArtifact, 'proofArtifact');
  assertSha256Digest(artifact.digest, 'proofArtifact.digest');
  if (typeof artifact.byteLength !== 'number' || !Number.isSafeInteger(artifact.byteLength) || artifact.byteLength < 0) {
    throw new ProofgateError('INVALID_INPUT', 'proofArtifact.byteLength must be a byte count');
  }
  if (artifact.mediaType !== PROOF_MEDIA_TYPE || artifact.purpose !== PROOF_PURPOSE) {
    throw new ProofgateError('INVALID_INPUT', 'proofArtifact must be a proof-packet reference from writeProofArtifact');
  }
  const graph = requireJsonObject(binding.graph, 'graph');
  assertSha256Digest(graph.definitionDigest, 'graph.definitionDigest');
  if (typeof graph.typeVersion !== 'number') throw new ProofgateError('INVALID_INPUT', 'graph.typeVersion must be a number');
  requireJsonObject(binding.workspaceAnchor, 'workspaceAnchor');
  requireJsonObject(binding.reviewerIdentity, 'reviewerIdentity');
}

export function graphMatchesPlan(graph: AcceptedResultQuery['graph'], plan: PlanGraph): boolean {
  return graph.definitionDigest === plan.definitionDigest && graph.typeVersion === plan.typeVersion;
}

/** Snapshot a resolver judges: the stored record and what is live now. */
export interface AcceptedSnapshot {
  readonly record: AcceptedResultRecord;
  /** The live query in its stored form (`storage.prepareJson`), so it compares byte for byte with the record. */
  readonly query: AcceptedResultQuery;
  readonly planGraph: PlanGraph;
  readonly planDigest: string;
  readonly completion: Completion;
  readonly artifactPresent: boolean;
}

/**
 * Pure judgment: `accepted` only while the plan, the completed result and
 * every bound value still match; otherwise `wait` naming the first change.
 */
export function judgeAcceptedResult(snapshot: AcceptedSnapshot): { kind: 'accepted' } | { kind: 'wait'; reason: string } {
  const { record, query, planGraph, completion } = snapshot;
  const wait = (reason: string) => ({ kind: 'wait' as const, reason });
  const bound = record.binding;
  if (snapshot.planDigest !== record.planDigest) return wait('the run plan changed');
  if (!graphMatchesPlan(bound.graph, planGraph)) return wait('the stored graph no longer matches the run plan');
  if (!sameJson(query.graph, bound.graph)) return wait('graph changed');
  if (completion.kind !== 'completed') return wait(`the run no longer proves this result: ${completion.reason}`);
  if (completion.nodeId !== record.nodeId || !sameJson(completion.result, bound.result)) return wait('the completed result changed');
  if (query.result !== undefined && !sameJson(query.result, bound.result)) return wait('result changed');
  const fields = ['inputHashes', 'proofScope', 'proofArtifact', 'workspaceAnchor'] as const;
  for (const field of fields) {
    if (!sameJson(query[field], bound[field])) return wait(`${field} changed`);
  }
  if (digestJson(query.reviewerIdentity) !== bound.reviewerFingerprint) return wait('reviewer identity changed');
  if (!snapshot.artifactPresent) return wait('the proof artifact is no longer stored');
  return { kind: 'accepted' };
}

/** Check a record read back from the store; anything off is `INVALID_STORED_VALUE`. */
export function checkStoredRecord(value: unknown, runId: string, position: string): AcceptedResultRecord {
  if (!isJsonObject(value) || !isJsonObject(value.binding)) {
    throw new ProofgateError('INVALID_STORED_VALUE', `accepted result at ${position} is not an object`);
  }
  const { digest, ...rest } = value;
  if (digest !== digestJson(rest) || value.runId !== runId || value.position !== position) {
    throw new ProofgateError('INVALID_STORED_VALUE', `accepted result at ${position} does not match its digest or place`);
  }
  return value as unknown as AcceptedResultRecord;
}
