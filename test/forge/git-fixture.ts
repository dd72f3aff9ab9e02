import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Real temporary git repositories for the local-forge tests. Commits are made
 * with plumbing (a private index file, `commit-tree`, `update-ref`) so no work
 * tree or HEAD is touched and branches can be written from anywhere.
 */
export interface TempRepo {
  readonly dir: string;
  git(args: readonly string[], env?: Record<string, string>): string;
  /** Commit `files` (null deletes) on top of `branch` (created from `from` when missing); returns the new sha. */
  commit(branch: string, files: Record<string, string | null>, message?: string, from?: string): string;
  sha(ref: string): string;
  cleanup(): void;
}

export function makeTempRepo(prefix = 'proofgate-forge-'): TempRepo {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const dir = join(root, 'repo');
  const git = (args: readonly string[], env: Record<string, string> = {}): string =>
    execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] }).trim();
  execFileSync('git', ['init', '-q', '-b', 'main', dir]);
  git(['config', 'user.name', 'Tess Tester']);
  git(['config', 'user.email', 'tess@example.test']);
  git(['config', 'commit.gpgsign', 'false']);
  let counter = 0;
  const sha = (ref: string): string => git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const exists = (branch: string): boolean => {
    try {
      sha(`refs/heads/${branch}`);
      return true;
    } catch {
      return false;
    }
  };
  const commit = (branch: string, files: Record<string, string | null>, message = 'change', from?: string): string => {
    counter += 1;
    const index = join(root, `index-${process.pid}-${counter}`);
    const env = { GIT_INDEX_FILE: index };
    const old = exists(branch) ? sha(`refs/heads/${branch}`) : null;
    const parent = old ?? (from !== undefined ? sha(from) : null);
    try {
      if (parent !== null) git(['read-tree', parent], env);
      else git(['read-tree', '--empty'], env);
      for (const [path, content] of Object.entries(files)) {
        if (content === null) {
          git(['update-index', '--force-remove', '--', path], env);
        } else {
          const blob = execFileSync('git', ['-C', dir, 'hash-object', '-w', '--stdin'], { input: content, encoding: 'utf8' }).trim();
          git(['update-index', '--add', '--cacheinfo', `100644,${blob},${path}`], env);
        }
      }
      const tree = git(['write-tree'], env);
      const args = ['commit-tree', tree, ...(parent === null ? [] : ['-p', parent]), '-m', message];
      const next = git(args);
      git(['update-ref', `refs/heads/${branch}`, next, old ?? '0'.repeat(40)]);
      return next;
    } finally {
      try {
        unlinkSync(index);
      } catch {
        // no index was written
      }
    }
  };
  return { dir, git, commit, sha, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** A repo with `main` (README + optional .proofgate.yml) and a `feature` branch that changes a file. */
export function makeChangeRepo(config?: string): TempRepo & { baseSha: string; headSha: string } {
  const repo = makeTempRepo();
  const files: Record<string, string> = { 'README.md': 'hello\n', 'shared.txt': 'one\ntwo\nthree\n' };
  if (config !== undefined) files['.proofgate.yml'] = config;
  const baseSha = repo.commit('main', files, 'initial');
  const headSha = repo.commit('feature', { 'feature.txt': 'new feature\n' }, 'add feature', 'main');
  // Check main out so the work tree and index match HEAD (a clean repository, as a user has it).
  repo.git(['reset', '-q', '--hard', 'main']);
  return { ...repo, baseSha, headSha };
}
