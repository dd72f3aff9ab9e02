import { ProofgateError, digestJson, type Sha256Digest } from '../../core/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import type { ReadonlyJsonObject } from '../json-types.js';
import type { GraphPlan } from '../plan/types.js';
import { schemaViolation } from '../schema/json-schema-subset.js';
import { requestIntact } from './gate.js';
import { subjectDigest, unadmittedPermissions } from './subject.js';
import type { ApprovalDecision, ApprovalRecord, CallbackRequest, StoredApprovalSubject } from './types.js';

/** Why a response cannot be recorded, or null. */
export function responseProblem(request: CallbackRequest, response: unknown): string | null {
  if (response === null || typeof response !== 'object' || Array.isArray(response)) return 'response must be a JSON object';
  const violation = schemaViolation(request.responseSchema, response as ReadonlyJsonObject);
  if (violation) return `response does not match the gate's schema: ${violation}`;
  const kind = (response as { kind?: unknown }).kind;
  if (kind !== 'allow' && kind !== 'deny') return 'response.kind must be allow or deny';
  return null;
}

/** Why a stored subject no longer fits its request and plan, or null. */
export function subjectProblem(request: CallbackRequest, subject: StoredApprovalSubject, plan: GraphPlan): string | null {
  if (!requestIntact(request)) return 'the request does not match its id and digest';
  if (subjectDigest(subject) !== request.subjectDigest) return 'the subject is not the one the request names';
  const outside = unadmittedPermissions(subject, plan.admission.permissions);
  if (outside.length > 0) return `permissions not admitted by the run plan: ${outside.join(', ')}`;
  return null;
}

/**
 * The approval record in the form the store keeps it: the body goes through
 * the storage policy (`prepare`, the binding's `prepareJson`) before it is
 * hashed, so `digest` matches the stored bytes. Refused content is the
 * storage's typed error.
 */
export function buildApprovalRecord(
  prepare: RunStorage['prepareJson'],
  input: {
    runId: string;
    request: CallbackRequest;
    subject: StoredApprovalSubject;
    plan: GraphPlan;
    planDigest: Sha256Digest;
    actor: ReadonlyJsonObject;
    claimer: string;
    decision: ApprovalDecision;
  },
): ApprovalRecord {
  const body = prepare(
    {
      schemaVersion: 1,
      runId: input.runId,
      requestId: input.request.requestId,
      requestDigest: input.request.digest,
      subjectDigest: input.request.subjectDigest,
      subject: input.subject,
      planDigest: input.planDigest,
      graph: { definitionDigest: input.plan.graph.definitionDigest, typeVersion: input.plan.graph.typeVersion },
      actor: input.actor,
      routerPath: ['stored-callback', input.request.gateId, input.claimer],
      decision: input.decision,
    },
    'approval record',
  ) as unknown as Omit<ApprovalRecord, 'digest'>;
  return { ...body, digest: digestJson(body) };
}

/** A stored approval record whose digest is not of its own bytes is `INVALID_STORED_VALUE`. */
export function checkApprovalDigest(record: ApprovalRecord): ApprovalRecord {
  const { digest, ...body } = record;
  if (digest !== digestJson(body)) {
    throw new ProofgateError('INVALID_STORED_VALUE', `approval record for ${String(record.requestId)} does not match its digest`);
  }
  return record;
}
