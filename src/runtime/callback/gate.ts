import { ProofgateError, canonicalJson, deepFreeze, digestHex, digestJson } from '../../core/index.js';
import { isJsonObject, requireJsonObject } from '../json-types.js';
import { checkSchemaSubset } from '../schema/json-schema-subset.js';
import { storedSubject, subjectDigest } from './subject.js';
import type { ApprovalSubjectInput, CallbackGateDefinition, CallbackRequest } from './types.js';

function bad(message: string): never {
  throw new ProofgateError('INVALID_INPUT', `callback gate: ${message}`);
}

/**
 * Build the approval request for `subject`. The subject digest is part of the
 * request before its id and digest are derived, so a request names exactly
 * one subject and any changed byte yields another request.
 */
export function createApprovalCallbackGate(definition: CallbackGateDefinition, subject: ApprovalSubjectInput): CallbackRequest {
  requireJsonObject(definition, 'callback gate definition');
  if (typeof definition.gateId !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(definition.gateId))
    bad('gateId must match [A-Za-z0-9][A-Za-z0-9._-]*');
  if (!Number.isSafeInteger(definition.gateVersion) || definition.gateVersion < 1) bad('gateVersion must be a positive integer');
  if (typeof definition.decisionText !== 'string' || definition.decisionText.length === 0) bad('decisionText must be a nonempty string');
  checkSchemaSubset(definition.responseSchema, 'responseSchema');
  const body = JSON.parse(
    canonicalJson({
      schemaVersion: 1,
      kind: 'approval',
      gateId: definition.gateId,
      gateVersion: definition.gateVersion,
      decisionText: definition.decisionText,
      responseSchema: definition.responseSchema,
      input: definition.input,
      subjectDigest: subjectDigest(storedSubject(subject)),
    }),
  ) as Omit<CallbackRequest, 'requestId' | 'digest'>;
  const requestId = `approval-${digestHex(digestJson(body)).slice(0, 32)}`;
  const withId = { ...body, requestId };
  return deepFreeze({ ...withId, digest: digestJson(withId) });
}

/** Whether a request's id and digest still derive from its fields. */
export function requestIntact(request: CallbackRequest): boolean {
  if (!isJsonObject(request)) return false;
  const { requestId, digest, ...body } = request;
  return requestId === `approval-${digestHex(digestJson(body)).slice(0, 32)}` && digest === digestJson({ ...body, requestId });
}
