import { ProofgateError, canonicalJson } from '../../core/index.js';
import { isJsonObject, type ReadonlyJsonObject, type ReadonlyJsonValue } from '../json-types.js';

/**
 * A small, closed subset of JSON Schema used for callback responses and node
 * result contracts: `type`, `properties`, `required`, `additionalProperties`
 * (boolean), `items`, `enum`, `const`, `minLength`, `maxLength`, `minimum`,
 * `maximum`, plus `description`/`title`. Any other keyword is refused when the
 * schema is checked, so nothing is silently ignored.
 */
const KEYWORDS = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const',
  'minLength', 'maxLength', 'minimum', 'maximum', 'description', 'title',
]);
const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

/** Throw `INVALID_INPUT` unless `schema` uses only the supported subset. */
export function checkSchemaSubset(schema: unknown, what: string, path = '$'): void {
  if (!isJsonObject(schema)) throw new ProofgateError('INVALID_INPUT', `${what}: schema at ${path} must be an object`);
  for (const [key, value] of Object.entries(schema)) {
    if (!KEYWORDS.has(key)) throw new ProofgateError('INVALID_INPUT', `${what}: unsupported schema keyword ${key} at ${path}`);
    if (key === 'type' && !(typeof value === 'string' && TYPES.has(value))) {
      throw new ProofgateError('INVALID_INPUT', `${what}: type at ${path} must be one of ${[...TYPES].join(', ')}`);
    }
    if (key === 'properties') {
      if (!isJsonObject(value)) throw new ProofgateError('INVALID_INPUT', `${what}: properties at ${path} must be an object`);
      for (const [name, child] of Object.entries(value)) checkSchemaSubset(child, what, `${path}.${name}`);
    }
    if (key === 'items') checkSchemaSubset(value, what, `${path}[]`);
    if (key === 'required' && !(Array.isArray(value) && value.every((entry) => typeof entry === 'string'))) {
      throw new ProofgateError('INVALID_INPUT', `${what}: required at ${path} must be a list of names`);
    }
    if (key === 'additionalProperties' && typeof value !== 'boolean') {
      throw new ProofgateError('INVALID_INPUT', `${what}: additionalProperties at ${path} must be a boolean`);
    }
    if (key === 'enum' && !Array.isArray(value)) throw new ProofgateError('INVALID_INPUT', `${what}: enum at ${path} must be a list`);
    if (['minLength', 'maxLength', 'minimum', 'maximum'].includes(key) && typeof value !== 'number') {
      throw new ProofgateError('INVALID_INPUT', `${what}: ${key} at ${path} must be a number`);
    }
  }
}

function typeOf(value: ReadonlyJsonValue): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function sameJson(a: ReadonlyJsonValue, b: ReadonlyJsonValue | undefined): boolean {
  return b !== undefined && canonicalJson(a) === canonicalJson(b);
}

/** The first reason `value` does not satisfy `schema`, or null when it does. */
export function schemaViolation(schema: ReadonlyJsonObject, value: ReadonlyJsonValue, path = '$'): string | null {
  const type = schema.type;
  const actual = typeOf(value);
  if (typeof type === 'string') {
    const ok = type === actual || (type === 'integer' && typeof value === 'number' && Number.isInteger(value));
    if (!ok) return `${path} must be ${type}, got ${actual}`;
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => sameJson(option, value))) return `${path} is not one of the allowed values`;
  if ('const' in schema && !sameJson(schema.const ?? null, value)) return `${path} must equal the fixed value`;
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && value.length < schema.minLength) return `${path} is shorter than ${schema.minLength}`;
    if (typeof schema.maxLength === 'number' && value.length > schema.maxLength) return `${path} is longer than ${schema.maxLength}`;
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) return `${path} is below ${schema.minimum}`;
    if (typeof schema.maximum === 'number' && value > schema.maximum) return `${path} is above ${schema.maximum}`;
  }
  if (Array.isArray(value) && isJsonObject(schema.items)) {
    for (let i = 0; i < value.length; i += 1) {
      const inner = schemaViolation(schema.items, value[i] ?? null, `${path}[${i}]`);
      if (inner) return inner;
    }
  }
  if (isJsonObject(value)) {
    const properties = isJsonObject(schema.properties) ? schema.properties : {};
    if (Array.isArray(schema.required)) {
      for (const name of schema.required) {
        if (typeof name === 'string' && !(name in value)) return `${path}.${name} is required`;
      }
    }
    for (const [name, child] of Object.entries(value)) {
      const childSchema = properties[name];
      if (isJsonObject(childSchema)) {
        const inner = schemaViolation(childSchema, child, `${path}.${name}`);
        if (inner) return inner;
      } else if (schema.additionalProperties === false) {
        return `${path}.${name} is not allowed`;
      }
    }
  }
  return null;
}
