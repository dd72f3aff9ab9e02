import { ProofgateError } from '../core/index.js';

/**
 * JSON as callers hand it to the runtime. Read-only arrays and objects are
 * accepted so `as const` values type-check; everything is canonicalized
 * (RFC 8785) before it is hashed or stored.
 */
export type ReadonlyJsonValue = null | boolean | number | string | readonly ReadonlyJsonValue[] | { readonly [key: string]: ReadonlyJsonValue };

export type ReadonlyJsonObject = { readonly [key: string]: ReadonlyJsonValue };

export function isJsonObject(value: unknown): value is ReadonlyJsonObject {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

export function requireJsonObject(value: unknown, what: string): ReadonlyJsonObject {
  if (!isJsonObject(value)) throw new ProofgateError('INVALID_INPUT', `${what} must be a JSON object`);
  return value;
}
