/**
 * Maintainers' approvals of trust changes, kept as the runtime's approval
 * records (`createStoredCallbackClient`, `resolveApproval`). Each change has
 * one approvals run; each approval is a callback request whose subject is the
 * exact change: its id, its head, the digest of its diff and the trusted
 * paths it touches. `/proofgate approve` from a maintainer posts that request
 * and answers it `allow` with the maintainer as actor; the loop rebuilds the
 * subject from what is live and asks `resolveApproval`, so a new head (or
 * other bytes, or another set of trusted paths) is another subject with no
 * answer: the approval is void.
 */
import { digestHex, isProofgateError, sha256Digest, type Sha256Digest } from '../../core/index.js';
import {
  compileGraph,
  createApprovalCallbackGate,
  createStoredCallbackClient,
  dagGraphType,
  persistRunDefinition,
  proofArtifactRef,
  resolveApproval,
  resolveGraphPlan,
  writeProofArtifact,
  type ApprovalSubjectInput,
  type CallbackGateDefinition,
  type CallbackRequest,
  type ProofArtifactRef,
} from '../../runtime/index.js';
import type { RunStorage } from '../../storage/policy-types.js';

/** The exact change an approval covers. */
export interface TrustApprovalSubject {
  readonly changeId: string;
  readonly head: string;
  /** `sha256:` digest of the change's diff (merge base to head). */
  readonly diff: string;
  /** The trusted paths it touches (`trustedPathsTouched`). */
  readonly paths: readonly string[];
}

/** Who approved: non-secret identifiers only (they are stored as the record's actor). */
export interface Approver {
  readonly login: string;
  readonly permission: string;
  readonly commentId: string;
}

/** The run that holds a change's approvals (a change id may hold characters a run id cannot). */
export function approvalsRunId(changeId: string): string {
  return `approvals.${digestHex(sha256Digest(changeId)).slice(0, 32)}`;
}

function gate(changeId: string): CallbackGateDefinition {
  return {
    gateId: 'trust-change',
    gateVersion: 1,
    decisionText: 'Merge this exact head of a change that touches what proofgate trusts?',
    responseSchema: { type: 'object', properties: { kind: { type: 'string' } }, required: ['kind'] },
    input: { change: changeId },
  };
}

function packet(subject: TrustApprovalSubject) {
  return { change: subject.changeId, head: subject.head, diff: subject.diff, paths: [...subject.paths] };
}

function request(subject: TrustApprovalSubject, artifact: ProofArtifactRef): { request: CallbackRequest; input: ApprovalSubjectInput } {
  const input: ApprovalSubjectInput = {
    workspaceAnchor: null,
    inputArtifactHashes: { diff: subject.diff as Sha256Digest },
    proofScope: { kind: 'trust-change', change: subject.changeId, head: subject.head, paths: [...subject.paths] },
    proofArtifact: artifact,
    // What the approval lets happen: this head, merged.
    proposedOutput: Buffer.from(subject.head, 'utf8'),
    effectivePermissions: [],
  };
  return { request: createApprovalCallbackGate(gate(subject.changeId), input), input };
}

/** Store the change's approvals run once (a second store of the same run is a no-op or a conflict, both fine). */
async function ensureRun(storage: RunStorage, runId: string, at: string): Promise<void> {
  const graph = compileGraph(dagGraphType, {
    id: 'proofgate-trust-approval',
    definitionVersion: 1,
    data: { globalConcurrency: 1, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: 0 },
    nodes: [{ id: 'approve', data: { kind: 'required', key: null } }],
    edges: [],
  });
  const identity = { source: 'npm:proofgate', version: '0.1.0', digest: sha256Digest('proofgate trust approvals v1') };
  const plan = resolveGraphPlan(graph.describe(), { package: identity, admission: { package: identity, permissions: [] }, executionLanes: [] });
  try {
    await persistRunDefinition(storage, {
      runId, eventId: `${runId}-started`, timestamp: at, graphDefinition: graph.definition, resolvedPlan: plan,
      resolvedInputs: {}, workspaceBinding: null, hostBinding: null,
    });
  } catch (error) {
    if (!isProofgateError(error, 'REVISION_CONFLICT') && !isProofgateError(error, 'DUPLICATE_EVENT_ID')) throw error;
  }
}

export type ApprovalWrite = { readonly kind: 'recorded' } | { readonly kind: 'already' } | { readonly kind: 'refused'; readonly reason: string };

/** Record `approver`'s approval of exactly `subject` (idempotent: an answered request stays as it is). */
export async function recordTrustApproval(storage: RunStorage, subject: TrustApprovalSubject, approver: Approver, at: string): Promise<ApprovalWrite> {
  const runId = approvalsRunId(subject.changeId);
  await ensureRun(storage, runId, at);
  const artifact = await writeProofArtifact(storage.artifactStore, { namespace: storage.record.namespace, runId }, packet(subject));
  const { request: req, input } = request(subject, artifact);
  const client = await createStoredCallbackClient(storage, runId);
  try {
    await client.post(req, input);
  } catch (error) {
    // Posted before (and claimed or answered since): the stream exists.
    if (!isProofgateError(error, 'REVISION_CONFLICT') && !isProofgateError(error, 'DUPLICATE_EVENT_ID')) throw error;
  }
  const claimer = `maintainer:${approver.login}`;
  const claim = await client.claim(req.requestId, claimer, { leaseMs: 60_000 });
  if (!claim.ok) return claim.reason.includes('already answered') ? { kind: 'already' } : { kind: 'refused', reason: claim.reason };
  const actor = { login: approver.login, permission: approver.permission, comment: approver.commentId };
  const submitted = await client.submit(req.requestId, claim.claimToken, claimer, req.digest, { kind: 'allow' }, actor);
  if (submitted.ok) return { kind: 'recorded' };
  return submitted.kind === 'answered' ? { kind: 'already' } : { kind: 'refused', reason: submitted.reason };
}

/** Who approved exactly `subject`, while the stored approval record still covers it; else null. */
export async function resolveTrustApproval(storage: RunStorage, subject: TrustApprovalSubject): Promise<{ readonly by: string } | null> {
  const { request: req, input } = request(subject, proofArtifactRef(packet(subject)));
  const resolution = await resolveApproval(storage, approvalsRunId(subject.changeId), { request: req, ...input });
  if (resolution.kind !== 'allow') return null;
  const login = resolution.record.actor.login;
  return { by: typeof login === 'string' ? login : 'a maintainer' };
}
