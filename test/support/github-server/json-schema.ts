/**
 * A small validator for the JSON-schema dialect of GitHub's OpenAPI 3.0
 * description: type (+ nullable), properties, required, additionalProperties,
 * items, enum, oneOf / anyOf / allOf, minimum / maximum, minLength /
 * maxLength and the formats date-time, uri and email. Annotations (title,
 * description, example, default, deprecated, x-*) are ignored.
 */

export interface SchemaObject {
  readonly type?: string;
  readonly nullable?: boolean;
  readonly properties?: Readonly<Record<string, SchemaObject>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean | SchemaObject;
  readonly items?: SchemaObject;
  readonly enum?: readonly unknown[];
  readonly oneOf?: readonly SchemaObject[];
  readonly anyOf?: readonly SchemaObject[];
  readonly allOf?: readonly SchemaObject[];
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly format?: string;
}

export interface SchemaViolation {
  readonly path: string;
  readonly message: string;
}

export function validateSchema(schema: SchemaObject, value: unknown, path = '$'): SchemaViolation[] {
  const errors: SchemaViolation[] = [];
  check(schema, value, path, errors);
  return errors;
}

function check(schema: SchemaObject, value: unknown, path: string, errors: SchemaViolation[]): void {
  if (value === null) {
    // OpenAPI 3.0: null is allowed only with nullable: true (or an enum listing null).
    if (schema.nullable === true || (schema.enum?.includes(null) ?? false)) return;
    if (schema.type !== undefined || schema.properties !== undefined) {
      errors.push({ path, message: 'is null but the schema is not nullable' });
      return;
    }
  }
  if (schema.allOf) for (const part of schema.allOf) check(part, value, path, errors);
  if (schema.anyOf && !schema.anyOf.some((part) => validateSchema(part, value, path).length === 0)) {
    errors.push({ path, message: 'matches none of anyOf' });
  }
  if (schema.oneOf) {
    const matches = schema.oneOf.filter((part) => validateSchema(part, value, path).length === 0).length;
    if (matches !== 1) errors.push({ path, message: `matches ${matches} of oneOf (exactly one required)` });
  }
  if (schema.enum && !schema.enum.includes(value)) {
    errors.push({ path, message: `${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}` });
  }
  if (schema.type !== undefined && !hasType(schema.type, value)) {
    errors.push({ path, message: `expected ${schema.type}, got ${describe(value)}` });
    return;
  }
  if (typeof value === 'number') checkNumber(schema, value, path, errors);
  if (typeof value === 'string') checkString(schema, value, path, errors);
  if (Array.isArray(value) && schema.items) value.forEach((item, i) => check(schema.items as SchemaObject, item, `${path}[${i}]`, errors));
  if (isObject(value)) checkObject(schema, value, path, errors);
}

function checkNumber(schema: SchemaObject, value: number, path: string, errors: SchemaViolation[]): void {
  if (schema.minimum !== undefined && value < schema.minimum) errors.push({ path, message: `${value} < minimum ${schema.minimum}` });
  if (schema.maximum !== undefined && value > schema.maximum) errors.push({ path, message: `${value} > maximum ${schema.maximum}` });
}

const FORMATS: Readonly<Record<string, RegExp>> = {
  'date-time': /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
  uri: /^[a-z][a-z0-9+.-]*:\S*$/i,
  email: /^[^\s@]+@[^\s@]+$/,
};

function checkString(schema: SchemaObject, value: string, path: string, errors: SchemaViolation[]): void {
  if (schema.minLength !== undefined && value.length < schema.minLength) errors.push({ path, message: `shorter than ${schema.minLength}` });
  if (schema.maxLength !== undefined && value.length > schema.maxLength) errors.push({ path, message: `longer than ${schema.maxLength}` });
  const format = schema.format === undefined ? undefined : FORMATS[schema.format];
  if (format !== undefined && !format.test(value)) errors.push({ path, message: `${JSON.stringify(value)} is not a ${schema.format}` });
}

function checkObject(schema: SchemaObject, value: Record<string, unknown>, path: string, errors: SchemaViolation[]): void {
  for (const key of schema.required ?? []) {
    if (!(key in value)) errors.push({ path, message: `missing required property '${key}'` });
  }
  const properties = schema.properties ?? {};
  for (const [key, item] of Object.entries(value)) {
    const sub = properties[key];
    if (sub !== undefined) check(sub, item, `${path}.${key}`, errors);
    else if (schema.additionalProperties === false) errors.push({ path, message: `unexpected property '${key}'` });
    else if (typeof schema.additionalProperties === 'object') check(schema.additionalProperties, item, `${path}.${key}`, errors);
  }
}

function hasType(type: string, value: unknown): boolean {
  switch (type) {
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      return false;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}
