/**
 * The GitHub adapter of the Forge port. A change id is the pull request
 * number. Reads go through one GraphQL query (see snapshot.ts); actions are
 * REST calls whose refusals become typed errors: a merge at a moved head is
 * HEAD_MOVED, an unmergeable pull request (or a merge method the repository
 * does not allow) NOT_MERGEABLE, and neither changes anything on GitHub.
 * `enqueue` / `dequeue` are GitHub's merge queue (GraphQL mutations, see
 * merge-queue.ts); `mergeQueue` is proofgate's own queue on a staging branch
 * (see staging-queue.ts). `deleteBranch` reads the ref and then deletes it (see `deleteBranch`
 * below for the window between the two).
 */
import type { Octokit } from '@octokit/core';
import type { Logger } from 'pino';
import { ProofgateError } from '../../core/errors.js';
import { protectedBranchNames } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, DeleteBranchRequest, Forge, ForgeComment, MergeRequest, MergeResult, PushRequest, RepoPermission } from '../port.js';
import { readTrustedConfig } from '../protection.js';
import { createGitHubClient, type GitHubClientOptions } from './client.js';
import { forgeError, httpFailure } from './errors.js';
import { dequeuePullRequest, enqueuePullRequest } from './merge-queue.js';
import { checkedPushBranch, pushBranch } from './push.js';
import { actorType, repoPermission } from './snapshot-mapping.js';
import { readSnapshot } from './snapshot.js';
import { githubStagingQueue, type StagingSettings } from './staging-queue.js';
import { defaultRemoteUrl, githubWorkspace, missingWorkspace, type GitHubWorkspaceOptions } from './workspace.js';
import { silentLogger } from '../../host/index.js';

interface ForgeTarget {
  readonly owner: string;
  readonly repo: string;
  /** proofgate's own login in REST spelling (a GitHub App: `slug[bot]`). */
  readonly selfLogin: string;
  readonly logger?: Logger;
  /** Checks and comments read per GraphQL page (1..100). Default 100. */
  readonly pageSize?: number;
  /** The trusted branch (default: the repository's default branch, asked once). */
  readonly trustedBranch?: string;
  /** The change workspace: where clones live and the git remote (without it, `workspace` refuses with `CONFIG`). */
  readonly workspace?: GitHubWorkspaceOptions;
  /** proofgate's own merge queue on GitHub (staging-queue.ts): how often and how long a candidate's checks are waited for. */
  readonly staging?: StagingSettings;
}

export type GitHubForgeOptions = ForgeTarget & ({ readonly octokit: Octokit } | (GitHubClientOptions & { readonly octokit?: undefined }));

interface RestComment {
  readonly id: number | bigint;
  readonly body?: string;
  readonly user: { readonly login: string; readonly type: string } | null;
  readonly created_at: string;
  readonly updated_at: string;
}

/** Files at commit ids kept per forge (oldest dropped first). */
const FILE_CACHE_ENTRIES = 256;

export function createGitHubForge(options: GitHubForgeOptions): Forge {
  const logger = options.logger ?? silentLogger();
  const octokit: Octokit = options.octokit ?? createGitHubClient({ ...options, logger });
  const { owner, repo } = options;
  if (owner.trim() === '' || repo.trim() === '') throw new ProofgateError('CONFIG', 'GitHub owner and repo are required');
  const pageSize = options.pageSize ?? 100;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) {
    throw new ProofgateError('CONFIG', `pageSize must be an integer from 1 to 100, got ${pageSize}`);
  }

  const filesAtCommits = new Map<string, Promise<Uint8Array | null>>();
  async function fetchFile(ref: string, path: string): Promise<Uint8Array | null> {
    let data: unknown;
    try {
      ({ data } = await octokit.request('GET /repos/{owner}/{repo}/contents/{path}', { owner, repo, path, ref }));
    } catch (error) {
      if (httpFailure(error)?.status === 404) return null;
      throw forgeError('read file', error);
    }
    return fileBytes(data, path);
  }

  async function permission(login: string): Promise<RepoPermission> {
    if (login.trim() === '') throw new ProofgateError('INVALID_INPUT', 'login is empty');
    try {
      const { data } = await octokit.request('GET /repos/{owner}/{repo}/collaborators/{username}/permission', { owner, repo, username: login });
      return repoPermission(data.role_name, data.permission);
    } catch (error) {
      if (httpFailure(error)?.status === 404) return 'none';
      throw forgeError('permission lookup', error);
    }
  }

  let defaultBranch: Promise<string> | null = options.trustedBranch === undefined ? null : Promise.resolve(options.trustedBranch);
  /** Every snapshot names the default branch: kept, so the trusted branch costs no request of its own (a setting wins). */
  function onDefaultBranch(name: string): void {
    if (options.trustedBranch === undefined) defaultBranch = Promise.resolve(name);
  }
  async function askDefaultBranch(): Promise<string> {
    try {
      const { data } = await octokit.request('GET /repos/{owner}/{repo}', { owner, repo });
      if (typeof data.default_branch !== 'string' || data.default_branch === '')
        throw new ProofgateError('FORGE_API', `${owner}/${repo} reports no default branch`);
      return data.default_branch;
    } catch (error) {
      defaultBranch = null;
      throw forgeError('repository lookup', error);
    }
  }

  let protectionWarned = false;
  /** Once per forge: the base's branch protection could not be read, so its required checks are unknown (counted as none). */
  function onProtectionUnreadable(message: string): void {
    if (protectionWarned) return;
    protectionWarned = true;
    logger.warn(
      { owner, repo, githubMessage: message },
      'branch protection is not readable (a GitHub App needs administration: read): required checks count as none until it is',
    );
  }

  /** The token the client authenticates with (a GitHub App: the installation's), for git over https. */
  async function gitToken(): Promise<string | undefined> {
    const auth = (await octokit.auth({ type: 'installation' })) as { token?: unknown } | null;
    return typeof auth?.token === 'string' && auth.token !== '' ? auth.token : undefined;
  }

  const workspace =
    options.workspace === undefined
      ? missingWorkspace()
      : githubWorkspace({
          ...options.workspace,
          remoteUrl: options.workspace.remoteUrl ?? defaultRemoteUrl(options.octokit === undefined ? options.baseUrl : undefined, owner, repo),
          token: gitToken,
        });

  /** Pull request node ids the snapshots read: what the merge queue mutations name. */
  const nodeIds = new Map<number, string>();
  const onPullRequestId = (number: number, id: string): void => void nodeIds.set(number, id);

  const forge: Forge = {
    kind: 'github',
    selfLogin: options.selfLogin,
    workspace,

    trustedBranch(): Promise<string> {
      defaultBranch ??= askDefaultBranch();
      return defaultBranch;
    },

    async snapshot(changeId: string): Promise<ChangeSnapshot> {
      return readSnapshot({ octokit, owner, repo, pageSize, onProtectionUnreadable, onDefaultBranch, onPullRequestId }, prNumber(changeId));
    },

    async createComment(changeId: string, body: string): Promise<ForgeComment> {
      const issue_number = prNumber(changeId);
      try {
        // Never retried: a lost answer to a create may still have created the comment.
        const { data } = await octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
          owner,
          repo,
          issue_number,
          body,
          request: { retries: 0 },
        });
        return restComment(data);
      } catch (error) {
        throw forgeError('create comment', error);
      }
    },

    async editComment(changeId: string, commentId: string, body: string): Promise<ForgeComment> {
      prNumber(changeId);
      const comment_id = positiveInteger(commentId, 'comment id');
      try {
        const { data } = await octokit.request('PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', { owner, repo, comment_id, body });
        return restComment(data);
      } catch (error) {
        throw forgeError('edit comment', error);
      }
    },

    async addLabels(changeId: string, labels: readonly string[]): Promise<void> {
      const issue_number = prNumber(changeId);
      if (labels.length === 0) return;
      if (labels.some((l) => l.trim() === '')) throw new ProofgateError('INVALID_INPUT', 'label names must not be empty');
      try {
        await octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/labels', { owner, repo, issue_number, labels: [...labels] });
      } catch (error) {
        throw forgeError('add labels', error);
      }
    },

    async removeLabel(changeId: string, label: string): Promise<void> {
      const issue_number = prNumber(changeId);
      try {
        await octokit.request('DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}', { owner, repo, issue_number, name: label });
      } catch (error) {
        const failure = httpFailure(error);
        // Removing a label the pull request does not carry is already done.
        if (failure?.status === 404 && /label does not exist/i.test(failure.githubMessage)) return;
        throw forgeError('remove label', error);
      }
    },

    async merge(changeId: string, request: MergeRequest): Promise<MergeResult> {
      const pull_number = prNumber(changeId);
      if (!/^[0-9a-f]{40}$/i.test(request.expectedHeadSha)) {
        throw new ProofgateError('INVALID_INPUT', 'merge needs the full expected head sha');
      }
      const method = request.method ?? 'squash';
      if (method !== 'squash' && method !== 'merge' && method !== 'rebase') {
        throw new ProofgateError('INVALID_INPUT', `unknown merge method ${JSON.stringify(method)} (squash, merge or rebase)`);
      }
      try {
        const { data } = await octokit.request('PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge', {
          owner,
          repo,
          pull_number,
          sha: request.expectedHeadSha,
          merge_method: method,
          // A rebase keeps the head's own commits and messages: GitHub takes no title or message for it.
          ...(method === 'rebase' ? {} : { commit_title: request.title, commit_message: request.message }),
          request: { retries: 0 },
        });
        logger.info({ pr: pull_number, head: request.expectedHeadSha, method, merged: data.sha }, 'pull request merged');
        return { merged: true, sha: data.sha };
      } catch (error) {
        const failure = httpFailure(error);
        const details = { number: pull_number, expectedHeadSha: request.expectedHeadSha, githubMessage: failure?.githubMessage ?? '' };
        if (failure?.status === 409) {
          throw new ProofgateError('HEAD_MOVED', `pull request #${pull_number}: head is no longer ${request.expectedHeadSha}`, details);
        }
        if (failure?.status === 405) {
          throw new ProofgateError('NOT_MERGEABLE', `pull request #${pull_number} is not mergeable: ${failure.githubMessage}`, details);
        }
        throw forgeError('merge', error);
      }
    },

    async enqueue(changeId: string, request: { readonly expectedHeadSha: string }): Promise<{ enqueuedAt: string }> {
      const number = prNumber(changeId);
      const queued = await enqueuePullRequest({ octokit, owner, repo, nodeIds }, number, request.expectedHeadSha);
      logger.info({ pr: number, head: request.expectedHeadSha }, "pull request put in GitHub's merge queue");
      return queued;
    },

    async dequeue(changeId: string): Promise<void> {
      const number = prNumber(changeId);
      await dequeuePullRequest({ octokit, owner, repo, nodeIds }, number);
      logger.info({ pr: number }, "pull request taken out of GitHub's merge queue");
    },

    async pushBranch(request: PushRequest): Promise<void> {
      await pushBranch(octokit, owner, repo, request);
    },

    async deleteBranch(request: DeleteBranchRequest): Promise<void> {
      await deleteBranch({ octokit, owner, repo, logger, forge }, request);
    },

    async readFile(ref: string, path: string): Promise<Uint8Array | null> {
      if (ref.trim() === '') throw new ProofgateError('INVALID_INPUT', 'ref is empty');
      const clean = path.replace(/^\/+/, '');
      if (clean === '' || clean.split('/').some((part) => part === '..' || part === '.')) {
        throw new ProofgateError('INVALID_INPUT', `not a file path: ${path}`);
      }
      // A file at a commit id never changes: asked once per id and path (a branch name is always asked afresh).
      const fixed = /^[0-9a-f]{40}$/.test(ref);
      const key = `${ref}\0${clean}`;
      const cached = fixed ? filesAtCommits.get(key) : undefined;
      const read = cached ?? fetchFile(ref, clean);
      if (fixed && cached === undefined) {
        filesAtCommits.set(key, read);
        if (filesAtCommits.size > FILE_CACHE_ENTRIES) filesAtCommits.delete(filesAtCommits.keys().next().value as string);
        read.catch(() => filesAtCommits.delete(key));
      }
      const bytes = await read;
      return bytes === null ? null : bytes.slice();
    },

    permission,

    // proofgate's own queue (bors-style, on `proofgate-staging/<base>`): used where the base's config opts in and no ruleset requires GitHub's queue.
    mergeQueue: githubStagingQueue({ octokit, owner, repo, logger, forge: () => forge, ...options.staging }),
  };
  return forge;
}

interface DeleteContext {
  readonly octokit: Octokit;
  readonly owner: string;
  readonly repo: string;
  readonly logger: Logger;
  /** The forge itself: its trusted branch and config name the protected branches. */
  readonly forge: Forge;
}

/**
 * `Forge.deleteBranch` on GitHub: delete `request.branch` while it points at
 * `request.expectedSha`; a branch already gone counts as done. Refusals
 * (nothing deleted):
 *
 * - `INVALID_INPUT`: a bad branch name or sha (no request sent), or a
 *   branch an open pull request uses as its base (GitHub would close that
 *   pull request) or as its head (`pulls/list` with `base=`, and with
 *   `head=owner:branch`: one request each);
 * - `PROTECTED_BRANCH`: the trusted branch (no request sent once the
 *   trusted branch is known) or a protected branch of its config (one read
 *   of `.proofgate.yml`), any letter case;
 * - `HEAD_MOVED`: the branch points elsewhere.
 *
 * GitHub has no compare-and-swap delete (`DELETE .../git/refs/{ref}` takes
 * no sha), so this reads the ref (`git/get-ref`), compares it, and only then
 * deletes it: two requests, made back to back after every other check. A
 * push to the branch that lands between the two is deleted with it (its
 * commits stay in the repository, unreferenced, and with whoever pushed
 * them), and a pull request opened on the branch in that window is closed
 * by GitHub (its base) or loses its head. The delete is never retried: a
 * retry would widen that window.
 */
async function deleteBranch(context: DeleteContext, request: DeleteBranchRequest): Promise<void> {
  const { octokit, owner, repo, logger } = context;
  if (!/^[0-9a-f]{40}$/i.test(request.expectedSha)) throw new ProofgateError('INVALID_INPUT', 'deleteBranch needs expectedSha as a full 40-hex commit sha');
  const expectedSha = request.expectedSha.toLowerCase();
  const branch = checkedPushBranch({ branch: request.branch, newSha: expectedSha, expectedOldSha: null });
  const sameName = (name: string) => name.toLowerCase() === branch.toLowerCase();
  const refuseProtected = () => new ProofgateError('PROTECTED_BRANCH', `"${branch}" is a protected branch: it is never deleted`, { branch });
  if (sameName(await context.forge.trustedBranch())) throw refuseProtected();
  const trusted = await readTrustedConfig(context.forge);
  if (protectedBranchNames(trusted.branch, trusted.config).some(sameName)) throw refuseProtected();

  // One open pull request is enough to refuse: a page of one each.
  const openPulls = async (filter: { base: string } | { head: string }): Promise<number[]> => {
    try {
      const { data } = await octokit.request('GET /repos/{owner}/{repo}/pulls', { owner, repo, state: 'open', per_page: 1, ...filter });
      return data.map((pr) => pr.number);
    } catch (error) {
      throw forgeError('list pull requests', error);
    }
  };
  const [asBase, asHead] = await Promise.all([openPulls({ base: branch }), openPulls({ head: `${owner}:${branch}` })]);
  if (asBase.length > 0 || asHead.length > 0) {
    const uses = [...asBase.map((n) => `#${n} (base)`), ...asHead.map((n) => `#${n} (head)`)].join(', ');
    throw new ProofgateError('INVALID_INPUT', `branch "${branch}" is still used by open pull request ${uses}; it was kept`, { branch });
  }

  let current: string;
  try {
    const { data } = await octokit.request('GET /repos/{owner}/{repo}/git/ref/{ref}', { owner, repo, ref: `heads/${branch}` });
    current = data.object.sha.toLowerCase();
  } catch (error) {
    if (httpFailure(error)?.status === 404) return;
    throw forgeError('read branch', error);
  }
  if (current !== expectedSha) {
    throw new ProofgateError('HEAD_MOVED', `branch ${branch} is at ${current}, not ${expectedSha}; it was kept`, { branch, expectedSha, actualSha: current });
  }
  try {
    await octokit.request('DELETE /repos/{owner}/{repo}/git/refs/{ref}', { owner, repo, ref: `heads/${branch}`, request: { retries: 0 } });
  } catch (error) {
    const failure = httpFailure(error);
    // Deleted meanwhile (by someone else, or by a first attempt whose answer was lost): done.
    if (failure?.status === 422 && /reference does not exist/i.test(failure.githubMessage)) return;
    throw forgeError('delete branch', error);
  }
  logger.info({ branch, sha: expectedSha }, 'branch deleted');
}

function fileBytes(data: unknown, path: string): Uint8Array {
  if (Array.isArray(data) || typeof data !== 'object' || data === null) {
    throw new ProofgateError('INVALID_INPUT', `${path} is a directory, not a file`);
  }
  const entry = data as { type?: unknown; encoding?: unknown; content?: unknown; size?: unknown };
  if (entry.type !== 'file') throw new ProofgateError('INVALID_INPUT', `${path} is a ${String(entry.type)}, not a regular file`);
  if (entry.encoding !== 'base64' || typeof entry.content !== 'string') {
    throw new ProofgateError('FORGE_API', `${path} is too large for the contents API (${String(entry.size)} bytes)`, { path });
  }
  return new Uint8Array(Buffer.from(entry.content, 'base64'));
}

function restComment(data: RestComment): ForgeComment {
  return {
    id: String(data.id),
    author: data.user?.login ?? 'ghost',
    authorType: actorType(data.user?.type),
    body: data.body ?? '',
    createdAt: data.created_at,
    updatedAt: data.updated_at,
  };
}

function prNumber(changeId: string): number {
  return positiveInteger(changeId, 'change id (pull request number)');
}

function positiveInteger(value: string, what: string): number {
  if (!/^[1-9][0-9]{0,15}$/.test(value)) throw new ProofgateError('INVALID_INPUT', `${what} must be a positive integer, got ${JSON.stringify(value)}`);
  return Number(value);
}
