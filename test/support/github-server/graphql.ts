/**
 * Just enough GraphQL for the test server: parse one query or mutation
 * (variables, arguments, list literals, nested selections, inline fragments), then project
 * it onto resolver objects. A field the resolvers do not know is an error, as
 * on GitHub, so the adapter cannot ask for data the server silently invents.
 */

export type Args = Readonly<Record<string, unknown>>;
/** A resolver object: plain values, or functions of the field's arguments. */
export type Resolved = { readonly __typename: string; readonly [field: string]: unknown };

export interface Field {
  readonly kind: 'field';
  readonly name: string;
  readonly args: Readonly<Record<string, ArgValue>>;
  readonly selections: readonly Selection[] | null;
}
export interface Fragment {
  readonly kind: 'fragment';
  readonly on: string;
  readonly selections: readonly Selection[];
}
export type Selection = Field | Fragment;
type ArgValue = { readonly variable: string } | { readonly literal: unknown };

export interface Operation {
  readonly type: 'query' | 'mutation';
  readonly name: string | null;
  readonly selections: readonly Selection[];
}

export class GraphqlError extends Error {
  constructor(
    message: string,
    readonly extra: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

const TOKEN = /\s*(\.\.\.|[{}():!$,=@[\]]|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*|#[^\n]*)/y;

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < text.length) {
    if (/^\s*$/.test(text.slice(TOKEN.lastIndex))) break;
    const m = TOKEN.exec(text);
    if (m === null) throw new GraphqlError(`Parse error at offset ${TOKEN.lastIndex}`);
    const token = m[1] as string;
    if (!token.startsWith('#') && token !== ',') tokens.push(token);
  }
  return tokens;
}

export function parseOperation(text: string): Operation {
  const tokens = tokenize(text);
  let i = 0;
  const peek = () => tokens[i];
  const next = () => {
    const token = tokens[i++];
    if (token === undefined) throw new GraphqlError('Unexpected end of query');
    return token;
  };
  const expect = (want: string) => {
    const got = next();
    if (got !== want) throw new GraphqlError(`Expected '${want}', got '${got}'`);
  };
  const value = (): ArgValue => {
    const token = next();
    if (token === '$') return { variable: next() };
    if (token.startsWith('"')) return { literal: JSON.parse(token) as string };
    if (/^-?\d/.test(token)) return { literal: Number(token) };
    if (token === 'true' || token === 'false') return { literal: token === 'true' };
    if (token === 'null') return { literal: null };
    if (token === '[') {
      const items: unknown[] = [];
      while (peek() !== ']') {
        const item = value();
        if ('variable' in item) throw new GraphqlError('Variables inside list literals are not supported');
        items.push(item.literal);
      }
      next();
      return { literal: items };
    }
    return { literal: token };
  };
  const selectionSet = (): Selection[] => {
    expect('{');
    const out: Selection[] = [];
    while (peek() !== '}') {
      if (peek() === '...') {
        next();
        expect('on');
        const on = next();
        out.push({ kind: 'fragment', on, selections: selectionSet() });
        continue;
      }
      const name = next();
      const args: Record<string, ArgValue> = {};
      if (peek() === '(') {
        next();
        while (peek() !== ')') {
          const argName = next();
          expect(':');
          args[argName] = value();
        }
        next();
      }
      out.push({ kind: 'field', name, args, selections: peek() === '{' ? selectionSet() : null });
    }
    next();
    return out;
  };
  let name: string | null = null;
  let type: Operation['type'] = 'query';
  if (peek() === 'query' || peek() === 'mutation') {
    type = next() as Operation['type'];
    if (peek() !== '(' && peek() !== '{') name = next();
    if (peek() === '(') {
      while (next() !== ')') {
        /* variable definitions: the values come from the request */
      }
    }
  } else if (peek() !== '{') {
    throw new GraphqlError(`Only queries and mutations are supported, got '${String(peek())}'`);
  }
  const selections = selectionSet();
  if (i !== tokens.length) throw new GraphqlError('Only one operation per document is supported');
  return { type, name, selections };
}

export function execute(selections: readonly Selection[], root: Resolved, variables: Args): Record<string, unknown> {
  return project(root, selections, variables, []);
}

function project(object: Resolved, selections: readonly Selection[], variables: Args, path: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const selection of selections) {
    if (selection.kind === 'fragment') {
      if (selection.on === object.__typename) Object.assign(out, project(object, selection.selections, variables, path));
      continue;
    }
    const here = [...path, selection.name];
    if (!(selection.name in object)) {
      throw new GraphqlError(`Field '${selection.name}' doesn't exist on type '${object.__typename}'`, { path: here });
    }
    const raw = object[selection.name];
    const args: Record<string, unknown> = {};
    for (const [argName, arg] of Object.entries(selection.args)) args[argName] = 'variable' in arg ? (variables[arg.variable] ?? null) : arg.literal;
    const resolved = typeof raw === 'function' ? (raw as (a: Args, p: readonly string[]) => unknown)(args, here) : raw;
    out[selection.name] = shape(resolved, selection, variables, here);
  }
  return out;
}

function shape(value: unknown, field: Field, variables: Args, path: readonly string[]): unknown {
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) return value.map((item) => shape(item, field, variables, path));
  if (typeof value === 'object') {
    if (field.selections === null) throw new GraphqlError(`Field '${field.name}' of object type must have a selection of subfields`, { path });
    return project(value as Resolved, field.selections, variables, path);
  }
  if (field.selections !== null) throw new GraphqlError(`Selections can't be made on scalars (field '${field.name}')`, { path });
  return value;
}
