import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import { ProofgateError } from './errors.js';

/** `sha256:` followed by 64 lowercase hex digits. */
export type Sha256Digest = `sha256:${string}`;

const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

export function isSha256Digest(value: unknown): value is Sha256Digest {
  return typeof value === 'string' && DIGEST_PATTERN.test(value);
}

export function assertSha256Digest(value: unknown, what = 'digest'): Sha256Digest {
  if (!isSha256Digest(value)) {
    throw new ProofgateError('INVALID_INPUT', `${what} must be sha256:<64 lowercase hex>`);
  }
  return value;
}

/** Hex sha256 of bytes or a UTF-8 string. */
export function sha256Hex(input: Uint8Array | string): string {
  return createHash('sha256').update(input).digest('hex');
}

export function sha256Digest(input: Uint8Array | string): Sha256Digest {
  return `sha256:${sha256Hex(input)}`;
}

/** Digest of the RFC 8785 canonical bytes of a JSON value. */
export function digestJson(value: unknown): Sha256Digest {
  return sha256Digest(canonicalJson(value));
}

/** The hex part of a digest. */
export function digestHex(digest: Sha256Digest): string {
  return digest.slice('sha256:'.length);
}
