/**
 * Crash safety with real process kills. The built CLI (`node dist/cli/main.cjs
 * automerge 1`) runs the loop on a local-forge repository in a child process;
 * PROOFGATE_TEST_CRASH_AT makes it SIGKILL itself at an effect boundary (the
 * test seam of src/automerge/loop/crash-seam.ts and src/forge/local/merge.ts).
 * A second run without the seam must finish the job: exactly one merge on the
 * base, one verdict comment per head, one status comment, the change merged,
 * and no effect recorded twice. Needs `npx tsc -p tsconfig.build.json` first.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { collectVerdicts } from '../../../src/automerge/index.js';
import { LedgerStore, loadOrCreateSecret } from '../../../src/automerge/loop/index.js';
import { openLocalForge } from '../../../src/forge/local/index.js';
import { defaultStoragePolicy } from '../../../src/storage/policy.js';
import { createLocalRunStorage } from '../../../src/storage/sqlite/index.js';
import { makeTempRepo, type TempRepo } from '../../forge/git-fixture.js';
import { startTestProcess, stopTestProcess } from '../../support/processes.js';
import { CHECK_SCRIPT, repoConfig } from './local-support.js';

const CLI = resolve('dist/cli/main.cjs');
const cleanups: Array<() => void> = [];
afterAll(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

interface Run {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

/**
 * One `proofgate automerge 1` session, in a process group of its own that ends with the test however the test
 * ends. When the CLI has exited (or killed itself), whatever it left in its group is killed before the next look.
 */
async function automerge(repo: TempRepo, data: string, crashAt: string | null): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.PROOFGATE_TEST_CRASH_AT;
  if (crashAt !== null) env.PROOFGATE_TEST_CRASH_AT = crashAt;
  const child = startTestProcess(process.execPath, [CLI, 'automerge', '1', '--repo', repo.dir, '--data', data], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const closed = once(child, 'close').catch(() => undefined);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  await stopTestProcess(child);
  await closed;
  return { code, signal, stderr };
}

/** main with the trusted config and a CHANGELOG; change 1 from `feature` (conflicting with main when `conflict`). */
async function setup(conflict: boolean): Promise<{ repo: TempRepo; data: string; base: string }> {
  const repo = makeTempRepo('proofgate-crash-');
  const data = mkdtempSync(join(tmpdir(), 'proofgate-crash-data-'));
  cleanups.push(
    () => repo.cleanup(),
    () => rmSync(data, { recursive: true, force: true }),
  );
  repo.commit(
    'main',
    { 'README.md': '# crash\n', 'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() },
    'initial',
  );
  repo.git(['reset', '-q', '--hard', 'main']);
  repo.commit('feature', { 'feature.txt': 'a feature\n', 'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n- add the feature\n' }, 'add feature', 'main');
  if (conflict) repo.commit('main', { 'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n- something else landed first\n' }, 'other change');
  repo.git(['reset', '-q', '--hard', 'main']);
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  await opened.forge.openChange({ head: 'feature', base: 'main', author: 'Casey Contributor' });
  await opened.close();
  return { repo, data, base: repo.sha('main') };
}

async function inspect(repo: TempRepo, data: string) {
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  const storage = createLocalRunStorage({ directory: data, namespace: 'automerge', policy: defaultStoragePolicy });
  try {
    const snapshot = await opened.forge.snapshot('1');
    const secret = await loadOrCreateSecret(data);
    const { verdicts } = collectVerdicts(snapshot.comments, { selfLogin: 'proofgate', secret, changeId: '1' });
    const status = snapshot.comments.filter((c) => c.author === 'proofgate' && c.body.includes('"kind":"automerge-status"'));
    const ledger = await new LedgerStore(storage.eventStore).load('1');
    return { snapshot, verdicts, status, ledger };
  } finally {
    await storage.close();
    await opened.close();
  }
}

const POINTS = [
  // The first status comment and the first label are written by the job's first decision (the router writes neither).
  { point: 'status-comment-created', conflict: false, inJob: true },
  { point: 'label-added', conflict: false, inJob: true },
  { point: 'review-verdict-decided', conflict: false, inJob: true },
  { point: 'review-comment-written', conflict: false, inJob: true },
  { point: 'repair-committed', conflict: true, inJob: true },
  { point: 'repair-pushed', conflict: true, inJob: true },
  { point: 'merge-base-updated', conflict: false, inJob: true },
  { point: 'merge-returned', conflict: false, inJob: true },
] as const;

/** How many times proofgate moved `branch` (the local forge's pushes leave `proofgate: push` in the reflog). */
function pushesTo(repo: TempRepo, branch: string): number {
  return repo
    .git(['reflog', 'show', '--format=%gs', `refs/heads/${branch}`])
    .split('\n')
    .filter((line) => line === 'proofgate: push').length;
}

type Point = (typeof POINTS)[number];

/**
 * The cases two at a time: each runs two full CLI sessions (git, checks, reviews), and two cases at once keep a
 * loaded 2-core machine busy without starving either. A pair is one test, so the processes of both end with it
 * (test/support/processes.ts stops every process a file started after each test).
 */
const PAIRS = Array.from({ length: Math.ceil(POINTS.length / 2) }, (_, i) => POINTS.slice(2 * i, 2 * i + 2));

// Two cases at once, two CLI sessions each, on a loaded machine: a limit well above what they take.
describe('automerge survives SIGKILL at every effect boundary (built CLI, real processes)', () => {
  it.each(PAIRS.map((pair): [string, readonly Point[]] => [pair.map((p) => p.point).join(' and '), pair]))(
    'killed at %s, restarted: one merge, no duplicate comment, no second effect',
    async (_points, pair) => {
      const settled = await Promise.allSettled(pair.map((point) => killedAndRestarted(point)));
      const failed = settled.flatMap((result, i) => (result.status === 'rejected' ? [{ point: pair[i]?.point, error: result.reason as Error }] : []));
      if (failed.length === 1 && failed[0] !== undefined) {
        failed[0].error.message = `killed at ${failed[0].point ?? '?'}: ${failed[0].error.message}`;
        throw failed[0].error;
      }
      if (failed.length > 1) throw new Error(failed.map((f) => `killed at ${f.point ?? '?'}: ${f.error.message}`).join('\n\n'));
    },
  );
});

/** One case: the CLI kills itself at `point`; what it left is as expected; a restart finishes the job exactly once. */
async function killedAndRestarted({ point, conflict, inJob }: Point): Promise<void> {
  const { repo, data, base } = await setup(conflict);
  const crashed = await automerge(repo, data, point);
  expect(crashed.signal, crashed.stderr).toBe('SIGKILL');
  const left = await inspect(repo, data);
  // What the killed run left: the effect of its point happened, the one after it did not.
  expect(left.ledger.state.merged).toBeNull();
  const firstStatus = left.status[0]?.id;
  switch (point) {
    case 'status-comment-created':
      expect(left.status).toHaveLength(1);
      expect(left.snapshot.labels).toEqual([]);
      break;
    case 'label-added':
      expect(left.snapshot.labels).toEqual(['proofgate:automerge']);
      expect(left.status).toHaveLength(1);
      break;
    case 'review-verdict-decided':
      expect(left.verdicts).toHaveLength(0);
      expect(left.ledger.state.reviews.map((r) => r.status)).toEqual(['dispatched']);
      break;
    case 'repair-committed':
      expect(pushesTo(repo, 'feature')).toBe(0);
      expect(left.snapshot.head.sha).toBe(left.ledger.state.repairs[0]?.head);
      expect(left.ledger.steps.filter((s) => s.step === 'repair-push')).toHaveLength(1);
      break;
    case 'review-comment-written':
      expect(left.verdicts).toHaveLength(1);
      expect(left.ledger.state.reviews.map((r) => r.status)).toEqual(['dispatched']);
      break;
    case 'repair-pushed':
      expect(pushesTo(repo, 'feature')).toBe(1);
      expect(left.ledger.state.repairs.map((r) => r.status)).toEqual(['dispatched']);
      break;
    case 'merge-base-updated':
    case 'merge-returned':
      expect(repo.git(['log', '--format=%H', '--grep=^Proofgate-Change: 1$', `${base}..main`])).toBe(repo.sha('main'));
      break;
  }
  const restarted = await automerge(repo, data, null);
  expect(restarted.code, restarted.stderr).toBe(0);
  expect(restarted.stderr).toContain('merged');

  const { snapshot, verdicts, status, ledger } = await inspect(repo, data);
  expect(snapshot.state).toBe('merged');
  // Exactly one squash commit of this change on the base, and it is the base tip.
  expect(repo.git(['log', '--format=%H', '--grep=^Proofgate-Change: 1$', `${base}..main`]).split('\n')).toEqual([repo.sha('main')]);
  expect(snapshot.mergeCommitSha).toBe(repo.sha('main'));
  expect(ledger.state.merged?.mergeCommit).toBe(snapshot.mergeCommitSha);
  expect(ledger.state.merged?.head).toBe(snapshot.head.sha);
  // No duplicate verdict comment for any head; the merged head was reviewed CONFIRMED.
  const heads = verdicts.map((v) => v.fields.head);
  expect(new Set(heads).size).toBe(heads.length);
  expect(verdicts.find((v) => v.fields.head === snapshot.head.sha)?.fields.verdict).toBe('CONFIRMED');
  expect(status).toHaveLength(1);
  // A status comment the killed run created is the one the restart edited.
  if (firstStatus !== undefined) expect(status[0]?.id).toBe(firstStatus);
  expect(status[0]?.body).toContain('automerge: merged');
  // The ledger: one merge attempt, reviews and repairs each finished once, nothing left running.
  const steps = ledger.steps.map((s) => s.step);
  expect(steps.filter((s) => s === 'merge-attempt')).toHaveLength(1);
  expect(ledger.state.reviews.every((r) => r.status !== 'dispatched')).toBe(true);
  expect(ledger.state.repairs.every((r) => r.status !== 'dispatched')).toBe(true);
  // One verdict per reviewed head in the ledger; a review killed before its comment is closed without one.
  const withVerdict = ledger.state.reviews.filter((r) => r.verdict !== null);
  expect(new Set(withVerdict.map((r) => r.head)).size).toBe(withVerdict.length);
  expect(verdicts).toHaveLength(withVerdict.length);
  if (point === 'review-verdict-decided') {
    expect(ledger.state.reviews.map((r) => [r.head, r.verdict])).toEqual([
      [snapshot.head.sha, null],
      [snapshot.head.sha, 'CONFIRMED'],
    ]);
    expect(steps.filter((s) => s === 'review-recovered')).toHaveLength(1);
  } else {
    expect(new Set(ledger.state.reviews.map((r) => r.head)).size).toBe(ledger.state.reviews.length);
  }
  // Labels: none of proofgate's left on a merged change.
  expect(snapshot.labels.filter((label) => label.startsWith('proofgate:'))).toEqual([]);
  expect(pushesTo(repo, 'feature')).toBe(conflict ? 1 : 0);
  if (point === 'repair-pushed') {
    expect(steps.filter((s) => s === 'repair-push')).toHaveLength(1);
    expect(ledger.state.repairs.map((r) => [r.repair, r.status, r.newHead])).toEqual([['rebase', 'pushed', snapshot.head.sha]]);
  }
  if (point === 'repair-committed') {
    // The killed repair recorded its intent but never pushed: closed as failed; the restart repaired once, pushed once.
    expect(ledger.state.repairs.map((r) => [r.repair, r.status, r.newHead])).toEqual([
      ['rebase', 'failed', null],
      ['rebase', 'pushed', snapshot.head.sha],
    ]);
    expect(steps.filter((s) => s === 'repair-recovered')).toHaveLength(1);
  }
  if (conflict) {
    expect(repo.git(['show', 'main:CHANGELOG.md'])).toContain('- something else landed first');
    expect(repo.git(['show', 'main:CHANGELOG.md'])).toContain('- add the feature');
    // The branch ends at one repaired head, directly on the old base tip.
    expect(repo.git(['rev-parse', `${snapshot.head.sha}^`])).toBe(base);
  }
  // The restarted job took over the dead process's lease at once (no 60 s wait); a router crash left no lease.
  expect(ledger.steps.some((s) => s.step === 'job-started' && typeof s.tookOverFrom === 'string')).toBe(inJob);
  expect(steps.filter((s) => s === 'job-started')).toHaveLength(inJob ? 2 : 1);
}
