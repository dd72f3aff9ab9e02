/**
 * The merge queue end to end: real git, the built CLI, one process per change
 * started at once on one local repository.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalForge } from '../../../src/forge/local/index.js';
import { runCliAsync as runCli } from '../../cli/helpers.js';
import { makeSeededRepo, type TempRepo } from '../../forge/git-fixture.js';
import { CHECK_SCRIPT, repoConfig } from '../loop/local-support.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A repository whose check fails while `broken.txt` exists, with `count` open changes each adding one file (change `broken` adds broken.txt too). */
async function repoWithChanges(
  count: number,
  options: { extra?: (n: number) => Record<string, string>; config?: string; check?: string } = {},
): Promise<{ repo: TempRepo; data: string; ids: string[] }> {
  const repo = makeSeededRepo('proofgate-queue-e2e-', {
    'README.md': '# queue\n',
    'check.mjs': options.check ?? CHECK_SCRIPT,
    '.proofgate.yml': repoConfig(options.config ?? ''),
  });
  cleanups.push(() => repo.cleanup());
  const data = tempDir('proofgate-queue-e2e-data-');
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  const ids: string[] = [];
  try {
    for (let n = 1; n <= count; n += 1) {
      const files: Record<string, string> = { [`file-${n}.txt`]: `change ${n}\n`, ...options.extra?.(n) };
      repo.commit(`change-${n}`, files, `add file ${n}`, 'main');
      ids.push((await opened.forge.openChange({ head: `change-${n}`, base: 'main', title: `change ${n}` })).id);
    }
  } finally {
    await opened.close();
  }
  return { repo, data, ids };
}

/** The first-parent history of main from `from` (exclusive), oldest first: sha, tree and the change its trailer names. */
function history(repo: TempRepo, from: string): { sha: string; tree: string; change: string | null; parents: number }[] {
  const out = execFileSync('git', ['log', '--first-parent', '--reverse', '--format=%H %T %P%x00%B%x01', `${from}..main`], { cwd: repo.dir, encoding: 'utf8' });
  return out
    .split('\u0001')
    .map((block) => block.trim())
    .filter((block) => block !== '')
    .map((block) => {
      const [line = '', body = ''] = block.split('\u0000');
      const [sha = '', tree = '', ...parents] = line.split(' ');
      return { sha, tree, change: /^Proofgate-Change: (\S+)$/m.exec(body)?.[1] ?? null, parents: parents.length };
    });
}

/** The trees whose checks passed, as the store recorded them (`forge/checks/<sha>` streams, each sha's tree). */
async function passedTrees(repo: TempRepo, data: string): Promise<Set<string>> {
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  try {
    const trees = new Set<string>();
    const streams = new Set<string>();
    for (const event of await opened.forge.store.events.readAll({ streamPrefix: 'forge/checks/', limit: 100_000 })) streams.add(event.streamId);
    for (const stream of streams) {
      const sha = stream.slice('forge/checks/'.length);
      const checks = await opened.forge.store.checks(sha);
      if (checks.length > 0 && checks.every((check) => check.conclusion === 'success')) trees.add(repo.git(['rev-parse', `${sha}^{tree}`]).trim());
    }
    return trees;
  } finally {
    await opened.close();
  }
}

/** For a failure message: each unmerged change's last progress lines and the lane lines of its review comment. */
async function diagnose(repo: TempRepo, data: string, ids: readonly string[], results: readonly { status: number | null; stderr: string }[]): Promise<string> {
  const lines: string[] = [];
  for (const [index, result] of results.entries()) {
    if (result.status === 0) continue;
    const id = ids[index] ?? '';
    lines.push(...result.stderr.trim().split('\n').slice(-3));
    const shown = await runCli(['change', 'show', id, '--repo', repo.dir, '--data', data, '--json']);
    const comments = (JSON.parse(shown.stdout) as { comments: { body: string }[] }).comments;
    for (const comment of comments)
      lines.push(
        ...comment.body
          .split('\n')
          .filter((line) => line.startsWith('- lane'))
          .map((line) => `[change ${id}] ${line}`),
      );
  }
  return lines.join('\n');
}

describe('merge queue (built CLI, concurrent processes)', () => {
  it('ten concurrent `proofgate automerge N` all merge: one squash per change, each base tree checked', async () => {
    const { repo, data, ids } = await repoWithChanges(10);
    const start = repo.sha('main');
    const results = await Promise.all(ids.map((id) => runCli(['automerge', id, '--repo', repo.dir, '--data', data, '--json'])));
    expect(
      results.map((result) => result.status),
      await diagnose(repo, data, ids, results),
    ).toEqual(ids.map(() => 0));
    for (const result of results) expect(JSON.parse(result.stdout)).toMatchObject({ outcome: 'merged' });
    const landed = history(repo, start);
    expect(landed.map((commit) => commit.change).sort()).toEqual([...ids].sort());
    expect(landed.every((commit) => commit.parents === 1)).toBe(true);
    const trees = await passedTrees(repo, data);
    // The base only moved to checked trees: every candidate tip it moved to (the last commit of each landing) passed.
    const tips = new Set(results.map((result) => (JSON.parse(result.stdout) as { mergeCommit: string }).mergeCommit));
    expect(landed.filter((commit) => tips.has(commit.sha)).length).toBeGreaterThan(0);
    expect(trees.has(landed[landed.length - 1]?.tree ?? '')).toBe(true);
    const ref = execFileSync('git', ['reflog', '--format=%H', 'refs/heads/main'], { cwd: repo.dir, encoding: 'utf8' }).trim().split('\n');
    for (const sha of ref.filter((s) => s !== start)) expect(trees.has(repo.git(['rev-parse', `${sha}^{tree}`]).trim()), `main at ${sha}`).toBe(true);
  });

  it('a change that breaks the checks only together with another is found (by bisection when batched) and ejected with its reason; the rest land', async () => {
    // Each change passes on its own; with both a.flag and b.flag on the base the check fails.
    const check =
      "import { existsSync } from 'node:fs';\nif (existsSync('a.flag') && existsSync('b.flag')) { console.error('a.flag and b.flag clash'); process.exit(1); }\nconsole.log('ok');\n";
    const { repo, data, ids } = await repoWithChanges(6, {
      check,
      extra: (n): Record<string, string> => (n === 2 ? { 'a.flag': 'a\n' } : n === 5 ? { 'b.flag': 'b\n' } : {}),
    });
    const start = repo.sha('main');
    const results = await Promise.all(ids.map((id) => runCli(['automerge', id, '--repo', repo.dir, '--data', data, '--json'])));
    const outcomes = results.map((result) => JSON.parse(result.stdout) as { change: string; outcome: string; reason: string });
    const blocked = outcomes.filter((outcome) => outcome.outcome === 'blocked');
    expect(blocked, await diagnose(repo, data, ids, results)).toHaveLength(1);
    expect(outcomes.filter((outcome) => outcome.outcome === 'merged')).toHaveLength(5);
    const [ejected] = blocked;
    expect(['2', '5']).toContain(ejected?.change);
    expect(ejected?.reason).toMatch(/left the merge queue of main: check "test" failed \(failure\) on the merge candidate [0-9a-f]{12} .*; log: artifact:\/\//);
    const landed = history(repo, start);
    expect(landed.map((commit) => commit.change).sort()).toEqual(ids.filter((id) => id !== ejected?.change).sort());
    // Its status comment says why, with the log reference.
    const shown = JSON.parse((await runCli(['change', 'show', ejected?.change ?? '', '--repo', repo.dir, '--data', data, '--json'])).stdout) as {
      comments: { body: string }[];
    };
    expect(shown.comments.some((comment) => comment.body.includes('queue-ejected') && comment.body.includes('artifact://'))).toBe(true);
    // The base never pointed at the clashing tree.
    const trees = await passedTrees(repo, data);
    const ref = execFileSync('git', ['reflog', '--format=%H', 'refs/heads/main'], { cwd: repo.dir, encoding: 'utf8' }).trim().split('\n');
    for (const sha of ref.filter((s) => s !== start)) expect(trees.has(repo.git(['rev-parse', `${sha}^{tree}`]).trim()), `main at ${sha}`).toBe(true);
    expect(
      repo
        .git(['ls-tree', '--name-only', 'main'])
        .split('\n')
        .filter((name) => name.endsWith('.flag')),
    ).toHaveLength(1);
  });
});
