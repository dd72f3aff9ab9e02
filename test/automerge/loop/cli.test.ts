import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../cli/helpers.js';
import { makeTempRepo, type TempRepo } from '../../forge/git-fixture.js';
import { CHECK_SCRIPT, MAINTAINER, repoConfig } from './local-support.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A repository with the trusted config on main and one open change (id 1). */
function repoWithChange(): { repo: TempRepo; data: string } {
  const repo = makeTempRepo('proofgate-automerge-cli-');
  cleanups.push(() => repo.cleanup());
  repo.commit('main', { 'README.md': '# cli\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() }, 'initial');
  repo.git(['reset', '-q', '--hard', 'main']);
  repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  const data = tempDir('proofgate-automerge-cli-data-');
  const opened = runCli(['change', 'open', '--head', 'feature', '--base', 'main', '--repo', repo.dir, '--data', data]);
  expect(opened.status, opened.stderr).toBe(0);
  return { repo, data };
}

describe('proofgate automerge / demo (built CLI)', () => {
  it('proofgate automerge ID runs the loop to a merge, progress on stderr, the outcome on stdout', () => {
    const { repo, data } = repoWithChange();
    const head = repo.sha('feature');
    const result = runCli(['automerge', '1', '--repo', repo.dir, '--data', data, '--json']);
    expect(result.status, result.stderr).toBe(0);
    const outcome = JSON.parse(result.stdout) as { outcome: string; head: string; mergeCommit: string; verdict: string };
    expect(outcome).toMatchObject({ outcome: 'merged', head, verdict: 'CONFIRMED' });
    expect(repo.sha('main')).toBe(outcome.mergeCommit);
    expect(result.stderr).toContain('[change 1] reviewing');
    expect(result.stderr).toContain('[change 1] merged');
  });

  it('proofgate change comment ID "/proofgate automerge" runs the same loop through the router', () => {
    const { repo, data } = repoWithChange();
    const result = runCli(['change', 'comment', '1', '/proofgate automerge', '--as', MAINTAINER, '--repo', repo.dir, '--data', data]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toContain('change 1: merged');
    const shown = runCli(['change', 'show', '1', '--repo', repo.dir, '--data', data, '--json']);
    expect((JSON.parse(shown.stdout) as { state: string }).state).toBe('merged');
  });

  it('a comment command from someone without write permission is refused and runs nothing', () => {
    const { repo, data } = repoWithChange();
    const result = runCli(['change', 'comment', '1', '/proofgate automerge', '--as', 'Mallory', '--repo', repo.dir, '--data', data]);
    expect(result.status).toBe(0);
    expect(result.stderr).toContain('ignored "automerge" from Mallory');
    const shown = runCli(['change', 'show', '1', '--repo', repo.dir, '--data', data, '--json']);
    expect((JSON.parse(shown.stdout) as { state: string }).state).toBe('open');
  });

  it('rejects a bad change id with a usage error', () => {
    const result = runCli(['automerge', 'abc']);
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('proofgate demo ends with the table: 3 merged (one clean, one rebased, one fixed), the secret blocked', () => {
    const cwd = tempDir('proofgate-demo-cwd-');
    const started = Date.now();
    const result = runCli(['demo'], { cwd });
    expect(result.status, result.stderr).toBe(0);
    expect(Date.now() - started).toBeLessThan(30_000);
    const rows = result.stdout.split('\n').filter((line) => /^\d+\s/.test(line) && !line.includes(' changes in '));
    expect(rows).toHaveLength(4);
    expect(rows.map((row) => / (merged|blocked) /.exec(row)?.[1])).toEqual(['merged', 'merged', 'merged', 'blocked']);
    expect(rows[3]).toContain('REFUTED');
    expect(result.stdout).toContain(join(cwd, '.proofgate', 'demo'));
    expect(result.stderr).toContain('resolved CHANGELOG.md');
    expect(result.stderr).toContain('agent-fix made 1 commit');
  });
});
