/**
 * GitHub's merge queue, as far as the test server models it. A branch uses
 * it when one of its rulesets has a MERGE_QUEUE rule (`addRuleset(branch, {
 * mergeQueue: true })`); then the REST merge endpoint refuses its pull
 * requests, and they land through the queue:
 *
 * - `enqueue` (the `enqueuePullRequest` mutation): refuses a pull request
 *   that is not open, a base without a queue, and an `expectedHeadOid`
 *   that is not the head (nothing is queued); the same pull request at the
 *   same head again is its entry. It makes the entry's merge group: a commit
 *   with the base as parent and the head's files, on the branch
 *   `gh-readonly-queue/<base>/pr-<n>-<head>` (as GitHub names it);
 * - `finish(number, conclusion)`: what a test does to the merge group's
 *   checks. Each check run on the group's commit (a `ci` run when there is
 *   none) completes with `conclusion`; a pass merges the pull request by the
 *   queue's merge method, a failure removes it (reason `CI_FAILURE`);
 * - `dequeue` (the `dequeuePullRequest` mutation, reason `MANUAL`), and a
 *   head that moves while queued (reason `HEAD_MOVED`) remove it too.
 *
 * Every change records the webhook deliveries GitHub would send
 * (`pull_request` `enqueued` / `dequeued` / `closed`, `merge_group`
 * `checks_requested` / `destroyed`, `check_run` `completed` on the group's
 * commit); a test takes them with `takeDeliveries()` and sends them signed.
 */
import { checkRunCompletedPayload, mergeGroupPayload, pullRequestPayload } from './deliveries.js';
import type { ModelMergeMethod } from './model-types.js';
import type { RepositoryModel } from './model.js';

export interface ModelQueueEntry {
  readonly number: number;
  readonly base: string;
  readonly headSha: string;
  /** The merge group's commit: the candidate its checks run on. */
  readonly groupSha: string;
  readonly groupBranch: string;
  readonly enqueuedAt: string;
}

export interface ModelQueueRemoval {
  readonly number: number;
  readonly headSha: string;
  readonly reason: string;
  readonly at: string;
}

/** A webhook GitHub would send: event name and payload (without `repository` and `installation`: each harness adds its own). */
export interface ModelDelivery {
  readonly eventName: string;
  readonly payload: Record<string, unknown>;
}

/** A refusal of a queue mutation, in GitHub's words. */
export class QueueRefusal extends Error {}

export class MergeQueueModel {
  /** Queued pull requests, first in line first. */
  readonly entries: ModelQueueEntry[] = [];
  readonly removals: ModelQueueRemoval[] = [];
  private deliveries: ModelDelivery[] = [];

  constructor(
    private readonly model: RepositoryModel,
    /** Where payloads say the API is. */
    private readonly serverUrl: () => string = () => 'http://127.0.0.1',
  ) {}

  /** The merge method of the branch's merge queue, or null when no ruleset on it requires one. */
  method(branch: string): ModelMergeMethod | null {
    return (this.model.rulesets.get(branch) ?? []).find((ruleset) => ruleset.mergeQueue !== null)?.mergeQueue?.mergeMethod ?? null;
  }

  entry(number: number): ModelQueueEntry | null {
    return this.entries.find((entry) => entry.number === number) ?? null;
  }

  /** 1 for the first in line. */
  position(number: number): number {
    return this.entries.findIndex((entry) => entry.number === number) + 1;
  }

  lastRemoval(number: number): ModelQueueRemoval | null {
    return this.removals.filter((removal) => removal.number === number).pop() ?? null;
  }

  /** The deliveries recorded since the last call, oldest first. */
  takeDeliveries(): ModelDelivery[] {
    const taken = this.deliveries;
    this.deliveries = [];
    return taken;
  }

  enqueue(number: number, expectedHeadOid: string | null): ModelQueueEntry {
    const pr = this.model.pull(number);
    if (pr.state !== 'open') throw new QueueRefusal('Pull request is closed');
    const method = this.method(pr.baseRef);
    if (method === null) throw new QueueRefusal(`Merge queue is not enabled for the branch ${pr.baseRef}`);
    const head = this.model.headSha(number);
    if (expectedHeadOid !== null && expectedHeadOid !== head) {
      throw new QueueRefusal(`Expected head oid ${expectedHeadOid} does not match the pull request's head ${head}`);
    }
    const existing = this.entry(number);
    if (existing !== null && existing.headSha === head) return existing;
    const base = this.model.baseSha(number);
    const files = Object.fromEntries(this.model.filesAt(head).map((file) => [file, this.model.file(head, file) ?? new Uint8Array()]));
    const groupSha = this.model.commit({ parent: base, files });
    const groupBranch = `gh-readonly-queue/${pr.baseRef}/pr-${number}-${head}`;
    this.model.setBranch(groupBranch, groupSha);
    const entry: ModelQueueEntry = { number, base: pr.baseRef, headSha: head, groupSha, groupBranch, enqueuedAt: this.model.now() };
    this.entries.push(entry);
    this.deliveries.push({ eventName: 'pull_request', payload: pullRequestPayload(this.model, number, 'enqueued') });
    this.deliveries.push({ eventName: 'merge_group', payload: mergeGroupPayload(entry, base, 'checks_requested') });
    return entry;
  }

  /** Takes the pull request out of the queue with `reason` (false: it was not queued). */
  dequeue(number: number, reason: string): boolean {
    const entry = this.entry(number);
    if (entry === null) return false;
    this.leave(entry);
    this.removals.push({ number, headSha: entry.headSha, reason, at: this.model.now() });
    this.deliveries.push({ eventName: 'merge_group', payload: mergeGroupPayload(entry, this.model.baseSha(number), 'destroyed', 'dequeued') });
    this.deliveries.push({ eventName: 'pull_request', payload: pullRequestPayload(this.model, number, 'dequeued', reason) });
    return true;
  }

  /** A branch moved: a pull request queued with it as head leaves the queue (GitHub drops an entry whose head changed). */
  headMoved(branch: string, sha: string): void {
    for (const entry of [...this.entries]) {
      if (this.model.pull(entry.number).headRef === branch && entry.headSha !== sha) this.dequeue(entry.number, 'HEAD_MOVED');
    }
  }

  /**
   * The merge group's checks of a queued pull request end with `conclusion`:
   * its check runs complete (a `ci` run is added when it has none), then a
   * pass merges it by the queue's method and a failure removes it.
   */
  finish(number: number, conclusion: 'success' | 'failure'): void {
    const entry = this.entry(number);
    if (entry === null) throw new Error(`pull request ${number} is not in the merge queue`);
    const runs = this.model.checkRuns.filter((run) => run.headSha === entry.groupSha);
    if (runs.length === 0) runs.push(this.model.addCheckRun({ sha: entry.groupSha, name: 'ci', status: 'in_progress' }));
    for (const run of runs) {
      run.status = 'completed';
      run.conclusion = conclusion;
      run.completedAt = this.model.now();
      this.deliveries.push({
        eventName: 'check_run',
        payload: checkRunCompletedPayload(this.serverUrl(), this.model.repositoryId, run, conclusion, [], entry.groupBranch),
      });
    }
    if (conclusion === 'failure') {
      this.dequeue(number, 'CI_FAILURE');
      return;
    }
    this.leave(entry);
    this.model.merge(number, this.method(entry.base) ?? 'squash');
    this.deliveries.push({ eventName: 'merge_group', payload: mergeGroupPayload(entry, this.model.baseSha(number), 'destroyed', 'merged') });
    this.deliveries.push({ eventName: 'pull_request', payload: pullRequestPayload(this.model, number, 'closed') });
  }

  private leave(entry: ModelQueueEntry): void {
    this.entries.splice(this.entries.indexOf(entry), 1);
    this.model.branches.delete(entry.groupBranch);
  }
}
