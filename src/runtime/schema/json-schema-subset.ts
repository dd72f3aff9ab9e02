import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { ProofgateError, canonicalJson } from '../../core/index.js';
import { isJsonObject, type ReadonlyJsonObject, type ReadonlyJsonValue } from '../json-types.js';

/**
 * A small, closed subset of JSON Schema used for callback responses and node
 * result contracts: `type`, `properties`, `required`, `additionalProperties`
 * (boolean), `items`, `enum`, `const`, `minLength`, `maxLength`, `minimum`,
 * `maximum`, plus `description`/`title`. Any other keyword is refused, so
 * nothing is silently ignored. The subset is itself written as a JSON Schema
 * (`SUBSET`) and values are checked by ajv.
 */
const TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'] as const;

const SUBSET = {
  $id: 'proofgate:json-schema-subset',
  type: 'object',
  additionalProperties: false,
  properties: {
    type: { enum: TYPES },
    properties: { type: 'object', additionalProperties: { $ref: '#' } },
    required: { type: 'array', items: { type: 'string' } },
    additionalProperties: { type: 'boolean' },
    items: { $ref: '#' },
    enum: { type: 'array' },
    const: true,
    minLength: { type: 'integer', minimum: 0 },
    maxLength: { type: 'integer', minimum: 0 },
    minimum: { type: 'number' },
    maximum: { type: 'number' },
    description: true,
    title: true,
  },
} as const;

/** What a keyword's value must be, for the one-line error. */
const KEYWORD_RULES: Readonly<Record<string, string>> = {
  type: `must be one of ${TYPES.join(', ')}`,
  properties: 'must be an object',
  required: 'must be a list of names',
  additionalProperties: 'must be a boolean',
  enum: 'must be a list',
  minLength: 'must be an integer >= 0',
  maxLength: 'must be an integer >= 0',
  minimum: 'must be a number',
  maximum: 'must be a number',
};

/**
 * Strict mode refuses unknown keywords (the subset check already does). The
 * type-related strict checks are off: the subset allows `minLength` without
 * `type: 'string'` and `required` naming a property `properties` does not
 * list, which are valid JSON Schema that strictTypes/strictRequired reject.
 * `allErrors` is off: the first violation is the message.
 */
let made: { readonly ajv: Ajv; readonly checkSubset: ValidateFunction } | undefined;
/** Made on first use: building ajv and compiling the subset costs a command that never checks a schema a fifth of its start-up. */
function subsetAjv(): { readonly ajv: Ajv; readonly checkSubset: ValidateFunction } {
  if (made === undefined) {
    const ajv = new Ajv({ strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false, logger: false });
    made = { ajv, checkSubset: ajv.compile(SUBSET) };
  }
  return made;
}

/** Compiled validators by canonical schema, compiled once; the oldest go first past `CACHE_LIMIT`. */
const CACHE_LIMIT = 500;
const compiled = new Map<string, { readonly schema: object; readonly validate: ValidateFunction }>();

/** `$.a.b[]` for the schema node a pointer into a schema leads to, and the keyword it ends on (if any). */
function schemaLocation(instancePath: string): { path: string; keyword: string | null } {
  const segments = instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let path = '$';
  for (let i = 0; i < segments.length; i += 1) {
    const segment = segments[i] as string;
    if (segment === 'items') path += '[]';
    else if (segment === 'properties' && i + 1 < segments.length) path += `.${segments[(i += 1)] as string}`;
    else return { path, keyword: segment };
  }
  return { path, keyword: null };
}

function subsetProblem(error: ErrorObject): string {
  const { path, keyword } = schemaLocation(error.instancePath);
  if (error.keyword === 'additionalProperties' && keyword === null) {
    return `unsupported schema keyword ${String(error.params.additionalProperty)} at ${path}`;
  }
  if (keyword === null) return `schema at ${path} must be an object`;
  return `${keyword} at ${path} ${KEYWORD_RULES[keyword] ?? error.message ?? 'is not valid'}`;
}

/** The reason `schema` is outside the subset (or does not compile), else its validator. */
function validatorFor(schema: unknown): ValidateFunction | string {
  if (!isJsonObject(schema)) return 'schema at $ must be an object';
  let key: string;
  try {
    key = canonicalJson(schema);
  } catch (error) {
    return `schema is not JSON: ${error instanceof Error ? error.message : String(error)}`;
  }
  const hit = compiled.get(key);
  if (hit !== undefined) {
    compiled.delete(key);
    compiled.set(key, hit);
    return hit.validate;
  }
  const { ajv, checkSubset } = subsetAjv();
  if (!checkSubset(schema)) return subsetProblem((checkSubset.errors ?? [])[0] as ErrorObject);
  // ajv keeps the object it compiled; a private copy lets an evicted entry be removed from it.
  const copy = JSON.parse(key) as object;
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(copy);
  } catch (error) {
    return `schema does not compile: ${error instanceof Error ? error.message : String(error)}`;
  }
  compiled.set(key, { schema: copy, validate });
  if (compiled.size > CACHE_LIMIT) {
    const [oldestKey, oldest] = compiled.entries().next().value as [string, { schema: object }];
    compiled.delete(oldestKey);
    ajv.removeSchema(oldest.schema);
  }
  return validate;
}

/** Throw `INVALID_INPUT` unless `schema` uses only the supported subset. */
export function checkSchemaSubset(schema: unknown, what: string): void {
  const validator = validatorFor(schema);
  if (typeof validator === 'string') throw new ProofgateError('INVALID_INPUT', `${what}: ${validator}`);
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/** `$.a[0].b` for a pointer into `value` (an index only where the value holds an array). */
function valuePath(instancePath: string, value: unknown): { path: string; at: unknown } {
  let path = '$';
  let at: unknown = value;
  for (const raw of instancePath.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path += Array.isArray(at) ? `[${segment}]` : `.${segment}`;
    at = typeof at === 'object' && at !== null ? (at as Record<string, unknown>)[segment] : undefined;
  }
  return { path, at };
}

function violationText(error: ErrorObject, value: unknown): string {
  const { path, at } = valuePath(error.instancePath, value);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'type':
      return `${path} must be ${String(params.type)}, got ${typeOf(at)}`;
    case 'enum':
      return `${path} is not one of the allowed values`;
    case 'const':
      return `${path} must equal the fixed value`;
    case 'minLength':
      return `${path} is shorter than ${String(params.limit)}`;
    case 'maxLength':
      return `${path} is longer than ${String(params.limit)}`;
    case 'minimum':
      return `${path} is below ${String(params.limit)}`;
    case 'maximum':
      return `${path} is above ${String(params.limit)}`;
    case 'required':
      return `${path}.${String(params.missingProperty)} is required`;
    case 'additionalProperties':
      return `${path}.${String(params.additionalProperty)} is not allowed`;
    default:
      return `${path} ${error.message ?? `fails ${error.keyword}`}`;
  }
}

/**
 * The first reason `value` does not satisfy `schema`, or null when it does.
 * A schema outside the subset is itself the reason (it is never half applied).
 */
export function schemaViolation(schema: ReadonlyJsonObject, value: ReadonlyJsonValue): string | null {
  const validator = validatorFor(schema);
  if (typeof validator === 'string') return `the schema is not usable: ${validator}`;
  if (validator(value)) return null;
  const first = (validator.errors ?? [])[0];
  return first === undefined ? '$ does not match the schema' : violationText(first, value);
}
