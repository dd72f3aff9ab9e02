import type { Sha256Digest } from '../../core/index.js';
import { canonicalBytes, sha256Digest } from '../../core/index.js';
import type { ArtifactScope, ArtifactStore } from '../../storage/ports.js';
import type { ReadonlyJsonValue } from '../json-types.js';

/** Reference to a stored proof packet. */
export type ProofArtifactRef = {
  readonly digest: Sha256Digest;
  readonly byteLength: number;
  readonly mediaType: 'application/json';
  readonly purpose: 'proof-packet';
};

export const PROOF_MEDIA_TYPE = 'application/json';
export const PROOF_PURPOSE = 'proof-packet';

/**
 * Store the RFC 8785 bytes of a proof packet. Reordered fields give the same
 * bytes and digest; any changed value gives another digest.
 */
export async function writeProofArtifact(artifactStore: ArtifactStore, scope: ArtifactScope, packet: ReadonlyJsonValue): Promise<ProofArtifactRef> {
  const bytes = canonicalBytes(packet);
  const ref = await artifactStore.write(scope, bytes, { mediaType: PROOF_MEDIA_TYPE, purpose: PROOF_PURPOSE });
  return Object.freeze({ digest: ref.digest, byteLength: ref.byteLength, mediaType: PROOF_MEDIA_TYPE, purpose: PROOF_PURPOSE });
}

/**
 * The reference `writeProofArtifact` returns for `packet`, computed without
 * storing anything: how a caller names a packet it stored before.
 */
export function proofArtifactRef(packet: ReadonlyJsonValue): ProofArtifactRef {
  const bytes = canonicalBytes(packet);
  return Object.freeze({ digest: sha256Digest(bytes), byteLength: bytes.byteLength, mediaType: PROOF_MEDIA_TYPE, purpose: PROOF_PURPOSE });
}
