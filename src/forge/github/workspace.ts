/**
 * The GitHub forge's change workspace: a clone per change under a directory
 * of proofgate's (a review refuses to run when refs move under it, so changes
 * never share one), fetched from the repository's git remote when the
 * change's base or head commit is missing, and the place a repair's new head
 * is published from, with `git push --force-with-lease` (git-push.ts): the
 * REST API cannot carry git objects.
 */
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { hasCommit, runGit } from '../../host/git.js';
import type { ChangeSnapshot, ChangeWorkspace, PushRequest } from '../port.js';
import { pushWithLease, remoteAccess } from './git-push.js';

export interface GitHubWorkspaceOptions {
  /** Where the clones live (one directory per change). */
  readonly directory: string;
  /**
   * The git remote: a URL or a path (default: the repository on the host of
   * the API base URL, `https://github.com/OWNER/REPO.git` on github.com).
   * Credentials in it never reach git's command line.
   */
  readonly remoteUrl?: string;
  /** Time limit of one fetch (default 600000 ms). */
  readonly fetchTimeoutMs?: number;
  /** Time limit of one push (default 120000 ms). */
  readonly pushTimeoutMs?: number;
}

export interface GitHubWorkspaceSetup extends GitHubWorkspaceOptions {
  readonly remoteUrl: string;
  /** The forge's token for an https remote without credentials of its own (undefined: none). */
  token(): Promise<string | undefined>;
}

/** The repository's https remote on the host an API base URL belongs to. */
export function defaultRemoteUrl(baseUrl: string | undefined, owner: string, repo: string): string {
  const api = new URL(baseUrl ?? 'https://api.github.com');
  const web = api.hostname === 'api.github.com' ? 'https://github.com' : api.origin;
  return `${web}/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}.git`;
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** A workspace that refuses every use: the forge was created without `workspace` options. */
export function missingWorkspace(): ChangeWorkspace {
  const refuse = (): Promise<never> =>
    Promise.reject(
      new ProofgateError('CONFIG', 'the GitHub forge has no change workspace: create it with `workspace: { directory }` (a directory for its clones)'),
    );
  return { prepare: refuse, publish: refuse };
}

export function githubWorkspace(setup: GitHubWorkspaceSetup): ChangeWorkspace {
  const fetchTimeoutMs = setup.fetchTimeoutMs ?? 600_000;
  const pushTimeoutMs = setup.pushTimeoutMs ?? 120_000;
  // The forge's token only where it is needed: an https remote that names no credentials itself.
  const ownCredentials = /^https?:\/\/[^/]*@/i.test(setup.remoteUrl);
  const wantsToken = /^https?:\/\//i.test(setup.remoteUrl) && !ownCredentials;
  const token = (): Promise<string | undefined> => (wantsToken ? setup.token() : Promise.resolve(undefined));

  return {
    async prepare(snapshot: ChangeSnapshot): Promise<string> {
      const dir = join(setup.directory, `change-${snapshot.id.replace(/[^A-Za-z0-9._-]/g, '_')}`);
      if (!(await exists(join(dir, '.git')))) {
        await mkdir(dir, { recursive: true });
        await runGit(dir, ['init', '-q']);
      }
      const wanted = [snapshot.base.sha, snapshot.head.sha];
      const present = await Promise.all(wanted.map((sha) => hasCommit(dir, sha)));
      if (present.every(Boolean)) return dir;
      const remote = remoteAccess(setup.remoteUrl, await token());
      await runGit(dir, ['fetch', '-q', '--no-tags', remote.url, '+refs/heads/*:refs/remotes/origin/*', '+refs/pull/*/head:refs/remotes/pull/*'], {
        ...remote.options,
        timeoutMs: fetchTimeoutMs,
      });
      for (const sha of wanted) {
        if (!(await hasCommit(dir, sha))) throw new ProofgateError('NOT_FOUND', `the git remote has no commit ${sha} of change ${snapshot.id}`);
      }
      return dir;
    },

    async publish(dir: string, request: PushRequest): Promise<void> {
      const secret = await token();
      await pushWithLease({ ...request, dir, remoteUrl: setup.remoteUrl, timeoutMs: pushTimeoutMs, ...(secret === undefined ? {} : { token: secret }) });
    },
  };
}
