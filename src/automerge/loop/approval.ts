/**
 * Maintainers' approvals of a change's exact head, kept as the runtime's
 * approval records (`createStoredCallbackClient`, `resolveApproval`): one
 * record kind for both uses, the approval a change that touches what
 * proofgate trusts needs and the approvals a base's `requiredApprovals`
 * asks for. Each change has one approvals run; each approval is a callback
 * request whose subject is the exact change and its approver: the change id,
 * its head, the digest of its diff, the trusted paths it touches (possibly
 * none) and the approver's login. `/proofgate approve` from a maintainer
 * posts that request and answers it `allow` with the maintainer as actor;
 * the loop (and the local forge, for its review decision) rebuild the
 * subject from what is live and ask `resolveApproval`, so a new head (or
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

/** The exact change an approval covers, and who gives it. */
export interface ApprovalSubject {
  readonly changeId: string;
  readonly head: string;
  /** `sha256:` digest of the change's diff (merge base to head). */
  readonly diff: string;
  /** The trusted paths it touches (`trustedPathsTouched`); empty: none. */
  readonly paths: readonly string[];
  /** The approver's login (compared case-insensitively: it is stored lower-cased). */
  readonly approver: string;
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
    gateId: 'change-approval',
    gateVersion: 2,
    decisionText: 'Merge this exact head of the change (and what it touches that proofgate trusts)?',
    responseSchema: { type: 'object', properties: { kind: { type: 'string' } }, required: ['kind'] },
    input: { change: changeId },
  };
}

function packet(subject: ApprovalSubject) {
  return { change: subject.changeId, head: subject.head, diff: subject.diff, paths: [...subject.paths], approver: subject.approver.toLowerCase() };
}

function request(subject: ApprovalSubject, artifact: ProofArtifactRef): { request: CallbackRequest; input: ApprovalSubjectInput } {
  const input: ApprovalSubjectInput = {
    workspaceAnchor: null,
    inputArtifactHashes: { diff: subject.diff as Sha256Digest },
    proofScope: { kind: 'change-approval', change: subject.changeId, head: subject.head, paths: [...subject.paths], approver: subject.approver.toLowerCase() },
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
    id: 'proofgate-change-approval',
    definitionVersion: 1,
    data: { globalConcurrency: 1, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: 0 },
    nodes: [{ id: 'approve', data: { kind: 'required', key: null } }],
    edges: [],
  });
  const identity = { source: 'npm:proofgate', version: '0.1.0', digest: sha256Digest('proofgate change approvals v2') };
  const plan = resolveGraphPlan(graph.describe(), { package: identity, admission: { package: identity, permissions: [] }, executionLanes: [] });
  try {
    await persistRunDefinition(storage, {
      runId,
      eventId: `${runId}-started`,
      timestamp: at,
      graphDefinition: graph.definition,
      resolvedPlan: plan,
      resolvedInputs: {},
      workspaceBinding: null,
      hostBinding: null,
    });
  } catch (error) {
    if (!isProofgateError(error, 'REVISION_CONFLICT') && !isProofgateError(error, 'DUPLICATE_EVENT_ID')) throw error;
  }
}

export type ApprovalWrite = { readonly kind: 'recorded' } | { readonly kind: 'already' } | { readonly kind: 'refused'; readonly reason: string };

/** Record `approver`'s approval of exactly `subject` (idempotent: an answered request stays as it is). */
export async function recordApproval(storage: RunStorage, subject: ApprovalSubject, approver: Approver, at: string): Promise<ApprovalWrite> {
  if (subject.approver.toLowerCase() !== approver.login.toLowerCase())
    return { kind: 'refused', reason: `the approval names ${subject.approver}, not ${approver.login}` };
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
export async function resolveChangeApproval(storage: RunStorage, subject: ApprovalSubject): Promise<{ readonly by: string } | null> {
  const { request: req, input } = request(subject, proofArtifactRef(packet(subject)));
  const resolution = await resolveApproval(storage, approvalsRunId(subject.changeId), { request: req, ...input });
  if (resolution.kind !== 'allow') return null;
  const login = resolution.record.actor.login;
  return { by: typeof login === 'string' ? login : 'a maintainer' };
}
