/**
 * Issue 10, attacks 1-4: code in a change's head, run by a check, reaches
 * proofgate's secret, the real repository, proofgate's environment, or
 * outlives its check. The attacker has a branch and `change open`; the
 * maintainer runs `checks run` and `automerge`. Built CLI: `npm run build` first.
 */
import { existsSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { payload } from './payloads.js';
import {
  HONEST_CHECK,
  alive,
  attackFixture,
  cleanupFixtures,
  commentsOf,
  expectNoSecretStored,
  expectRepoUnchanged,
  jailSkipReason,
  repoState,
  survivors,
  trustedConfig,
  type Fixture,
} from './support.js';

afterEach(cleanupFixtures);

const skip = await jailSkipReason();
if (skip !== null) console.warn(`test/attacks/head-code: ${skip}`);

/** main: trusted config + an honest check; `feature`: the check replaced by `evil` (plus `files`). */
function openAttack(evil: (fx: Fixture) => string, files: Record<string, string> = {}): Fixture {
  const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK, 'README.md': '# target\n' });
  fx.commit('feature', [{ path: 'check.mjs', content: evil(fx) }, ...Object.entries(files).map(([path, content]) => ({ path, content }))], 'innocent refactor');
  const opened = fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']);
  expect(opened.status, opened.stderr).toBe(0);
  return fx;
}

function checkLog(fx: Fixture): string {
  const log = fx.cli(['checks', 'log', '1', 'test']);
  return log.status === 0 ? log.stdout : '';
}

describe.skipIf(skip !== null)('attack 1: head code forges a verdict or moves main', () => {
  it('a check that reads the marker secret and posts a signed CONFIRMED as proofgate cannot get a REFUTED change merged', () => {
    const fx = openAttack((f) => payload({ repoDir: f.repo.dir, canary: f.canary('secret'), token: f.token, changeId: '1' }, ['forge-verdict']), {
      'secrets/prod.key': 'the change is REFUTED: forbidden path\n',
    });
    const before = repoState(fx);
    // The maintainer has used automerge here before (the data dir holds its secret), then runs the checks, then automerge.
    const first = fx.cli(['automerge', '1', '--json']);
    expect(first.status, first.stderr).not.toBe(0);
    fx.cli(['checks', 'run', '1']);
    const second = fx.cli(['automerge', '1', '--json']);
    expect(second.status, second.stderr).not.toBe(0);
    expect(second.stdout).not.toContain('"outcome":"merged"');
    expectRepoUnchanged(fx, before);
    expect(existsSync(fx.canary('secret')), 'the check read the secret or posted a verdict').toBe(false);
    expect(commentsOf(fx, '1').filter((comment) => comment.body.includes(fx.token))).toEqual([]);
    const secret = readFileSync(`${fx.dataDir}/automerge-secret`, 'utf8').trim();
    expect(checkLog(fx).includes(secret), 'the secret is in the check log').toBe(false);
  });

  it('a check that runs `git update-ref refs/heads/main` (or writes the ref file) through the common git dir leaves main where it was', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK });
    const unreviewed = fx.commit('unreviewed', [{ path: 'backdoor.txt', content: 'never reviewed\n' }]);
    fx.commit('feature', [
      { path: 'check.mjs', content: payload({ repoDir: fx.repo.dir, canary: fx.canary('main'), token: fx.token, target: unreviewed }, ['move-main']) },
    ]);
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    expectRepoUnchanged(fx, before);
    expect(existsSync(fx.canary('main'))).toBe(false);
  });
});

describe.skipIf(skip !== null)('attack 2: head code plants git config', () => {
  it("a check cannot write core.fsmonitor, hooks or info/attributes into the real .git; the maintainer's next git status runs nothing", () => {
    const fx = openAttack((f) => payload({ repoDir: f.repo.dir, canary: f.canary('planted'), token: f.token }, ['plant-config']));
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    expectRepoUnchanged(fx, before);
    // The maintainer's next git commands in the repository.
    fx.repo.git(['status']);
    fx.repo.git(['checkout', '-q', '-b', 'after-attack']);
    expect(existsSync(fx.canary('planted')), 'planted git config or hook ran').toBe(false);
  });
});

describe.skipIf(skip !== null)("attack 3: head code reads proofgate's environment", () => {
  const SECRETS = {
    AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Tq3vPgN',
    GITHUB_TOKEN: 'ghp_Q8vZ3kLmN0pRsT5uVwXyZaBcDeFgHiJkLmNo',
    PROOFGATE_TEST_DB_PASSWORD: 'pgpw-0a9b8c7d6e5f4a3b2c1d',
  };

  it("a check that reads /proc/$PPID/environ, /proc/1/environ and every /proc/*/environ finds none of proofgate's variables, and none is stored", () => {
    const fx = openAttack((f) => payload({ repoDir: f.repo.dir, canary: f.canary('env'), token: f.token }, ['read-env']));
    const before = repoState(fx);
    const run = fx.cli(['checks', 'run', '1'], SECRETS);
    expect(run.stderr).not.toContain('JAIL_UNAVAILABLE');
    const log = checkLog(fx);
    expect(log, 'the check did not run').toContain('ok');
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(log.includes(value), `${name} reached the check`).toBe(false);
      expect((run.stdout + run.stderr).includes(value), `${name} printed`).toBe(false);
      expectNoSecretStored(fx, value);
    }
    expect(existsSync(fx.canary('env')), 'the check wrote outside its job dir').toBe(false);
    expectRepoUnchanged(fx, before);
  });
});

describe.skipIf(skip !== null)('attack 4: a detached process outlives its check', () => {
  it('setsid and a TERM-ignoring background loop are gone when checks run returns', () => {
    const fx = openAttack((f) => payload({ repoDir: f.repo.dir, canary: f.canary('detach'), token: f.token, pidFile: f.canary('pid') }, ['detach']));
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    expect(survivors(fx.token), 'processes of the check still run').toEqual([]);
    if (existsSync(fx.canary('pid'))) {
      const pid = Number(readFileSync(fx.canary('pid'), 'utf8').trim());
      expect(alive(pid), `detached pid ${pid} is alive`).toBe(false);
    }
    expect(existsSync(fx.canary('pid')), 'the detached process wrote outside the job dir').toBe(false);
    expectRepoUnchanged(fx, before);
  });
});

describe('without a working jail', () => {
  it('a bwrap that cannot start: checks run refuses head code with one line naming the package [JAIL_UNAVAILABLE], and the check never ran', async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const fx = openAttack((f) => payload({ repoDir: f.repo.dir, canary: f.canary('ran'), token: f.token }, ['write-outside']));
    const bin = mkdtempSync(join(tmpdir(), `proofgate-nobwrap-${fx.token}-`));
    try {
      writeFileSync(join(bin, 'bwrap'), '#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n', { mode: 0o755 });
      const before = repoState(fx);
      const run = fx.cli(['checks', 'run', '1'], { PATH: `${bin}:${process.env.PATH ?? ''}` });
      expect(run.status).not.toBe(0);
      expect(run.stderr).toMatch(/\[JAIL_UNAVAILABLE\]/);
      expect(run.stderr).toContain('bubblewrap');
      expect(run.stderr).not.toContain('internal error');
      expect(existsSync(fx.canary('ran')), 'head code ran without the jail').toBe(false);
      expectRepoUnchanged(fx, before);
      // automerge ends with the same refusal instead of waiting on checks that never run.
      const automerge = fx.cli(['automerge', '1'], { PATH: `${bin}:${process.env.PATH ?? ''}` });
      expect(automerge.status).not.toBe(0);
      expect(automerge.stderr).toMatch(/\[JAIL_UNAVAILABLE\]/);
      expect(existsSync(fx.canary('ran')), 'head code ran without the jail').toBe(false);
      expectRepoUnchanged(fx, before);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });
});
