/**
 * What a GitHub App service queues, as pure functions: the jobs an accepted
 * delivery becomes, the queue and key of each, and the job that brings a
 * parked change back. Every job of one pull request shares that pull
 * request's queue, so one change never has two jobs running anywhere; keys
 * make a second wake of a waiting change a no-op that can only make it run
 * sooner.
 *
 * Tasks:
 * - `comment`: route one recorded comment delivery (its commands) through
 *   the automerge router. The payload names the record in the store, not the
 *   comment text: what the job reads is what the store's policy kept.
 * - `resume`: run the change's automerge job when automerge is on (a check
 *   finished, the head moved, a review arrived, GitHub's merge queue took
 *   the change in, let it go or asked its merge group for checks, a parked
 *   wait is due).
 * - `sweep`: read a pull request's comments and route every command comment
 *   (the ledger skips those already applied): comments whose delivery was lost.
 * - `repository`: list a repository's open pull requests; queue `resume`
 *   for those carrying proofgate's labels, and (when asked) `sweep` for those
 *   updated since a time (a base push asks for the first only).
 * - `reconcile`: list every installation's repositories and queue a
 *   `repository` job for each, sweeping what changed since the last pass;
 *   then queue the next pass.
 */
import { ProofgateError, type JsonValue } from '../../core/index.js';
import type { GitHubForgeEvent, IgnoredDelivery } from '../../forge/github/webhook-events.js';
import type { JobSpec } from '../jobs/port.js';

export const TASK = { comment: 'comment', resume: 'resume', sweep: 'sweep', repository: 'repository', reconcile: 'reconcile' } as const;

/** The queue and key of the reconciliation pass (one for the whole service). */
export const RECONCILE_QUEUE = 'github:reconcile';

/** Where a pull request lives, as jobs name it. */
export interface PullAddress {
  readonly installationId: number;
  /** `owner/name`. */
  readonly repository: string;
  readonly changeId: string;
}

/** GitHub's owner and repository names: what may become a path or a store namespace. */
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const REPO = /^[A-Za-z0-9._-]{1,100}$/;

/** `owner/name` checked (pure): GitHub's characters only, never `.` or `..`. */
export function checkRepository(repository: string): { owner: string; name: string } {
  const [owner, name, extra] = repository.split('/');
  if (owner === undefined || name === undefined || extra !== undefined || !OWNER.test(owner) || !REPO.test(name) || name === '.' || name === '..') {
    throw new ProofgateError('INVALID_INPUT', 'a job names a repository that is not owner/name in GitHub characters');
  }
  return { owner, name };
}

/** Whether `owner/name` passes `checkRepository` (pure). */
export function isRepository(repository: string): boolean {
  try {
    checkRepository(repository);
    return true;
  } catch {
    return false;
  }
}

/** A pull request's queue: its repository in lower case (GitHub's names are case-insensitive) and its number. */
export function changeQueue(repository: string, changeId: string): string {
  return `github:${repository.toLowerCase()}#${changeId}`;
}

function addressPayload(address: PullAddress): { installationId: number; repository: string; changeId: string } {
  return { installationId: address.installationId, repository: address.repository, changeId: address.changeId };
}

/**
 * A pull request's command lane: comments are routed here, beside the
 * change's own queue, so a `/proofgate stop` is recorded while the change's
 * job runs (the job reads the ledger before every action) instead of waiting
 * behind it. Two loops of one change never run at once all the same: the
 * change's lease in the ledger admits one.
 */
export function commandQueue(repository: string, changeId: string): string {
  return `${changeQueue(repository, changeId)}:commands`;
}

/** A pull request number as jobs carry it: 1 to 2^31 - 1, written plainly. */
export function isChangeNumber(changeId: string): boolean {
  return /^[1-9][0-9]{0,9}$/.test(changeId) && Number(changeId) <= 2_147_483_647;
}

/** Run the change's job at `runAt` (default now); an earlier wake of a waiting one wins. */
export function resumeJob(address: PullAddress, runAt?: Date): JobSpec {
  const queue = changeQueue(address.repository, address.changeId);
  return { task: TASK.resume, queue, key: `resume:${queue}`, payload: addressPayload(address), ...(runAt === undefined ? {} : { runAt }) };
}

export function sweepJob(address: PullAddress): JobSpec {
  const queue = commandQueue(address.repository, address.changeId);
  return { task: TASK.sweep, queue, key: `sweep:${queue}`, payload: addressPayload(address) };
}

/** How a `repository` job sweeps comments: none, those of pull requests updated since a time, or (null) every open one's. */
export type SweepSince = { readonly since: string | null } | null;

export function repositoryJob(installationId: number, repository: string, sweep: SweepSince): JobSpec {
  const queue = `github:${repository.toLowerCase()}`;
  return { task: TASK.repository, queue, key: `repository:${queue}`, payload: { installationId, repository, sweep } };
}

/** The next reconciliation pass: comments updated since `since` are swept (null: every open pull request's). */
export function reconcileJob(since: string | null, runAt?: Date): JobSpec {
  return { task: TASK.reconcile, queue: RECONCILE_QUEUE, key: RECONCILE_QUEUE, payload: { since }, ...(runAt === undefined ? {} : { runAt }) };
}

/** Where an accepted delivery is kept in the store. */
export interface RecordRef {
  readonly streamId: string;
  readonly eventId: string;
}

/** What the intake hands on, as far as the jobs need it. */
export interface DeliveryWork {
  readonly deliveryId: string;
  readonly eventName: string;
  readonly installationId: number | null;
  readonly result: GitHubForgeEvent | IgnoredDelivery;
  readonly record: RecordRef;
}

/** Installation events that change what the service can reach: a pass finds the new repositories at once. */
const INSTALLATION_EVENTS = new Set(['installation', 'installation_repositories']);

/**
 * The jobs one accepted delivery becomes (pure). Deliveries without an
 * installation (not sent to an App) and events proofgate ignores become none.
 */
export function jobsForDelivery(work: DeliveryWork): JobSpec[] {
  const { result } = work;
  if (result.kind === 'ignored') return INSTALLATION_EVENTS.has(work.eventName) ? [reconcileJob(null)] : [];
  if (work.installationId === null || !Number.isSafeInteger(work.installationId) || work.installationId <= 0) return [];
  const repository = `${result.repository.owner}/${result.repository.repo}`;
  // An address no pull request can have queues nothing (a job would only fail, again and again).
  if (!isRepository(repository)) return [];
  if ('changeId' in result && !isChangeNumber(result.changeId)) return [];
  if ((result.kind === 'check-completed' || result.kind === 'merge-group') && !result.changeIds.every(isChangeNumber)) return [];
  const at = (changeId: string): PullAddress => ({ installationId: work.installationId as number, repository, changeId });
  switch (result.kind) {
    case 'comment-created':
    case 'comment-edited': {
      const queue = commandQueue(repository, result.changeId);
      const payload: JsonValue = { ...addressPayload(at(result.changeId)), record: { streamId: work.record.streamId, eventId: work.record.eventId } };
      return [{ task: TASK.comment, queue, key: `comment:${work.deliveryId}`, payload }];
    }
    case 'change-opened':
    case 'change-synchronized':
    case 'change-closed':
    case 'change-enqueued':
    case 'change-dequeued':
    case 'review-submitted':
      return [resumeJob(at(result.changeId))];
    case 'merge-group':
    case 'check-completed':
      // A check with no pull request named (a fork's, a push's) is found by the next pass.
      return result.changeIds.length === 0 ? [] : result.changeIds.map((changeId) => resumeJob(at(changeId)));
    case 'base-pushed':
      // Every open change on the base may have become BEHIND or blocked: wake the labelled ones of the repository.
      return [repositoryJob(work.installationId, repository, null)];
  }
}
