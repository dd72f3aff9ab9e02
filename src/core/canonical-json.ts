import { ProofgateError } from './errors.js';

/**
 * A JSON value as proofgate stores and hashes it.
 */
export type JsonPrimitive = null | boolean | number | string;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

function nonJson(path: string, what: string): ProofgateError {
  return new ProofgateError('NON_JSON_VALUE', `not a JSON value at ${path || '$'}: ${what}`, { path: path || '$' });
}

function hasLoneSurrogate(text: string): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i += 1;
        continue;
      }
      return true;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) return true;
  }
  return false;
}

const SHORT_ESCAPES: Record<number, string> = {
  0x08: '\\b',
  0x09: '\\t',
  0x0a: '\\n',
  0x0c: '\\f',
  0x0d: '\\r',
  0x22: '\\"',
  0x5c: '\\\\',
};

// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /[\u0000-\u001f"\\]/;

function serializeString(text: string, path: string): string {
  if (hasLoneSurrogate(text)) throw nonJson(path, 'string holds a lone surrogate');
  if (!NEEDS_ESCAPE.test(text)) return `"${text}"`;
  let out = '"';
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    const short = SHORT_ESCAPES[unit];
    if (short !== undefined) out += short;
    else if (unit < 0x20) out += `\\u${unit.toString(16).padStart(4, '0')}`;
    else out += text[i];
  }
  return `${out}"`;
}

function serializeNumber(value: number, path: string): string {
  if (!Number.isFinite(value)) throw nonJson(path, `number ${String(value)}`);
  // ECMAScript Number::toString is the serialization RFC 8785 prescribes; -0 becomes 0.
  return Object.is(value, -0) ? '0' : String(value);
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function serialize(value: unknown, path: string, seen: Set<object>): string {
  switch (typeof value) {
    case 'string':
      return serializeString(value, path);
    case 'number':
      return serializeNumber(value, path);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      throw nonJson(path, 'undefined');
    case 'function':
      throw nonJson(path, 'function');
    case 'bigint':
      throw nonJson(path, 'bigint');
    case 'symbol':
      throw nonJson(path, 'symbol');
    default:
      break;
  }
  if (value === null) return 'null';
  const object = value as object;
  if (seen.has(object)) throw nonJson(path, 'cycle');
  seen.add(object);
  try {
    if (Array.isArray(object)) {
      const parts: string[] = [];
      for (let i = 0; i < object.length; i += 1) {
        if (!(i in object)) throw nonJson(`${path}[${i}]`, 'array hole');
        parts.push(serialize(object[i], `${path}[${i}]`, seen));
      }
      return `[${parts.join(',')}]`;
    }
    if (!isPlainObject(object)) {
      const name = (object as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      throw nonJson(path, `${name} instance`);
    }
    if (Object.getOwnPropertySymbols(object).length > 0) throw nonJson(path, 'symbol key');
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    const parts: string[] = [];
    for (const key of keys) {
      const childPath = `${path}.${key}`;
      parts.push(`${serializeString(key, childPath)}:${serialize(record[key], childPath, seen)}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    seen.delete(object);
  }
}

/**
 * RFC 8785 (JSON Canonicalization Scheme) text of a value. Anything that is not
 * plain JSON is a `NON_JSON_VALUE` error; nothing is silently dropped.
 */
export function canonicalJson(value: unknown): string {
  return serialize(value, '', new Set());
}

/** UTF-8 bytes of the canonical text. */
export function canonicalBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalJson(value));
}

/** Parse JSON text; malformed input is a typed `INVALID_JSON` error. */
export function parseJson(text: string, what = 'input'): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ProofgateError('INVALID_JSON', `${what} is not valid JSON: ${reason}`);
  }
}

/** Deep-freeze a JSON value (in place) and return it. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value as object)) deepFreeze(child);
  }
  return value;
}

/** A structural copy made through the canonical form (drops nothing, fails on non-JSON). */
export function cloneJson<T extends JsonValue>(value: T): T {
  return JSON.parse(canonicalJson(value)) as T;
}
