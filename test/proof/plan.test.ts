import { describe, expect, it } from 'vitest';
import { digestJson, isProofgateError, isSha256Digest } from '../../src/core/index.js';
import { checkPlan, MAX_PLAN_BYTES, MAX_PLAN_DEPTH, parsePlanText, planDigest, type PlanRefusalReason } from '../../src/proof/plan.js';

/** An object nested `levels` deep: `{ "a": { "a": ... 1 } }` (built without recursion). */
function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i += 1) value = { a: value };
  return value;
}

function reasonOf(value: unknown): PlanRefusalReason | 'ok' {
  const result = checkPlan(value);
  return result.ok ? 'ok' : result.reason;
}

class Step {
  constructor(readonly text: string) {}
}

describe('checkPlan', () => {
  const cyclic: Record<string, unknown> = { steps: [] };
  (cyclic.steps as unknown[]).push(cyclic);
  const sparse: unknown[] = [];
  sparse[2] = 1;
  const symbolKeyed = { [Symbol('x')]: 1 };

  const cases: [string, unknown, PlanRefusalReason | 'ok'][] = [
    ['the empty plan', {}, 'ok'],
    ['a plan of steps', { steps: [{ send: 'hello' }, { expect: { reply: true, within: 30 } }], note: null }, 'ok'],
    ['a plan at the depth cap', nested(MAX_PLAN_DEPTH), 'ok'],
    ['a plan one level too deep', nested(MAX_PLAN_DEPTH + 1), 'TOO_DEEP'],
    ['an array one level too deep', { a: nested(MAX_PLAN_DEPTH - 2), b: [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]] }, 'TOO_DEEP'],
    ['an array at the top', [1, 2], 'NOT_OBJECT'],
    ['a string at the top (a command line is not a plan)', 'rm -rf /', 'NOT_OBJECT'],
    ['null at the top', null, 'NOT_OBJECT'],
    ['a number at the top', 3, 'NOT_OBJECT'],
    ['undefined', undefined, 'NOT_JSON'],
    ['an undefined member', { a: undefined }, 'NOT_JSON'],
    ['a function member', { run: () => 1 }, 'NOT_JSON'],
    ['NaN', { n: Number.NaN }, 'NOT_JSON'],
    ['Infinity', { n: Number.POSITIVE_INFINITY }, 'NOT_JSON'],
    ['a bigint', { n: 1n }, 'NOT_JSON'],
    ['a symbol', { s: Symbol('x') }, 'NOT_JSON'],
    ['a symbol key', symbolKeyed, 'NOT_JSON'],
    ['a Date', { at: new Date(0) }, 'NOT_JSON'],
    ['a Map', { m: new Map([['a', 1]]) }, 'NOT_JSON'],
    ['a class instance', { step: new Step('x') }, 'NOT_JSON'],
    ['a cycle', cyclic, 'NOT_JSON'],
    ['an array hole', { list: sparse }, 'NOT_JSON'],
    ['a lone surrogate', { text: 'a\ud800b' }, 'NOT_JSON'],
    ['a string over the cap', { text: 'x'.repeat(MAX_PLAN_BYTES) }, 'TOO_LARGE'],
    ['many small members over the cap', Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])), 'TOO_LARGE'],
    ['a long array over the cap', { list: new Array<number>(MAX_PLAN_BYTES).fill(0) }, 'TOO_LARGE'],
    ['multi-byte text under the cap in characters but over it in bytes', { text: 'é'.repeat(40_000) }, 'TOO_LARGE'],
  ];
  it.each(cases)('%s', (_name, value, expected) => {
    expect(reasonOf(value)).toBe(expected);
  });

  it('refuses a hostile nesting (100,000 levels) without running out of stack', () => {
    expect(reasonOf(nested(100_000))).toBe('TOO_DEEP');
    let array: unknown = [];
    for (let i = 0; i < 100_000; i += 1) array = [array];
    expect(reasonOf({ a: array })).toBe('TOO_DEEP');
  });

  it('refuses a huge sparse array before walking its elements', () => {
    expect(reasonOf({ list: new Array(1_000_000_000) })).toBe('TOO_LARGE');
  });

  it('accepts a plan just under the size cap and measures its canonical bytes', () => {
    const overhead = JSON.stringify({ t: '' }).length;
    const result = checkPlan({ t: 'x'.repeat(MAX_PLAN_BYTES - overhead) });
    expect(result.ok && result.bytes).toBe(MAX_PLAN_BYTES);
    expect(reasonOf({ t: 'x'.repeat(MAX_PLAN_BYTES - overhead + 1) })).toBe('TOO_LARGE');
  });

  it('hands back a canonical copy: later changes to the input do not reach it', () => {
    const input = { z: [1, -0], a: { y: 'é', b: true } };
    const result = checkPlan(input);
    if (!result.ok) throw new Error(result.message);
    expect(result.canonical).toBe('{"a":{"b":true,"y":"é"},"z":[1,0]}');
    expect(result.bytes).toBe(Buffer.byteLength(result.canonical));
    input.z.push(2);
    expect(result.plan).toEqual({ a: { y: 'é', b: true }, z: [1, 0] });
  });

  it('says why in one line', () => {
    const result = checkPlan({ a: undefined });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/^the plan is not a JSON value at \.a: undefined$/);
  });
});

describe('parsePlanText', () => {
  it.each([
    ['a plan', '{"steps":[{"send":"hi"}]}', 'ok'],
    ['spacing and member order', ' { "b" : 1 ,\n "a" : [ ] } ', 'ok'],
    ['a byte order mark', '\ufeff{}', 'ok'],
    ['malformed text', '{"a":', 'NOT_JSON'],
    ['a member name twice', '{"a":1,"a":2}', 'NOT_JSON'],
    ['a nested member name twice', '{"x":{"a":1,"a":2}}', 'NOT_JSON'],
    ['an array', '[]', 'NOT_OBJECT'],
    ['a text too long to parse', `{"a":"${'x'.repeat(4 * MAX_PLAN_BYTES)}"}`, 'TOO_LARGE'],
    ['a deep text', `${'{"a":'.repeat(40_000)}1${'}'.repeat(40_000)}`, 'TOO_DEEP'],
    ['a deep array text', `{"a":${'['.repeat(120_000)}${']'.repeat(120_000)}}`, 'TOO_DEEP'],
  ])('%s', (_name, text, expected) => {
    const result = parsePlanText(text);
    expect(result.ok ? 'ok' : result.reason).toBe(expected);
  });
});

describe('planDigest', () => {
  it('identifies a plan by its canonical form and its scenario', () => {
    const digest = planDigest('web-chat', { b: 1, a: [true, null] });
    expect(isSha256Digest(digest)).toBe(true);
    expect(digest).toBe(digestJson({ schema: 'proof-plan.v1', scenario: 'web-chat', plan: { a: [true, null], b: 1 } }));
    const parsed = parsePlanText('{ "a": [true, null], "b": 1.0 }');
    if (!parsed.ok) throw new Error(parsed.message);
    expect(planDigest('web-chat', parsed.plan)).toBe(digest);
    expect(planDigest('bot', { b: 1, a: [true, null] })).not.toBe(digest);
    expect(planDigest('web-chat', { b: 2, a: [true, null] })).not.toBe(digest);
    expect(planDigest('web-chat', {})).not.toBe(planDigest('web-chat', { a: null }));
  });

  it.each([
    ['a scenario id with path characters', '../web', {}],
    ['a scenario id with a dot', 'web.chat', {}],
    ['an empty scenario id', '', {}],
    ['a plan that is not an object', 'web', 'run this'],
    ['a plan that is not JSON', 'web', { n: Number.NaN }],
    ['a plan too deep', 'web', nested(MAX_PLAN_DEPTH + 5)],
  ])('refuses %s with INVALID_INPUT', (_name, scenarioId, plan) => {
    let caught: unknown;
    try {
      planDigest(scenarioId, plan);
    } catch (error) {
      caught = error;
    }
    expect(isProofgateError(caught, 'INVALID_INPUT')).toBe(true);
  });
});
