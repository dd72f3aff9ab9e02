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

/**
 * Characters a one-line message shows as `\u{..}` escapes: controls and line
 * breaks, every invisible format character (bidi overrides and isolates, zero
 * width characters, a byte order mark) and lone surrogates.
 */
const ESCAPED = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** Longest refusal message, in characters (reason and escapes included); a longer one is cut with `…`. */
export const MAX_MESSAGE_CHARS = 1000;

/** `text` on one line, with every character of `ESCAPED` escaped, cut to `max` characters with `…`. */
export function escapeText(text: string, max: number): string {
  let out = '';
  // Each character gives at least one character out, so no more than `max` of them are looked at.
  for (const char of text.length > max ? text.slice(0, max + 1) : text) {
    const piece = ESCAPED.test(char) ? `\\u{${(char.codePointAt(0) ?? 0).toString(16)}}` : char;
    if (out.length + piece.length > max) return `${out}…`;
    out += piece;
  }
  return out;
}

/** A refusal: code `EVIDENCE_INVALID`, `details.reason`, message `<REASON>: <what>` on one line, escaped and bounded. */
export function evidenceError(reason: EvidenceReason, message: string, details: Record<string, unknown> = {}): ProofgateError {
  return new ProofgateError('EVIDENCE_INVALID', escapeText(`${reason}: ${message}`, MAX_MESSAGE_CHARS), { ...details, reason });
}

/** The reason of an evidence refusal, or null for any other value. */
export function evidenceReason(error: unknown): EvidenceReason | null {
  if (!isProofgateError(error, 'EVIDENCE_INVALID')) return null;
  const reason = error.details?.reason;
  return typeof reason === 'string' && (EVIDENCE_REASONS as readonly string[]).includes(reason) ? (reason as EvidenceReason) : null;
}

/** Longest name, in characters, that a message quotes in full. */
const MAX_QUOTED_CHARS = 200;

/** An archive-supplied name inside a message: JSON-quoted, cut to a readable length, every invisible character escaped. */
export function quoteName(name: string): string {
  const cut = name.length > MAX_QUOTED_CHARS ? `${name.slice(0, MAX_QUOTED_CHARS)}…` : name;
  // JSON.stringify escapes quotes, backslashes and controls; what it leaves raw (bidi controls, U+2028) is escaped after it.
  return escapeText(JSON.stringify(cut), Number.POSITIVE_INFINITY);
}
