import { ProofgateError, assertSha256Digest, canonicalJson, digestJson, sha256Digest, type Sha256Digest } from '../../core/index.js';
import { isJsonObject, requireJsonObject } from '../json-types.js';
import { checkPermissions } from '../plan/resolve.js';
import type { Permission } from '../plan/types.js';
import { PROOF_MEDIA_TYPE, PROOF_PURPOSE } from '../proof/artifact.js';
import type { ApprovalSubjectInput, StoredApprovalSubject } from './types.js';

/** A subject that does not fit the run: `SUBJECT_MISMATCH`. */
export class ApprovalSubjectError extends ProofgateError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('SUBJECT_MISMATCH', message, details);
    this.name = 'ApprovalSubjectError';
  }
}

function permissionKey(permission: Permission): string {
  return canonicalJson({ name: permission.name, scope: permission.scope });
}

/** The stored form of a subject: JSON only, output bytes reduced to digest and length. */
export function storedSubject(subject: ApprovalSubjectInput): StoredApprovalSubject {
  requireJsonObject(subject as unknown, 'approval subject');
  if (!(subject.proposedOutput instanceof Uint8Array)) throw new ProofgateError('INVALID_INPUT', 'proposedOutput must be bytes (Uint8Array)');
  if (subject.workspaceAnchor !== null) requireJsonObject(subject.workspaceAnchor, 'workspaceAnchor');
  const hashes = requireJsonObject(subject.inputArtifactHashes, 'inputArtifactHashes');
  for (const [name, value] of Object.entries(hashes)) assertSha256Digest(value, `inputArtifactHashes.${name}`);
  requireJsonObject(subject.proofScope, 'proofScope');
  const artifact = requireJsonObject(subject.proofArtifact, 'proofArtifact');
  assertSha256Digest(artifact.digest, 'proofArtifact.digest');
  if (artifact.mediaType !== PROOF_MEDIA_TYPE || artifact.purpose !== PROOF_PURPOSE) {
    throw new ProofgateError('INVALID_INPUT', 'proofArtifact must be a proof-packet reference');
  }
  const permissions = checkPermissions(subject.effectivePermissions, 'effectivePermissions').sort((a, b) => (permissionKey(a) < permissionKey(b) ? -1 : 1));
  return JSON.parse(
    canonicalJson({
      workspaceAnchor: subject.workspaceAnchor,
      inputArtifactHashes: subject.inputArtifactHashes,
      proofScope: subject.proofScope,
      proofArtifact: { digest: artifact.digest, byteLength: artifact.byteLength, mediaType: artifact.mediaType, purpose: artifact.purpose },
      proposedOutput: { digest: sha256Digest(subject.proposedOutput), byteLength: subject.proposedOutput.byteLength },
      effectivePermissions: permissions,
    }),
  ) as StoredApprovalSubject;
}

export function subjectDigest(subject: StoredApprovalSubject): Sha256Digest {
  return digestJson(subject);
}

/** The permissions of `subject` that the plan did not admit (exact name and canonical scope). */
export function unadmittedPermissions(subject: Pick<StoredApprovalSubject, 'effectivePermissions'>, admitted: readonly Permission[]): string[] {
  const allowed = new Set(admitted.map(permissionKey));
  return subject.effectivePermissions.filter((permission) => !allowed.has(permissionKey(permission))).map((permission) => permission.name);
}

export function isStoredSubject(value: unknown): value is StoredApprovalSubject {
  return isJsonObject(value) && Array.isArray(value.effectivePermissions) && isJsonObject(value.proposedOutput);
}
