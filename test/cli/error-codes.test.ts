import { afterEach, describe, expect, it } from 'vitest';
import { makeChangeRepo } from '../forge/git-fixture.js';
import { runCli } from './helpers.js';

/** These tests run the built binary: `npx tsc -p tsconfig.build.json` first. */

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function openedChange() {
  const repo = makeChangeRepo('');
  cleanups.push(repo.cleanup);
  const open = runCli(['change', 'open', '--head', 'feature', '--repo', repo.dir]);
  expect(open.status, open.stderr).toBe(0);
  return repo;
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

describe('typed errors on the CLI carry their code', () => {
  it('a stale --expected-head: HEAD_MOVED at the end of the one stderr line, nothing on stdout, exit 1', () => {
    const repo = openedChange();
    const stale = runCli(['change', 'merge', '1', '--expected-head', repo.baseSha, '--repo', repo.dir]);
    expect(stale.status).toBe(1);
    expect(stale.stdout).toBe('');
    expect(lines(stale.stderr)).toEqual([`proofgate: change 1: head is ${repo.headSha}, not the expected ${repo.baseSha} [HEAD_MOVED]`]);
    expect(repo.sha('main')).toBe(repo.baseSha);
  });

  it('with --json the same failure is also one {"error":{code,message}} line on stdout', () => {
    const repo = openedChange();
    const stale = runCli(['change', 'merge', '1', '--expected-head', repo.baseSha, '--repo', repo.dir, '--json']);
    expect(stale.status).toBe(1);
    expect(lines(stale.stderr)).toEqual([expect.stringMatching(/ \[HEAD_MOVED\]$/)]);
    expect(stale.stdout.endsWith('\n')).toBe(true);
    expect(lines(stale.stdout)).toHaveLength(1);
    expect(JSON.parse(stale.stdout)).toEqual({ error: { code: 'HEAD_MOVED', message: `change 1: head is ${repo.headSha}, not the expected ${repo.baseSha}` } });
  });

  it('tells NOT_MERGEABLE apart from HEAD_MOVED', () => {
    const repo = openedChange();
    // Both sides rewrite the same line: the change conflicts with its base.
    repo.commit('main', { 'feature.txt': 'the base wrote this first\n' }, 'conflicting base');
    const refused = runCli(['change', 'merge', '1', '--expected-head', repo.headSha, '--repo', repo.dir, '--json']);
    expect(refused.status).toBe(1);
    expect(lines(refused.stderr)).toEqual([expect.stringMatching(/^proofgate: .* \[NOT_MERGEABLE\]$/)]);
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: 'NOT_MERGEABLE' } });
  });

  it('a typed usage error keeps exit 2 and carries USAGE; a parse error of the arguments prints no JSON', () => {
    const repo = openedChange();
    const shortSha = runCli(['change', 'merge', '1', '--expected-head', 'abc', '--repo', repo.dir, '--json']);
    expect(shortSha.status).toBe(2);
    expect(lines(shortSha.stderr)).toEqual(['proofgate: --expected-head must be a full 40-character sha [USAGE]']);
    expect(JSON.parse(shortSha.stdout)).toEqual({ error: { code: 'USAGE', message: '--expected-head must be a full 40-character sha' } });
    const missing = runCli(['change', 'merge', '1', '--repo', repo.dir, '--json']);
    expect(missing.status).toBe(2);
    expect(missing.stdout).toBe('');
    expect(lines(missing.stderr)).toHaveLength(1);
  });

  it('a failure of a command without --json prints nothing on stdout', () => {
    const repo = openedChange();
    const missing = runCli(['change', 'show', '9', '--repo', repo.dir]);
    expect(missing.status).toBe(1);
    expect(missing.stdout).toBe('');
    expect(lines(missing.stderr)).toEqual(['proofgate: no change with id "9" [NOT_FOUND]']);
    const json = runCli(['change', 'show', '9', '--repo', repo.dir, '--json']);
    expect(JSON.parse(json.stdout)).toEqual({ error: { code: 'NOT_FOUND', message: 'no change with id "9"' } });
  });
});
