import { runGit, gitText, type GitOptions, type GitResult } from '../../host/index.js';

/**
 * How the repair runs git: the host git runner in `isolated` mode, so nothing
 * around it can redirect git or make it run anything else (inherited `GIT_*`
 * variables dropped, hooks, editors and signing off, no rerere or auto gc in
 * the user's repository).
 */

export type RepairGitResult = GitResult;
export type RepairGitOptions = Pick<GitOptions, 'okExitCodes' | 'input' | 'env'>;

/** Run `git -C dir args...` isolated; resolve when the exit code is accepted, else one `GIT` error. */
export function repairGit(dir: string, args: readonly string[], options: RepairGitOptions = {}): Promise<RepairGitResult> {
  return runGit(dir, args, { ...options, isolated: true });
}

export function repairGitText(dir: string, args: readonly string[], options: RepairGitOptions = {}): Promise<string> {
  return gitText(dir, args, { ...options, isolated: true });
}

/** Environment that makes git record `identity` as author and committer. */
export function identityEnvironment(identity: { readonly name: string; readonly email: string }, author = true): Record<string, string> {
  const env: Record<string, string> = { GIT_COMMITTER_NAME: identity.name, GIT_COMMITTER_EMAIL: identity.email };
  if (author) {
    env.GIT_AUTHOR_NAME = identity.name;
    env.GIT_AUTHOR_EMAIL = identity.email;
  }
  return env;
}

/**
 * A commit on no ref whose tree is git's merge of `base` into `head`
 * (`merge-tree --write-tree`), conflicted files holding conflict markers:
 * what an agent resolving a rebase conflict starts from.
 */
export async function mergeWithMarkers(dir: string, head: string, base: string, identity: { readonly name: string; readonly email: string }): Promise<string> {
  const merged = await repairGit(dir, ['merge-tree', '--write-tree', '--no-messages', head, base], { okExitCodes: [1] });
  const tree = merged.stdout.toString('utf8').split('\n')[0]?.trim() ?? '';
  return repairGitText(dir, ['commit-tree', tree, '-p', head, '-F', '-'], {
    input: 'proofgate: the base merged into the head, conflicts marked\n',
    env: identityEnvironment(identity),
  });
}
