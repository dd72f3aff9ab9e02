import { randomBytes, randomUUID } from 'node:crypto';

/** A random identifier with a readable prefix, e.g. `run_3f2a...`. */
export function newId(prefix: string): string {
  return `${prefix}_${randomUUID().replace(/-/g, '')}`;
}

/** Hex of `bytes` random bytes (at least 16, i.e. 128 bits, by default). */
export function randomHex(bytes = 16): string {
  return randomBytes(bytes).toString('hex');
}
