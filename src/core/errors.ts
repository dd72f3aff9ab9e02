/**
 * Typed errors. Every error proofgate raises on purpose carries a stable `code`
 * so callers branch on data, never on message text.
 */
export const ERROR_CODES = [
  'INVALID_JSON',
  'NON_JSON_VALUE',
  'REVISION_CONFLICT',
  'DUPLICATE_EVENT_ID',
  'KNOWN_SECRET',
  'POLICY_VIOLATION',
  'INVALID_STORED_VALUE',
  'INVALID_INPUT',
  'NOT_FOUND',
  'STORAGE_MISMATCH',
  'UNSUPPORTED_SCHEMA_VERSION',
  'NOT_OUR_DATABASE',
  'CORRUPT_DATABASE',
  'QUOTA_EXCEEDED',
  'DIGEST_MISMATCH',
  'CLOSED',
  'USAGE',
  'IO',
  'GIT',
  'HEAD_MOVED',
  'BASE_MOVED',
  'NOT_MERGEABLE',
  'MUTABLE_INPUT',
  'SELF_REVIEW',
  'CONFIG',
  'TIMEOUT',
  'ABORTED',
  'SUBJECT_MISMATCH',
  'INTERNAL',
  'WEBHOOK_SIGNATURE',
  'FORGE_AUTH',
  'FORGE_API',
  'READ_ONLY',
  'ARTIFACT_CONFLICT',
  'JAIL_UNAVAILABLE',
  'PROTECTED_BRANCH',
  'RESERVED_IDENTITY',
  'DATA_DIR',
  'DUPLICATE_DELIVERY',
  'LEASE_LOST',
  'EVIDENCE_INVALID',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class ProofgateError extends Error {
  readonly code: ErrorCode;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProofgateError';
    this.code = code;
    this.details = details === undefined ? undefined : Object.freeze({ ...details });
  }
}

export function isProofgateError(value: unknown, code?: ErrorCode): value is ProofgateError {
  return value instanceof ProofgateError && (code === undefined || value.code === code);
}

/** Message of any thrown value, one line. */
export function errorMessage(value: unknown): string {
  const text = value instanceof Error ? value.message : String(value);
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
