import { describe, expect, it } from 'vitest';
import { allowsMerge, judgeMergeability, type MergeabilityInput } from '../../src/forge/local/index.js';
import type { ForgeCheck } from '../../src/forge/port.js';

const SHA = 'a'.repeat(40);
const check = (name: string, status: ForgeCheck['status'], conclusion: ForgeCheck['conclusion'] = null): ForgeCheck => ({
  kind: 'check_run',
  name,
  workflow: 'proofgate',
  status,
  conclusion,
  startedAt: null,
  completedAt: null,
  url: null,
  headSha: SHA,
});

const base: MergeabilityInput = { state: 'open', conflicts: false, upToDate: true, requireUpToDate: false, configuredChecks: [], checks: [] };

const cases: Array<[string, Partial<MergeabilityInput>, string, string, boolean]> = [
  ['clean, nothing configured', {}, 'MERGEABLE', 'CLEAN', true],
  ['merged change', { state: 'merged' }, 'UNKNOWN', 'UNKNOWN', false],
  ['closed change', { state: 'closed', conflicts: true }, 'UNKNOWN', 'UNKNOWN', false],
  ['conflict', { conflicts: true }, 'CONFLICTING', 'DIRTY', false],
  ['conflict wins over behind', { conflicts: true, upToDate: false, requireUpToDate: true }, 'CONFLICTING', 'DIRTY', false],
  ['behind, up-to-date required', { upToDate: false, requireUpToDate: true }, 'MERGEABLE', 'BEHIND', false],
  ['behind, not required', { upToDate: false }, 'MERGEABLE', 'CLEAN', true],
  ['configured check not run', { configuredChecks: ['lint'] }, 'MERGEABLE', 'BLOCKED', false],
  ['configured check queued', { configuredChecks: ['lint'], checks: [check('lint', 'queued')] }, 'MERGEABLE', 'BLOCKED', false],
  ['configured check running', { configuredChecks: ['lint'], checks: [check('lint', 'in_progress')] }, 'MERGEABLE', 'BLOCKED', false],
  ['configured check failed', { configuredChecks: ['lint'], checks: [check('lint', 'completed', 'failure')] }, 'MERGEABLE', 'BLOCKED', false],
  ['configured check timed out', { configuredChecks: ['lint'], checks: [check('lint', 'completed', 'timed_out')] }, 'MERGEABLE', 'BLOCKED', false],
  ['configured check passed', { configuredChecks: ['lint'], checks: [check('lint', 'completed', 'success')] }, 'MERGEABLE', 'CLEAN', true],
  ['behind wins over blocked', { upToDate: false, requireUpToDate: true, configuredChecks: ['lint'] }, 'MERGEABLE', 'BEHIND', false],
  [
    'unconfigured check failed',
    { configuredChecks: ['lint'], checks: [check('lint', 'completed', 'success'), check('old', 'completed', 'failure')] },
    'MERGEABLE',
    'UNSTABLE',
    true,
  ],
  ['unconfigured check pending', { checks: [check('old', 'in_progress')] }, 'MERGEABLE', 'CLEAN', true],
];

describe('judgeMergeability', () => {
  it.each(cases)('%s', (_name, input, mergeable, mergeStateStatus, merges) => {
    const judgment = judgeMergeability({ ...base, ...input });
    expect(judgment.mergeable).toBe(mergeable);
    expect(judgment.mergeStateStatus).toBe(mergeStateStatus);
    expect(judgment.reason).not.toBe('');
    expect(allowsMerge(judgment)).toBe(merges);
  });

  it('names every blocking check in its reason', () => {
    const judgment = judgeMergeability({
      ...base,
      configuredChecks: ['lint', 'test', 'build'],
      checks: [check('lint', 'completed', 'failure'), check('test', 'in_progress')],
    });
    expect(judgment.reason).toBe('required checks failed: lint; pending: test; not run: build');
  });
});
