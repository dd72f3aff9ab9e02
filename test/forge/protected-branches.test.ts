import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Octokit } from '@octokit/core';
import { isProofgateError } from '../../src/core/index.js';
import { createGitHubForge } from '../../src/forge/github/index.js';
import { openLocalForge, type LocalForge } from '../../src/forge/local/index.js';
import { changeStream } from '../../src/forge/local/records.js';
import { requireOwnHeadPush } from '../../src/forge/protection.js';
import { runCli } from '../cli/helpers.js';
import { makeTempRepo, type TempRepo } from './git-fixture.js';

/**
 * Attacks 5 and 6 of issue 10, performed for real: a change with `main` as its
 * head, and an attacker's branch as the base that would supply the config.
 * These tests run the built binary (`npm run build` first).
 */

// Each test runs the built CLI many times (a few seconds each on a loaded machine).

const cleanups: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const TRUSTED_CONFIG = ['maintainers:', '  - alice', 'checks:', '  - name: greet', '    run: echo hello', ''].join('\n');

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** main with the trusted config; `attacker` off main with its own config; `feature` off main. */
function attackRepo(attackerConfig: string): { repo: TempRepo; data: string; mainSha: string } {
  const repo = makeTempRepo('proofgate-protected-');
  cleanups.push(() => repo.cleanup());
  const mainSha = repo.commit('main', { 'README.md': 'hello\n', '.proofgate.yml': TRUSTED_CONFIG }, 'initial');
  repo.git(['reset', '-q', '--hard', 'main']);
  repo.commit('attacker', { '.proofgate.yml': attackerConfig, 'evil.txt': 'unreviewed\n' }, 'attacker config', 'main');
  repo.commit('feature', { 'feature.txt': 'work\n' }, 'add feature', 'main');
  return { repo, data: tempDir('proofgate-protected-data-'), mainSha };
}

async function withForge<T>(repo: TempRepo, data: string, action: (forge: LocalForge) => Promise<T>): Promise<T> {
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  try {
    return await action(opened.forge);
  } finally {
    await opened.close();
  }
}

/** Register a change the way a store from before the rule holds one: no check at all. */
async function registerUnchecked(forge: LocalForge, repo: TempRepo, head: string, base: string): Promise<string> {
  const number = await forge.store.allocateNumber();
  const changeId = String(number);
  await forge.store.append(changeStream(changeId), [
    {
      type: 'change-opened',
      data: {
        changeId,
        number,
        title: 'opened before the rule',
        baseRef: base,
        headRef: head,
        baseSha: repo.sha(base),
        headSha: repo.sha(head),
        author: 'mallory',
        at: new Date(0).toISOString(),
      },
    },
  ]);
  return changeId;
}

function oneLine(stderr: string): string {
  const lines = stderr.split('\n').filter((line) => line !== '');
  expect(lines).toHaveLength(1);
  return lines[0] ?? '';
}

describe('protected branches (attacks 5 and 6)', () => {
  it('refuses `main` as a change head against an attacker base asking for up-to-date branches: main and its config stay', async () => {
    const attackerConfig = 'requireUpToDate: true\nprotectedBranches: [attacker, main]\n';
    const { repo, data, mainSha } = attackRepo(attackerConfig);
    const configBefore = repo.git(['show', 'main:.proofgate.yml']);

    const open = runCli(['change', 'open', '--head', 'main', '--base', 'attacker', '--repo', repo.dir, '--data', data]);
    expect(open.status).toBe(1);
    expect(oneLine(open.stderr)).toMatch(/head "main" is a protected branch.*\[PROTECTED_BRANCH\]$/);
    // The case variant is the same ref file on a case-insensitive file system: refused too.
    repo.git(['branch', 'MAIN', 'main']);
    const variant = runCli(['change', 'open', '--head', 'MAIN', '--base', 'main', '--repo', repo.dir, '--data', data]);
    expect(variant.status).toBe(1);
    expect(variant.stderr).toContain('[PROTECTED_BRANCH]');
    expect(JSON.parse(runCli(['change', 'list', '--repo', repo.dir, '--data', data, '--json']).stdout)).toEqual([]);

    // A change like that already in the store (opened before the rule): automerge refuses it before any rebase.
    const id = await withForge(repo, data, (forge) => registerUnchecked(forge, repo, 'main', 'attacker'));
    const automerge = runCli(['automerge', id, '--repo', repo.dir, '--data', data]);
    expect(automerge.status).toBe(1);
    expect(automerge.stderr).toMatch(/head "main" is a protected branch.*\[PROTECTED_BRANCH\]/);
    expect(repo.sha('main')).toBe(mainSha);
    expect(repo.git(['show', 'main:.proofgate.yml'])).toBe(configBefore);
  });

  it('refuses an attacker-chosen base: its check never runs, not at open, not at checks run, not at automerge', async () => {
    const marker = join(tempDir('proofgate-protected-marker-'), 'ran');
    const attackerConfig = ['checks:', '  - name: pwn', `    run: "touch ${marker}"`, ''].join('\n');
    const { repo, data, mainSha } = attackRepo(attackerConfig);
    repo.commit('side', { 'side.txt': 'side\n' }, 'side work', 'attacker');

    const open = runCli(['change', 'open', '--head', 'side', '--base', 'attacker', '--repo', repo.dir, '--data', data]);
    expect(open.status).toBe(1);
    expect(oneLine(open.stderr)).toMatch(/base "attacker" is not a protected branch \(main, from main:\.proofgate\.yml\).*\[PROTECTED_BRANCH\]$/);
    expect(JSON.parse(runCli(['change', 'list', '--repo', repo.dir, '--data', data, '--json']).stdout)).toEqual([]);

    const id = await withForge(repo, data, (forge) => registerUnchecked(forge, repo, 'side', 'attacker'));
    const checks = runCli(['checks', 'run', id, '--repo', repo.dir, '--data', data]);
    expect(checks.status).toBe(1);
    expect(checks.stderr).toMatch(/base "attacker" is not a protected branch.*no check was run.*\[PROTECTED_BRANCH\]/);
    const automerge = runCli(['automerge', id, '--repo', repo.dir, '--data', data]);
    expect(automerge.status).toBe(1);
    expect(automerge.stderr).toContain('[PROTECTED_BRANCH]');
    expect(existsSync(marker)).toBe(false);
    // The snapshot says why it can never merge; a direct merge is refused.
    const show = JSON.parse(runCli(['change', 'show', id, '--repo', repo.dir, '--data', data, '--json']).stdout) as { mergeStateStatus: string };
    expect(show.mergeStateStatus).toBe('BLOCKED');
    const merge = runCli(['change', 'merge', id, '--expected-head', repo.sha('side'), '--repo', repo.dir, '--data', data]);
    expect(merge.status).toBe(1);
    expect(merge.stderr).toContain('not a protected branch');
    expect(repo.sha('attacker')).not.toBe(mainSha);
    expect(repo.sha('main')).toBe(mainSha);
  });

  it('refuses a change whose base stopped being protected', async () => {
    const { repo, data } = attackRepo('checks: []\n');
    repo.commit('main', { '.proofgate.yml': `${TRUSTED_CONFIG}protectedBranches: [main, release]\n` }, 'protect release');
    repo.commit('release', { 'release.txt': '1.0\n' }, 'release', 'main');
    repo.commit('fix', { 'fix.txt': 'fix\n' }, 'fix', 'release');
    expect(runCli(['change', 'open', '--head', 'fix', '--base', 'release', '--repo', repo.dir, '--data', data]).status).toBe(0);
    repo.commit('main', { '.proofgate.yml': TRUSTED_CONFIG }, 'release is no longer protected');
    const checks = runCli(['checks', 'run', '1', '--repo', repo.dir, '--data', data]);
    expect(checks.status).toBe(1);
    expect(checks.stderr).toContain('base "release" is not a protected branch');
  });

  it('registers nothing when the base config is invalid', () => {
    const { repo, data } = attackRepo('checks: []\n');
    repo.commit('main', { '.proofgate.yml': `${TRUSTED_CONFIG}protectedBranches: [main, release]\n` }, 'protect release');
    repo.commit('release', { '.proofgate.yml': 'checks: [oops\n' }, 'broken config', 'main');
    repo.commit('fix', { 'fix.txt': 'fix\n' }, 'fix', 'release');
    expect(runCli(['change', 'open', '--head', 'feature', '--base', 'main', '--repo', repo.dir, '--data', data]).status).toBe(0);
    const before = runCli(['change', 'list', '--repo', repo.dir, '--data', data, '--json']).stdout;
    const open = runCli(['change', 'open', '--head', 'fix', '--base', 'release', '--repo', repo.dir, '--data', data]);
    expect(open.status).toBe(1);
    expect(oneLine(open.stderr)).toMatch(/release:\.proofgate\.yml: not valid YAML.*\[CONFIG\]$/);
    expect(runCli(['change', 'list', '--repo', repo.dir, '--data', data, '--json']).stdout).toBe(before);
    // The next change gets the next number: the refused one took none.
    repo.commit('more', { 'more.txt': 'more\n' }, 'more', 'main');
    expect(runCli(['change', 'open', '--head', 'more', '--repo', repo.dir, '--data', data]).stdout).toMatch(/^opened change 2: more -> main/);
  });

  it('pushes a repair only to the change head, never to a protected branch', async () => {
    const { repo, data, mainSha } = attackRepo('checks: []\n');
    await withForge(repo, data, async (forge) => {
      const change = await forge.openChange({ head: 'feature', base: 'main' });
      const next = repo.commit('elsewhere', { 'x.txt': 'x\n' }, 'x', 'main');
      const pushMain = await forge.pushBranch({ branch: 'main', newSha: next, expectedOldSha: mainSha }).catch((error: unknown) => error);
      expect(isProofgateError(pushMain, 'PROTECTED_BRANCH')).toBe(true);
      const notHead = await requireOwnHeadPush(forge, change, 'attacker').catch((error: unknown) => error);
      expect(isProofgateError(notHead, 'PROTECTED_BRANCH')).toBe(true);
      await expect(requireOwnHeadPush(forge, change, 'refs/heads/feature')).resolves.toBeUndefined();
    });
    expect(repo.sha('main')).toBe(mainSha);
  });

  it('on GitHub the trusted branch is the repository default branch, asked once', async () => {
    const routes: string[] = [];
    const octokit = {
      request: (route: string) => {
        routes.push(route);
        return Promise.resolve({ data: { default_branch: 'trunk' } });
      },
    } as unknown as Octokit;
    const forge = createGitHubForge({ octokit, owner: 'o', repo: 'r', selfLogin: 'proofgate[bot]' });
    expect(await forge.trustedBranch()).toBe('trunk');
    expect(await forge.trustedBranch()).toBe('trunk');
    expect(routes).toEqual(['GET /repos/{owner}/{repo}']);
    expect(await createGitHubForge({ octokit, owner: 'o', repo: 'r', selfLogin: 'proofgate[bot]', trustedBranch: 'main' }).trustedBranch()).toBe('main');
  });

  it('keeps the trusted branch in the data dir: settable, and fixed at first use', () => {
    const repo = makeTempRepo('proofgate-trusted-');
    cleanups.push(() => repo.cleanup());
    const data = tempDir('proofgate-trusted-data-');
    repo.git(['branch', '-m', 'main', 'master']);
    repo.commit('master', { 'README.md': 'hi\n' }, 'initial');
    repo.commit('topic', { 't.txt': 't\n' }, 'topic', 'master');
    expect(runCli(['change', 'open', '--head', 'topic', '--repo', repo.dir, '--data', data]).stdout).toMatch(/topic -> master/);
    // A `main` created later does not take the place of the trusted branch.
    repo.commit('main', { '.proofgate.yml': 'protectedBranches: [main, anything]\n' }, 'rogue main', 'master');
    const shown = runCli(['config', 'trusted-branch', '--repo', repo.dir, '--data', data, '--json']);
    expect(JSON.parse(shown.stdout)).toEqual({ trustedBranch: 'master', protectedBranches: ['master'] });
    const set = runCli(['config', 'trusted-branch', 'main', '--repo', repo.dir, '--data', data]);
    expect(set.status, set.stderr).toBe(0);
    expect(set.stdout).toContain('protected branches  main, anything');
    const missing = runCli(['config', 'trusted-branch', 'nope', '--repo', repo.dir, '--data', data]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('[NOT_FOUND]');
  });
});
