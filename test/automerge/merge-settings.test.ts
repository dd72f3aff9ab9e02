import { describe, expect, it } from 'vitest';
import { decideAutomerge, defaultAutomergePolicy, foldLedger, parseCommands, withForgeRequired } from '../../src/automerge/index.js';
import { headBranchDeletion, mergeSettings, policyFromConfig, type MergeSettings } from '../../src/automerge/loop/policy.js';
import { isProofgateError } from '../../src/core/index.js';
import { emptyRepoConfig, parseRepoConfig, parseRepoConfigYaml } from '../../src/contracts/repo-config.js';
import type { TrustedConfig } from '../../src/forge/protection.js';
import { CHANGE, check, facts, snapshot, verdicts } from './builders.js';

function configError(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (!isProofgateError(error, 'CONFIG')) throw error;
    return error.message;
  }
  throw new Error('no CONFIG error');
}

describe('automerge.mergeMethod and automerge.deleteHeadBranch (config parsing)', () => {
  it('defaults to squash and keeping the head branch', () => {
    expect(mergeSettings(emptyRepoConfig())).toEqual({ method: 'squash', deleteHeadBranch: false });
    expect(mergeSettings(parseRepoConfig({ automerge: {} }, 'test'))).toEqual({ method: 'squash', deleteHeadBranch: false });
  });

  it.each(['squash', 'merge', 'rebase'] as const)('takes mergeMethod: %s', (method) => {
    const config = parseRepoConfigYaml(`automerge:\n  mergeMethod: ${method}\n  deleteHeadBranch: true\n`, 'main:.proofgate.yml');
    expect(mergeSettings(config)).toEqual({ method, deleteHeadBranch: true });
  });

  it.each([
    ['mergeMethod: fast-forward', 'automerge.mergeMethod'],
    ['mergeMethod: Squash', 'automerge.mergeMethod'],
    ['mergeMethod: 1', 'automerge.mergeMethod'],
    ['deleteHeadBranch: "yes"', 'automerge.deleteHeadBranch'],
    ['deleteHeadBranch: 1', 'automerge.deleteHeadBranch'],
    ['deleteHeadBranchAfterMerge: true', 'unknown key automerge.deleteHeadBranchAfterMerge'],
  ])('refuses %s with one CONFIG line naming %s', (line, key) => {
    const message = configError(() => parseRepoConfigYaml(`automerge:\n  ${line}\n`, 'main:.proofgate.yml'));
    expect(message).toContain('main:.proofgate.yml: ');
    expect(message).toContain(key);
    expect(message).not.toContain('\n');
  });

  it('names the allowed methods when one is wrong', () => {
    expect(configError(() => parseRepoConfig({ automerge: { mergeMethod: 'ff' } }, 'main:.proofgate.yml'))).toBe(
      'main:.proofgate.yml: automerge.mergeMethod: expected one of "squash"|"merge"|"rebase"',
    );
  });
});

describe('head branch deletion rule (pure)', () => {
  const trusted: TrustedConfig = { branch: 'main', config: parseRepoConfig({ protectedBranches: ['main', 'release/1.x'] }, 'test') };
  const on: MergeSettings = { method: 'squash', deleteHeadBranch: true };
  const head = (ref: string, crossRepository?: boolean) => ({
    head: { ref, sha: 'a'.repeat(40) },
    ...(crossRepository === undefined ? {} : { crossRepository }),
  });

  it.each([
    ['the setting is off', head('feature'), { ...on, deleteHeadBranch: false }, true, 'setting-off'],
    ['the head lives in a fork', head('feature', true), on, true, 'fork'],
    ['the head is the trusted branch', head('main'), on, true, 'protected'],
    ['the head is a protected branch in another letter case', head('Release/1.X'), on, true, 'protected'],
    ['the forge cannot delete branches', head('feature', false), on, false, 'unsupported'],
  ] as const)('keeps the branch when %s', (_name, snap, settings, forgeDeletes, code) => {
    const verdict = headBranchDeletion(snap, settings, trusted, forgeDeletes);
    expect(verdict).toMatchObject({ delete: false, code });
  });

  it('deletes a branch of this repository that is not protected, when asked', () => {
    expect(headBranchDeletion(head('feature'), on, trusted, true)).toEqual({ delete: true });
    expect(headBranchDeletion(head('feature', false), on, trusted, true)).toEqual({ delete: true });
  });
});

describe('required checks from the forge (branch protection)', () => {
  it('withForgeRequired adds the names once and takes them out of the ignored list', () => {
    const policy = { ignored: ['Labeler', 'Stale'], required: ['build'] };
    expect(withForgeRequired(policy, undefined)).toBe(policy);
    expect(withForgeRequired(policy, [])).toBe(policy);
    expect(withForgeRequired(policy, ['BUILD', 'labeler', 'security'])).toEqual({ ignored: ['Stale'], required: ['build', 'labeler', 'security'] });
  });

  it("policyFromConfig requires the snapshot's required checks on GitHub and keeps the configured ones locally", () => {
    const config = parseRepoConfig({ checks: [{ name: 'test', run: 'true' }] }, 'test');
    expect(policyFromConfig(config, 'github').checks.required).toBeUndefined();
    expect(policyFromConfig(config, 'github', { requiredChecks: ['build', 'security'] }).checks.required).toEqual(['build', 'security']);
    expect(policyFromConfig(config, 'github', {}).checks.required).toBeUndefined();
    expect(policyFromConfig(config, 'local', {}).checks.required).toEqual(['test']);
  });

  const ledger = foldLedger(CHANGE, [
    {
      type: 'commands',
      delivery: { comment: { id: '1', author: 'maintainer', updatedAt: '2024-05-01T09:00:00Z' }, commands: parseCommands('/proofgate automerge') },
    },
  ]);
  const decide = (overrides: Parameters<typeof snapshot>[0], ignored?: string[]) =>
    decideAutomerge(
      snapshot(overrides),
      ledger,
      { ...defaultAutomergePolicy, checks: { ignored: ignored ?? defaultAutomergePolicy.checks.ignored } },
      verdicts({ verdict: 'CONFIRMED' }),
      facts(),
    );

  it('a required check that has not run is pending: wait, never merge', () => {
    const decision = decide({ requiredChecks: ['build', 'security'] });
    expect(decision).toMatchObject({ kind: 'wait', code: 'checks-pending' });
    expect(decision.reason).toContain('required, not reported yet: security');
  });

  it('merges once every required check passed (names compare case-insensitively)', () => {
    expect(decide({ requiredChecks: ['build', 'Security'], checks: [check('build'), check('test'), check('security')] })).toMatchObject({
      kind: 'merge',
      code: 'ready',
    });
    expect(decide({ requiredChecks: [] })).toMatchObject({ kind: 'merge' });
    expect(decide({})).toMatchObject({ kind: 'merge' });
  });

  it('a required check the config ignores still gates the merge', () => {
    expect(decide({ requiredChecks: ['Labeler'] }, ['Labeler'])).toMatchObject({ kind: 'wait', code: 'checks-pending' });
    const failing = decide({ requiredChecks: ['Labeler'], checks: [check('build'), check('Labeler', { conclusion: 'failure' })] }, ['Labeler']);
    expect(failing.kind).not.toBe('merge');
    expect(failing.code).toBe('checks-failed');
  });

  it('a required check still running is pending, a failed one is a failure', () => {
    expect(decide({ requiredChecks: ['security'], checks: [check('build'), check('security', { status: 'in_progress', conclusion: null })] })).toMatchObject({
      kind: 'wait',
      code: 'checks-pending',
    });
    expect(decide({ requiredChecks: ['security'], checks: [check('build'), check('security', { conclusion: 'failure' })] })).toMatchObject({
      code: 'checks-failed',
    });
  });
});
