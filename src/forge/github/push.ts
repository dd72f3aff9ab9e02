/**
 * Compare-and-swap of a branch on GitHub through the REST ref API: read the
 * ref, refuse unless it still points at the expected sha, then move it
 * without force (GitHub refuses a non-fast-forward with 422, which also
 * catches a push that raced in between). A branch already at the new sha
 * counts as done, so a retried push has no second effect.
 *
 * This is `Forge.pushBranch`: it moves a branch to a commit GitHub already
 * has, fast-forward only. It cannot carry git objects, so it cannot publish a
 * rebased head made in a local clone; that is `pushWithLease` (git-push.ts),
 * a real `git push --force-with-lease` from the clone.
 */
import type { Octokit } from '@octokit/core';
import { ProofgateError } from '../../core/errors.js';
import type { PushRequest } from '../port.js';
import { forgeError, httpFailure } from './errors.js';

const SHA = /^[0-9a-f]{40}$/i;

/** The branch name of a push request (without `refs/heads/`), after checking it and the shas; one INVALID_INPUT error otherwise. */
export function checkedPushBranch(request: PushRequest): string {
  const branch = request.branch.replace(/^refs\/heads\//, '');
  if (branch === '' || branch.includes('..') || branch.split('/').some((part) => part === '' || part.startsWith('.')) || /[\s~^:?*[\\]/.test(branch)) {
    throw new ProofgateError('INVALID_INPUT', `not a branch name: ${JSON.stringify(request.branch)}`);
  }
  if (!SHA.test(request.newSha) || (request.expectedOldSha !== null && !SHA.test(request.expectedOldSha))) {
    throw new ProofgateError('INVALID_INPUT', 'push needs full 40-hex shas');
  }
  return branch;
}

export async function pushBranch(octokit: Octokit, owner: string, repo: string, request: PushRequest): Promise<void> {
  const branch = checkedPushBranch(request);
  const current = await currentSha(octokit, owner, repo, branch);
  if (current === request.newSha) return;
  const moved = (reason: string, githubMessage = '') =>
    new ProofgateError('HEAD_MOVED', `branch ${branch} ${reason}`, {
      branch,
      expectedOldSha: request.expectedOldSha,
      actualSha: current,
      githubMessage,
    });
  if (current !== request.expectedOldSha) {
    throw moved(current === null ? 'does not exist' : `is at ${current}, not ${String(request.expectedOldSha)}`);
  }
  try {
    if (current === null) {
      await octokit.request('POST /repos/{owner}/{repo}/git/refs', { owner, repo, ref: `refs/heads/${branch}`, sha: request.newSha });
    } else {
      await octokit.request('PATCH /repos/{owner}/{repo}/git/refs/{ref}', { owner, repo, ref: `heads/${branch}`, sha: request.newSha, force: false });
    }
  } catch (error) {
    const failure = httpFailure(error);
    if (failure?.status === 422) throw moved('moved or the push is not a fast-forward', failure.githubMessage);
    throw forgeError('push branch', error);
  }
}

async function currentSha(octokit: Octokit, owner: string, repo: string, branch: string): Promise<string | null> {
  try {
    const { data } = await octokit.request('GET /repos/{owner}/{repo}/git/ref/{ref}', { owner, repo, ref: `heads/${branch}` });
    return data.object.sha;
  } catch (error) {
    if (httpFailure(error)?.status === 404) return null;
    throw forgeError('read branch', error);
  }
}
