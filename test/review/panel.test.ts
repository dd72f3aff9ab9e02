import { describe, expect, it } from 'vitest';
import type { ReviewLaneResultV1 } from '../../src/contracts/index.js';
import { judgePanel, type PanelLane, type PanelRequest, type PanelVerdict } from '../../src/review/index.js';

const author = { context_id: 'author-ctx', family: 'human' };
const fresh: PanelRequest = { author, diversity_mode: 'fresh-context' };
const multi: PanelRequest = { author, diversity_mode: 'multi-model' };
const finding = { title: 'bug', evidence: 'line 3 divides by zero', path: 'src/a.ts', line: 3 };

function lane(
  id: string,
  outcome: 'CONFIRMED' | 'REFUTED' | 'transport',
  opts: { family?: string; context?: string; findings?: number; invalid?: boolean; attempts?: number } = {},
): PanelLane {
  const base = {
    schema: 'review-lane-result.v1' as const,
    lane_id: id,
    family: opts.family ?? `fam-${id}`,
    context_id: opts.context ?? `ctx-${id}`,
    nonce: 'n'.repeat(32),
    read_only: true,
    findings: Array.from({ length: opts.findings ?? (outcome === 'REFUTED' ? 1 : 0) }, () => finding),
  };
  const result: ReviewLaneResultV1 =
    outcome === 'transport'
      ? { ...base, failure: { class: 'transport', reason: 'timed out after 5s' } }
      : { ...base, evidence_path: `/e/${id}.txt`, disposition: outcome };
  return {
    lane_id: id,
    result,
    validation: opts.invalid ? { valid: false, code: 'NONCE_MISMATCH', reason: 'wrong nonce' } : { valid: true },
    ...(opts.attempts === undefined ? {} : { attempts: Array.from({ length: opts.attempts }, (_, index) => ({ attempt: index + 1 })) }),
  };
}

const cases: { name: string; request: PanelRequest; lanes: PanelLane[]; expected: string[]; verdict: PanelVerdict; reason: RegExp }[] = [
  {
    name: 'fresh: one valid CONFIRMED confirms',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED')],
    expected: ['a'],
    verdict: 'CONFIRMED',
    reason: /lane a: CONFIRMED/,
  },
  {
    name: 'fresh: all CONFIRMED in one family still confirms',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'CONFIRMED', { family: 'x' })],
    expected: ['a', 'b'],
    verdict: 'CONFIRMED',
    reason: /lane b: CONFIRMED/,
  },
  {
    name: 'fresh: a valid REFUTED with findings refutes',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED'), lane('b', 'REFUTED')],
    expected: ['a', 'b'],
    verdict: 'REFUTED',
    reason: /lane b: REFUTED with 1 finding/,
  },
  {
    name: 'fresh: REFUTED wins over a transport failure elsewhere',
    request: fresh,
    lanes: [lane('a', 'transport'), lane('b', 'REFUTED')],
    expected: ['a', 'b'],
    verdict: 'REFUTED',
    reason: /lane b: REFUTED/,
  },
  {
    name: 'fresh: REFUTED without findings does not refute, it holds',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED'), lane('b', 'REFUTED', { findings: 0 })],
    expected: ['a', 'b'],
    verdict: 'HOLD',
    reason: /REFUTED without findings/,
  },
  {
    name: 'fresh: an invalid REFUTED does not refute',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED'), lane('b', 'REFUTED', { invalid: true })],
    expected: ['a', 'b'],
    verdict: 'HOLD',
    reason: /lane b: invalid result \(NONCE_MISMATCH/,
  },
  {
    name: 'fresh: a transport failure holds even beside a CONFIRMED',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED'), lane('b', 'transport')],
    expected: ['a', 'b'],
    verdict: 'HOLD',
    reason: /lane b: transport failure \(timed out/,
  },
  {
    name: 'fresh: only transport failures hold',
    request: fresh,
    lanes: [lane('a', 'transport')],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /transport failure/,
  },
  { name: 'fresh: a missing lane holds', request: fresh, lanes: [lane('a', 'CONFIRMED')], expected: ['a', 'b'], verdict: 'HOLD', reason: /lane b: missing/ },
  { name: 'fresh: no lanes at all holds', request: fresh, lanes: [], expected: ['a'], verdict: 'HOLD', reason: /lane a: missing/ },
  {
    name: 'fresh: no expected lanes holds',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED')],
    expected: [],
    verdict: 'HOLD',
    reason: /no reviewer lanes configured/,
  },
  {
    name: "fresh: a CONFIRMED from the author's context does not count",
    request: fresh,
    lanes: [lane('a', 'CONFIRMED', { context: 'author-ctx' })],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /author's/,
  },
  {
    name: 'fresh: an invalid CONFIRMED does not count',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED', { invalid: true })],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /invalid result/,
  },
  {
    name: 'fresh: a lane reported twice holds',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED'), lane('a', 'CONFIRMED')],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /reported more than once/,
  },
  {
    name: 'fresh: an unexpected lane holds',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED'), lane('z', 'CONFIRMED')],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /lane z: not an expected lane/,
  },
  {
    name: 'fresh: a lane without a result holds',
    request: fresh,
    lanes: [{ lane_id: 'a', result: null, validation: { valid: false, code: 'MALFORMED', reason: 'not an object' } }],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /lane a: no result/,
  },
  {
    name: 'multi: two families all CONFIRMED confirms',
    request: multi,
    lanes: [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'CONFIRMED', { family: 'y' })],
    expected: ['a', 'b'],
    verdict: 'CONFIRMED',
    reason: /CONFIRMED by y/,
  },
  {
    name: 'multi: one family holds',
    request: multi,
    lanes: [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'CONFIRMED', { family: 'x' })],
    expected: ['a', 'b'],
    verdict: 'HOLD',
    reason: /needs 2 distinct families, got 1/,
  },
  {
    name: 'multi: a single lane holds',
    request: multi,
    lanes: [lane('a', 'CONFIRMED')],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /needs 2 distinct families/,
  },
  {
    name: 'multi: a transport failure holds',
    request: multi,
    lanes: [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'CONFIRMED', { family: 'y' }), lane('c', 'transport')],
    expected: ['a', 'b', 'c'],
    verdict: 'HOLD',
    reason: /lane c: transport failure/,
  },
  {
    name: 'multi: a valid REFUTED refutes',
    request: multi,
    lanes: [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'REFUTED', { family: 'y' })],
    expected: ['a', 'b'],
    verdict: 'REFUTED',
    reason: /lane b: REFUTED/,
  },
  {
    name: 'retried: a lane still failing after its retries holds and says after how many',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED'), lane('b', 'transport', { attempts: 3 })],
    expected: ['a', 'b'],
    verdict: 'HOLD',
    reason: /lane b: transport failure \(timed out after 5s\) after 3 attempts/,
  },
  {
    name: 'retried: an invalid answer on the last attempt holds',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED', { invalid: true, attempts: 2 })],
    expected: ['a'],
    verdict: 'HOLD',
    reason: /lane a: invalid result \(NONCE_MISMATCH: wrong nonce\) after 2 attempts/,
  },
  {
    name: 'retried: a CONFIRMED on a later attempt confirms and names it',
    request: fresh,
    lanes: [lane('a', 'CONFIRMED', { attempts: 2 })],
    expected: ['a'],
    verdict: 'CONFIRMED',
    reason: /lane a: CONFIRMED by fam-a in context ctx-a on attempt 2$/,
  },
  {
    name: 'retried: a REFUTED on a later attempt refutes',
    request: multi,
    lanes: [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'REFUTED', { attempts: 3 })],
    expected: ['a', 'b'],
    verdict: 'REFUTED',
    reason: /lane b: REFUTED with 1 finding\(s\) on attempt 3/,
  },
  {
    name: 'multi: a missing lane holds',
    request: multi,
    lanes: [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'CONFIRMED', { family: 'y' })],
    expected: ['a', 'b', 'c'],
    verdict: 'HOLD',
    reason: /lane c: missing/,
  },
];

describe('judgePanel', () => {
  it.each(cases)('$name', ({ request, lanes, expected, verdict, reason }) => {
    const decision = judgePanel(request, lanes, { expectedLanes: expected });
    expect(decision.verdict).toBe(verdict);
    expect(decision.reasons.join('\n')).toMatch(reason);
  });

  it('multi-model honours a higher family minimum', () => {
    const lanes = [lane('a', 'CONFIRMED', { family: 'x' }), lane('b', 'CONFIRMED', { family: 'y' })];
    expect(judgePanel(multi, lanes, { expectedLanes: ['a', 'b'], minFamilies: 3 }).verdict).toBe('HOLD');
    expect(judgePanel(multi, lanes, { expectedLanes: ['a', 'b'], minFamilies: 2 }).verdict).toBe('CONFIRMED');
  });

  it('never confirms when any lane failed (property over every subset of outcomes)', () => {
    const kinds = ['CONFIRMED', 'REFUTED', 'transport'] as const;
    for (const x of kinds)
      for (const y of kinds)
        for (const mode of [fresh, multi]) {
          const lanes = [lane('a', x, { family: 'x' }), lane('b', y, { family: 'y' })];
          const verdict = judgePanel(mode, lanes, { expectedLanes: ['a', 'b'] }).verdict;
          if (x === 'REFUTED' || y === 'REFUTED') expect(verdict).toBe('REFUTED');
          else if (x === 'transport' || y === 'transport') expect(verdict).toBe('HOLD');
          else expect(verdict).toBe('CONFIRMED');
        }
  });
});
