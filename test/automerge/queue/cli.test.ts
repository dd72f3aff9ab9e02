import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCliAsync as runCli } from '../../cli/helpers.js';
import { makeSeededRepo } from '../../forge/git-fixture.js';
import { CHECK_SCRIPT, MAINTAINER, repoConfig } from '../loop/local-support.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe('proofgate queue show|pause|resume (built CLI)', () => {
  it('a maintainer pauses and resumes; show says so; others and unprotected bases are refused with one line', async () => {
    const repo = makeSeededRepo('proofgate-queue-cli-', { 'README.md': '# q\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() });
    cleanups.push(() => repo.cleanup());
    const data = mkdtempSync(join(tmpdir(), 'proofgate-queue-cli-data-'));
    cleanups.push(() => rmSync(data, { recursive: true, force: true }));
    const at = ['--repo', repo.dir, '--data', data];

    const empty = await runCli(['queue', 'show', ...at, '--json']);
    expect(empty.status, empty.stderr).toBe(0);
    expect(JSON.parse(empty.stdout)).toMatchObject({ base: 'main', paused: null, waiting: [], stats: { landed: 0 } });

    const refused = await runCli(['queue', 'pause', ...at, '--as', 'Mallory']);
    expect(refused.status).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toContain('needs maintain or admin');

    const other = await runCli(['queue', 'show', ...at, '--base', 'feature/x']);
    expect(other.status).toBe(1);
    expect(other.stderr).toContain('[PROTECTED_BRANCH]');

    const paused = await runCli(['queue', 'pause', ...at, '--as', MAINTAINER]);
    expect(paused.status, paused.stderr).toBe(0);
    expect(paused.stdout.trim()).toBe(`merge queue of main paused by ${MAINTAINER}`);
    const shown = await runCli(['queue', 'show', ...at]);
    expect(shown.stdout).toContain(`merge queue of main: paused by ${MAINTAINER}`);
    const again = await runCli(['queue', 'pause', ...at, '--as', MAINTAINER]);
    expect(again.stdout).toContain('already paused');
    const resumed = await runCli(['queue', 'resume', ...at, '--as', MAINTAINER, '--json']);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ base: 'main', action: 'resume', changed: true, view: { paused: null } });
  });
});
