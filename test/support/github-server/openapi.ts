/**
 * GitHub's published REST description (../shared/fixtures/github-openapi),
 * used by the test server to route requests to operations and to check each
 * answer it gives against the response schema of that operation and status.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { validateSchema, type SchemaObject, type SchemaViolation } from './json-schema.js';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const fixturesRoot = path.resolve(projectRoot, '..', 'shared', 'fixtures');

interface ResponseObject {
  readonly content?: Readonly<Record<string, { readonly schema?: SchemaObject }>>;
}
interface OperationObject {
  readonly operationId: string;
  readonly responses: Readonly<Record<string, ResponseObject>>;
}

export interface RouteMatch {
  readonly operationId: string;
  readonly template: string;
  readonly params: Readonly<Record<string, string>>;
}

interface Route {
  readonly method: string;
  readonly operationId: string;
  readonly template: string;
  readonly regex: RegExp;
  readonly names: readonly string[];
}

/** Operations proofgate needs that the cut-down description lacks, with the operation whose schema stands in for them. */
const EXTRA_ROUTES: readonly { method: string; template: string; operationId: string; schemaFrom: { operationId: string; status: string } }[] = [
  { method: 'POST', template: '/repos/{owner}/{repo}/git/refs', operationId: 'git/create-ref', schemaFrom: { operationId: 'git/get-ref', status: '200' } },
];

let loaded: { operations: Map<string, OperationObject>; routes: Route[] } | null = null;

function load(): { operations: Map<string, OperationObject>; routes: Route[] } {
  if (loaded !== null) return loaded;
  const file = path.join(fixturesRoot, 'github-openapi', 'operations.deref.json');
  const doc = JSON.parse(readFileSync(file, 'utf8')) as { paths: Record<string, Record<string, OperationObject>> };
  const operations = new Map<string, OperationObject>();
  const routes: Route[] = [];
  const add = (method: string, template: string, operationId: string) => {
    const names: string[] = [];
    const pattern = template.replace(/[.*+?^${}()|[\]\\]/g, (c) => (c === '{' || c === '}' ? c : `\\${c}`)).replace(/\{(\w+)\}/g, (_m, name: string) => {
      names.push(name);
      return name === 'path' || name === 'ref' ? '(.+)' : '([^/]+)';
    });
    routes.push({ method, operationId, template, regex: new RegExp(`^${pattern}$`), names });
  };
  for (const [template, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      if (typeof op !== 'object' || op === null || typeof op.operationId !== 'string') continue;
      operations.set(op.operationId, op);
      add(method.toUpperCase(), template, op.operationId);
    }
  }
  for (const extra of EXTRA_ROUTES) add(extra.method, extra.template, extra.operationId);
  // Literal segments win over parameters (e.g. /git/ref/ vs /git/refs/).
  routes.sort((a, b) => b.template.replace(/\{\w+\}/g, '').length - a.template.replace(/\{\w+\}/g, '').length);
  loaded = { operations, routes };
  return loaded;
}

export function matchRoute(method: string, rawPath: string): RouteMatch | null {
  for (const route of load().routes) {
    if (route.method !== method) continue;
    const m = route.regex.exec(rawPath);
    if (m === null) continue;
    const params: Record<string, string> = {};
    route.names.forEach((name, i) => {
      params[name] = decodeURIComponent(m[i + 1] ?? '');
    });
    return { operationId: route.operationId, template: route.template, params };
  }
  return null;
}

/** Which schema checks an answer: the operation's own, or a documented stand-in. */
export interface SchemaSource {
  readonly operationId: string;
  readonly status: string;
  readonly schema: SchemaObject;
  /** 'own' when the operation documents this status; otherwise why another schema stands in. */
  readonly source: 'own' | 'stand-in';
}

export function responseSchema(operationId: string, status: number): SchemaSource | null {
  const { operations } = load();
  const extra = EXTRA_ROUTES.find((r) => r.operationId === operationId);
  if (extra !== undefined) {
    const schema = jsonSchema(operations.get(extra.schemaFrom.operationId), extra.schemaFrom.status);
    return schema === null ? null : { ...extra.schemaFrom, schema, source: 'stand-in' };
  }
  const own = jsonSchema(operations.get(operationId), String(status));
  if (own !== null) return { operationId, status: String(status), schema: own, source: 'own' };
  if (status >= 400) {
    // GitHub answers undocumented errors (401 Bad credentials, ...) with its "Basic Error" body.
    const basic = basicErrorSchema();
    if (basic !== null) return { operationId: 'basic-error', status: String(status), schema: basic, source: 'stand-in' };
  }
  return null;
}

export function checkResponse(operationId: string, status: number, body: unknown): { checkedBy: SchemaSource | null; violations: SchemaViolation[] } {
  const source = responseSchema(operationId, status);
  if (source === null) return { checkedBy: null, violations: [{ path: '$', message: `no schema for ${operationId} ${status}` }] };
  return { checkedBy: source, violations: validateSchema(source.schema, body) };
}

function jsonSchema(op: OperationObject | undefined, status: string): SchemaObject | null {
  const response = op?.responses[status];
  if (response === undefined) return null;
  const content = response.content ?? {};
  return content['application/json']?.schema ?? null;
}

function basicErrorSchema(): SchemaObject | null {
  return jsonSchema(load().operations.get('pulls/merge'), '404');
}
