import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_IGNORED_CHECKS, newestChecks, summarizeChecks, type CheckPolicy } from '../../src/automerge/index.js';
import type { CheckConclusion, CheckStatus, ForgeCheck } from '../../src/forge/port.js';
import { check } from './builders.js';

const POLICY: CheckPolicy = { ignored: DEFAULT_IGNORED_CHECKS };
const running = (name: string, status: CheckStatus = 'in_progress', at = '2024-05-01T10:00:00Z'): ForgeCheck =>
  check(name, { status, conclusion: null, startedAt: at, completedAt: null });
const done = (name: string, conclusion: CheckConclusion, started = '2024-05-01T10:00:00Z', completed = '2024-05-01T10:05:00Z'): ForgeCheck =>
  check(name, { conclusion, startedAt: started, completedAt: completed });

interface Expect {
  pending: string[];
  failed: string[];
  rerun: string[];
  passed: string[];
  ignored: string[];
  noChecksYet: boolean;
  hasPending: boolean;
  missing?: string[];
}

const rows: [string, ForgeCheck[], CheckPolicy, Expect][] = [
  ['no checks yet', [], POLICY, { pending: [], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: true, hasPending: true }],
  [
    'no checks, none expected',
    [],
    { ...POLICY, expectChecks: false },
    { pending: [], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: false },
  ],
  [
    'only ignored checks',
    [done('Labeler', 'failure')],
    POLICY,
    { pending: [], failed: [], rerun: [], passed: [], ignored: ['CI / Labeler'], noChecksYet: true, hasPending: true },
  ],
  [
    'all green',
    [done('build', 'success'), done('test', 'success')],
    POLICY,
    { pending: [], failed: [], rerun: [], passed: ['CI / build', 'CI / test'], ignored: [], noChecksYet: false, hasPending: false },
  ],
  [
    'neutral and skipped pass',
    [done('a', 'neutral'), done('b', 'skipped')],
    POLICY,
    { pending: [], failed: [], rerun: [], passed: ['CI / a', 'CI / b'], ignored: [], noChecksYet: false, hasPending: false },
  ],
  ...(['queued', 'in_progress', 'waiting', 'requested', 'pending'] as const).map((status): [string, ForgeCheck[], CheckPolicy, Expect] => [
    `${status} is pending`,
    [running('lint', status)],
    POLICY,
    { pending: ['CI / lint'], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: true },
  ]),
  ...(['failure', 'error', 'timed_out', 'action_required', 'startup_failure'] as const).map((conclusion): [string, ForgeCheck[], CheckPolicy, Expect] => [
    `${conclusion} is a repairable terminal blocker`,
    [done('lint', conclusion)],
    POLICY,
    { pending: [], failed: ['CI / lint'], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: false },
  ]),
  ...(['cancelled', 'stale'] as const).map((conclusion): [string, ForgeCheck[], CheckPolicy, Expect] => [
    `${conclusion} blocks and needs a re-run`,
    [done('lint', conclusion)],
    POLICY,
    { pending: [], failed: [], rerun: ['CI / lint'], passed: [], ignored: [], noChecksYet: false, hasPending: false },
  ]),
  [
    'completed without a conclusion is pending',
    [check('odd', { conclusion: null })],
    POLICY,
    { pending: ['CI / odd'], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: true },
  ],
  [
    'newest run wins: re-run in progress after a failure',
    [done('lint', 'failure'), running('lint', 'in_progress', '2024-05-01T10:06:00Z')],
    POLICY,
    { pending: ['CI / lint'], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: true },
  ],
  [
    'newest run wins regardless of input order',
    [running('lint', 'in_progress', '2024-05-01T10:06:00Z'), done('lint', 'failure')],
    POLICY,
    { pending: ['CI / lint'], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: true },
  ],
  [
    'a later success replaces a failure',
    [done('lint', 'failure'), done('lint', 'success', '2024-05-01T11:00:00Z', '2024-05-01T11:01:00Z')],
    POLICY,
    { pending: [], failed: [], rerun: [], passed: ['CI / lint'], ignored: [], noChecksYet: false, hasPending: false },
  ],
  [
    'a later failure replaces a success',
    [done('lint', 'success'), done('lint', 'failure', '2024-05-01T11:00:00Z', '2024-05-01T11:01:00Z')],
    POLICY,
    { pending: [], failed: ['CI / lint'], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: false },
  ],
  [
    'a queued run without times counts as newest',
    [done('lint', 'success'), check('lint', { status: 'queued', conclusion: null, startedAt: null, completedAt: null })],
    POLICY,
    { pending: ['CI / lint'], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: true },
  ],
  [
    'a cancelled run superseded by a newer success',
    [done('lint', 'cancelled'), done('lint', 'success', '2024-05-01T10:02:00Z', '2024-05-01T10:07:00Z')],
    POLICY,
    { pending: [], failed: [], rerun: [], passed: ['CI / lint'], ignored: [], noChecksYet: false, hasPending: false },
  ],
  [
    'same name in two workflows is two checks',
    [done('lint', 'failure'), check('lint', { workflow: 'Docs', status: 'in_progress', conclusion: null, completedAt: null })],
    POLICY,
    { pending: ['Docs / lint'], failed: ['CI / lint'], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: true },
  ],
  [
    'commit status without workflow',
    [check('ci/jenkins', { kind: 'status', workflow: null, status: 'pending', conclusion: null, completedAt: null })],
    POLICY,
    { pending: ['ci/jenkins'], failed: [], rerun: [], passed: [], ignored: [], noChecksYet: false, hasPending: true },
  ],
  [
    'ignored by workflow name, case-insensitive',
    [check('triage', { workflow: 'labeler', conclusion: 'failure' }), done('build', 'success')],
    POLICY,
    { pending: [], failed: [], rerun: [], passed: ['CI / build'], ignored: ['labeler / triage'], noChecksYet: false, hasPending: false },
  ],
  [
    'ignored pending check does not make it wait',
    [running('Stale'), done('build', 'success')],
    POLICY,
    { pending: [], failed: [], rerun: [], passed: ['CI / build'], ignored: ['CI / Stale'], noChecksYet: false, hasPending: false },
  ],
  [
    'custom ignored list',
    [done('flaky-e2e', 'failure'), done('build', 'success')],
    { ignored: ['flaky-e2e'] },
    { pending: [], failed: [], rerun: [], passed: ['CI / build'], ignored: ['CI / flaky-e2e'], noChecksYet: false, hasPending: false },
  ],
  [
    'required check missing is pending',
    [done('build', 'success')],
    { ...POLICY, required: ['build', 'security'] },
    { pending: [], failed: [], rerun: [], passed: ['CI / build'], ignored: [], noChecksYet: false, hasPending: true, missing: ['security'] },
  ],
  [
    'required check named by label',
    [done('build', 'success')],
    { ...POLICY, required: ['CI / build'] },
    { pending: [], failed: [], rerun: [], passed: ['CI / build'], ignored: [], noChecksYet: false, hasPending: false, missing: [] },
  ],
  [
    'required but ignored never blocks',
    [done('build', 'success')],
    { ignored: ['security'], required: ['security'] },
    { pending: [], failed: [], rerun: [], passed: ['CI / build'], ignored: [], noChecksYet: false, hasPending: false, missing: [] },
  ],
  [
    'mixed: failed, pending, passed, ignored',
    [done('build', 'success'), done('lint', 'failure'), running('test'), done('Labeler', 'success'), done('deploy', 'cancelled')],
    POLICY,
    {
      pending: ['CI / test'],
      failed: ['CI / lint'],
      rerun: ['CI / deploy'],
      passed: ['CI / build'],
      ignored: ['CI / Labeler'],
      noChecksYet: false,
      hasPending: true,
    },
  ],
];

describe('summarizeChecks', () => {
  it.each(rows)('%s', (_name, checks, policy, expected) => {
    const summary = summarizeChecks(checks, policy);
    expect(summary.pending.map((c) => c.label)).toEqual(expected.pending);
    expect(summary.terminalBlockers.filter((b) => b.repairable).map((c) => c.label)).toEqual(expected.failed);
    expect(summary.terminalBlockers.filter((b) => !b.repairable).map((c) => c.label)).toEqual(expected.rerun);
    expect(summary.passed.map((c) => c.label)).toEqual(expected.passed);
    expect(summary.ignored.map((c) => c.label)).toEqual(expected.ignored);
    expect(summary.noChecksYet).toBe(expected.noChecksYet);
    expect(summary.hasPending).toBe(expected.hasPending);
    if (expected.missing !== undefined) expect(summary.missingRequired).toEqual(expected.missing);
    if (expected.pending.length > 0) expect(summary.text).toContain('pending: ');
    if (expected.failed.length === 0) expect(summary.text).not.toContain('failed');
  });

  it('renders the parts in a fixed wording', () => {
    const summary = summarizeChecks([done('lint', 'failure'), running('test'), done('build', 'success'), done('Labeler', 'success')], POLICY);
    expect(summary.text).toBe('failed checks: CI / lint (failure); pending: CI / test (in_progress); passed: 1; ignored: CI / Labeler');
    expect(summarizeChecks([], POLICY).text).toBe('no checks reported yet; passed: 0');
  });

  it('newestChecks keeps one run per (workflow, name)', () => {
    const result = newestChecks([done('a', 'failure'), done('a', 'success', '2024-05-01T12:00:00Z', '2024-05-01T12:01:00Z'), done('b', 'success')]);
    expect(result.map((c) => [c.name, c.conclusion])).toEqual([
      ['a', 'success'],
      ['b', 'success'],
    ]);
  });
});

const STATUSES: CheckStatus[] = ['queued', 'in_progress', 'completed', 'waiting', 'requested', 'pending'];
const CONCLUSIONS: (CheckConclusion | null)[] = [
  null,
  'success',
  'failure',
  'neutral',
  'cancelled',
  'skipped',
  'timed_out',
  'action_required',
  'startup_failure',
  'stale',
  'error',
];
const TIMES = [null, '2024-05-01T10:00:00Z', '2024-05-01T10:01:00Z', '2024-05-01T10:02:00.500Z', 'not a time'];

const arbCheck: fc.Arbitrary<ForgeCheck> = fc.record({
  kind: fc.constantFrom<'check_run' | 'status'>('check_run', 'status'),
  name: fc.constantFrom('lint', 'test', 'build', 'e2e', 'Labeler', 'docs'),
  workflow: fc.constantFrom<string | null>(null, 'CI', 'Nightly'),
  status: fc.constantFrom(...STATUSES),
  conclusion: fc.constantFrom(...CONCLUSIONS),
  startedAt: fc.constantFrom(...TIMES),
  completedAt: fc.constantFrom(...TIMES),
  url: fc.constant(null),
  headSha: fc.constant('a'.repeat(40)),
});

function segment(text: string, prefix: string): string[] {
  const part = text.split('; ').find((p) => p.startsWith(prefix));
  if (part === undefined) return [];
  return part
    .slice(prefix.length)
    .split(', ')
    .map((item) => item.replace(/ \([a-z_]+\)$/, ''));
}

describe('summarizeChecks: properties', () => {
  it('never names a check that is not completed in the failure part of the text', () => {
    fc.assert(
      fc.property(fc.array(arbCheck, { maxLength: 25 }), fc.subarray(['lint', 'docs', 'Labeler']), (checks, ignored) => {
        const summary = summarizeChecks(checks, { ignored });
        const newest = new Map(newestChecks(checks).map((c) => [c.workflow === null ? c.name : `${c.workflow} / ${c.name}`, c]));
        for (const prefix of ['failed checks: ', 'not green, needs a re-run: ']) {
          for (const label of segment(summary.text, prefix)) {
            const run = newest.get(label);
            expect(run?.status).toBe('completed');
            expect(run?.conclusion).not.toBeNull();
            expect(ignored.map((n) => n.toLowerCase())).not.toContain(run?.name.toLowerCase());
          }
        }
        for (const entry of summary.pending) expect(summary.terminalBlockers.map((b) => b.label)).not.toContain(entry.label);
      }),
      { numRuns: 500 },
    );
  });

  it('every newest gating run lands in exactly one bucket', () => {
    fc.assert(
      fc.property(fc.array(arbCheck, { maxLength: 25 }), (checks) => {
        const summary = summarizeChecks(checks, { ignored: [] });
        const total = summary.pending.length + summary.terminalBlockers.length + summary.passed.length;
        expect(total).toBe(newestChecks(checks).length);
        expect(summary.hasPending).toBe(summary.pending.length > 0 || checks.length === 0);
      }),
      { numRuns: 300 },
    );
  });
});
