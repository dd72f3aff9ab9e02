import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../cli/helpers.js';
import { makeChangeRepo } from './git-fixture.js';

/** These tests run the built binary: `npx tsc -p tsconfig.build.json` first. */

const CONFIG = ['checks:', '  - name: greet', '    run: echo hello', '  - name: broken', '    run: "exit 4"', 'maintainers:', '  - alice', ''].join('\n');

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function repoWithChange(config = CONFIG) {
  const repo = makeChangeRepo(config);
  cleanups.push(repo.cleanup);
  return repo;
}

function oneLine(stderr: string): string {
  const lines = stderr.split('\n').filter((line) => line !== '');
  expect(lines).toHaveLength(1);
  return lines[0] ?? '';
}

describe('proofgate change / checks (local forge CLI)', () => {
  it('opens, lists, shows, comments, runs checks, keeping state in .git/proofgate', () => {
    const repo = repoWithChange();
    const open = runCli(['change', 'open', '--head', 'feature', '--base', 'main', '--title', 'Add a feature'], { cwd: repo.dir });
    expect(open.status).toBe(0);
    expect(open.stdout).toMatch(/^opened change 1: feature -> main \(head [0-9a-f]{12}\)\n$/);
    expect(existsSync(join(repo.dir, '.git', 'proofgate'))).toBe(true);
    expect(repo.git(['status', '--porcelain', '--ignored'])).toBe('');

    const list = runCli(['change', 'list', '--repo', repo.dir, '--json']);
    expect(list.status).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject([{ id: '1', state: 'open', head: 'feature', base: 'main', title: 'Add a feature', author: 'Tess Tester' }]);

    // A plain comment: a command line here would start the automerge loop (test/automerge/loop/cli.test.ts covers that).
    const comment = runCli(['change', 'comment', '1', 'looks good to me', '--as', 'alice', '--repo', repo.dir, '--json']);
    expect(comment.status).toBe(0);
    expect(JSON.parse(comment.stdout)).toMatchObject({ author: 'alice', authorType: 'User', body: 'looks good to me' });

    const checks = runCli(['checks', 'run', '1', '--repo', repo.dir]);
    expect(checks.status).toBe(1);
    expect(checks.stderr.split('\n').filter((line) => line !== '')).toEqual([
      expect.stringMatching(/^check greet: success \(\d+\.\ds, jailed\)$/),
      expect.stringMatching(/^check broken: failure \(\d+\.\ds, jailed\)$/),
      'proofgate: 1 of 2 checks did not pass: broken (failure)',
    ]);
    expect(checks.stdout).toContain('success         greet');

    const show = runCli(['change', 'show', '1', '--repo', repo.dir, '--json']);
    expect(show.status).toBe(0);
    const snapshot = JSON.parse(show.stdout);
    expect(snapshot).toMatchObject({ id: '1', state: 'open', mergeable: 'MERGEABLE', mergeStateStatus: 'BLOCKED', head: { sha: repo.headSha } });
    expect(snapshot.checks.map((check: { name: string; conclusion: string }) => `${check.name}:${check.conclusion}`)).toEqual([
      'greet:success',
      'broken:failure',
    ]);
    expect(snapshot.comments).toHaveLength(1);

    const human = runCli(['change', 'show', '1', '--repo', repo.dir]);
    expect(human.stdout).toContain('mergeable  MERGEABLE / BLOCKED');
    expect(human.stdout).toContain('author     Tess Tester (read)');
  });

  it('checks log prints the stored output of the newest run of a check on the current head', () => {
    // Each run is jailed on a fresh export, so a run tells itself apart by a random number.
    const counter = 'echo "run $(od -An -N8 -tu8 /dev/urandom | tr -d \' \')"';
    const config = [
      'checks:',
      '  - name: greet',
      '    run: echo "hello from $PROOFGATE_HEAD_SHA"',
      '  - name: silent',
      '    run: "exit 4"',
      '  - name: count',
      `    run: ${JSON.stringify(counter)}`,
      '',
    ];
    const repo = repoWithChange(config.join('\n'));
    expect(runCli(['change', 'open', '--head', 'feature', '--repo', repo.dir]).status).toBe(0);
    const before = runCli(['checks', 'log', '1', 'greet', '--repo', repo.dir]);
    expect(before.status).toBe(1);
    expect(oneLine(before.stderr)).toBe(`proofgate: change 1: no run of check "greet" at head ${repo.headSha} [NOT_FOUND]`);

    expect(runCli(['checks', 'run', '1', '--repo', repo.dir]).status).toBe(1);
    const log = runCli(['checks', 'log', '1', 'greet', '--repo', repo.dir]);
    expect(log.status, log.stderr).toBe(0);
    expect(log.stdout).toBe(`hello from ${repo.headSha}\n`);
    expect(log.stderr).toBe('');
    const json = runCli(['checks', 'log', '1', 'greet', '--repo', repo.dir, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      changeId: '1',
      headSha: repo.headSha,
      name: 'greet',
      status: 'completed',
      conclusion: 'success',
      output: `hello from ${repo.headSha}\n`,
    });
    expect(JSON.parse(json.stdout).outputUrl).toMatch(/^artifact:\/\/[^/]+\/[^/]+\/sha256:[0-9a-f]{64}$/);
    // The newest run on the head wins.
    const first = runCli(['checks', 'log', '1', 'count', '--repo', repo.dir]).stdout.trim();
    expect(first).toMatch(/^run \d+$/);
    expect(runCli(['checks', 'run', '1', '--repo', repo.dir]).status).toBe(1);
    const second = runCli(['checks', 'log', '1', 'count', '--repo', repo.dir]).stdout.trim();
    expect(second).toMatch(/^run \d+$/);
    expect(second).not.toBe(first);
    // A check that printed nothing has nothing to print.
    const silent = runCli(['checks', 'log', '1', 'silent', '--repo', repo.dir]);
    expect({ status: silent.status, stdout: silent.stdout }).toEqual({ status: 0, stdout: '' });
    const unknown = runCli(['checks', 'log', '1', 'nope', '--repo', repo.dir]);
    expect(unknown.status).toBe(1);
    expect(oneLine(unknown.stderr)).toContain('no run of check "nope"');

    // A new head: the old run does not describe it.
    const moved = repo.commit('feature', { 'more.txt': 'more\n' }, 'more work');
    const stale = runCli(['checks', 'log', '1', 'greet', '--repo', repo.dir]);
    expect(stale.status).toBe(1);
    expect(oneLine(stale.stderr)).toBe(`proofgate: change 1: no run of check "greet" at head ${moved} [NOT_FOUND]`);
    const rerun = runCli(['checks', 'run', '1', '--repo', repo.dir]);
    expect({ status: rerun.status, stderr: rerun.stderr }).toEqual({ status: 1, stderr: expect.stringMatching(/^check greet: success /m) });
    const fresh = runCli(['checks', 'log', '1', 'greet', '--repo', repo.dir]);
    expect({ status: fresh.status, stdout: fresh.stdout, stderr: fresh.stderr }).toEqual({ status: 0, stdout: `hello from ${moved}\n`, stderr: '' });

    const help = runCli(['checks', 'log', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('Usage: proofgate checks log [options] <id> <name>');
    const usage = runCli(['checks', 'log', '1', '--repo', repo.dir]);
    expect(usage.status).toBe(2);
  });

  it('merges at the expected head and refuses a stale one', () => {
    const repo = repoWithChange('');
    expect(runCli(['change', 'open', '--head', 'feature', '--repo', repo.dir]).status).toBe(0);
    const stale = runCli(['change', 'merge', '1', '--expected-head', repo.baseSha, '--repo', repo.dir]);
    expect(stale.status).toBe(1);
    expect(oneLine(stale.stderr)).toContain('proofgate: change 1: head is');
    const merged = runCli(['change', 'merge', '1', '--expected-head', repo.headSha, '--repo', repo.dir, '--json']);
    expect(merged.status).toBe(0);
    const result = JSON.parse(merged.stdout);
    expect(repo.sha('main')).toBe(result.sha);
    expect(runCli(['change', 'list', '--state', 'merged', '--repo', repo.dir]).stdout).toContain('1\tmerged\tfeature -> main');
    const close = runCli(['change', 'close', '1', '--repo', repo.dir]);
    expect(close.status).toBe(1);
    expect(oneLine(close.stderr)).toBe('proofgate: change 1 is merged; it cannot be closed [INVALID_INPUT]');
  });

  it('honours --data and PROOFGATE_DATA_DIR', () => {
    const repo = repoWithChange();
    const data = mkdtempSync(join(tmpdir(), 'proofgate-cli-data-'));
    cleanups.push(() => rmSync(data, { recursive: true, force: true }));
    expect(runCli(['change', 'open', '--head', 'feature', '--repo', repo.dir, '--data', data]).status).toBe(0);
    expect(existsSync(join(data, 'proofgate.sqlite'))).toBe(true);
    expect(existsSync(join(repo.dir, '.git', 'proofgate'))).toBe(false);
    expect(runCli(['change', 'list', '--repo', repo.dir], { env: { PROOFGATE_DATA_DIR: data } }).stdout).toContain('1\topen');
    expect(runCli(['change', 'list', '--repo', repo.dir]).stdout).toBe('no changes\n');
  });

  it('gives one clear line and exit 1 for bad repositories, branches and ids; exit 2 for usage', () => {
    const repo = repoWithChange();
    const notRepo = mkdtempSync(join(tmpdir(), 'proofgate-cli-plain-'));
    cleanups.push(() => rmSync(notRepo, { recursive: true, force: true }));
    const cases: Array<[string[], number, string]> = [
      [['change', 'list', '--repo', notRepo], 1, `proofgate: not a git repository: ${notRepo} [GIT]`],
      [['change', 'open', '--head', 'nope', '--repo', repo.dir], 1, `proofgate: no branch "nope" in ${repo.dir} [NOT_FOUND]`],
      [['change', 'show', '7', '--repo', repo.dir], 1, 'proofgate: no change with id "7" [NOT_FOUND]'],
      [['checks', 'run', 'x', '--repo', repo.dir], 1, 'proofgate: no change with id "x" [NOT_FOUND]'],
      [['change', 'open', '--repo', repo.dir], 2, "proofgate: required option '--head <branch>' not specified"],
      [['change', 'list', '--state', 'weird', '--repo', repo.dir], 2, 'proofgate: --state must be one of open, closed, merged, all [USAGE]'],
      [['change', 'merge', '1', '--expected-head', 'abc', '--repo', repo.dir], 2, 'proofgate: --expected-head must be a full 40-character sha [USAGE]'],
    ];
    for (const [args, status, line] of cases) {
      const result = runCli(args);
      expect({ args, status: result.status }).toEqual({ args, status });
      expect(oneLine(result.stderr)).toBe(line);
    }
    const help = runCli(['change', 'open', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--head <branch>');
  });
});
