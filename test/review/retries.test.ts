import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixedClock, type Clock } from '../../src/core/index.js';
import { readRunEvents } from '../../src/runtime/index.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import {
  decideRetry,
  evidenceFileName,
  invalid,
  laneRetryPolicy,
  runReview,
  runReviewOnRuntime,
  semanticResult,
  transportFailure,
  type AttemptFacts,
  type LaneAdapter,
  type LaneRun,
  type LaneRunContext,
  type ReviewOutcome,
} from '../../src/review/index.js';
import { makeRepo, type TestRepo } from './repo-fixture.js';

let repo: TestRepo;
let dir: string;

beforeAll(() => {
  repo = makeRepo();
  repo.branch('feature');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => b + a;\n', 'test/calc.test.ts': 'commutes\n' }, 'commute');
  repo.switchTo('main');
  dir = mkdtempSync(join(tmpdir(), 'pg-review-retries-'));
});

afterAll(() => {
  repo.remove();
  rmSync(dir, { recursive: true, force: true });
});

/** What the scripted reviewer does on one call. */
type Step = 'transport' | 'confirm' | 'refute' | 'refute-no-findings' | 'refute-no-evidence' | 'garbage' | 'wrong-nonce' | 'breach';

function writeEvidence(context: LaneRunContext): string {
  const { request } = context;
  const path = join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce));
  writeFileSync(path, `looked at ${request.head_sha}\n`);
  return path;
}

const FINDING = { title: 'add is wrong', evidence: 'b + a', path: 'src/calc.ts', line: 1 };

function answer(step: Step, context: LaneRunContext): LaneRun {
  switch (step) {
    case 'transport':
      return { raw: transportFailure(context, 'reviewer exited with code 1: provider lost') };
    case 'confirm':
      return { raw: semanticResult(context, writeEvidence(context), [], 'CONFIRMED') };
    case 'refute':
      return { raw: semanticResult(context, writeEvidence(context), [FINDING], 'REFUTED') };
    case 'refute-no-findings':
      return { raw: semanticResult(context, writeEvidence(context), [], 'REFUTED') };
    case 'refute-no-evidence':
      return {
        raw: semanticResult(
          context,
          join(context.request.evidence_dir, evidenceFileName(context.request.subject_id, context.request.head_sha, context.request.nonce)),
          [FINDING],
          'REFUTED',
        ),
      };
    case 'garbage':
      return { raw: { verdict: 'yes please' } };
    case 'wrong-nonce':
      return { raw: { ...semanticResult(context, writeEvidence(context), [], 'CONFIRMED'), nonce: 'a'.repeat(32) } };
    case 'breach':
      return {
        raw: semanticResult(context, writeEvidence(context), [], 'CONFIRMED'),
        breach: invalid('READ_ONLY_VIOLATED', 'the reviewer changed its read-only snapshot of the head'),
      };
  }
}

/** A reviewer that answers `steps` in order (the last one again once they run out), and remembers every call. */
function scripted(steps: readonly Step[], onCall?: () => void): { adapter: LaneAdapter; calls: LaneRunContext[] } {
  const calls: LaneRunContext[] = [];
  const adapter: LaneAdapter = (context) => {
    calls.push(context);
    onCall?.();
    const step = steps[Math.min(calls.length, steps.length) - 1] ?? 'transport';
    return Promise.resolve(answer(step, context));
  };
  return { adapter, calls };
}

let configs = 0;
function configFile(review: string): string {
  configs += 1;
  const path = join(dir, `config-${configs}.yml`);
  writeFileSync(path, `review:\n${review}  lanes:\n    - { id: a, builtin: rules, timeoutSeconds: 100 }\n`);
  return path;
}

async function review(steps: readonly Step[], settings = '', options: { clock?: Clock & { advance(ms: number): void }; stepMs?: number } = {}) {
  const { clock, stepMs = 0 } = options;
  const reviewer = scripted(steps, () => clock?.advance(stepMs));
  configs += 1;
  const outcome = await runReview({
    repoDir: repo.dir,
    base: 'main',
    head: 'feature',
    dataDir: join(dir, `data-${configs}`),
    configFile: configFile(settings),
    adapters: { rules: reviewer.adapter },
    ...(clock === undefined ? {} : { clock }),
  });
  return { outcome, calls: reviewer.calls };
}

function lane(outcome: ReviewOutcome) {
  const first = outcome.lanes[0];
  if (first === undefined) throw new Error('no lane');
  return first;
}

describe('a lane that fails in transport is dispatched again', () => {
  it('with a fresh context, nonce, evidence directory and request, and the judgment it then gives counts', async () => {
    const { outcome, calls } = await review(['transport', 'confirm']);
    expect(outcome.verdict).toBe('CONFIRMED');
    expect(calls).toHaveLength(2);
    const [first, second] = calls;
    expect(second?.contextId).not.toBe(first?.contextId);
    expect(second?.request.nonce).not.toBe(first?.request.nonce);
    expect(second?.request.evidence_dir).not.toBe(first?.request.evidence_dir);
    expect(second?.request.evidence_dir).toBe(join(outcome.dir, 'lanes', 'a', 'attempt-2', 'evidence'));
    expect(existsSync(join(outcome.dir, 'lanes', 'a', 'request.json'))).toBe(true);
    const final = lane(outcome);
    expect(final.request_file).toBe(join(outcome.dir, 'lanes', 'a', 'attempt-2', 'request.json'));
    expect(final.attempt).toBe(2);
    expect(final.context_id).toBe(second?.contextId);
    expect(final.attempts).toEqual([
      {
        attempt: 1,
        context_id: first?.contextId,
        outcome: 'transport-failure',
        kind: 'REPORTED',
        reason: 'reviewer exited with code 1: provider lost',
        next: 'retried',
        stopped: null,
      },
      { attempt: 2, context_id: second?.contextId, outcome: 'valid', kind: 'CONFIRMED', reason: null, next: 'final', stopped: null },
    ]);
    expect(outcome.reasons).toEqual([`lane a: CONFIRMED by proofgate-builtin in context ${second?.contextId ?? ''} on attempt 2`]);
  });

  it('holds only when the lane still has no valid judgment after its retries, and says after how many', async () => {
    const { outcome, calls } = await review(['transport']);
    expect(calls).toHaveLength(3);
    expect(outcome.verdict).toBe('HOLD');
    expect(outcome.reasons).toEqual(['lane a: transport failure (reviewer exited with code 1: provider lost) after 3 attempts']);
    expect(lane(outcome).attempts.map((attempt) => [attempt.outcome, attempt.next])).toEqual([
      ['transport-failure', 'retried'],
      ['transport-failure', 'retried'],
      ['transport-failure', 'final'],
    ]);
    expect(lane(outcome).attempts[2]?.stopped).toBe('no retries left (review.transportRetries: 2)');
  });
});

describe('a refutation is never asked again', () => {
  it('a valid REFUTED ends the lane on its first attempt, whatever the retries', async () => {
    const { outcome, calls } = await review(['refute', 'confirm'], '  transportRetries: 10\n');
    expect(calls).toHaveLength(1);
    expect(outcome.verdict).toBe('REFUTED');
    expect(lane(outcome).attempts).toMatchObject([{ attempt: 1, outcome: 'valid', kind: 'REFUTED', next: 'final', stopped: null }]);
  });

  it('a REFUTED after a transport failure ends the lane there', async () => {
    const { outcome, calls } = await review(['transport', 'refute', 'confirm']);
    expect(calls).toHaveLength(2);
    expect(outcome.verdict).toBe('REFUTED');
  });

  it.each([
    ['refute-no-findings' as const, 'REFUTED_WITHOUT_FINDINGS'],
    ['refute-no-evidence' as const, 'REPORTED'],
  ])('an answer that says REFUTED but does not validate (%s) is not asked again either: the review holds', async (step, kind) => {
    const { outcome, calls } = await review([step, 'confirm'], '  transportRetries: 10\n');
    expect(calls).toHaveLength(1);
    expect(outcome.verdict).toBe('HOLD');
    expect(lane(outcome).attempts).toMatchObject([
      { outcome: 'transport-failure', kind, next: 'final', stopped: 'the reviewer answered REFUTED: a refutation is never asked again' },
    ]);
  });
});

describe('a lane that answers invalidly on purpose', () => {
  it.each([
    ['garbage' as const, '  transportRetries: 0\n', 1],
    ['garbage' as const, '  transportRetries: 1\n', 2],
    ['garbage' as const, '', 3],
    ['wrong-nonce' as const, '  transportRetries: 4\n', 5],
  ])('(%s, %j) gets exactly 1 + transportRetries attempts, then holds', async (step, settings, expected) => {
    const { outcome, calls } = await review(
      [step, 'confirm'].map(() => step),
      settings,
    );
    expect(calls).toHaveLength(expected);
    expect(outcome.verdict).toBe('HOLD');
    expect(lane(outcome).attempts).toHaveLength(expected);
    expect(lane(outcome).attempts.every((attempt) => attempt.outcome === 'transport-failure')).toBe(true);
    expect(lane(outcome).attempts.at(-1)?.next).toBe('final');
  });

  it('is cut off by the review budget before the retry count: a re-dispatch starts only if it can end within the budget', async () => {
    const clock = fixedClock('2030-01-01T00:00:00Z');
    // Every attempt takes the lane's whole timeout (100 s); the budget has room for two attempts, not a third.
    const { outcome, calls } = await review(['garbage'], '  transportRetries: 10\n  budgetSeconds: 250\n', { clock, stepMs: 100_000 });
    expect(calls).toHaveLength(2);
    expect(outcome.verdict).toBe('HOLD');
    expect(lane(outcome).attempts.at(-1)?.stopped).toBe("the review's budget (250s) has no room for another attempt of 100s after 200s");
  });

  it('a breach (the reviewer wrote into its read-only snapshot) is not transport: no retry, the review holds', async () => {
    const { outcome, calls } = await review(['breach', 'confirm']);
    expect(calls).toHaveLength(1);
    expect(outcome.verdict).toBe('HOLD');
    expect(lane(outcome).attempts).toMatchObject([
      { kind: 'READ_ONLY_VIOLATED', next: 'final', stopped: 'READ_ONLY_VIOLATED is a breach, not a transport failure' },
    ]);
  });
});

describe('the retry rule (pure)', () => {
  const policy = { retries: 2, budgetMs: 1_000_000 };
  const time = { elapsedMs: 0, laneTimeoutMs: 1_000 };
  const base = { context_id: 'ctx_1', attempt: 1, answered: null, validation: { valid: true } } as const;
  const failure = {
    ...base,
    result: transportFailure({ request: { nonce: 'n' }, lane: { id: 'a', family: 'f' }, contextId: 'ctx_1' } as LaneRunContext, 'timed out after 600s'),
  };
  const cases: Array<[string, AttemptFacts, Partial<typeof time>, boolean]> = [
    ['a reported transport failure, attempts left', failure, {}, true],
    ['the last allowed attempt', { ...failure, attempt: 3 }, {}, false],
    ['no room in the budget', failure, { elapsedMs: 999_500 }, false],
    ['exactly room in the budget', failure, { elapsedMs: 999_000 }, true],
    ['an invalid CONFIRMED', { ...base, result: null, answered: 'CONFIRMED', validation: invalid('NONCE_MISMATCH', 'x') }, {}, true],
    ['an invalid REFUTED', { ...base, result: null, answered: 'REFUTED', validation: invalid('EVIDENCE_EMPTY', 'x') }, {}, false],
    ['a repository change', { ...base, result: null, answered: 'CONFIRMED', validation: invalid('REPOSITORY_MODIFIED', 'x') }, {}, false],
  ];
  it.each(cases)('%s', (_name, facts, at, retry) => {
    expect(decideRetry(facts, policy, { ...time, ...at }).retry).toBe(retry);
  });

  it('defaults to 2 retries and a budget of (1 + retries) x the slowest lane', () => {
    expect(
      laneRetryPolicy({
        lanes: [
          { id: 'a', builtin: 'rules' },
          { id: 'b', builtin: 'tests', timeoutSeconds: 900 },
        ],
      }),
    ).toEqual({ retries: 2, budgetMs: 2_700_000 });
    expect(laneRetryPolicy({ lanes: [{ id: 'a', builtin: 'rules' }], transportRetries: 0, budgetSeconds: 60 })).toEqual({ retries: 0, budgetMs: 60_000 });
  });
});

describe('on the runtime, each attempt is a graph attempt of the lane node', () => {
  function storage() {
    configs += 1;
    return createLocalRunStorage({ directory: join(dir, 'store'), namespace: `retries-${configs}`, policy: defaultStoragePolicy });
  }

  it('records every attempt in the run events, and the final one completes with the lane outcome', async () => {
    const store = storage();
    const reviewer = scripted(['transport', 'garbage', 'confirm']);
    const reviewed = await runReviewOnRuntime({
      repoDir: repo.dir,
      base: 'main',
      head: 'feature',
      dataDir: join(dir, 'rt-data'),
      configFile: configFile(''),
      storage: store,
      adapters: { rules: reviewer.adapter },
    });
    expect(reviewer.calls).toHaveLength(3);
    expect(reviewed.outcome.verdict).toBe('CONFIRMED');
    const events = await readRunEvents(store.eventStore, reviewed.runId);
    const lanePositions = events
      .filter((event) => event.type === 'dispatch-decided' && event.data.nodeId === 'lane.a')
      .map((event) => event.type === 'dispatch-decided' && event.data.position);
    expect(lanePositions).toEqual(['dag/lane.a/1', 'dag/lane.a/2', 'dag/lane.a/3']);
    const failed = events.flatMap((event) => (event.type === 'attempt-failed' ? [event.data.reason] : []));
    expect(failed).toHaveLength(2);
    expect(failed[0]).toMatch(
      /^lane a attempt 1: transport failure REPORTED \(reviewer exited with code 1: provider lost\); dispatched again with a fresh context$/,
    );
    expect(failed[1]).toMatch(
      /^lane a attempt 2: transport failure MISSING_OUTCOME \(a lane result carries neither a disposition nor a failure\); dispatched again with a fresh context$/,
    );
    const completed = events.flatMap((event) => (event.type === 'attempt-completed' && event.data.nodeId === 'lane.a' ? [event.data] : []));
    expect(completed.map((data) => data.position)).toEqual(['dag/lane.a/3']);
    expect((completed[0]?.result as { attempts: unknown[] }).attempts).toMatchObject([
      { attempt: 1, outcome: 'transport-failure', kind: 'REPORTED', next: 'retried' },
      { attempt: 2, outcome: 'transport-failure', kind: 'MISSING_OUTCOME', next: 'retried' },
      { attempt: 3, outcome: 'valid', kind: 'CONFIRMED', next: 'final' },
    ]);
    store.close();
  });

  it('a lane that never answers holds after its retries; the run completes with the HOLD recorded', async () => {
    const store = storage();
    const reviewer = scripted(['transport']);
    const reviewed = await runReviewOnRuntime({
      repoDir: repo.dir,
      base: 'main',
      head: 'feature',
      dataDir: join(dir, 'rt-data'),
      configFile: configFile('  transportRetries: 1\n'),
      storage: store,
      adapters: { rules: reviewer.adapter },
    });
    expect(reviewer.calls).toHaveLength(2);
    expect(reviewed.outcome.verdict).toBe('HOLD');
    expect(reviewed.record.binding.result).toEqual({
      verdict: 'HOLD',
      reasons: ['lane a: transport failure (reviewer exited with code 1: provider lost) after 2 attempts'],
    });
    store.close();
  });

  it('a valid REFUTED is dispatched once', async () => {
    const store = storage();
    const reviewer = scripted(['refute', 'confirm']);
    const reviewed = await runReviewOnRuntime({
      repoDir: repo.dir,
      base: 'main',
      head: 'feature',
      dataDir: join(dir, 'rt-data'),
      configFile: configFile(''),
      storage: store,
      adapters: { rules: reviewer.adapter },
    });
    expect(reviewer.calls).toHaveLength(1);
    expect(reviewed.outcome.verdict).toBe('REFUTED');
    const events = await readRunEvents(store.eventStore, reviewed.runId);
    expect(events.filter((event) => event.type === 'attempt-failed')).toEqual([]);
    store.close();
  });
});
