import { canonicalJson, digestJson, isProofgateError, parseJson, ProofgateError, type JsonObject, type Sha256Digest } from '../core/index.js';
import { isScenarioId } from './scenarios.js';

/**
 * A proof plan: what a reviewer asks one scenario to do, as data only. It is
 * a JSON object that the scenario's trusted program reads (never a command
 * line, never run by a shell), bounded in size and depth, and identified by
 * the digest of its canonical form (RFC 8785) together with the scenario id.
 * Pure.
 */

/** The most bytes a plan's canonical text may take. */
export const MAX_PLAN_BYTES = 64 * 1024;
/** The most levels of objects and arrays a plan may nest (the plan object itself is level 1). */
export const MAX_PLAN_DEPTH = 16;
/** What a plan digest covers besides the plan: this schema name and the scenario id. */
export const PROOF_PLAN_SCHEMA = 'proof-plan.v1';

export type PlanRefusalReason =
  /** Not plain JSON: undefined, a function, NaN, a class instance, a cycle, a lone surrogate, malformed text, a member name twice. */
  | 'NOT_JSON'
  /** Valid JSON, but not an object at the top. */
  | 'NOT_OBJECT'
  | 'TOO_LARGE'
  | 'TOO_DEEP';

export type PlanCheck =
  | {
      readonly ok: true;
      /** A fresh copy made from the canonical text: exactly what is digested and handed to the scenario's program. */
      readonly plan: JsonObject;
      /** The canonical text (RFC 8785). */
      readonly canonical: string;
      /** Its UTF-8 length. */
      readonly bytes: number;
    }
  | { readonly ok: false; readonly reason: PlanRefusalReason; readonly message: string };

function refuse(reason: PlanRefusalReason, message: string): PlanCheck {
  return { ok: false, reason, message };
}

interface Ancestors {
  readonly value: object;
  readonly parent: Ancestors | null;
}

function isAncestor(chain: Ancestors | null, value: object): boolean {
  for (let at = chain; at !== null; at = at.parent) if (at.value === value) return true;
  return false;
}

/**
 * Walks the value without recursion, so a hostile nesting cannot exhaust the
 * stack: refuses a depth over the cap, a cycle, and a value whose canonical
 * text is surely over the size cap (counted as it goes, from a lower bound:
 * at least one byte per value and per string code unit, so the walk stops
 * early on a huge plan). The exact size is measured on the canonical text.
 */
function walk(value: unknown): PlanCheck | null {
  const pending: { readonly value: unknown; readonly depth: number; readonly ancestors: Ancestors | null }[] = [{ value, depth: 0, ancestors: null }];
  let atLeast = 0;
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    atLeast += typeof item.value === 'string' ? item.value.length + 2 : 1;
    if (atLeast > MAX_PLAN_BYTES) return refuse('TOO_LARGE', `the plan is larger than ${MAX_PLAN_BYTES} bytes`);
    if (item.value === null || typeof item.value !== 'object') continue;
    const object = item.value;
    const depth = item.depth + 1;
    if (depth > MAX_PLAN_DEPTH) return refuse('TOO_DEEP', `the plan nests deeper than ${MAX_PLAN_DEPTH} levels`);
    if (isAncestor(item.ancestors, object)) return refuse('NOT_JSON', 'the plan is not JSON: it holds a cycle');
    const ancestors = { value: object, parent: item.ancestors };
    if (Array.isArray(object)) {
      // Every element takes at least a byte: a huge (or sparse) array is refused before its elements are queued.
      if (atLeast + object.length > MAX_PLAN_BYTES) return refuse('TOO_LARGE', `the plan is larger than ${MAX_PLAN_BYTES} bytes`);
      for (let index = object.length - 1; index >= 0; index -= 1) pending.push({ value: object[index] as unknown, depth, ancestors });
    } else {
      // The canonical serializer's fast path skips symbol keys; a plan with one is refused here.
      if (Object.getOwnPropertySymbols(object).length > 0) return refuse('NOT_JSON', 'the plan is not JSON: it holds a symbol key');
      const keys = Object.keys(object);
      if (atLeast + 4 * keys.length > MAX_PLAN_BYTES) return refuse('TOO_LARGE', `the plan is larger than ${MAX_PLAN_BYTES} bytes`);
      for (const key of keys) {
        atLeast += key.length + 3;
        pending.push({ value: (object as Record<string, unknown>)[key], depth, ancestors });
      }
    }
  }
  return null;
}

/**
 * Checks a plan value: plain JSON only (through the canonical serializer),
 * an object at the top, at most MAX_PLAN_DEPTH levels and MAX_PLAN_BYTES
 * canonical bytes. A refusal is a value with a typed reason, never a throw:
 * a plan comes from a reviewer, and a bad one is an answer to give it.
 */
export function checkPlan(value: unknown): PlanCheck {
  const early = walk(value);
  if (early !== null) return early;
  let canonical: string;
  try {
    canonical = canonicalJson(value);
  } catch (error) {
    if (isProofgateError(error, 'NON_JSON_VALUE')) return refuse('NOT_JSON', `the plan is ${error.message}`);
    throw error;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return refuse('NOT_OBJECT', 'a plan is a JSON object');
  const bytes = Buffer.byteLength(canonical, 'utf8');
  if (bytes > MAX_PLAN_BYTES) return refuse('TOO_LARGE', `the plan takes ${bytes} bytes; at most ${MAX_PLAN_BYTES}`);
  return { ok: true, plan: JSON.parse(canonical) as JsonObject, canonical, bytes };
}

/**
 * Checks a plan given as JSON text (a wire message): the size cap before
 * parsing (a UTF-8 text within the cap stays within it once canonical, give
 * or take escapes, which the canonical check then measures), malformed text
 * and duplicate member names refused, then `checkPlan`.
 */
export function parsePlanText(text: string): PlanCheck {
  // Whitespace and escapes may shrink in the canonical form; allow for them, but bound the parse.
  if (text.length > 4 * MAX_PLAN_BYTES) return refuse('TOO_LARGE', `the plan text is longer than ${4 * MAX_PLAN_BYTES} characters`);
  let value: unknown;
  try {
    value = parseJson(text, 'the plan');
  } catch (error) {
    if (isProofgateError(error, 'INVALID_JSON')) return refuse('NOT_JSON', error.message);
    throw error;
  }
  return checkPlan(value);
}

/**
 * The digest that identifies a plan of a scenario: sha256 of the canonical
 * JSON of `{ schema: "proof-plan.v1", scenario, plan }`. Two plans with the
 * same members in any order and spacing have the same digest; the same plan
 * for two scenarios has two. An invalid scenario id or plan is an
 * `INVALID_INPUT` error (check untrusted plans with `checkPlan` first).
 */
export function planDigest(scenarioId: string, plan: unknown): Sha256Digest {
  if (!isScenarioId(scenarioId)) throw new ProofgateError('INVALID_INPUT', `not a scenario id: ${JSON.stringify(String(scenarioId)).slice(0, 80)}`);
  const checked = checkPlan(plan);
  if (!checked.ok) throw new ProofgateError('INVALID_INPUT', `invalid proof plan (${checked.reason}): ${checked.message}`, { reason: checked.reason });
  return digestJson({ schema: PROOF_PLAN_SCHEMA, scenario: scenarioId, plan: checked.plan });
}
