/**
 * Issue 10, attacks 5-6: the attacker picks the branches. A change whose head
 * is a protected branch (by any spelling git accepts), or whose base is the
 * attacker's own branch (which would supply the config: checks, lanes,
 * requireUpToDate), is refused at `change open`: nothing is registered, and a
 * maintainer's later `checks run` / `automerge` runs none of the attacker's
 * commands and moves nothing.
 */
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { attackFixture, cleanupFixtures, expectOneLineFailure, expectRepoUnchanged, HONEST_CHECK, repoState, trustedConfig, type Fixture } from './support.js';

afterEach(cleanupFixtures);

function changeCount(fx: Fixture): number {
  const list = fx.cli(['change', 'list', '--json']);
  expect(list.status, list.stderr).toBe(0);
  return (JSON.parse(list.stdout) as unknown[]).length;
}

/** An attacker's branch from main whose config runs `touch canary` as a check, a lane and the gate, and asks for up-to-date rebases. */
function evilBase(fx: Fixture, branch: string): string {
  const touch = `touch ${fx.canary('ran')}`;
  const config = [
    'maintainers: [mallory]',
    'requireUpToDate: true',
    'checks:',
    `  - { name: test, run: ${JSON.stringify(touch)} }`,
    'review:',
    '  lanes:',
    `    - { id: evil, family: evil, command: ["sh", "-c", ${JSON.stringify(`${touch}; exit 1`)}] }`,
    'automerge:',
    `  gate: ["sh", "-c", ${JSON.stringify(touch)}]`,
    `  agentFix: { command: ["sh", "-c", ${JSON.stringify(touch)}] }`,
    '',
  ].join('\n');
  return fx.commit(
    branch,
    [
      { path: '.proofgate.yml', content: config },
      { path: 'unreviewed.txt', content: 'attacker bytes\n' },
    ],
    'attacker base',
  );
}

describe("attack 5: a protected branch as a change's head", () => {
  it('change open --head main (with an attacker base asking for requireUpToDate) is PROTECTED_BRANCH; nothing registered, main unmoved', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK });
    evilBase(fx, 'evil');
    fx.repo.commit('main', { 'reviewed.txt': 'a reviewed main commit the attacker base lacks\n' }, 'main moves on');
    const before = repoState(fx);
    const opened = fx.cli(['change', 'open', '--head', 'main', '--base', 'evil', '--as', 'mallory']);
    expectOneLineFailure(opened, 'PROTECTED_BRANCH');
    expect(changeCount(fx)).toBe(0);
    // Whatever the maintainer runs next finds nothing to act on.
    expect(fx.cli(['automerge', '1']).status).not.toBe(0);
    expect(fx.cli(['checks', 'run', '1']).status).not.toBe(0);
    expectRepoUnchanged(fx, before);
    expect(existsSync(fx.canary('ran'))).toBe(false);
  });

  it.each([['heads/main'], ['refs/heads/main']])('the protected head spelled %s is refused the same way', (head) => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK });
    evilBase(fx, 'evil');
    fx.repo.commit('main', { 'reviewed.txt': 'a reviewed main commit the attacker base lacks\n' }, 'main moves on');
    const before = repoState(fx);
    const opened = fx.cli(['change', 'open', '--head', head, '--base', 'evil', '--as', 'mallory']);
    expect(opened.status).not.toBe(0);
    expect(opened.stderr).not.toContain('internal error');
    expect(changeCount(fx)).toBe(0);
    fx.cli(['automerge', '1']);
    expectRepoUnchanged(fx, before);
  });

  it('a repair never pushes to a protected branch: a change from feature into main whose rebase is needed leaves main to the merge alone', () => {
    // main moves after the change was cut and requireUpToDate is on: the repair rebases the HEAD ref only.
    const fx = attackFixture({
      '.proofgate.yml': trustedConfig({ checks: 'checks: []', extra: 'requireUpToDate: true\nautomerge: { expectChecks: false }' }),
      'check.mjs': HONEST_CHECK,
    });
    fx.commit('feature', [{ path: 'secrets/leak.txt', content: 'forbidden\n' }], 'refuted change');
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    fx.repo.commit('main', { 'later.txt': 'a later main commit\n' }, 'main moves on');
    const before = repoState(fx);
    const run = fx.cli(['automerge', '1', '--json']);
    expect(run.stdout).not.toContain('"outcome":"merged"');
    expect(fx.repo.sha('main')).toBe(before.main);
  });
});

describe('attack 6: an attacker-chosen base supplies the config', () => {
  it('change open --base my-branch is PROTECTED_BRANCH: nothing registered; checks and automerge run none of its commands', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK });
    evilBase(fx, 'evil');
    fx.commit('feature', [{ path: 'feature.txt', content: 'on top of evil\n' }], 'feature', 'evil');
    const before = repoState(fx);
    const opened = fx.cli(['change', 'open', '--head', 'feature', '--base', 'evil', '--as', 'mallory']);
    expectOneLineFailure(opened, 'PROTECTED_BRANCH');
    expect(changeCount(fx)).toBe(0);
    fx.cli(['checks', 'run', '1']);
    fx.cli(['automerge', '1']);
    expect(existsSync(fx.canary('ran')), 'a command from the attacker base ran').toBe(false);
    expectRepoUnchanged(fx, before);
  });
});
