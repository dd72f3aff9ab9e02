import { describe, expect, it } from 'vitest';
import { bisectBatch, planAfterCheck } from '../../../src/automerge/queue/bisect.js';

const failure = { check: 'test', conclusion: 'failure', log: 'artifact://x/y/sha256:00' };

describe('bisectBatch (pure)', () => {
  it.each([
    [[], []],
    [['a'], ['a']],
    [['a', 'b'], ['a']],
    [
      ['a', 'b', 'c'],
      ['a', 'b'],
    ],
    [
      ['a', 'b', 'c', 'd'],
      ['a', 'b'],
    ],
    [
      ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'],
      ['a', 'b', 'c', 'd'],
    ],
  ])('%j -> first half %j', (suspects, half) => {
    expect(bisectBatch(suspects)).toEqual(half);
  });
});

describe('planAfterCheck (pure)', () => {
  it.each([
    {
      name: 'a passing batch with no suspects lands, nothing flaky',
      batch: ['a', 'b'],
      result: { passed: true as const },
      suspects: null,
      plan: { kind: 'land', changes: ['a', 'b'], flaky: null },
    },
    {
      name: 'a passing half of the suspects lands; others still suspected, nothing flaky yet',
      batch: ['a', 'b'],
      result: { passed: true as const },
      suspects: { changes: ['a', 'b', 'c', 'd'], failure },
      plan: { kind: 'land', changes: ['a', 'b'], flaky: null },
    },
    {
      name: 'the last suspects pass: the failure did not come back, reported flaky',
      batch: ['d'],
      result: { passed: true as const },
      suspects: { changes: ['d'], failure },
      plan: { kind: 'land', changes: ['d'], flaky: { changes: ['d'], failure } },
    },
    {
      name: 'a lone change that fails is ejected with the failure',
      batch: ['c'],
      result: { passed: false as const, failure },
      suspects: { changes: ['c', 'd'], failure },
      plan: { kind: 'eject', change: 'c', failure },
    },
    {
      name: 'a lone change outside any bisection that fails is ejected (batch size 1)',
      batch: ['a'],
      result: { passed: false as const, failure },
      suspects: null,
      plan: { kind: 'eject', change: 'a', failure },
    },
    {
      name: 'several changes that fail together become the suspects',
      batch: ['a', 'b', 'c', 'd'],
      result: { passed: false as const, failure },
      suspects: null,
      plan: { kind: 'bisect', changes: ['a', 'b', 'c', 'd'], failure },
    },
    {
      name: 'a failing half narrows the suspects to that half',
      batch: ['a', 'b'],
      result: { passed: false as const, failure },
      suspects: { changes: ['a', 'b', 'c', 'd'], failure },
      plan: { kind: 'bisect', changes: ['a', 'b'], failure },
    },
  ])('$name', ({ batch, result, suspects, plan }) => {
    expect(planAfterCheck(batch, result, suspects)).toEqual(plan);
  });
});
