/**
 * The merge queue survives SIGKILL at each of its effect boundaries (built
 * CLI, real processes): the restarted run lands the change once, and the
 * queue forgets nothing.
 */
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalForge } from '../../../src/forge/local/index.js';
import { CLI, runCliAsync as runCli } from '../../cli/helpers.js';
import { makeSeededRepo, type TempRepo } from '../../forge/git-fixture.js';
import { startTestProcess, stopTestProcess } from '../../support/processes.js';
import { CHECK_SCRIPT, repoConfig } from '../loop/local-support.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function automerge(
  repo: TempRepo,
  data: string,
  id: string,
  crashAt: string | null,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.PROOFGATE_TEST_CRASH_AT;
  if (crashAt !== null) env.PROOFGATE_TEST_CRASH_AT = crashAt;
  const child = startTestProcess(process.execPath, [CLI, 'automerge', id, '--repo', repo.dir, '--data', data], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const closed = once(child, 'close').catch(() => undefined);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  await stopTestProcess(child);
  await closed;
  return { code, signal, stderr };
}

async function killedAndRestarted(point: string): Promise<void> {
  const repo = makeSeededRepo('proofgate-queue-crash-', { 'README.md': '# q\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() });
  const data = mkdtempSync(join(tmpdir(), 'proofgate-queue-crash-data-'));
  cleanups.push(
    () => repo.cleanup(),
    () => rmSync(data, { recursive: true, force: true }),
  );
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  try {
    for (const n of [1, 2, 3]) {
      repo.commit(`c${n}`, { [`f${n}.txt`]: `${n}\n` }, `change ${n}`, 'main');
      await opened.forge.openChange({ head: `c${n}`, base: 'main' });
    }
  } finally {
    await opened.close();
  }
  const start = repo.sha('main');
  expect((await automerge(repo, data, '1', null)).code).toBe(0);
  // Change 2 is behind main now: its candidate is a new tree, checked before it lands.
  const killed = await automerge(repo, data, '2', point);
  expect(killed.signal, killed.stderr).toBe('SIGKILL');
  const restarted = await automerge(repo, data, '2', null);
  expect(restarted.code, restarted.stderr).toBe(0);
  expect((await automerge(repo, data, '3', null)).code).toBe(0);

  const log = execFileSync('git', ['log', '--first-parent', '--format=%(trailers:key=Proofgate-Change,valueonly)', `${start}..main`], {
    cwd: repo.dir,
    encoding: 'utf8',
  });
  expect(log.trim().split(/\s+/).sort()).toEqual(['1', '2', '3']);
  const shown = JSON.parse((await runCli(['queue', 'show', '--repo', repo.dir, '--data', data, '--json'])).stdout) as {
    waiting: unknown[];
    outcomes: { change: string; kind: string }[];
  };
  expect(shown.waiting).toEqual([]);
  expect(shown.outcomes.map((o) => `${o.change}:${o.kind}`).sort()).toEqual(['1:landed', '2:landed', '3:landed']);
  for (const id of ['1', '2', '3']) {
    const change = JSON.parse((await runCli(['change', 'show', id, '--repo', repo.dir, '--data', data, '--json'])).stdout) as { state: string };
    expect(change.state).toBe('merged');
  }
}

const PAIRS = [
  ['queue-candidate-built', 'queue-checks-recorded'],
  ['queue-base-moved', 'queue-landed-recorded'],
];

describe('merge queue: SIGKILL at each queue effect, then a restart', () => {
  it.each(PAIRS)('killed at %s / %s: one merge per change, no change lost', async (...points) => {
    const settled = await Promise.allSettled(points.map((point) => killedAndRestarted(point)));
    const failed = settled.flatMap((result, i) => (result.status === 'rejected' ? [`${points[i] ?? '?'}: ${(result.reason as Error).message}`] : []));
    expect(failed).toEqual([]);
  });
});
