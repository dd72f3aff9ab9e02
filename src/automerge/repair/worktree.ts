import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repairGit, repairGitText, type RepairGitOptions, type RepairGitResult } from './git.js';

/**
 * A disposable worktree of the user's repository, detached at one exact
 * commit, in a fresh temporary directory: where proofgate replays a change
 * onto its base (rebase.ts). No untrusted command ever runs in it. The
 * user's own work tree, index and HEAD are never touched, and no branch is
 * created: the worktree is detached.
 * `dispose()` removes the worktree and its directory; it never throws, so it
 * can run in a `finally` after any failure.
 */
export interface RepairWorktree {
  /** The worktree's top directory. */
  readonly dir: string;
  git(args: readonly string[], options?: RepairGitOptions): Promise<RepairGitResult>;
  text(args: readonly string[], options?: RepairGitOptions): Promise<string>;
  /** The commit the worktree's HEAD points to. */
  head(): Promise<string>;
  /** Force the worktree to `sha`: detached HEAD, index and files reset, untracked files removed. */
  resetTo(sha: string): Promise<void>;
  dispose(): Promise<void>;
}

export async function openRepairWorktree(repoDir: string, sha: string): Promise<RepairWorktree> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'proofgate-repair-')));
  const dir = join(root, 'tree');
  let added = false;
  const dispose = async (): Promise<void> => {
    if (added) {
      const removed = await repairGit(repoDir, ['worktree', 'remove', '--force', '--force', dir], { okExitCodes: [128] }).catch(() => null);
      await rm(root, { recursive: true, force: true }).catch(() => undefined);
      // Only when git could not remove its bookkeeping itself: forget the now missing directory.
      if (removed === null || removed.exitCode !== 0) await repairGit(repoDir, ['worktree', 'prune']).catch(() => undefined);
    } else {
      await rm(root, { recursive: true, force: true }).catch(() => undefined);
    }
  };
  try {
    await repairGit(repoDir, ['worktree', 'add', '--detach', '--quiet', dir, sha]);
    added = true;
  } catch (error) {
    await dispose();
    throw error;
  }
  const git = (args: readonly string[], options?: RepairGitOptions) => repairGit(dir, args, options);
  const text = (args: readonly string[], options?: RepairGitOptions) => repairGitText(dir, args, options);
  return {
    dir,
    git,
    text,
    head: () => text(['rev-parse', '--verify', 'HEAD^{commit}']),
    resetTo: async (target: string) => {
      await git(['reset', '--quiet', '--hard']);
      await git(['checkout', '--quiet', '--force', '--detach', target]);
      await git(['clean', '-ffdxq']);
    },
    dispose,
  };
}
