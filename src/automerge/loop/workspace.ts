/**
 * Where a review or a repair gets a local git repository holding the exact
 * base and head of a change. On the local forge that is the repository
 * itself. For a remote forge it is a clone kept under the data directory, one
 * per change (a review refuses to run when refs move under it, so changes
 * never share one), fetched from a configured git remote URL before each use,
 * and the place a repair's new commits are pushed from (`pushCommits`: a
 * `git push --force-with-lease` to that remote, since a remote forge's API
 * cannot carry git objects).
 */
import { execFile } from 'node:child_process';
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ProofgateError } from '../../core/index.js';
import { gitEnvironment, safeGitArgs } from '../../host/index.js';
import { pushWithLease } from '../../forge/github/git-push.js';
import type { ChangeSnapshot, PushRequest } from '../../forge/port.js';

const run = promisify(execFile);

export interface Workspace {
  /** A repository directory where `snapshot.base.sha` and `snapshot.head.sha` exist. */
  prepare(snapshot: ChangeSnapshot): Promise<string>;
  /**
   * Publish commits made in `dir` (a directory `prepare` returned) with a
   * compare-and-swap of the branch on the remote: `HEAD_MOVED` when the
   * branch is no longer at `expectedOldSha`, and nothing changed. Absent: the
   * forge holds the workspace's objects itself (the local forge) and
   * `Forge.pushBranch` publishes.
   */
  pushCommits?(dir: string, request: PushRequest): Promise<void>;
}

/** The local forge's workspace: the repository itself. */
export function repositoryWorkspace(repoDir: string): Workspace {
  return { prepare: () => Promise.resolve(repoDir) };
}

async function git(cwd: string, args: readonly string[]): Promise<string> {
  try {
    const { stdout } = await run('git', [...safeGitArgs(), ...args], { cwd, maxBuffer: 64 * 1024 * 1024, env: gitEnvironment() });
    return stdout.trim();
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    // The remote URL may hold credentials: never repeat it.
    throw new ProofgateError('GIT', `git ${args[0] ?? ''} failed: ${stderr.split('\n')[0]?.replace(/[a-z]+:\/\/\S+/gi, '<remote>') ?? ''}`);
  }
}

async function hasCommit(dir: string, sha: string): Promise<boolean> {
  try {
    await git(dir, ['cat-file', '-e', `${sha}^{commit}`]);
    return true;
  } catch {
    return false;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export interface MirrorWorkspaceOptions {
  /** Where the clones live (one directory per change). */
  readonly directory: string;
  /** The git remote to fetch from (a URL or a path). */
  readonly remoteUrl: string;
}

/**
 * A clone per change of `remoteUrl`, under `directory`. Before each use it
 * fetches the branches (and GitHub's `refs/pull/*` heads) unless both shas are
 * already there; a sha the remote does not have is one `NOT_FOUND` error.
 */
export function mirrorWorkspace(options: MirrorWorkspaceOptions): Workspace {
  return {
    async prepare(snapshot: ChangeSnapshot): Promise<string> {
      const dir = join(options.directory, `change-${snapshot.id.replace(/[^A-Za-z0-9._-]/g, '_')}`);
      if (!(await exists(join(dir, '.git')))) {
        await mkdir(dir, { recursive: true });
        await git(dir, ['init', '-q']);
        await git(dir, ['config', 'commit.gpgsign', 'false']);
      }
      const wanted = [snapshot.base.sha, snapshot.head.sha];
      const present = await Promise.all(wanted.map((sha) => hasCommit(dir, sha)));
      if (present.every(Boolean)) return dir;
      await git(dir, ['fetch', '-q', '--no-tags', options.remoteUrl, '+refs/heads/*:refs/remotes/origin/*', '+refs/pull/*/head:refs/remotes/pull/*']);
      for (const sha of wanted) {
        if (!(await hasCommit(dir, sha))) throw new ProofgateError('NOT_FOUND', `the git remote has no commit ${sha} of change ${snapshot.id}`);
      }
      return dir;
    },
    pushCommits(dir: string, request: PushRequest): Promise<void> {
      return pushWithLease({ ...request, dir, remoteUrl: options.remoteUrl });
    },
  };
}
