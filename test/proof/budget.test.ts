import { describe, expect, it } from 'vitest';
import { canonicalJson, sha256Digest, type Sha256Digest } from '../../src/core/index.js';
import {
  acknowledgesSuccess,
  adoptProofBudget,
  closeProofBudget,
  completeProof,
  expireProofs,
  findPlan,
  MAX_PROOF_PLANS,
  openProofBudget,
  outcomeOfReport,
  proofAnswer,
  proofBindings,
  requestProof,
  type ProducerReport,
  type ProofBudget,
  type ProofBudgetOptions,
  type ProofRequestAnswer,
} from '../../src/proof/budget.js';
import { planDigest } from '../../src/proof/plan.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');
const S = 1000;
const HEAD = 'a'.repeat(40);
const OTHER_HEAD = 'b'.repeat(40);
const LEASE = { owner: 'worker-1', epoch: 3 };
const OFFERED = [
  { scenarioId: 'web', timeoutSeconds: 300 },
  { scenarioId: 'bot', timeoutSeconds: 900 },
  { scenarioId: 'slow', timeoutSeconds: 1200 },
];

function open(overrides: Partial<ProofBudgetOptions> = {}): ProofBudget {
  return openProofBudget({
    reviewId: 'review-1',
    headSha: HEAD,
    lease: LEASE,
    reviewStartMs: T0,
    reviewBudgetMs: 1200 * S,
    ceilingSeconds: 1200,
    reserveSeconds: 90,
    offered: OFFERED,
    ...overrides,
  });
}

/** The digest of plan number `n` of a scenario. */
function digest(scenarioId: string, n = 1): Sha256Digest {
  return planDigest(scenarioId, { n });
}

function ask(budget: ProofBudget, scenarioId: string, n: number, atSeconds: number, extra: Partial<Parameters<typeof requestProof>[1]> = {}) {
  return requestProof(budget, { scenarioId, planDigest: digest(scenarioId, n), lease: LEASE, headSha: HEAD, now: T0 + atSeconds * S, ...extra });
}

function finish(
  budget: ProofBudget,
  scenarioId: string,
  n: number,
  atSeconds: number,
  report: ProducerReport,
  extra: Partial<Parameters<typeof completeProof>[1]> = {},
) {
  return completeProof(budget, { scenarioId, planDigest: digest(scenarioId, n), lease: LEASE, headSha: HEAD, report, now: T0 + atSeconds * S, ...extra });
}

const VERIFIED: ProducerReport = {
  status: 'verified',
  observations: [{ path: 'observations/reply.json', sha256: sha256Digest('reply'), bytes: 5 }],
  bundleDigest: sha256Digest('bundle'),
};

/** What a request came to, for tables: the plan's deadline in seconds from T0, or the refusal reason, or pending / settled. */
function summary(answer: ProofRequestAnswer): number | string {
  switch (answer.kind) {
    case 'dispatch':
      return (answer.plan.deadlineMs - T0) / S;
    case 'refused':
      return answer.outcome.reason;
    default:
      return answer.kind;
  }
}

describe('deadlines', () => {
  const cases: [string, Partial<ProofBudgetOptions>, [string, number][], (number | string)[], number | null][] = [
    ['a short scenario at once: its own timeout', {}, [['web', 0]], [300], 1110],
    ['the slowest scenario at once: 18 min 30 s with the default review and reserve', {}, [['slow', 0]], [1110], 1110],
    ['after 5 minutes of analysis: less than 18 min 30 s', {}, [['slow', 300]], [1110], 1110],
    ['a long review: the ceiling from the first request binds', { reviewBudgetMs: 3600 * S }, [['slow', 60]], [1260], 1260],
    [
      'a later plan never restarts the clock',
      { reviewBudgetMs: 3600 * S },
      [
        ['web', 60],
        ['bot', 960],
      ],
      [360, 1260],
      1260,
    ],
    ['a zero reserve', { reviewBudgetMs: 600 * S, reserveSeconds: 0 }, [['slow', 0]], [600], 600],
    ['no time left before the reserve', {}, [['web', 1110]], ['NO_TIME'], 1110],
    ['a reserve larger than the review budget', { reviewBudgetMs: 60 * S }, [['web', 0]], ['NO_TIME'], -30],
    [
      'a plan after the shared deadline',
      { reviewBudgetMs: 3600 * S },
      [
        ['web', 0],
        ['bot', 1200],
      ],
      [300, 'DEADLINE'],
      1200,
    ],
    [
      'three plans, each within the one ceiling',
      { reviewBudgetMs: 3600 * S },
      [
        ['web', 0],
        ['bot', 400],
        ['slow', 500],
      ],
      [300, 1200, 1200],
      1200,
    ],
  ];
  it.each(cases)('%s', (_name, options, requests, expected, shared) => {
    let budget = open(options);
    const results: (number | string)[] = [];
    for (const [scenarioId, at] of requests) {
      const step = ask(budget, scenarioId, 1, at);
      budget = step.budget;
      results.push(summary(step.answer));
    }
    expect(results).toEqual(expected);
    expect(budget.deadlineMs === null ? null : (budget.deadlineMs - T0) / S).toBe(shared);
  });

  it('keeps the earliest deadline: the shared one is fixed at the first request', () => {
    let budget = open({ reviewBudgetMs: 3600 * S });
    budget = ask(budget, 'web', 1, 100).budget;
    const fixed = budget.deadlineMs;
    budget = ask(budget, 'bot', 1, 700).budget;
    budget = ask(budget, 'slow', 1, 1000).budget;
    expect(budget.deadlineMs).toBe(fixed);
    expect(budget.firstRequestMs).toBe(T0 + 100 * S);
    expect(budget.plans.every((plan) => budget.deadlineMs !== null && plan.deadlineMs <= budget.deadlineMs)).toBe(true);
  });
});

describe('plans', () => {
  it('dispatches a new plan bound to the lease, head, scenario and digest', () => {
    const { budget, answer } = ask(open(), 'web', 1, 10);
    expect(answer).toEqual({
      kind: 'dispatch',
      plan: {
        scenarioId: 'web',
        planDigest: digest('web', 1),
        lease: LEASE,
        headSha: HEAD,
        requestedAtMs: T0 + 10 * S,
        deadlineMs: T0 + 310 * S,
        outcome: null,
        settledAtMs: null,
      },
    });
    expect(budget.plans).toHaveLength(1);
  });

  it('answers a repeated plan from the first one, never dispatching it again, from any lane', () => {
    let budget = ask(open(), 'web', 1, 0).budget;
    const again = ask(budget, 'web', 1, 20);
    expect(again.answer.kind).toBe('pending');
    budget = again.budget;
    expect(budget.plans).toHaveLength(1);
    budget = finish(budget, 'web', 1, 30, VERIFIED).budget;
    const third = ask(budget, 'web', 1, 40);
    expect(third.answer.kind).toBe('settled');
    if (third.answer.kind === 'settled') expect(third.answer.outcome.status).toBe('verified');
    expect(third.budget.plans).toHaveLength(1);
  });

  it('counts the same plan for another scenario as another plan', () => {
    let budget = ask(open(), 'web', 1, 0).budget;
    const other = ask(budget, 'bot', 1, 1);
    expect(other.answer.kind).toBe('dispatch');
    budget = other.budget;
    expect(budget.plans).toHaveLength(2);
  });

  it(`refuses a ${MAX_PROOF_PLANS + 1}th distinct plan, but still answers the first three`, () => {
    let budget = open({ reviewBudgetMs: 3600 * S });
    for (const n of [1, 2, 3]) budget = ask(budget, 'web', n, n).budget;
    const fourth = ask(budget, 'bot', 9, 10);
    expect(summary(fourth.answer)).toBe('PLAN_LIMIT');
    expect(fourth.budget.plans).toHaveLength(3);
    expect(ask(fourth.budget, 'web', 2, 11).answer.kind).toBe('pending');
  });

  it('does not count refused requests as plans', () => {
    let budget = open();
    budget = ask(budget, 'unknown', 1, 0).budget;
    budget = ask(budget, 'web', 1, 0, { lease: { ...LEASE, epoch: 2 } }).budget;
    budget = ask(budget, 'web', 1, 0, { headSha: OTHER_HEAD }).budget;
    expect(budget.plans).toHaveLength(0);
    for (const n of [1, 2, 3]) expect(ask(budget, 'web', n, n).answer.kind).toBe('dispatch');
  });

  const refusals: [string, Partial<Parameters<typeof requestProof>[1]>, string][] = [
    ['a lease of another epoch (the owner was replaced)', { lease: { owner: 'worker-1', epoch: 4 } }, 'OWNER_LOST'],
    ['a lease of an earlier epoch', { lease: { owner: 'worker-1', epoch: 2 } }, 'OWNER_LOST'],
    ['a lease of another owner', { lease: { owner: 'worker-2', epoch: 3 } }, 'OWNER_LOST'],
    ['another head', { headSha: OTHER_HEAD }, 'HEAD_MOVED'],
    ['a scenario the review was not offered', { scenarioId: 'admin-tools', planDigest: digest('admin-tools') }, 'NOT_OFFERED'],
    ['a scenario id with path characters', { scenarioId: '../web' }, 'INVALID_REQUEST'],
    ['a digest that is not a sha256 digest', { planDigest: 'sha256:xyz' as Sha256Digest }, 'INVALID_REQUEST'],
  ];
  it.each(refusals)('refuses %s', (_name, extra, reason) => {
    const { budget, answer } = ask(open(), 'web', 1, 0, extra);
    expect(summary(answer)).toBe(reason);
    if (answer.kind === 'refused') expect(answer.outcome.status).toBe('inconclusive');
    expect(budget.plans).toHaveLength(0);
  });
});

describe('completions', () => {
  const dispatched = ask(open(), 'web', 1, 0).budget;

  it('returns a completed check at once: the ceiling is not a wait', () => {
    const { budget, answer } = finish(dispatched, 'web', 1, 5, VERIFIED);
    expect(answer).toEqual({ kind: 'recorded', outcome: VERIFIED });
    expect(acknowledgesSuccess(answer)).toBe(true);
    const waiting = proofAnswer(budget, { scenarioId: 'web', planDigest: digest('web', 1) }, T0 + 6 * S);
    expect(waiting.answer).toEqual({ kind: 'result', outcome: VERIFIED });
  });

  const reports: [string, ProducerReport, string, string][] = [
    ['verified evidence', VERIFIED, 'verified', ''],
    [
      'evidence that failed verification',
      { status: 'rejected', reason: 'UNSAFE_PATH', message: 'entry ../x', bundleDigest: sha256Digest('b') },
      'rejected',
      'UNSAFE_PATH',
    ],
    ['incomplete work', { status: 'incomplete', message: 'the run was cancelled' }, 'inconclusive', 'INCOMPLETE'],
    ['an unverifiable result', { status: 'unverifiable', message: 'no artifact' }, 'inconclusive', 'UNVERIFIABLE'],
    ['a verified report without observations', { ...VERIFIED, observations: [] }, 'inconclusive', 'UNVERIFIABLE'],
    [
      'a verified report with an unsafe observation path',
      { ...VERIFIED, observations: [{ path: '../../etc/passwd', sha256: sha256Digest('x'), bytes: 1 }] },
      'inconclusive',
      'UNVERIFIABLE',
    ],
    [
      'a verified report with a malformed observation digest',
      { ...VERIFIED, observations: [{ path: 'a.json', sha256: 'sha256:nope' as Sha256Digest, bytes: 1 }] },
      'inconclusive',
      'UNVERIFIABLE',
    ],
    ['a verified report with a malformed bundle digest', { ...VERIFIED, bundleDigest: 'md5:x' as Sha256Digest }, 'inconclusive', 'UNVERIFIABLE'],
    [
      'a verified report with a negative size',
      { ...VERIFIED, observations: [{ path: 'a.json', sha256: sha256Digest('x'), bytes: -1 }] },
      'inconclusive',
      'UNVERIFIABLE',
    ],
  ];
  it.each(reports)('records %s; only verified is a success', (_name, report, status, reason) => {
    const { budget, answer } = finish(dispatched, 'web', 1, 5, report);
    expect(answer.kind).toBe('recorded');
    if (answer.kind !== 'recorded') return;
    expect(answer.outcome.status).toBe(status);
    if (answer.outcome.status !== 'verified') expect(answer.outcome.reason).toBe(reason);
    expect(acknowledgesSuccess(answer)).toBe(status === 'verified');
    expect(outcomeOfReport(report)).toEqual(answer.outcome);
    expect(findPlan(budget, { scenarioId: 'web', planDigest: digest('web', 1) })?.outcome).toEqual(answer.outcome);
  });

  const refused: [string, Partial<Parameters<typeof completeProof>[1]>, number, string][] = [
    ['from a lost owner (another lease epoch)', { lease: { owner: 'worker-1', epoch: 2 } }, 5, 'OWNER_LOST'],
    ['from another owner', { lease: { owner: 'worker-9', epoch: 3 } }, 5, 'OWNER_LOST'],
    ['for another head', { headSha: OTHER_HEAD }, 5, 'HEAD_MOVED'],
    ['for a plan never requested', { planDigest: digest('web', 42) }, 5, 'UNKNOWN_PLAN'],
    ['for a scenario never requested', { scenarioId: 'bot', planDigest: digest('bot', 1) }, 5, 'UNKNOWN_PLAN'],
    ['at the deadline', {}, 300, 'LATE'],
    ['after the deadline', {}, 301, 'LATE'],
  ];
  it.each(refused)('refuses a verified completion %s, never as a success', (_name, extra, at, reason) => {
    const { budget, answer } = finish(dispatched, 'web', 1, at, VERIFIED, extra);
    expect(answer.kind === 'refused' && answer.reason).toBe(reason);
    expect(acknowledgesSuccess(answer)).toBe(false);
    const plan = findPlan(budget, { scenarioId: 'web', planDigest: digest('web', 1) });
    expect(plan?.outcome?.status ?? 'pending').toBe(reason === 'LATE' ? 'inconclusive' : 'pending');
  });

  it('keeps the first result: a retried delivery of it is recorded again, a different one is refused', () => {
    const first = finish(dispatched, 'web', 1, 5, VERIFIED);
    const replay = finish(first.budget, 'web', 1, 6, VERIFIED);
    expect(replay.answer).toEqual({ kind: 'recorded', outcome: VERIFIED });
    const rejected = finish(first.budget, 'web', 1, 7, { status: 'incomplete', message: 'x' });
    expect(rejected.answer.kind === 'refused' && rejected.answer.reason).toBe('ALREADY_SETTLED');
    const failed = finish(
      finish(dispatched, 'web', 1, 5, { status: 'rejected', reason: 'CRC_MISMATCH', message: 'entry a.json', bundleDigest: null }).budget,
      'web',
      1,
      6,
      VERIFIED,
    );
    expect(failed.answer.kind === 'refused' && failed.answer.reason).toBe('ALREADY_SETTLED');
    expect(acknowledgesSuccess(failed.answer)).toBe(false);
    expect(findPlan(failed.budget, { scenarioId: 'web', planDigest: digest('web', 1) })?.outcome?.status).toBe('rejected');
  });

  it('a late completion settles the plan inconclusive, and a retry of it stays refused', () => {
    const late = finish(dispatched, 'web', 1, 400, VERIFIED);
    const retry = finish(late.budget, 'web', 1, 401, VERIFIED);
    expect(retry.answer.kind === 'refused' && retry.answer.reason).toBe('ALREADY_SETTLED');
    expect(findPlan(retry.budget, { scenarioId: 'web', planDigest: digest('web', 1) })?.outcome).toMatchObject({ status: 'inconclusive', reason: 'DEADLINE' });
  });
});

describe('waiting', () => {
  const key = { scenarioId: 'web', planDigest: digest('web', 1) };
  const dispatched = ask(open(), 'web', 1, 0).budget;

  it('waits until the plan deadline, then answers inconclusive', () => {
    expect(proofAnswer(dispatched, key, T0 + 10 * S).answer).toEqual({ kind: 'wait', untilMs: T0 + 300 * S });
    const expired = proofAnswer(dispatched, key, T0 + 300 * S);
    expect(expired.answer).toMatchObject({ kind: 'result', outcome: { status: 'inconclusive', reason: 'DEADLINE' } });
    expect(findPlan(expired.budget, key)?.outcome).toMatchObject({ status: 'inconclusive', reason: 'DEADLINE' });
  });

  it.each([
    ['cancelled', 'CANCELLED'],
    ['client-timeout', 'CLIENT_TIMEOUT'],
  ] as const)('a client wait %s answers inconclusive and leaves the plan pending', (interrupt, reason) => {
    const { budget, answer } = proofAnswer(dispatched, key, T0 + 10 * S, interrupt);
    expect(answer).toMatchObject({ kind: 'result', outcome: { status: 'inconclusive', reason } });
    expect(findPlan(budget, key)?.outcome).toBeNull();
    // Asking again finds the running plan; its later result is still taken.
    expect(ask(budget, 'web', 1, 20).answer.kind).toBe('pending');
    const done = finish(budget, 'web', 1, 30, VERIFIED);
    expect(acknowledgesSuccess(done.answer)).toBe(true);
  });

  it('a result already in is answered even to a cancelled wait', () => {
    const done = finish(dispatched, 'web', 1, 5, VERIFIED).budget;
    expect(proofAnswer(done, key, T0 + 6 * S, 'cancelled').answer).toEqual({ kind: 'result', outcome: VERIFIED });
  });

  it('an unknown plan is answered inconclusive', () => {
    expect(proofAnswer(dispatched, { scenarioId: 'web', planDigest: digest('web', 7) }, T0).answer).toMatchObject({
      kind: 'result',
      outcome: { status: 'inconclusive', reason: 'INVALID_REQUEST' },
    });
  });

  it('a repeated plan after its deadline is inconclusive and is not dispatched again', () => {
    const again = ask(dispatched, 'web', 1, 500);
    expect(again.answer.kind).toBe('settled');
    if (again.answer.kind === 'settled') expect(again.answer.outcome).toMatchObject({ status: 'inconclusive', reason: 'DEADLINE' });
    expect(again.budget.plans).toHaveLength(1);
  });

  it('a repeated plan after its deadline keeps a result that came in time', () => {
    const done = finish(dispatched, 'web', 1, 100, VERIFIED).budget;
    const again = ask(done, 'web', 1, 900);
    expect(again.answer.kind === 'settled' && again.answer.outcome).toEqual(VERIFIED);
  });

  it('expireProofs settles only the plans whose deadline has come', () => {
    let budget = open({ reviewBudgetMs: 3600 * S });
    budget = ask(budget, 'web', 1, 0).budget;
    budget = ask(budget, 'bot', 1, 0).budget;
    budget = expireProofs(budget, T0 + 600 * S);
    expect(budget.plans.map((plan) => plan.outcome?.status ?? 'pending')).toEqual(['inconclusive', 'pending']);
  });
});

describe('a clock that goes backwards', () => {
  it('never moves a request earlier than a time already seen', () => {
    let budget = ask(open({ reviewBudgetMs: 3600 * S }), 'web', 1, 100).budget;
    const back = ask(budget, 'bot', 1, 50);
    budget = back.budget;
    expect(back.answer.kind === 'dispatch' && back.answer.plan.requestedAtMs).toBe(T0 + 100 * S);
    expect(budget.clockMs).toBe(T0 + 100 * S);
    expect(budget.firstRequestMs).toBe(T0 + 100 * S);
  });

  it('never revives an expired plan or admits a completion after its deadline', () => {
    let budget = ask(open(), 'web', 1, 0).budget;
    budget = expireProofs(budget, T0 + 400 * S);
    const back = finish(budget, 'web', 1, 10, VERIFIED);
    expect(back.answer.kind === 'refused' && back.answer.reason).toBe('ALREADY_SETTLED');
    expect(acknowledgesSuccess(back.answer)).toBe(false);
    const seen = proofAnswer(budget, { scenarioId: 'web', planDigest: digest('web', 1) }, T0);
    expect(seen.answer).toMatchObject({ kind: 'result', outcome: { status: 'inconclusive', reason: 'DEADLINE' } });
  });
});

describe('a lost owner', () => {
  it('a new owner takes over: pending plans end inconclusive, results, count and deadline stay', () => {
    let budget = open({ reviewBudgetMs: 3600 * S });
    budget = ask(budget, 'web', 1, 0).budget;
    budget = ask(budget, 'bot', 1, 0).budget;
    budget = ask(budget, 'slow', 1, 0).budget;
    budget = finish(budget, 'web', 1, 10, VERIFIED).budget;
    const deadline = budget.deadlineMs;
    const adopted = adoptProofBudget(budget, { owner: 'worker-2', epoch: 4 }, T0 + 20 * S);
    if (adopted.kind !== 'adopted') throw new Error(adopted.message);
    budget = adopted.budget;
    expect(budget.plans.map((plan) => [plan.scenarioId, plan.outcome?.status, plan.outcome?.status === 'inconclusive' ? plan.outcome.reason : null])).toEqual([
      ['web', 'verified', null],
      ['bot', 'inconclusive', 'OWNER_LOST'],
      ['slow', 'inconclusive', 'OWNER_LOST'],
    ]);
    expect(budget.deadlineMs).toBe(deadline);
    // The old owner's producer is refused; the new owner gets no fourth plan.
    const stale = finish(budget, 'bot', 1, 30, VERIFIED);
    expect(stale.answer.kind === 'refused' && stale.answer.reason).toBe('OWNER_LOST');
    expect(acknowledgesSuccess(stale.answer)).toBe(false);
    const newLease = { owner: 'worker-2', epoch: 4 };
    expect(summary(ask(budget, 'web', 5, 40, { lease: newLease }).answer)).toBe('PLAN_LIMIT');
    expect(summary(ask(budget, 'web', 1, 40, { lease: LEASE }).answer)).toBe('OWNER_LOST');
    const repeat = ask(budget, 'web', 1, 40, { lease: newLease });
    expect(repeat.answer.kind === 'settled' && repeat.answer.outcome).toEqual(VERIFIED);
  });

  it.each([
    ['the same epoch', { owner: 'worker-2', epoch: 3 }],
    ['an earlier epoch', { owner: 'worker-2', epoch: 2 }],
  ])('refuses a takeover with %s', (_name, lease) => {
    expect(adoptProofBudget(open(), lease, T0).kind).toBe('refused');
  });
});

describe('the end of the review', () => {
  it('closes pending plans as inconclusive and refuses later completions', () => {
    let budget = open({ reviewBudgetMs: 3600 * S });
    budget = ask(budget, 'web', 1, 0).budget;
    budget = ask(budget, 'bot', 1, 0).budget;
    budget = finish(budget, 'web', 1, 5, VERIFIED).budget;
    budget = closeProofBudget(budget, T0 + 60 * S);
    expect(budget.plans.map((plan) => plan.outcome?.status)).toEqual(['verified', 'inconclusive']);
    const late = finish(budget, 'bot', 1, 61, VERIFIED);
    expect(late.answer.kind === 'refused' && late.answer.reason).toBe('ALREADY_SETTLED');
    expect(proofBindings(budget)).toEqual([
      { scenarioId: 'web', planDigest: digest('web', 1), status: 'verified', bundleDigest: VERIFIED.status === 'verified' ? VERIFIED.bundleDigest : null },
      { scenarioId: 'bot', planDigest: digest('bot', 1), status: 'inconclusive', bundleDigest: null },
    ]);
  });

  it('keeps its state as plain JSON (what is stored is what is read back)', () => {
    let budget = ask(open(), 'web', 1, 0).budget;
    budget = finish(budget, 'web', 1, 5, VERIFIED).budget;
    expect(JSON.parse(canonicalJson(budget))).toEqual(budget);
  });
});
