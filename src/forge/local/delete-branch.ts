/**
 * Deleting a branch of the local forge (after a merge, when the trusted
 * config asks for it): a compare-and-swap `git update-ref -d` that refuses,
 * changing nothing, a protected branch, a branch an open change still uses,
 * and a branch checked out in a work tree (deleting it would leave that work
 * tree on a branch that no longer exists, which `git branch -d` refuses too).
 */
import { ProofgateError } from '../../core/index.js';
import { protectedBranchNames } from '../../contracts/repo-config.js';
import type { DeleteBranchRequest } from '../port.js';
import type { TrustedConfig } from '../protection.js';
import type { GitRepository } from './repository.js';
import type { LocalForgeStore } from './store.js';

const FULL_SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

export interface DeleteBranchContext {
  readonly repo: GitRepository;
  readonly store: LocalForgeStore;
  readonly trusted: TrustedConfig;
}

/** Work trees (their paths) that have `branch` checked out. */
async function checkedOutIn(repo: GitRepository, branch: string): Promise<string[]> {
  const listing = await repo.text(['worktree', 'list', '--porcelain']);
  return listing
    .split(/\n\s*\n/)
    .filter((block) => /^branch (.+)$/m.exec(block)?.[1] === `refs/heads/${branch}`)
    .map((block) => /^worktree (.+)$/m.exec(block)?.[1] ?? '(unknown work tree)');
}

/**
 * Delete `request.branch` while it points at `request.expectedSha`; a branch
 * already gone counts as done. Refusals (nothing changes): `INVALID_INPUT`
 * for a bad name or sha, a branch an open change uses as head or base, or one
 * checked out in a work tree; `PROTECTED_BRANCH` for a protected branch (the
 * trusted branch among them); `HEAD_MOVED` when the branch is elsewhere.
 */
export async function deleteBranch(context: DeleteBranchContext, request: DeleteBranchRequest): Promise<void> {
  const { repo, store, trusted } = context;
  const branch = request.branch.replace(/^refs\/heads\//, '');
  if (!(await repo.isValidBranchName(branch))) throw new ProofgateError('INVALID_INPUT', `not a valid branch name: ${request.branch}`);
  if (!FULL_SHA.test(request.expectedSha)) throw new ProofgateError('INVALID_INPUT', 'deleteBranch needs expectedSha as a full commit sha');
  if (protectedBranchNames(trusted.branch, trusted.config).some((name) => name.toLowerCase() === branch.toLowerCase())) {
    throw new ProofgateError('PROTECTED_BRANCH', `"${branch}" is a protected branch: it is never deleted`, { branch });
  }
  const users = (await store.listChanges()).filter((record) => record.state === 'open' && (record.headRef === branch || record.baseRef === branch));
  if (users.length > 0) {
    const ids = users.map((record) => record.changeId).join(', ');
    throw new ProofgateError('INVALID_INPUT', `branch "${branch}" is still used by open change ${ids}; it was kept`, { branch });
  }
  const trees = await checkedOutIn(repo, branch);
  if (trees.length > 0) {
    throw new ProofgateError('INVALID_INPUT', `branch "${branch}" is checked out in ${trees.join(', ')}; it was kept`, { branch });
  }
  const current = await repo.branchSha(branch);
  if (current === null) return;
  const moved = (now: string) =>
    new ProofgateError('HEAD_MOVED', `branch ${branch} is at ${now}, not ${request.expectedSha}; it was kept`, {
      branch,
      expectedSha: request.expectedSha,
      actualSha: now,
    });
  if (current !== request.expectedSha) throw moved(current);
  const result = await repo.git(['update-ref', '-m', 'proofgate: delete merged head', '-d', `refs/heads/${branch}`, request.expectedSha], {
    okExitCodes: [1, 128],
  });
  if (result.exitCode === 0) return;
  const after = await repo.branchSha(branch);
  if (after === null) return;
  if (after !== request.expectedSha) throw moved(after);
  throw new ProofgateError('GIT', `git update-ref -d refs/heads/${branch} failed: ${result.stderr.trim().split('\n')[0] ?? ''}`, { branch });
}
