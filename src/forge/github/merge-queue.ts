/**
 * GitHub's own merge queue: where a ruleset on the base requires it (a rule
 * of type MERGE_QUEUE), a pull request lands only through the queue, and the
 * REST merge endpoint refuses it. `enqueue` sends the GraphQL mutation
 * `enqueuePullRequest` pinned to the reviewed head (`expectedHeadOid`: GitHub
 * refuses a head that moved, and nothing is queued); `dequeue` sends
 * `dequeuePullRequest`. Neither is retried: a lost answer may hide a done
 * effect, and the caller reads the snapshot again (it shows the entry).
 */
import type { Octokit } from '@octokit/core';
import { ProofgateError } from '../../core/errors.js';
import { forgeError } from './errors.js';
import { redactSecrets } from './redact.js';
import { DEQUEUE_MUTATION, ENQUEUE_MUTATION, PULL_REQUEST_ID_QUERY, type GqlMergeQueueEntry } from './snapshot-query.js';

export interface QueueTarget {
  readonly octokit: Octokit;
  readonly owner: string;
  readonly repo: string;
  /** Node ids the snapshots read, by pull request number. */
  readonly nodeIds: Map<number, string>;
}

interface GraphqlFailure {
  readonly type: string | null;
  readonly message: string;
}

/** The first GraphQL error of a failed call (its `type` and message), or null when the call failed another way. */
export function graphqlFailure(error: unknown): GraphqlFailure | null {
  const errors = typeof error === 'object' && error !== null ? (error as { errors?: unknown }).errors : undefined;
  if (!Array.isArray(errors) || errors.length === 0) return null;
  const first = errors[0] as { type?: unknown; message?: unknown };
  return {
    type: typeof first.type === 'string' ? first.type : null,
    message: redactSecrets(typeof first.message === 'string' ? first.message : 'GraphQL error'),
  };
}

/** A GitHub refusal of a queue mutation as a typed error (pure): a stale head is HEAD_MOVED, another refusal NOT_MERGEABLE. */
export function queueRefusal(operation: 'enqueue' | 'dequeue', number: number, error: unknown): ProofgateError {
  const failure = graphqlFailure(error);
  if (failure === null) return forgeError(`${operation} pull request`, error);
  const details = { number, githubMessage: failure.message, githubType: failure.type ?? '' };
  if (failure.type === 'NOT_FOUND') return new ProofgateError('NOT_FOUND', `pull request #${number}: ${failure.message}`, details);
  if (failure.type === 'FORBIDDEN') return new ProofgateError('FORGE_AUTH', `GitHub ${operation} of pull request #${number}: ${failure.message}`, details);
  if (/expected head|head oid|head (?:sha|commit) (?:has )?(?:changed|moved)/i.test(failure.message)) {
    return new ProofgateError('HEAD_MOVED', `pull request #${number}: the head is no longer the expected one (${failure.message})`, details);
  }
  return new ProofgateError('NOT_MERGEABLE', `GitHub's merge queue refused pull request #${number}: ${failure.message}`, details);
}

async function nodeId(target: QueueTarget, number: number): Promise<string> {
  const known = target.nodeIds.get(number);
  if (known !== undefined) return known;
  let response: { repository: { pullRequest: { id: string } | null } | null };
  try {
    response = await target.octokit.graphql(PULL_REQUEST_ID_QUERY, { owner: target.owner, repo: target.repo, number });
  } catch (error) {
    throw queueRefusal('enqueue', number, error);
  }
  const id = response.repository?.pullRequest?.id;
  if (typeof id !== 'string') throw new ProofgateError('NOT_FOUND', `pull request #${number} not found in ${target.owner}/${target.repo}`, { number });
  target.nodeIds.set(number, id);
  return id;
}

/** `Forge.enqueue` on GitHub. */
export async function enqueuePullRequest(target: QueueTarget, number: number, expectedHeadSha: string): Promise<{ enqueuedAt: string }> {
  if (!/^[0-9a-f]{40}$/i.test(expectedHeadSha)) throw new ProofgateError('INVALID_INPUT', 'enqueue needs the full expected head sha');
  const pullRequestId = await nodeId(target, number);
  let response: { enqueuePullRequest: { mergeQueueEntry: GqlMergeQueueEntry | null } | null };
  try {
    response = await target.octokit.graphql(ENQUEUE_MUTATION, {
      input: { pullRequestId, expectedHeadOid: expectedHeadSha },
      request: { retries: 0 },
    });
  } catch (error) {
    throw queueRefusal('enqueue', number, error);
  }
  const entry = response.enqueuePullRequest?.mergeQueueEntry ?? null;
  if (entry === null) throw new ProofgateError('FORGE_API', `GitHub enqueued pull request #${number} but answered no queue entry`, { number });
  return { enqueuedAt: entry.enqueuedAt };
}

/** `Forge.dequeue` on GitHub: a pull request that is not queued is left as it is. */
export async function dequeuePullRequest(target: QueueTarget, number: number): Promise<void> {
  const id = await nodeId(target, number);
  try {
    await target.octokit.graphql(DEQUEUE_MUTATION, { input: { id }, request: { retries: 0 } });
  } catch (error) {
    const failure = graphqlFailure(error);
    if (failure !== null && /not (?:in|on) (?:the |a )?(?:merge )?queue|not queued/i.test(failure.message)) return;
    throw queueRefusal('dequeue', number, error);
  }
}
