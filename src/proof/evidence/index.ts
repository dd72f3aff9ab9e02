export { verifyEvidenceBundle, DEFAULT_READ_OBSERVATION_BYTES, type VerifiedBundle, type EvidenceExpectation } from './verify.js';
export { packEvidenceBundle, type PackEvidenceOptions, type PackedBundle } from './pack.js';
export { EVIDENCE_REASONS, evidenceReason, type EvidenceReason } from './reasons.js';
export { DEFAULT_EVIDENCE_LIMITS, resolveEvidenceLimits, type EvidenceLimits } from './limits.js';
export { EVIDENCE_MANIFEST_SCHEMA, SCENARIO_ID_PATTERN, evidenceManifestSchema, type EvidenceManifest, type EvidenceObservation } from './manifest.js';
export { MANIFEST_NAME, entryNameProblem } from './names.js';
