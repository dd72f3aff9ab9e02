import { describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import type { GitHubForgeEvent } from '../../src/forge/github/webhook-events.js';
import {
  RECONCILE_QUEUE,
  TASK,
  changeQueue,
  checkRepository,
  jobsForDelivery,
  reconcileJob,
  resumeJob,
  type DeliveryWork,
} from '../../src/service/github/work.js';

const repository = { owner: 'Octo-Org', repo: 'Demo' };
const record = { streamId: 'github-intake:grp_1', eventId: 'delivery-id' };
const base = { eventName: 'x', repository, installationId: 7 } as const;

function work(result: DeliveryWork['result'], extra: Partial<DeliveryWork> = {}): DeliveryWork {
  return { deliveryId: 'd-1', eventName: result.eventName, installationId: 7, result, record, ...extra };
}

const comment = (kind: 'comment-created' | 'comment-edited'): GitHubForgeEvent => ({
  ...base,
  eventName: 'issue_comment',
  kind,
  changeId: '12',
  deliveryId: 'd-1',
  comment: {
    id: '99',
    author: 'maint',
    authorType: 'User',
    body: '/proofgate automerge',
    createdAt: '2026-01-01T00:00:00Z',
    updatedAt: '2026-01-01T00:00:00Z',
  },
});

describe('jobsForDelivery', () => {
  it("a comment becomes one comment job on its pull request's command lane, keyed by the delivery, naming the record and not the text", () => {
    for (const kind of ['comment-created', 'comment-edited'] as const) {
      const jobs = jobsForDelivery(work(comment(kind)));
      expect(jobs).toEqual([
        {
          task: TASK.comment,
          queue: 'github:octo-org/demo#12:commands',
          key: 'comment:d-1',
          payload: { installationId: 7, repository: 'Octo-Org/Demo', changeId: '12', record },
        },
      ]);
      expect(JSON.stringify(jobs)).not.toContain('/proofgate automerge');
    }
  });

  it('events about a change wake it through its resume key, so a parked wait becomes due at once', () => {
    const events: GitHubForgeEvent[] = [
      { ...base, eventName: 'pull_request', kind: 'change-synchronized', changeId: '12', headSha: 'a'.repeat(40), deliveryId: 'd-1' },
      { ...base, eventName: 'pull_request', kind: 'change-opened', changeId: '12', headSha: 'a'.repeat(40), deliveryId: 'd-1' },
      { ...base, eventName: 'pull_request', kind: 'change-closed', changeId: '12', merged: false, deliveryId: 'd-1' },
      {
        ...base,
        eventName: 'pull_request_review',
        kind: 'review-submitted',
        changeId: '12',
        reviewer: 'm',
        state: 'approved',
        headSha: 'a'.repeat(40),
        deliveryId: 'd-1',
      },
    ];
    for (const event of events) {
      const jobs = jobsForDelivery(work(event));
      expect(jobs).toEqual([resumeJob({ installationId: 7, repository: 'Octo-Org/Demo', changeId: '12' })]);
      expect(jobs[0]?.key).toBe(`resume:${changeQueue('Octo-Org/Demo', '12')}`);
      expect(jobs[0]?.runAt).toBeUndefined();
    }
  });

  it('a finished check wakes each pull request it names; one naming none waits for the pass', () => {
    const check = {
      kind: 'check_run',
      name: 'ci',
      workflow: null,
      status: 'completed',
      conclusion: 'success',
      startedAt: null,
      completedAt: null,
      url: null,
    } as const;
    const event = (changeIds: string[]): GitHubForgeEvent => ({
      ...base,
      eventName: 'check_run',
      kind: 'check-completed',
      changeIds,
      headSha: 'b'.repeat(40),
      check: { ...check, headSha: 'b'.repeat(40) },
      deliveryId: 'd-1',
    });
    expect(jobsForDelivery(work(event(['3', '4']))).map((j) => j.queue)).toEqual(['github:octo-org/demo#3', 'github:octo-org/demo#4']);
    expect(jobsForDelivery(work(event([])))).toEqual([]);
  });

  it('a base push asks for a pass over the repository without sweeping comments', () => {
    const jobs = jobsForDelivery(
      work({ ...base, eventName: 'push', kind: 'base-pushed', ref: 'refs/heads/main', before: 'c'.repeat(40), after: 'd'.repeat(40), deliveryId: 'd-1' }),
    );
    expect(jobs).toEqual([
      {
        task: TASK.repository,
        queue: 'github:octo-org/demo',
        key: 'repository:github:octo-org/demo',
        payload: { installationId: 7, repository: 'Octo-Org/Demo', sweep: null },
      },
    ]);
  });

  it('installation events ask for a reconciliation pass; other ignored events and deliveries without an installation queue nothing', () => {
    const ignored = (eventName: string) => ({ kind: 'ignored', reason: 'r', eventName, deliveryId: 'd-1' }) as const;
    expect(jobsForDelivery(work(ignored('installation')))).toEqual([reconcileJob(null)]);
    expect(jobsForDelivery(work(ignored('installation_repositories')))).toEqual([reconcileJob(null)]);
    expect(jobsForDelivery(work(ignored('star')))).toEqual([]);
    expect(jobsForDelivery(work(comment('comment-created'), { installationId: null }))).toEqual([]);
    expect(reconcileJob(null).queue).toBe(RECONCILE_QUEUE);
  });
});

describe('jobsForDelivery: addresses no pull request can have', () => {
  it('queue nothing: a repository name GitHub would not give, a number out of range, an installation id that is not a positive integer', () => {
    const event = (repo: { owner: string; repo: string }, changeId: string): GitHubForgeEvent =>
      ({ ...comment('comment-created'), repository: repo, changeId }) as GitHubForgeEvent;
    expect(jobsForDelivery(work(event({ owner: '..', repo: '..' }, '12')))).toEqual([]);
    expect(jobsForDelivery(work(event({ owner: 'octo', repo: '..' }, '12')))).toEqual([]);
    expect(jobsForDelivery(work(event(repository, '0')))).toEqual([]);
    expect(jobsForDelivery(work(event(repository, '-1')))).toEqual([]);
    expect(jobsForDelivery(work(event(repository, '9007199254740993')))).toEqual([]);
    expect(jobsForDelivery(work(event(repository, '2147483648')))).toEqual([]);
    expect(jobsForDelivery(work(event(repository, '2147483647')))).toHaveLength(1);
    expect(jobsForDelivery(work(event(repository, '12'), { installationId: 0 }))).toEqual([]);
    expect(jobsForDelivery(work(event(repository, '12'), { installationId: 1.5 }))).toEqual([]);
  });
});

describe('checkRepository', () => {
  it('takes GitHub names', () => {
    expect(checkRepository('octo-org/demo.js')).toEqual({ owner: 'octo-org', name: 'demo.js' });
  });

  it.each(['octo/..', 'octo/.', '../etc', 'octo/demo/extra', 'octo', '-octo/demo', 'octo/de mo', 'octo/de\nmo', '/demo', 'octo/'])(
    'refuses %j with one typed line',
    (name) => {
      let caught: unknown;
      try {
        checkRepository(name);
      } catch (error) {
        caught = error;
      }
      expect(isProofgateError(caught, 'INVALID_INPUT')).toBe(true);
      expect((caught as Error).message).not.toContain('\n');
    },
  );
});
