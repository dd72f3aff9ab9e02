/**
 * The local forge's change workspace: the repository itself, which already
 * holds every change's commits. A repair works in a disposable worktree of it
 * and leaves its commits in the repository's object store; publishing moves
 * the change's head branch with one `git update-ref <branch> <new> <old>`
 * (`LocalForge.pushBranch`: protected branches refused, the change's
 * `head-pushed` event recorded).
 */
import { ProofgateError } from '../../core/index.js';
import { hasCommit } from '../../host/git.js';
import type { ChangeSnapshot, ChangeWorkspace, PushRequest } from '../port.js';
import type { GitRepository } from './repository.js';

export function repositoryWorkspace(repo: GitRepository, pushBranch: (request: PushRequest) => Promise<void>): ChangeWorkspace {
  return {
    async prepare(snapshot: ChangeSnapshot): Promise<string> {
      for (const [what, sha] of [
        ['base', snapshot.base.sha],
        ['head', snapshot.head.sha],
      ] as const) {
        if (!(await hasCommit(repo.root, sha)))
          throw new ProofgateError('NOT_FOUND', `change ${snapshot.id}: the ${what} commit ${sha} is not in ${repo.root}`);
      }
      return repo.root;
    },

    async publish(dir: string, request: PushRequest): Promise<void> {
      if (dir !== repo.root) throw new ProofgateError('INVALID_INPUT', `the local forge publishes from its repository ${repo.root}, not from ${dir}`);
      await pushBranch(request);
    },
  };
}
