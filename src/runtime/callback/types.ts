import type { Sha256Digest } from '../../core/index.js';
import type { ReadonlyJsonObject, ReadonlyJsonValue } from '../json-types.js';
import type { Permission } from '../plan/types.js';
import type { ProofArtifactRef } from '../proof/artifact.js';
import type { GraphBinding } from '../proof/accepted-types.js';
import type { WorkspaceAnchor } from '../workspace/types.js';

/** A question a run asks a human or a system, answered through a stored callback. */
export type CallbackGateDefinition = {
  readonly gateId: string;
  readonly gateVersion: number;
  readonly decisionText: string;
  /** JSON Schema subset the response must satisfy; the response also needs `kind` allow or deny. */
  readonly responseSchema: ReadonlyJsonObject;
  readonly input: ReadonlyJsonValue;
};

/** The exact things an approval covers. */
export type ApprovalSubjectInput = {
  readonly workspaceAnchor: WorkspaceAnchor | null;
  readonly inputArtifactHashes: { readonly [name: string]: Sha256Digest };
  readonly proofScope: ReadonlyJsonObject;
  readonly proofArtifact: ProofArtifactRef;
  /** The bytes to be applied; only their digest and length are stored. */
  readonly proposedOutput: Uint8Array;
  /** Must each match a permission the run plan admitted (name and scope, key order ignored). */
  readonly effectivePermissions: readonly Permission[];
};

/** How a subject is stored and hashed: output bytes become digest and length. */
export type StoredApprovalSubject = {
  readonly workspaceAnchor: WorkspaceAnchor | null;
  readonly inputArtifactHashes: { readonly [name: string]: Sha256Digest };
  readonly proofScope: ReadonlyJsonObject;
  readonly proofArtifact: ProofArtifactRef;
  readonly proposedOutput: { readonly digest: Sha256Digest; readonly byteLength: number };
  readonly effectivePermissions: readonly Permission[];
};

export type CallbackRequest = {
  readonly schemaVersion: 1;
  readonly kind: 'approval';
  readonly gateId: string;
  readonly gateVersion: number;
  readonly decisionText: string;
  readonly responseSchema: ReadonlyJsonObject;
  readonly input: ReadonlyJsonValue;
  readonly subjectDigest: Sha256Digest;
  /** Derived from every field above, so any changed byte is another request. */
  readonly requestId: string;
  /** sha256 of the canonical request without this field. */
  readonly digest: Sha256Digest;
};

export type ApprovalDecision =
  { readonly kind: 'allow'; readonly [key: string]: ReadonlyJsonValue } | { readonly kind: 'deny'; readonly [key: string]: ReadonlyJsonValue };

export type ApprovalRecord = {
  readonly schemaVersion: 1;
  readonly runId: string;
  readonly requestId: string;
  readonly requestDigest: Sha256Digest;
  readonly subjectDigest: Sha256Digest;
  readonly subject: StoredApprovalSubject;
  readonly planDigest: Sha256Digest;
  readonly graph: GraphBinding;
  readonly actor: ReadonlyJsonObject;
  readonly routerPath: readonly string[];
  readonly decision: ApprovalDecision;
  readonly digest: Sha256Digest;
};

export type CallbackEventKind = 'callback-posted' | 'callback-claimed' | 'callback-released' | 'callback-submitted' | 'approval-recorded';

export type CallbackHistoryEntry = {
  readonly kind: CallbackEventKind;
  readonly revision: number;
  readonly recordedAt: string;
  readonly data: ReadonlyJsonValue;
};

export type PendingCallback = {
  readonly requestId: string;
  readonly requestDigest: Sha256Digest;
  readonly gateId: string;
  readonly decisionText: string;
  readonly claimedBy: string | null;
};

export type ClaimResult = { readonly ok: true; readonly claimToken: string; readonly leaseExpiresAt: string } | { readonly ok: false; readonly reason: string };

export type SubmitResult =
  | { readonly ok: true; readonly record: ApprovalRecord }
  | { readonly ok: false; readonly kind: 'invalid' | 'stale-claim' | 'answered' | 'not-found'; readonly reason: string };

export type ReleaseResult = { readonly ok: true } | { readonly ok: false; readonly reason: string };

export interface StoredCallbackClient {
  /** Store a request with its exact subject (idempotent). Throws `ApprovalSubjectError` on a subject mismatch. */
  post(request: CallbackRequest, subject: ApprovalSubjectInput): Promise<void>;
  claim(requestId: string, claimer: string, options?: { readonly leaseMs?: number }): Promise<ClaimResult>;
  /** Store the answer and its approval record in one batch. */
  submit(
    requestId: string,
    claimToken: string,
    claimer: string,
    requestDigest: Sha256Digest,
    response: ReadonlyJsonObject,
    actor: ReadonlyJsonObject,
  ): Promise<SubmitResult>;
  release(requestId: string, claimToken: string, claimer: string): Promise<ReleaseResult>;
  history(requestId: string): Promise<CallbackHistoryEntry[]>;
  listPending(): Promise<PendingCallback[]>;
}

export type ApprovalResolution = { readonly kind: 'allow' | 'deny'; readonly record: ApprovalRecord } | { readonly kind: 'wait'; readonly reason: string };
