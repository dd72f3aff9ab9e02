import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../../src/core/index.js';
import { mapCheckRun, mapStatusContext, mergeStateStatus, reviewDecision } from '../../../src/forge/github/snapshot-mapping.js';
import type { GqlCheckRun, GqlStatusContext } from '../../../src/forge/github/snapshot-query.js';
import { countRequests, startHarness, type Harness } from './harness.js';

const SHA = 'a'.repeat(40);

function run(status: string, conclusion: string | null, extra: Partial<GqlCheckRun> = {}): GqlCheckRun {
  return {
    __typename: 'CheckRun',
    databaseId: 1,
    name: 'test',
    status,
    conclusion,
    startedAt: '2026-01-01T00:00:00Z',
    completedAt: status === 'COMPLETED' ? '2026-01-01T00:01:00Z' : null,
    detailsUrl: 'https://ci.example/1',
    checkSuite: { app: { name: 'GitHub Actions' }, workflowRun: { workflow: { name: 'CI' } } },
    ...extra,
  };
}

describe('check mapping (pure)', () => {
  it.each([
    ['QUEUED', null, 'queued', null],
    ['IN_PROGRESS', null, 'in_progress', null],
    ['WAITING', null, 'waiting', null],
    ['PENDING', null, 'pending', null],
    ['REQUESTED', null, 'requested', null],
    ['COMPLETED', 'SUCCESS', 'completed', 'success'],
    ['COMPLETED', 'FAILURE', 'completed', 'failure'],
    ['COMPLETED', 'NEUTRAL', 'completed', 'neutral'],
    ['COMPLETED', 'CANCELLED', 'completed', 'cancelled'],
    ['COMPLETED', 'SKIPPED', 'completed', 'skipped'],
    ['COMPLETED', 'TIMED_OUT', 'completed', 'timed_out'],
    ['COMPLETED', 'ACTION_REQUIRED', 'completed', 'action_required'],
    ['COMPLETED', 'STARTUP_FAILURE', 'completed', 'startup_failure'],
    ['COMPLETED', 'STALE', 'completed', 'stale'],
    ['COMPLETED', 'SOMETHING_NEW', 'completed', 'error'],
    ['SOMETHING_NEW', null, 'pending', null],
  ])('CheckRun %s/%s -> %s/%s', (status, conclusion, wantStatus, wantConclusion) => {
    const check = mapCheckRun(run(status, conclusion), SHA);
    expect(check).toMatchObject({ kind: 'check_run', name: 'test', workflow: 'CI', status: wantStatus, conclusion: wantConclusion, headSha: SHA });
  });

  it('names the app when a check run has no workflow', () => {
    expect(mapCheckRun(run('COMPLETED', 'SUCCESS', { checkSuite: { app: { name: 'Linter' }, workflowRun: null } }), SHA).workflow).toBe('Linter');
    expect(mapCheckRun(run('COMPLETED', 'SUCCESS', { checkSuite: null }), SHA).workflow).toBeNull();
  });

  it.each([
    ['EXPECTED', 'pending', null],
    ['PENDING', 'pending', null],
    ['SUCCESS', 'completed', 'success'],
    ['FAILURE', 'completed', 'failure'],
    ['ERROR', 'completed', 'error'],
  ])('StatusContext %s -> %s/%s', (state, wantStatus, wantConclusion) => {
    const status: GqlStatusContext = { __typename: 'StatusContext', context: 'ci/legacy', state, targetUrl: null, createdAt: '2026-01-01T00:00:00Z' };
    const check = mapStatusContext(status, SHA);
    expect(check).toMatchObject({ kind: 'status', name: 'ci/legacy', workflow: null, status: wantStatus, conclusion: wantConclusion });
    expect(check.completedAt).toBe(wantConclusion === null ? null : '2026-01-01T00:00:00Z');
  });

  it.each([
    ['CLEAN', 'CLEAN'],
    ['DRAFT', 'BLOCKED'],
    ['HAS_HOOKS', 'HAS_HOOKS'],
    ['SOMETHING_NEW', 'UNKNOWN'],
  ])('mergeStateStatus %s -> %s', (value, want) => {
    expect(mergeStateStatus(value)).toBe(want);
  });
});

describe('GitHub snapshot over the test server', () => {
  let h: Harness;
  afterEach(async () => h.close());

  it('maps a pull request with checks, statuses, labels and comments', async () => {
    h = await startHarness();
    const { model } = h.server;
    model.setCollaborator('dana', 'maintain');
    const pr = model.openPullRequest({ author: 'dana', title: 'Teach the parser' });
    const head = model.headSha(pr.number);
    model.addCheckRun({ sha: model.baseSha(pr.number), name: 'on-base' });
    model.addCheckRun({ sha: head, name: 'build', conclusion: 'failure' });
    model.addCheckRun({ sha: head, name: 'build', conclusion: 'success' });
    model.addCheckRun({ sha: head, name: 'lint', status: 'in_progress', app: 'Linter', workflow: null });
    model.addStatus({ sha: head, context: 'legacy/ci', state: 'pending' });
    model.addStatus({ sha: head, context: 'legacy/ci', state: 'error', targetUrl: 'https://ci.example/9' });
    pr.labels.push('automerge');
    model.addComment(pr.number, 'dana', '/proofgate automerge');
    model.addComment(pr.number, 'helper[bot]', 'a bot speaks');

    const snap = await h.forge.snapshot(String(pr.number));
    expect(snap).toMatchObject({
      id: String(pr.number),
      number: pr.number,
      title: 'Teach the parser',
      state: 'open',
      draft: false,
      base: { ref: 'main', sha: model.baseSha(pr.number) },
      head: { ref: pr.headRef, sha: head },
      author: { login: 'dana' },
      mergeable: 'MERGEABLE',
      mergeStateStatus: 'CLEAN',
      reviewDecision: null,
      labels: ['automerge'],
      mergeCommitSha: null,
    });
    expect(snap.checks).toEqual([
      {
        kind: 'check_run',
        name: 'build',
        workflow: 'CI',
        status: 'completed',
        conclusion: 'success',
        startedAt: expect.any(String),
        completedAt: expect.any(String),
        url: expect.any(String),
        headSha: head,
      },
      {
        kind: 'check_run',
        name: 'lint',
        workflow: 'Linter',
        status: 'in_progress',
        conclusion: null,
        startedAt: expect.any(String),
        completedAt: null,
        url: expect.any(String),
        headSha: head,
      },
      {
        kind: 'status',
        name: 'legacy/ci',
        workflow: null,
        status: 'completed',
        conclusion: 'error',
        startedAt: expect.any(String),
        completedAt: expect.any(String),
        url: 'https://ci.example/9',
        headSha: head,
      },
    ]);
    expect(snap.comments.map((c) => [c.author, c.authorType, c.body])).toEqual([
      ['dana', 'User', '/proofgate automerge'],
      ['helper[bot]', 'Bot', 'a bot speaks'],
    ]);
    // One request: the author's permission is not asked (a snapshot does not carry it), and the default branch comes with it.
    expect(countRequests(h.server, 'graphql')).toBe(1);
    expect(countRequests(h.server, 'repos/get-collaborator-permission-level')).toBe(0);
    expect(await h.forge.trustedBranch()).toBe('main');
    expect(countRequests(h.server, 'repos/get')).toBe(0);
  });

  it('reads the review decision the base asks for', async () => {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'dana' });
    for (const decision of ['REVIEW_REQUIRED', 'CHANGES_REQUESTED', 'APPROVED', null] as const) {
      model.setReviewDecision(pr.number, decision);
      expect((await h.forge.snapshot(String(pr.number))).reviewDecision).toBe(decision);
    }
  });

  it('reads draft, merged and unknown-author states', async () => {
    h = await startHarness();
    const { model } = h.server;
    const draft = model.openPullRequest({ author: 'erin', draft: true });
    const merged = model.openPullRequest({ author: 'renovate[bot]' });
    const mergeSha = model.squashMerge(merged.number);

    const d = await h.forge.snapshot(String(draft.number));
    expect(d).toMatchObject({ draft: true, mergeStateStatus: 'BLOCKED', author: { login: 'erin' } });
    const m = await h.forge.snapshot(String(merged.number));
    expect(m).toMatchObject({ state: 'merged', mergeCommitSha: mergeSha, author: { login: 'renovate[bot]' } });
  });

  it('takes one GraphQL request for 100 checks and 100 comments', async () => {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'fay' });
    const head = model.headSha(pr.number);
    for (let i = 0; i < 100; i++) model.addCheckRun({ sha: head, name: `check-${i}` });
    for (let i = 0; i < 100; i++) model.addComment(pr.number, 'fay', `comment ${i}`);
    const snap = await h.forge.snapshot(String(pr.number));
    expect(snap.checks).toHaveLength(100);
    expect(snap.comments).toHaveLength(100);
    expect(countRequests(h.server, 'graphql')).toBe(1);
    expect(h.server.requests).toHaveLength(1);
  });

  it('pages on past 100 checks or comments and keeps their order', async () => {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'gus' });
    const head = model.headSha(pr.number);
    for (let i = 0; i < 150; i++) model.addCheckRun({ sha: head, name: `check-${i}` });
    for (let i = 0; i < 250; i++) model.addComment(pr.number, 'gus', `comment ${i}`);
    const snap = await h.forge.snapshot(String(pr.number));
    expect(snap.checks.map((c) => c.name)).toEqual(Array.from({ length: 150 }, (_, i) => `check-${i}`));
    expect(snap.comments.map((c) => c.body)).toEqual(Array.from({ length: 250 }, (_, i) => `comment ${i}`));
    expect(countRequests(h.server, 'graphql')).toBe(3);
  });

  it('says NOT_FOUND for a missing pull request and INVALID_INPUT for a bad id (no request)', async () => {
    h = await startHarness();
    await expect(h.forge.snapshot('99')).rejects.toSatisfy((e: unknown) => isProofgateError(e, 'NOT_FOUND'));
    const before = h.server.requests.length;
    for (const bad of ['', '0', '-1', '1.5', 'abc', '12 ']) {
      await expect(h.forge.snapshot(bad)).rejects.toSatisfy((e: unknown) => isProofgateError(e, 'INVALID_INPUT'));
    }
    expect(h.server.requests.length).toBe(before);
  });
});

describe('review decision mapping', () => {
  it.each([
    [null, null],
    [undefined, null],
    ['APPROVED', 'APPROVED'],
    ['CHANGES_REQUESTED', 'CHANGES_REQUESTED'],
    ['REVIEW_REQUIRED', 'REVIEW_REQUIRED'],
    ['SOMETHING_NEW', 'REVIEW_REQUIRED'],
  ] as const)('reviewDecision %s -> %s', (value, want) => {
    expect(reviewDecision(value)).toBe(want);
  });
});
