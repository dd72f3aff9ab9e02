import { ProofgateError, isProofgateError, setJsonMember } from '../core/index.js';
import { findFreeTextSecret, redactFreeText } from './free-text.js';
import { knownSecretError, type KnownSecrets } from './known-secrets.js';
import type { SensitiveContentPolicy } from './policy-types.js';

/**
 * The key that marks a value as sensitive: any JSON object holding the own key
 * `$sensitive` (for example `{ "$sensitive": "hunter2" }`) is a marked value.
 * Policy `marked: 'reject'` refuses it; `'redact'` replaces the whole object by
 * the string `[redacted:marked]`.
 */
export const SENSITIVE_MARKER_KEY = '$sensitive';
export const REDACTED_MARKED = '[redacted:marked]';

function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * One pass over a caller's JSON value, before it is hashed or stored:
 * known secrets in keys and strings are refused (`KNOWN_SECRET`, checked on
 * the value as given), marked values are refused or redacted, and secret-looking
 * free text is redacted, refused or allowed as the policy says. Returns the
 * value (a changed copy where something was redacted); values that are not JSON are passed through unchanged so that the
 * canonical serializer reports them as `NON_JSON_VALUE` with their path.
 */
export function applySensitivePolicy(value: unknown, where: string, policy: SensitiveContentPolicy, secrets: KnownSecrets): unknown {
  const ancestors = new Set<object>();
  const checkSecrets = secrets.count > 0;
  // The path is kept as a stack of segments and only turned into text for an error.
  const segments: (string | number)[] = [];
  const here = (): string => segments.reduce<string>((path, segment) => (typeof segment === 'number' ? `${path}[${segment}]` : childPath(path, segment)), '$');

  const visitString = (text: string): string => {
    if (checkSecrets && secrets.inText(text)) throw knownSecretError(`${where} at ${here()}`);
    if (policy.freeText === 'allow') return text;
    if (policy.freeText === 'reject') {
      const kind = findFreeTextSecret(text);
      if (kind !== undefined) {
        const path = here();
        throw new ProofgateError('POLICY_VIOLATION', `${where} at ${path} holds secret-looking text (${kind}); the policy rejects it`, { path, kind });
      }
      return text;
    }
    return redactFreeText(text);
  };

  // Returns the node itself when nothing inside it changed (copy on write).
  const visit = (node: unknown): unknown => {
    if (typeof node === 'string') return visitString(node);
    if (typeof node === 'number' && checkSecrets && secrets.inText(String(node))) throw knownSecretError(`${where} at ${here()}`);
    if (node === null || typeof node !== 'object') return node;
    if (ancestors.has(node)) {
      const path = here();
      throw new ProofgateError('NON_JSON_VALUE', `not a JSON value at ${path}: cycle`, { path });
    }
    if (Array.isArray(node)) {
      ancestors.add(node);
      let out: unknown[] | undefined;
      for (let i = 0; i < node.length; i += 1) {
        segments.push(i);
        if (!(i in node)) {
          const path = here();
          throw new ProofgateError('NON_JSON_VALUE', `not a JSON value at ${path}: array hole`, { path });
        }
        const item: unknown = node[i];
        const next = visit(item);
        segments.pop();
        if (next !== item && out === undefined) out = node.slice(0, i);
        if (out !== undefined) out.push(next);
      }
      ancestors.delete(node);
      return out ?? node;
    }
    if (!isPlainObject(node)) return node;
    const keys = Object.keys(node);
    if (checkSecrets) {
      for (const key of keys) if (secrets.inText(key)) throw knownSecretError(`${where} at ${here()} (an object key)`);
    }
    if (Object.prototype.hasOwnProperty.call(node, SENSITIVE_MARKER_KEY)) {
      if (checkSecrets) visitSecretsOnly(node);
      if (policy.marked === 'reject') {
        const path = here();
        throw new ProofgateError('POLICY_VIOLATION', `${where} at ${path} is marked ${SENSITIVE_MARKER_KEY}; the policy rejects marked values`, { path });
      }
      return REDACTED_MARKED;
    }
    ancestors.add(node);
    let out: Record<string, unknown> | undefined;
    for (let k = 0; k < keys.length; k += 1) {
      const key = keys[k] as string;
      const item = node[key];
      segments.push(key);
      const next = visit(item);
      segments.pop();
      if (next !== item && out === undefined) {
        out = {};
        for (let j = 0; j < k; j += 1) setJsonMember(out, keys[j] as string, node[keys[j] as string]);
      }
      if (out !== undefined) setJsonMember(out, key, next);
    }
    ancestors.delete(node);
    return out ?? node;
  };

  // A marked value that is redacted is still checked for known secrets (exact: 'reject').
  const visitSecretsOnly = (node: unknown): void => {
    if (typeof node === 'string') {
      if (secrets.inText(node)) throw knownSecretError(`${where} at ${here()}`);
      return;
    }
    if (node === null || typeof node !== 'object' || ancestors.has(node)) return;
    ancestors.add(node);
    if (Array.isArray(node)) {
      node.forEach((item, i) => {
        segments.push(i);
        visitSecretsOnly(item);
        segments.pop();
      });
    } else if (isPlainObject(node)) {
      for (const key of Object.keys(node)) {
        if (secrets.inText(key)) throw knownSecretError(`${where} at ${here()} (an object key)`);
        segments.push(key);
        visitSecretsOnly(node[key]);
        segments.pop();
      }
    }
    ancestors.delete(node);
  };

  return visit(value);
}

/**
 * Why the sensitive-content policy refused a value passed under the name
 * `where`: the error code and the path, never the value (these errors name
 * paths only), e.g. `KNOWN_SECRET at $.log` or `POLICY_VIOLATION at $.note
 * (secret-looking text: assignment)`. Null for any other error.
 */
export function policyRefusal(error: unknown, where: string): string | null {
  if (isProofgateError(error, 'KNOWN_SECRET')) {
    const place = typeof error.details?.where === 'string' ? error.details.where : where;
    return `KNOWN_SECRET at ${place.startsWith(`${where} at `) ? place.slice(where.length + 4) : place}`;
  }
  if (isProofgateError(error, 'POLICY_VIOLATION')) {
    const path = typeof error.details?.path === 'string' ? error.details.path : '$';
    const kind = typeof error.details?.kind === 'string' ? ` (secret-looking text: ${error.details.kind})` : ' (a marked value)';
    return `POLICY_VIOLATION at ${path}${kind}`;
  }
  return null;
}
