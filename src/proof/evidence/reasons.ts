import { ProofgateError, isProofgateError } from '../../core/index.js';

/**
 * Why an evidence bundle was refused. Every refusal is a `ProofgateError` with
 * code `EVIDENCE_INVALID`; its `details.reason` is one of these, and its
 * one-line message starts with the same word.
 */
export const EVIDENCE_REASONS = [
  'UNSAFE_PATH',
  'DUPLICATE_ENTRY',
  'SYMLINK',
  'SPECIAL_FILE',
  'UNSUPPORTED_METHOD',
  'CRC_MISMATCH',
  'SIZE_MISMATCH',
  'EXPANSION_LIMIT',
  'ENTRY_LIMIT',
  'ARCHIVE_TOO_LARGE',
  'OVERLAPPING_ENTRIES',
  'HEADER_MISMATCH',
  'MISSING_FILE',
  'UNLISTED_FILE',
  'DIGEST_MISMATCH',
  'MANIFEST_INVALID',
  'SUBJECT_MISMATCH',
  'CORRUPT',
] as const;

export type EvidenceReason = (typeof EVIDENCE_REASONS)[number];

/** Line breaks and other controls, which a one-line message shows as `\u{..}` escapes. */
const BREAKS = /[\p{Cc}\p{Zl}\p{Zp}]/gu;

/** A refusal: code `EVIDENCE_INVALID`, `details.reason`, message `<REASON>: <what>` on one line. */
export function evidenceError(reason: EvidenceReason, message: string, details: Record<string, unknown> = {}): ProofgateError {
  const line = message.replace(BREAKS, (char) => `\\u{${(char.codePointAt(0) ?? 0).toString(16)}}`);
  return new ProofgateError('EVIDENCE_INVALID', `${reason}: ${line}`, { ...details, reason });
}

/** The reason of an evidence refusal, or null for any other value. */
export function evidenceReason(error: unknown): EvidenceReason | null {
  if (!isProofgateError(error, 'EVIDENCE_INVALID')) return null;
  const reason = error.details?.reason;
  return typeof reason === 'string' && (EVIDENCE_REASONS as readonly string[]).includes(reason) ? (reason as EvidenceReason) : null;
}

/** An archive-supplied name inside a message: JSON-quoted (one line) and cut to a readable length. */
export function quoteName(name: string): string {
  return JSON.stringify(name.length > 200 ? `${name.slice(0, 200)}…` : name);
}
