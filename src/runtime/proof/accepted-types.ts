import type { Sha256Digest } from '../../core/index.js';
import type { ReadonlyJsonObject, ReadonlyJsonValue } from '../json-types.js';
import type { WorkspaceAnchor } from '../workspace/types.js';
import type { ProofArtifactRef } from './artifact.js';

/** The graph a record was made under: the plan's definition digest and type version. */
export type GraphBinding = {
  readonly definitionDigest: Sha256Digest;
  readonly typeVersion: number;
};

/** Everything an accepted result is bound to. */
export type AcceptedResultBinding = {
  readonly inputHashes: { readonly [name: string]: Sha256Digest };
  readonly proofScope: ReadonlyJsonObject;
  readonly proofArtifact: ProofArtifactRef;
  readonly graph: GraphBinding;
  readonly workspaceAnchor: WorkspaceAnchor;
  readonly result: ReadonlyJsonValue;
  /** Non-secret identifiers of the reviewer; stored as given, with their digest as fingerprint. */
  readonly reviewerIdentity: ReadonlyJsonObject;
};

/** What a host checks before reuse; `result` is optional (the stored one is compared to the run). */
export type AcceptedResultQuery = Omit<AcceptedResultBinding, 'result'> & { readonly result?: ReadonlyJsonValue };

export type StoredAcceptedBinding = AcceptedResultBinding & { readonly reviewerFingerprint: Sha256Digest };

export type AcceptedResultRecord = {
  readonly schemaVersion: 1;
  readonly runId: string;
  readonly position: string;
  readonly nodeId: string;
  readonly planDigest: Sha256Digest;
  readonly resultDigest: Sha256Digest;
  readonly binding: StoredAcceptedBinding;
  /** sha256 of the canonical record without this field. */
  readonly digest: Sha256Digest;
};

export type AcceptedResultResolution =
  { readonly kind: 'accepted'; readonly record: AcceptedResultRecord } | { readonly kind: 'wait'; readonly reason: string };
