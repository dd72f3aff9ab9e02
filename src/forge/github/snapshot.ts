/**
 * Reads a pull request snapshot: one GraphQL query (more pages of the same
 * query only beyond `pageSize` checks or comments) plus one REST call for the
 * author's permission, which GraphQL does not expose to an App. The base's
 * branch protection rule comes with the same query; one the caller may not
 * read (GitHub answers it null, or with a FORBIDDEN error beside the rest of
 * the data) counts as no rule.
 */
import type { Octokit } from '@octokit/core';
import { ProofgateError } from '../../core/errors.js';
import type { ChangeSnapshot } from '../port.js';
import { forgeError } from './errors.js';
import { buildSnapshot, mapCheckContext } from './snapshot-mapping.js';
import {
  MERGE_GROUP_QUERY,
  SNAPSHOT_QUERY,
  type GqlCheckContext,
  type GqlComment,
  type GqlPullRequest,
  type MergeGroupResponse,
  type SnapshotResponse,
  type SnapshotVariables,
} from './snapshot-query.js';

export interface SnapshotTarget {
  readonly octokit: Octokit;
  readonly owner: string;
  readonly repo: string;
  readonly pageSize: number;
  /** Told the repository's default branch each time a query answers with it. */
  onDefaultBranch?(name: string): void;
  /** Told each pull request's node id (what the merge queue mutations name). */
  onPullRequestId?(number: number, id: string): void;
  /** Told (with GitHub's message) when the base's branch protection could not be read and counted as none. */
  onProtectionUnreadable?(message: string): void;
}

/** A head that moves between pages restarts the read; after this many tries the read fails. */
const MAX_ATTEMPTS = 3;

export async function readSnapshot(target: SnapshotTarget, number: number): Promise<ChangeSnapshot> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const pages = await readPages(target, number);
    if (pages === null) continue;
    if (typeof pages.pr.id === 'string') target.onPullRequestId?.(number, pages.pr.id);
    return withMergeGroup(target, buildSnapshot(pages));
  }
  throw new ProofgateError('FORGE_API', `pull request #${number} kept moving while it was read`, { number });
}

/**
 * A queued pull request's merge group and its checks: one more query, only
 * while it is queued. The group is the commit GitHub's branch for this entry
 * (`gh-readonly-queue/<base>/pr-<n>-<head>`) points at; its checks carry
 * that commit's sha and stay apart from the head's.
 */
async function withMergeGroup(target: SnapshotTarget, snapshot: ChangeSnapshot): Promise<ChangeSnapshot> {
  const queue = snapshot.forgeQueue;
  if (queue?.entry == null) return snapshot;
  const ref = `refs/heads/gh-readonly-queue/${snapshot.base.ref}/pr-${snapshot.number}-${snapshot.head.sha}`;
  let response: MergeGroupResponse;
  try {
    response = await target.octokit.graphql<MergeGroupResponse>(MERGE_GROUP_QUERY, { owner: target.owner, repo: target.repo, ref });
  } catch (error) {
    throw forgeError('merge group query', error);
  }
  const commit = response.repository?.ref?.target ?? null;
  if (commit === null || typeof commit.oid !== 'string') return snapshot;
  const sha = commit.oid;
  const checks = (commit.statusCheckRollup?.contexts.nodes ?? []).flatMap((node) => (node === null ? [] : [mapCheckContext(node, sha)]));
  return { ...snapshot, forgeQueue: { ...queue, entry: { ...queue.entry, group: { sha, checks } } } };
}

interface Pages {
  readonly pr: GqlPullRequest;
  readonly checkHeadSha: string;
  readonly contexts: GqlCheckContext[];
  readonly comments: GqlComment[];
}

/** Pages beyond this many mean a runaway answer, not a real pull request. */
const MAX_PAGES = 50;

async function readPages(target: SnapshotTarget, number: number): Promise<Pages | null> {
  const cursor = { checks: null as string | null, checksMore: true, comments: null as string | null, commentsMore: true };
  let first: Pages | null = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const pr = await query(target, {
      owner: target.owner,
      repo: target.repo,
      number,
      checks: target.pageSize,
      checksAfter: cursor.checks,
      comments: target.pageSize,
      commentsBefore: cursor.comments,
    });
    const commit = pr.commits.nodes[0]?.commit ?? null;
    const rollup = commit?.statusCheckRollup?.contexts ?? null;
    const contexts = (rollup?.nodes ?? []).filter((c): c is GqlCheckContext => c !== null);
    const comments = pr.comments.nodes.filter((c): c is GqlComment => c !== null);
    if (first === null) {
      first = { pr, checkHeadSha: commit?.oid ?? pr.headRefOid, contexts, comments };
    } else {
      if (pr.headRefOid !== first.pr.headRefOid) return null;
      if (cursor.checksMore) first.contexts.push(...contexts);
      if (cursor.commentsMore) first.comments.unshift(...comments);
    }
    if (cursor.checksMore) {
      cursor.checksMore = rollup?.pageInfo.hasNextPage === true && rollup.pageInfo.endCursor !== null;
      cursor.checks = rollup?.pageInfo.endCursor ?? cursor.checks;
    }
    if (cursor.commentsMore) {
      cursor.commentsMore = pr.comments.pageInfo.hasPreviousPage && pr.comments.pageInfo.startCursor !== null;
      cursor.comments = pr.comments.pageInfo.startCursor ?? cursor.comments;
    }
    if (!cursor.checksMore && !cursor.commentsMore) return first;
  }
  throw new ProofgateError('FORGE_API', `pull request #${number}: more than ${MAX_PAGES} pages of checks or comments`, { number });
}

async function query(target: SnapshotTarget, variables: SnapshotVariables): Promise<GqlPullRequest> {
  let response: SnapshotResponse;
  try {
    response = await target.octokit.graphql<SnapshotResponse>(SNAPSHOT_QUERY, variables);
  } catch (error) {
    if (isGraphqlNotFound(error)) {
      throw new ProofgateError('NOT_FOUND', `pull request #${variables.number} not found in ${target.owner}/${target.repo}`, { number: variables.number });
    }
    const partial = withoutUnreadableProtection(error);
    if (partial === null) throw forgeError('snapshot query', error);
    target.onProtectionUnreadable?.(partial.message);
    response = partial.response;
  }
  const defaultBranch = response.repository?.defaultBranchRef?.name;
  if (typeof defaultBranch === 'string' && defaultBranch !== '') target.onDefaultBranch?.(defaultBranch);
  const pr = response.repository?.pullRequest ?? null;
  if (pr === null) {
    throw new ProofgateError('NOT_FOUND', `pull request #${variables.number} not found in ${target.owner}/${target.repo}`, { number: variables.number });
  }
  return pr;
}

/**
 * An answer whose only errors are about the base's branch protection rule
 * (a caller without the permission to read it): the rest of the data, with
 * the rule read as none, and GitHub's message. Null for any other error.
 */
export function withoutUnreadableProtection(error: unknown): { response: SnapshotResponse; message: string } | null {
  if (typeof error !== 'object' || error === null) return null;
  const { errors, data } = error as { errors?: unknown; data?: unknown };
  if (!Array.isArray(errors) || errors.length === 0) return null;
  const aboutRule = (entry: unknown): boolean => {
    const path = typeof entry === 'object' && entry !== null ? (entry as { path?: unknown }).path : undefined;
    return Array.isArray(path) && path.includes('branchProtectionRule');
  };
  if (!errors.every(aboutRule)) return null;
  const pr = (data as SnapshotResponse | null | undefined)?.repository?.pullRequest ?? null;
  if (pr === null || typeof pr !== 'object') return null;
  const first = errors[0] as { message?: unknown };
  const message = typeof first.message === 'string' ? first.message : 'branch protection rule not readable';
  const baseRef = pr.baseRef === null || pr.baseRef === undefined ? pr.baseRef : { ...pr.baseRef, branchProtectionRule: null };
  return { response: { repository: { pullRequest: { ...pr, baseRef } } }, message };
}

function isGraphqlNotFound(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const errors = (error as { errors?: unknown }).errors;
  return Array.isArray(errors) && errors.some((e) => typeof e === 'object' && e !== null && (e as { type?: unknown }).type === 'NOT_FOUND');
}
