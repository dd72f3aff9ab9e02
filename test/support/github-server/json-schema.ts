/**
 * JSON-schema checking for the GitHub API test server, with ajv. GitHub's
 * description is OpenAPI 3.0, whose schema dialect differs from the JSON
 * Schema ajv implements in a few places; `toJsonSchema` translates them (see
 * there) and everything else is ajv's own. Formats (date-time, uri, email,
 * int64, ...) come from ajv-formats.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

/** A schema in the OpenAPI 3.0 dialect (only the keys this module looks at are typed). */
export interface SchemaObject {
  readonly type?: string;
  readonly nullable?: boolean;
  readonly enum?: readonly unknown[];
  readonly $ref?: string;
  readonly [keyword: string]: unknown;
}

export interface SchemaViolation {
  readonly path: string;
  readonly message: string;
}

/** Checks one value; the answer lists every violation ([] when the value fits). */
export type SchemaChecker = (value: unknown) => SchemaViolation[];

/**
 * Strict mode stays on for schema keywords, so a validation keyword ajv does
 * not know (a newer OpenAPI subset, a typo) is a compile error instead of a
 * check silently skipped. OpenAPI's annotation keywords are declared as
 * vocabulary; its `x-*` extensions and `nullable` are translated away by
 * `toJsonSchema`. The type-related strict checks are off: OpenAPI schemas
 * routinely put `properties` or `required` beside `allOf` without a `type`,
 * which is valid JSON Schema that ajv's strictTypes/strictRequired reject.
 */
const ajv = new Ajv({ allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false, logger: false });
ajv.addVocabulary(['example', 'externalDocs', 'xml']);
addFormats.default(ajv);

const SUBSCHEMA = new Set(['items', 'additionalItems', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames']);
const SUBSCHEMA_LIST = new Set(['allOf', 'anyOf', 'oneOf']);
const SUBSCHEMA_MAP = new Set(['properties', 'patternProperties', '$defs', 'definitions']);

function toJsonSchemaMap(map: unknown, refBase: string, seen: WeakMap<object, unknown>): unknown {
  if (typeof map !== 'object' || map === null) return map;
  return Object.fromEntries(Object.entries(map).map(([name, schema]) => [name, toJsonSchema(schema, refBase, seen)]));
}

/**
 * OpenAPI 3.0 -> JSON Schema:
 * - `nullable: true` also allows null. ajv has a `nullable` keyword of its
 *   own, but it refuses a `nullable` without a `type` (GitHub writes
 *   `{ allOf: [...], nullable: true }`) and keeps null out of an `enum` that
 *   does not list it (GitHub's `conclusion` enums are nullable and answer
 *   null), so it is translated: a `type` gains `'null'` and an `enum` gains
 *   null; without a `type`, null is let through by an `if`/`else`.
 * - `x-*` extension keys carry no validation and are dropped.
 * - `#/components/schemas/X` references point into the document's schemas,
 *   registered with ajv under `refBase`.
 * Objects shared by several references are translated once (`seen`).
 */
function toJsonSchema(node: unknown, refBase: string, seen: WeakMap<object, unknown>): unknown {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return node;
  const done = seen.get(node);
  if (done !== undefined) return done;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key.startsWith('x-') || key === 'nullable') continue;
    if (key === '$ref' && typeof value === 'string') out.$ref = value.replace(/^#\/components\/schemas\//, `${refBase}#/$defs/`);
    else if (SUBSCHEMA.has(key)) out[key] = toJsonSchema(value, refBase, seen);
    else if (SUBSCHEMA_LIST.has(key) && Array.isArray(value)) out[key] = value.map((item) => toJsonSchema(item, refBase, seen));
    // A map from names to schemas: a property may well be called `nullable` or `x-...`.
    else if (SUBSCHEMA_MAP.has(key)) out[key] = toJsonSchemaMap(value, refBase, seen);
    // Anything else (enum, example, default, ...) is a value, not a schema, and is kept as it is.
    else out[key] = value;
  }
  let result: Record<string, unknown> = out;
  if ((node as SchemaObject).nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    if (out.type === undefined && out.enum === undefined) result = { if: { type: 'null' }, else: out };
  }
  seen.set(node, result);
  return result;
}

function pathOf(instancePath: string, value: unknown): string {
  let path = '$';
  let at: unknown = value;
  for (const raw of instancePath.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path += Array.isArray(at) ? `[${segment}]` : `.${segment}`;
    at = typeof at === 'object' && at !== null ? (at as Record<string, unknown>)[segment] : undefined;
  }
  return path;
}

function violationOf(error: ErrorObject, value: unknown): SchemaViolation {
  const path = pathOf(error.instancePath, value);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return { path, message: `missing required property '${String(params.missingProperty)}'` };
    case 'additionalProperties':
      return { path, message: `unexpected property '${String(params.additionalProperty)}'` };
    case 'enum':
      return { path, message: `is not one of ${JSON.stringify(params.allowedValues)}` };
    default:
      return { path, message: error.message ?? error.keyword };
  }
}

/**
 * One violation per thing that is wrong: the errors ajv reports from inside
 * the branches of a failed `anyOf`/`oneOf` are dropped (the failed keyword
 * itself is reported), and so is the summary error of an `if`/`else` (the
 * `else` branch's own errors are reported).
 */
function violations(check: ValidateFunction, value: unknown): SchemaViolation[] {
  if (check(value)) return [];
  return (check.errors ?? [])
    .filter((error) => error.keyword !== 'if' && !/\/(anyOf|oneOf)\/\d+\//.test(error.schemaPath))
    .map((error) => violationOf(error, value));
}

let documents = 0;

/**
 * Compile the schemas of one OpenAPI document: `components` are its
 * `components.schemas` (what `$ref`s name). Returns a compiler for the
 * document's own schemas (request bodies, responses); compile each once and
 * keep the check.
 */
export function openApiSchemas(components: Readonly<Record<string, unknown>>): (schema: SchemaObject) => SchemaChecker {
  documents += 1;
  const refBase = `openapi-${documents}`;
  const seen = new WeakMap<object, unknown>();
  ajv.addSchema({ $id: refBase, $defs: toJsonSchemaMap(components, refBase, seen) } as object);
  return (schema) => {
    const check = ajv.compile(toJsonSchema(schema, refBase, seen) as object);
    return (value) => violations(check, value);
  };
}

const standalone = new WeakMap<SchemaObject, SchemaChecker>();
const compileStandalone = openApiSchemas({});

/** Check `value` against one self-contained OpenAPI 3.0 schema (compiled on first use, then reused). */
export function validateSchema(schema: SchemaObject, value: unknown): SchemaViolation[] {
  let check = standalone.get(schema);
  if (check === undefined) {
    check = compileStandalone(schema);
    standalone.set(schema, check);
  }
  return check(value);
}
