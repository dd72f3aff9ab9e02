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

// Strings with nothing to escape and no surrogate at all take the fast path.
// eslint-disable-next-line no-control-regex
const PLAIN_STRING = /^[^\u0000-\u001f"\\\ud800-\udfff]*$/;

function serializeString(text: string, path: string): string {
  // JSON.stringify escapes exactly as RFC 8785 asks (short forms for \b \t \n \f \r " \\,
  // lowercase \u00xx for other controls, everything else literal) once lone
  // surrogates, which it would escape instead of refusing, are ruled out.
  if (PLAIN_STRING.test(text)) return `"${text}"`;
  if (hasLoneSurrogate(text)) throw nonJson(path, 'string holds a lone surrogate');
  return JSON.stringify(text);
}

function serializeNumber(value: number, path: string): string {
  if (!Number.isFinite(value)) throw nonJson(path, `number ${String(value)}`);
  // ECMAScript Number::toString is the serialization RFC 8785 prescribes; -0 becomes 0.
  return Object.is(value, -0) ? '0' : String(value);
}

/**
 * Set an own, enumerable property. Plain assignment would treat the key
 * `__proto__` as the prototype setter and silently drop the member.
 */
export function setJsonMember(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function serialize(value: unknown, path: string, stack: object[]): string {
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
  if (stack.includes(object)) throw nonJson(path, 'cycle');
  stack.push(object);
  let out: string;
  if (Array.isArray(object)) {
    out = '[';
    for (let i = 0; i < object.length; i += 1) {
      if (!(i in object)) throw nonJson(`${path}[${i}]`, 'array hole');
      if (i > 0) out += ',';
      out += serialize(object[i], `${path}[${i}]`, stack);
    }
    out += ']';
  } else {
    if (!isPlainObject(object)) {
      const name = (object as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      throw nonJson(path, `${name} instance`);
    }
    if (Object.getOwnPropertySymbols(object).length > 0) throw nonJson(path, 'symbol key');
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    out = '{';
    for (let i = 0; i < keys.length; i += 1) {
      const key = keys[i] as string;
      if (i > 0) out += ',';
      out += serializeString(key, `${path}.${key}`);
      out += ':';
      out += serialize(record[key], `${path}.${key}`, stack);
    }
    out += '}';
  }
  stack.pop();
  return out;
}

/** True for keys that JavaScript enumerates before all others (array-index-like). */
function isIndexKey(key: string): boolean {
  const first = key.charCodeAt(0);
  return first >= 48 && first <= 57 && /^(?:0|[1-9][0-9]{0,9})$/.test(key) && Number(key) < 4294967295;
}

class NeedsSlowPath extends Error {}

/**
 * Validate a value and return it with every object's keys in code-unit order
 * (objects already in order are reused, not copied), so that JSON.stringify
 * of the result is the canonical text. Objects with index-like keys, whose
 * enumeration order JavaScript fixes, send the caller to the slow path.
 */
function normalize(value: unknown, stack: object[]): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw nonJson('', `number ${String(value)}`);
      return value;
    case 'object':
      break;
    default:
      throw nonJson('', typeof value);
  }
  if (value === null) return null;
  const object = value as object;
  if (stack.includes(object)) throw nonJson('', 'cycle');
  stack.push(object);
  let result: unknown;
  if (Array.isArray(object)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < object.length; i += 1) {
      if (!(i in object)) throw nonJson('', 'array hole');
      const child: unknown = object[i];
      const normalized = normalize(child, stack);
      if (normalized !== child) {
        copy ??= object.slice();
        copy[i] = normalized;
      }
    }
    result = copy ?? object;
  } else {
    // JSON.stringify would drop a symbol-keyed member silently: the careful serializer refuses it.
    if (!isPlainObject(object) || Object.getOwnPropertySymbols(object).length > 0) throw new NeedsSlowPath();
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record);
    let sorted = true;
    for (let i = 0; i < keys.length; i += 1) {
      const key = keys[i] as string;
      if (isIndexKey(key)) throw new NeedsSlowPath();
      if (i > 0 && (keys[i - 1] as string) > key) sorted = false;
    }
    if (sorted) {
      let copy: Record<string, unknown> | null = null;
      for (const key of keys) {
        const child = record[key];
        const normalized = normalize(child, stack);
        if (normalized !== child) {
          copy ??= { ...record };
          setJsonMember(copy, key, normalized);
        }
      }
      result = copy ?? object;
    } else {
      keys.sort();
      const copy: Record<string, unknown> = {};
      for (const key of keys) setJsonMember(copy, key, normalize(record[key], stack));
      result = copy;
    }
  }
  stack.pop();
  return result;
}

// A lone surrogate that JSON.stringify escaped: an odd run of backslashes before `ud8xx`..`udfxx`.
const ESCAPED_SURROGATE = /(?<!\\)(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/;

/**
 * RFC 8785 (JSON Canonicalization Scheme) text of a value. Anything that is not
 * plain JSON is a `NON_JSON_VALUE` error; nothing is silently dropped.
 */
export function canonicalJson(value: unknown): string {
  let normalized: unknown;
  try {
    normalized = normalize(value, []);
  } catch (error) {
    if (!(error instanceof NeedsSlowPath) && !(error instanceof ProofgateError)) throw error;
    // The careful serializer also names the path of a refused value.
    return serialize(value, '', []);
  }
  const text = JSON.stringify(normalized);
  if (text.includes('\\ud') && ESCAPED_SURROGATE.test(text)) return serialize(value, '', []);
  return text;
}

/** UTF-8 bytes of the canonical text. */
export function canonicalBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalJson(value));
}

/** A duplicate's path names at most this many of its innermost levels. */
const MAX_PATH_PARTS = 32;

/** The index of the quote that closes the string opening at `open` in valid JSON text: the next one after an even run of backslashes. */
function closingQuote(text: string, open: number): number {
  // indexOf is much faster than a loop over the characters of a long string.
  let end = text.indexOf('"', open + 1);
  for (;;) {
    let slash = end - 1;
    while (text.charCodeAt(slash) === 0x5c /* \ */) slash -= 1;
    if ((end - 1 - slash) % 2 === 0) return end;
    end = text.indexOf('"', end + 1);
  }
}

/**
 * How many member names `text` (already known to be valid JSON) holds, over
 * all its objects. JSON.parse makes one own key of each, except that a name
 * seen twice in one object collapses into one: so the text has a duplicate
 * exactly when this count exceeds `countKeys` of the parsed value. Counting
 * needs no set of names per object, which makes it the cheap first test.
 */
function countMemberNames(text: string): number {
  // One entry per open object (true) or array (false); a body may nest 100,000 levels, so no recursion.
  const open: boolean[] = [];
  let expectName = false;
  let names = 0;
  for (let i = 0; i < text.length; i += 1) {
    const char = text.charCodeAt(i);
    if (char === 0x22 /* " */) {
      if (expectName) names += 1;
      expectName = false;
      i = closingQuote(text, i);
    } else if (char === 0x7b /* { */) {
      open.push(true);
      expectName = true;
    } else if (char === 0x5b /* [ */) {
      open.push(false);
      expectName = false;
    } else if (char === 0x7d /* } */ || char === 0x5d /* ] */) {
      open.pop();
      expectName = false;
    } else if (char === 0x2c /* , */) {
      expectName = open[open.length - 1] === true;
    }
  }
  return names;
}

/**
 * How many own keys the objects of a parsed JSON value hold, over all of
 * them (walked without recursion, and without a copy of each object's keys
 * or values). `for...in` would also visit enumerable names inherited from a
 * tampered Object.prototype (the only prototype of JSON.parse's objects);
 * when it has any, each name is checked, so that they can neither hide a
 * duplicate nor make one up.
 */
function countKeys(value: unknown): number {
  const tampered = Object.keys(Object.prototype).length > 0;
  let keys = 0;
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const next = todo.pop();
    // Only objects are pushed below; the value itself may be a string, whose indices for...in would visit.
    if (next === null || typeof next !== 'object') continue;
    if (Array.isArray(next)) {
      for (const child of next as unknown[]) if (child !== null && typeof child === 'object') todo.push(child);
      continue;
    }
    for (const name in next) {
      if (tampered && !Object.hasOwn(next, name)) continue;
      keys += 1;
      const child = (next as Record<string, unknown>)[name];
      if (child !== null && typeof child === 'object') todo.push(child);
    }
  }
  return keys;
}

/**
 * The first member name that occurs twice in one object of `text` (already
 * known to be valid JSON), with its path, or null. JSON.parse keeps the last
 * duplicate silently; RFC 8785 needs I-JSON, which has none.
 */
function findDuplicateName(text: string): string | null {
  // One frame per open object or array. A frame's path is built from its parents only when a
  // duplicate is found, and a name without escapes is sliced, not decoded: both keep the scan cheap
  // on large bodies (webhook deliveries).
  type Frame = { readonly parent: Frame | null; readonly key: string; readonly names: Set<string> | null; expectName: boolean; last: string };
  // The path of a frame, walked without recursion (a body may nest 100,000 levels); a deep one keeps its last levels.
  const pathOf = (frame: Frame): string => {
    const parts: string[] = [];
    for (let at: Frame = frame; at.parent !== null; at = at.parent) parts.push(at.parent.names !== null ? `.${at.key}` : '[]');
    const kept = parts.length > MAX_PATH_PARTS ? [...parts.slice(0, MAX_PATH_PARTS).reverse()] : parts.reverse();
    return `${parts.length > MAX_PATH_PARTS ? '$...' : '$'}${kept.join('')}`;
  };
  let top = null as Frame | null;
  for (let i = 0; i < text.length; i += 1) {
    const char = text.charCodeAt(i);
    if (char === 0x22 /* " */) {
      const end = closingQuote(text, i);
      if (top !== null && top.names !== null && top.expectName) {
        const raw = text.slice(i + 1, end);
        const name = raw.includes('\\') ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        if (top.names.has(name)) return `${pathOf(top)}.${name}`;
        top.names.add(name);
        top.last = name;
        top.expectName = false;
      }
      i = end;
    } else if (char === 0x7b /* { */ || char === 0x5b /* [ */) {
      const object = char === 0x7b;
      const parent: Frame | null = top;
      const frame: Frame = { parent, key: parent === null ? '' : parent.last, names: object ? new Set() : null, expectName: object, last: '' };
      top = frame;
    } else if (char === 0x7d /* } */ || char === 0x5d /* ] */) {
      top = top === null ? null : top.parent;
    } else if (char === 0x2c /* , */ && top !== null && top.names !== null) {
      top.expectName = true;
    }
  }
  return null;
}

/**
 * Parse JSON text; malformed input, and an object with a member name twice
 * (which JSON.parse would silently collapse), is a typed `INVALID_JSON` error.
 * A leading byte order mark is ignored.
 */
export function parseJson(text: string, what = 'input'): JsonValue {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  let value: JsonValue;
  try {
    value = JSON.parse(body) as JsonValue;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ProofgateError('INVALID_JSON', `${what} is not valid JSON: ${reason}`);
  }
  // The count comparison finds whether there is a duplicate; the slower scan, only then, says where.
  if (countMemberNames(body) !== countKeys(value)) {
    const duplicate = findDuplicateName(body) ?? '$';
    throw new ProofgateError('INVALID_JSON', `${what} is not valid JSON: member name ${duplicate} occurs twice`);
  }
  return value;
}

/** One strict decoder: a non-streaming `decode` keeps no state between calls. */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Decode UTF-8 bytes strictly: invalid sequences are an `INVALID_JSON` error, never replaced. */
export function decodeUtf8(bytes: Uint8Array, what = 'input'): string {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw new ProofgateError('INVALID_JSON', `${what} is not valid UTF-8`);
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
