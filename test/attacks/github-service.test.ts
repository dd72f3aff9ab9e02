/**
 * Attacks on `proofgate serve` as a GitHub App (src/service/github/): signed
 * deliveries whose payloads name what they should not, commands from people
 * without the right, forged markers, races with pushes, floods and
 * redeliveries, and what the logs carry. Each test asserts the safe
 * behaviour; a test skipped here is a defect the report describes.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { composeMarkedBody } from '../../src/automerge/markers.js';
import { loadOrCreateSecret, type Reviewer } from '../../src/automerge/loop/index.js';
import { liveReviewBindings } from '../../src/review/index.js';
import { BOT, CONFIG, MAINTAINER, WEBHOOK_SECRET, startServiceHarness, type ServiceHarness } from '../service/github-service-support.js';
import { until } from '../support/wait.js';
import {
  bufferLogger,
  checkRunBody,
  commentBody,
  ended,
  jobEvent,
  openPullWith,
  pullRequestBody,
  pushHead,
  quiet,
  sendSigned,
  writes,
} from './github-service-rig.js';

let harness: ServiceHarness | null = null;
afterEach(async () => {
  await harness?.cleanup();
  harness = null;
});

const botComments = (h: ServiceHarness, pr: number) => h.server.model.commentsOf(pr).filter((c) => c.author === BOT);

describe('attack: payloads that name what they should not', () => {
  it('repositories named ../.., with slashes, newlines, unicode, or not installed: no write on GitHub, no path outside the data dir, the service keeps working', async () => {
    const h = (harness = await startServiceHarness());
    const { number } = h.openPullRequest();
    const names: [string, string][] = [
      ['..', '..'],
      ['octo-org', '../../x'],
      ['octo-org/..', 'demo'],
      ['octo-org', 'demo/../../../etc'],
      ['octo-org', 'demo\nx'],
      ['octo-org', 'démo'],
      ['ｏｃｔｏ-org', 'demo'],
      ['octo-org', 'other'],
      ['someone-else', 'demo'],
    ];
    const from = h.events.length;
    for (const [owner, repo] of names) {
      const answer = await sendSigned(h, 'issue_comment', commentBody(h, { pr: number, body: '/proofgate automerge', author: MAINTAINER, owner, repo }));
      expect([202, 400]).toContain(answer.status);
    }
    await until(() => h.events.slice(from).filter((e) => e.kind !== 'started' && ended(e)).length >= 1, 'no job of the hostile deliveries ended');
    // The real repository still works: a status command is answered.
    const ok = await h.comment(number, '/proofgate status');
    expect(ok.status).toBe(202);
    await until(() => botComments(h, number).length >= 1, 'the service stopped answering after the hostile deliveries');
    const wrote = writes(h);
    expect(wrote.every((w) => w.path.startsWith(`/repos/${h.server.model.owner}/${h.server.model.repo}/`))).toBe(true);
    expect(wrote.map((w) => w.operation)).toEqual(['issues/create-comment']);
    // Nothing was made outside the service's data dir (the harness root holds only it and the remote).
    expect(readdirSync(h.root).sort()).toEqual(['data', 'remote.git']);
    const github = join(h.root, 'data', 'github');
    if (existsSync(github)) for (const owner of readdirSync(github)) expect(['octo-org', 'someone-else']).toContain(owner);
  });

  // Was a defect (work.ts jobsForDelivery / service.ts addressOf): the address is checked only when the job runs, and INVALID_INPUT is retried like a transient failure.
  it('a delivery naming an impossible repository or pull request number is not queued, or its job fails for good at once', async () => {
    const h = (harness = await startServiceHarness());
    h.openPullRequest();
    const from = h.events.length;
    const sent = [
      await sendSigned(h, 'issue_comment', commentBody(h, { pr: 1, body: '/proofgate automerge', author: MAINTAINER, owner: 'octo-org', repo: '../../x' })),
      await sendSigned(h, 'issue_comment', commentBody(h, { pr: 2 ** 53, body: '/proofgate automerge', author: MAINTAINER })),
      await sendSigned(h, 'issue_comment', commentBody(h, { pr: -1, body: '/proofgate automerge', author: MAINTAINER })),
    ];
    expect(sent.map((s) => s.status)).toEqual([202, 202, 202]);
    await quiet(h);
    const ofThem = (key: string) => h.events.slice(from).filter((e) => e.kind === 'failed' && e.job.key === key);
    for (const s of sent) for (const failure of ofThem(`comment:${s.deliveryId}`)) expect(failure.kind === 'failed' && failure.final).toBe(true);
    expect((await h.service.queue.list()).filter((j) => !j.failed && j.task === 'comment')).toEqual([]);
  });

  it("installation ids 0, negative, fractional, huge or a string do not stop the repository's work", async () => {
    const h = (harness = await startServiceHarness());
    const { number } = h.openPullRequest();
    for (const installation of [{ id: 0 }, { id: -77 }, { id: 77.5 }, { id: 2 ** 60 }, { id: '77' }, { id: null }, 77, null]) {
      const answer = await sendSigned(h, 'issue_comment', commentBody(h, { pr: number, body: '/proofgate automerge', author: MAINTAINER, installation }));
      expect([202, 400]).toContain(answer.status);
    }
    const ok = await h.comment(number, '/proofgate status');
    expect(ok.status).toBe(202);
    await until(() => botComments(h, number).length >= 1, 'the service stopped answering after the hostile installation ids');
    expect(writes(h).map((w) => w.operation)).toEqual(['issues/create-comment']);
    expect(h.server.model.pull(number).labels).toEqual([]);
  });

  // Was a defect (service.ts contextOf): the repository's context is cached by name alone, with the first installation id seen.
  it("a delivery naming another installation for the repository does not take the repository's work over (its context is not cached under the wrong installation)", async () => {
    const h = (harness = await startServiceHarness());
    const { number } = h.openPullRequest();
    const from = h.events.length;
    // The first job to touch the repository names an installation that is not (or no longer) the repository's: a stale job, a reinstalled App.
    const stale = await sendSigned(
      h,
      'issue_comment',
      commentBody(h, { pr: number, body: '/proofgate status', author: MAINTAINER, installation: { id: 999 } }),
    );
    expect(stale.status).toBe(202);
    await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${stale.deliveryId}`, 'the stale job did not run');
    const ok = await h.comment(number, '/proofgate status');
    expect(ok.status).toBe(202);
    const done = await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${ok.deliveryId}`, 'the good job did not run');
    expect(done.kind === 'failed' ? done.error : null).toBeNull();
    expect(botComments(h, number)).toHaveLength(1);
  });
});

describe('attack: commands from people without the right', () => {
  it('automerge, approve and stop from a reader, a triager, a stranger and the change author are refused silently; the check completing merges nothing', async () => {
    const h = (harness = await startServiceHarness());
    h.server.model.setCollaborator('reader', 'read');
    h.server.model.setCollaborator('triager', 'triage');
    const { number, runId } = h.openPullRequest();
    const from = h.events.length;
    const sent = [];
    for (const author of ['reader', 'triager', 'stranger', 'casey', 'CASEY']) {
      sent.push(await h.comment(number, '/proofgate automerge\n/proofgate approve\n/proofgate rebase', author));
    }
    for (const s of sent) await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${s.deliveryId}`, 'a refused comment job did not end');
    const checked = h.events.length;
    await h.completeCheck(number, runId);
    await jobEvent(h, checked, (e) => ended(e) && e.job.task === 'resume', 'the resume job did not run');
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(writes(h)).toEqual([]);
    expect(h.server.model.pull(number).labels).toEqual([]);
    // The same check state with the same command from the maintainer merges: only the permission held it back.
    await h.comment(number, '/proofgate automerge');
    await until(() => h.server.model.pull(number).merged, "the maintainer's automerge did not merge");
  });

  it("commands written as proofgate itself (any letter case, blanks), by another bot with write permission, or by logins that would bend the permission lookup's path, are refused", async () => {
    const h = (harness = await startServiceHarness());
    for (const login of ['Proofgate-Test[BOT]', 'proofgate-test[bot] ', ' proofgate-test[bot]', 'helper[bot]']) h.server.model.setCollaborator(login, 'write');
    const { number, runId } = h.openPullRequest();
    const from = h.events.length;
    const shapes: [string, string][] = [
      [BOT, 'Bot'],
      [BOT, 'User'],
      ['Proofgate-Test[BOT]', 'User'],
      ['proofgate-test[bot] ', 'User'],
      [' proofgate-test[bot]', 'User'],
      ['helper[bot]', 'Bot'],
      // Logins that would change the permission lookup's path if they were not encoded.
      ['..', 'User'],
      ['.', 'User'],
      ['x/../maint', 'User'],
      ['maint/permission?', 'User'],
      ['maint#', 'User'],
      ['maint%2F', 'User'],
    ];
    const sent = [];
    for (const [author, authorType] of shapes) {
      h.server.model.addComment(number, author, '/proofgate automerge');
      sent.push(await sendSigned(h, 'issue_comment', commentBody(h, { pr: number, body: '/proofgate automerge', author, authorType })));
    }
    for (const s of sent) await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${s.deliveryId}`, 'a spoofed comment job did not end');
    const checked = h.events.length;
    await h.completeCheck(number, runId);
    await jobEvent(h, checked, (e) => ended(e) && e.job.task === 'resume', 'the resume job did not run');
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(writes(h)).toEqual([]);
  });
});

describe('attack: edits and redeliveries of a command already applied', () => {
  it('an automerge comment edited (or redelivered with other bytes) after a stop does not turn automerge back on', async () => {
    const h = (harness = await startServiceHarness());
    const { number, runId } = h.openPullRequest();
    const first = await h.comment(number, '/proofgate automerge');
    await until(() => h.server.model.pull(number).labels.includes('proofgate:automerge'), 'automerge was not turned on');
    await h.comment(number, '/proofgate stop');
    await until(() => !h.server.model.pull(number).labels.includes('proofgate:automerge'), 'the stop was not applied');
    const from = h.events.length;
    const original = first.payload.comment as Record<string, unknown>;
    const editedAt = h.server.model.now();
    const attempts = [
      // An edit (a later updated_at) that keeps the command.
      commentBody(h, {
        pr: number,
        body: '/proofgate automerge\n\n(typo fixed)',
        author: MAINTAINER,
        commentId: first.commentId,
        createdAt: String(original.created_at),
        updatedAt: editedAt,
        action: 'edited',
      }),
      // The same version again under other bytes (a new body digest).
      commentBody(h, {
        pr: number,
        body: '/proofgate automerge',
        author: MAINTAINER,
        commentId: first.commentId,
        createdAt: String(original.created_at),
        updatedAt: String(original.updated_at),
      }),
      // An older version than the one applied, with another command added.
      commentBody(h, {
        pr: number,
        body: '/proofgate automerge\n/proofgate review',
        author: MAINTAINER,
        commentId: first.commentId,
        createdAt: String(original.created_at),
        updatedAt: '2025-01-01T00:00:00Z',
        action: 'edited',
      }),
    ];
    const sent = [];
    for (const body of attempts) sent.push(await sendSigned(h, 'issue_comment', body));
    expect(sent.map((s) => s.status)).toEqual([202, 202, 202]);
    for (const s of sent) await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${s.deliveryId}`, 'an edit job did not end');
    const checked = h.events.length;
    await h.completeCheck(number, runId);
    await jobEvent(h, checked, (e) => ended(e) && e.job.task === 'resume', 'the resume job did not run');
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(h.server.model.pull(number).labels).not.toContain('proofgate:automerge');
    // A new automerge command does merge: the stop, not a broken check, held it back.
    await h.comment(number, '/proofgate automerge');
    await until(() => h.server.model.pull(number).merged, 'a new automerge did not merge');
  });
});

describe('attack: check deliveries that lie', () => {
  it('check_run.completed naming the pull request for another head, or claiming success while the check still runs, merges nothing', async () => {
    const h = (harness = await startServiceHarness());
    const { number, head, runId } = h.openPullRequest();
    const first = await h.comment(number, '/proofgate automerge');
    await jobEvent(h, 0, (e) => ended(e) && e.job.key === `comment:${first.deliveryId}`, 'the automerge job did not park');
    const other = h.server.model.addCheckRun({ sha: h.server.model.baseSha(number), name: 'ci', status: 'completed', conclusion: 'success' });
    const from = h.events.length;
    const lies = [
      checkRunBody(h, { runId: other.id, name: 'ci', headSha: h.server.model.baseSha(number), prs: [number], conclusion: 'success' }),
      checkRunBody(h, { runId, name: 'ci', headSha: head, prs: [number], conclusion: 'success' }),
      checkRunBody(h, { runId: 424242, name: 'ci', headSha: 'f'.repeat(40), prs: [number, 2, 99999], conclusion: 'success' }),
    ];
    const sent = [];
    for (const body of lies) sent.push(await sendSigned(h, 'check_run', body));
    expect(sent.map((s) => s.status)).toEqual([202, 202, 202]);
    await jobEvent(
      h,
      from,
      (e) => ended(e) && e.job.task === 'resume' && (e.job.payload as { changeId?: string }).changeId === String(number),
      'no resume ran',
    );
    await quiet(h);
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);
    // The real check completing merges the reviewed head.
    await h.completeCheck(number, runId);
    await until(() => h.server.model.pull(number).merged, 'not merged after the real check completed');
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
  });
});

describe('attack: a push racing the merge', () => {
  it('a head pushed as the merge request arrives: GitHub refuses the sha, nothing merges at the unreviewed head', async () => {
    const h = (harness = await startServiceHarness());
    const { number, head, runId } = h.openPullRequest();
    const first = await h.comment(number, '/proofgate automerge');
    await jobEvent(h, 0, (e) => ended(e) && e.job.key === `comment:${first.deliveryId}`, 'the automerge job did not park');
    const model = h.server.model;
    const headSha = model.headSha.bind(model);
    let raced: string | null = null;
    model.headSha = (n: number): string => {
      if (raced === null && n === number && /pulls\/merge/.test(new Error().stack ?? '')) {
        raced = 'pending';
        raced = pushHead(h, number, { 'sneaky.txt': 'not reviewed\n' });
        model.addCheckRun({ sha: raced, name: 'ci', status: 'in_progress' });
      }
      return headSha(n);
    };
    await h.completeCheck(number, runId);
    await until(() => h.server.requests.some((r) => r.operation === 'pulls/merge'), 'no merge was tried');
    await until(async () => (await h.service.queue.list()).every((j) => j.lockedBy === null), 'the job did not end');
    await quiet(h);
    expect(raced).not.toBeNull();
    expect(model.pull(number).merged).toBe(false);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([409]);
    expect(model.headSha(number)).not.toBe(head);
  });
});

describe('attack: floods, redeliveries, closed and merged pull requests', () => {
  it('one check body under 20 delivery ids, 20 other check deliveries and 10 synchronize deliveries at once: one merge, no comment written twice', async () => {
    const h = (harness = await startServiceHarness());
    const { number, head, runId } = h.openPullRequest();
    const first = await h.comment(number, '/proofgate automerge');
    await jobEvent(h, 0, (e) => ended(e) && e.job.key === `comment:${first.deliveryId}`, 'the automerge job did not park');
    const run = h.server.model.checkRuns.find((r) => r.id === runId)!;
    run.status = 'completed';
    run.conclusion = 'success';
    run.completedAt = h.server.model.now();
    const same = checkRunBody(h, { runId, name: 'ci', headSha: head, prs: [number], conclusion: 'success' });
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, () => sendSigned(h, 'check_run', same)),
      ...Array.from({ length: 20 }, (_, i) =>
        sendSigned(h, 'check_run', checkRunBody(h, { runId: 50_000 + i, name: `other-${i}`, headSha: head, prs: [number], conclusion: 'success' })),
      ),
      ...Array.from({ length: 10 }, () => sendSigned(h, 'pull_request', pullRequestBody(h, 'synchronize', number))),
    ]);
    expect(answers.slice(0, 20).filter((a) => a.status === 202)).toHaveLength(1);
    await until(() => h.server.model.pull(number).merged, 'not merged after the flood');
    await quiet(h);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
    // One status comment (edited into the final one) and one review comment, as without the flood.
    expect(botComments(h, number)).toHaveLength(2);
    expect(writes(h).filter((w) => w.operation === 'issues/create-comment')).toHaveLength(2);
    expect(h.server.model.pull(number).labels).toEqual([]);
  });

  it('a closed pull request: an automerge command and a check completing merge nothing and reopen nothing', async () => {
    const h = (harness = await startServiceHarness());
    const { number, runId } = h.openPullRequest();
    h.server.model.closePullRequest(number);
    const from = h.events.length;
    const closed = await sendSigned(h, 'pull_request', pullRequestBody(h, 'closed', number));
    expect(closed.status).toBe(202);
    const first = await h.comment(number, '/proofgate automerge');
    await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${first.deliveryId}`, 'the automerge job did not end');
    await h.completeCheck(number, runId);
    await quiet(h);
    expect(h.server.model.pull(number).state).toBe('closed');
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);
    // What was written says so, and leaves nothing claiming automerge is on.
    expect(h.server.model.pull(number).labels).toEqual([]);
    // The command's reply says the change is closed; the change's job (automerge was asked for) ends at once, its status saying why.
    const status = botComments(h, number);
    expect(status[0]?.body).toContain('this change is closed');
    expect(status.slice(1).every((c) => c.body.includes('change is closed') && c.body.includes('stopped'))).toBe(true);
    expect(status.length).toBeLessThanOrEqual(2);
  });

  /** Merge a fresh pull request, then watch the final comment's edits and the label writes that follow. */
  async function mergedThenWatched(h: ServiceHarness) {
    const { number, runId } = h.openPullRequest();
    await h.comment(number, '/proofgate automerge');
    await h.completeCheck(number, runId);
    await until(() => h.server.model.pull(number).merged, 'not merged');
    await quiet(h);
    const final = botComments(h, number).find((c) => c.body.startsWith('### proofgate automerge: merged'));
    expect(final).toBeDefined();
    const model = h.server.model;
    const edits: string[] = [];
    const editComment = model.editComment.bind(model);
    model.editComment = (id: number, body: string) => {
      if (id === final?.id) edits.push(body);
      return editComment(id, body);
    };
    return { number, finalId: final!.id, edits, writesBefore: writes(h).length };
  }

  async function commandsAfter(h: ServiceHarness, number: number, texts: string[]): Promise<void> {
    const from = h.events.length;
    const sent = [];
    for (const text of texts) sent.push(await h.comment(number, text));
    for (const s of sent) await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${s.deliveryId}`, 'a command after the merge did not end');
    await quiet(h);
  }

  // Was a defect (router): a stop after the merge replaces the final comment with "stopped", for good.
  it('/proofgate stop after the merge leaves the final comment saying merged', async () => {
    const h = (harness = await startServiceHarness());
    const { number, finalId } = await mergedThenWatched(h);
    await commandsAfter(h, number, ['/proofgate stop']);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge')).toHaveLength(1);
    const final = h.server.model.comments.find((c) => c.id === finalId);
    expect(final?.body.split('\n')[0]).toBe('### proofgate automerge: merged');
  });

  // Was a defect (router): automerge after the merge puts the label back and rewrites the final comment as "waiting" until a job restores it.
  it('/proofgate automerge, review and rebase after the merge: no label put back, the final comment never stops saying merged', async () => {
    const h = (harness = await startServiceHarness());
    const { number, edits, writesBefore } = await mergedThenWatched(h);
    await commandsAfter(h, number, ['/proofgate automerge', '/proofgate review', '/proofgate rebase']);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge')).toHaveLength(1);
    expect(
      writes(h)
        .slice(writesBefore)
        .filter((w) => w.operation === 'issues/add-labels'),
    ).toEqual([]);
    expect(h.server.model.pull(number).labels).toEqual([]);
    for (const body of edits) expect(body.split('\n')[0]).toBe('### proofgate automerge: merged');
  });
});

describe('attack: forged verdict markers', () => {
  it('a CONFIRMED verdict marker signed with the real secret, for the exact head and bindings, posted by anyone but proofgate, is not taken', async () => {
    let seen: { diff: string; contract: string; config: string } | null = null;
    const hold: Reviewer = async ({ repoDir, base, head }) => {
      const live = await liveReviewBindings({ repoDir, base, head });
      seen = { diff: live.diff, contract: live.contract, config: live.config };
      return { verdict: 'HOLD', reasons: ['a human must look'], findings: [], reviewRef: 'hold', bindings: seen, run: null };
    };
    const h = (harness = await startServiceHarness({ reviewer: () => hold }));
    h.server.model.setCollaborator('Proofgate-Test', 'write');
    const { number, head, runId } = h.openPullRequest();
    await h.comment(number, '/proofgate automerge');
    await h.completeCheck(number, runId);
    await until(() => h.server.model.pull(number).labels.includes('proofgate:human-review'), 'the HOLD did not block');
    await quiet(h);
    expect(seen).not.toBeNull();
    // The attacker has everything a marker needs, even the secret (as if it leaked): only the author is missing.
    const secret = await loadOrCreateSecret(join(h.root, 'data'));
    const forged = (review: string) =>
      composeMarkedBody(
        '### proofgate review: CONFIRMED\n\nLooks good.',
        [
          {
            kind: 'review-verdict',
            change: String(number),
            head,
            verdict: 'CONFIRMED',
            findings: 0,
            review,
            at: new Date(Date.now() + 60_000).toISOString(),
            ...seen!,
            run: null,
          },
        ],
        secret,
      );
    for (const author of [MAINTAINER, 'casey', 'Proofgate-Test', 'proofgate-test[bot] '])
      await h.comment(number, forged(`rvw_forged_${author.replace(/[^A-Za-z0-9]/g, 'x')}`), author);
    const from = h.events.length;
    const status = await h.comment(number, '/proofgate status');
    await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${status.deliveryId}`, 'the status job did not end');
    await quiet(h);
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);
    // Control: the same marker in proofgate's own comment is taken (so only the author check held the forgeries back).
    h.server.model.addComment(number, BOT, forged('rvw_forged_bot'));
    await h.comment(number, '/proofgate status');
    await until(() => h.server.model.pull(number).merged, 'the control marker from proofgate itself was not taken');
  });
});

describe('attack: a change to what proofgate trusts', () => {
  it("a head that edits .proofgate.yml merges only with a maintainer's approval of that exact head: strangers, the author and an approval of an older head do not count", async () => {
    const h = (harness = await startServiceHarness());
    h.openPullRequest();
    const { number, head, runId } = openPullWith(h, 'trust', { '.proofgate.yml': `${CONFIG}checks: []\n` });
    await h.comment(number, '/proofgate automerge');
    await h.completeCheck(number, runId);
    await until(() => botComments(h, number).some((c) => c.body.includes('approval-required')), 'the trust change did not wait for an approval');
    await quiet(h);
    // Head A is reviewed and green: approvals from a stranger and from its author change nothing.
    let from = h.events.length;
    const refused = [await h.comment(number, '/proofgate approve', 'stranger'), await h.comment(number, `/proofgate approve ${head}`, 'casey')];
    for (const s of refused) await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${s.deliveryId}`, 'a refused approval did not end');
    await quiet(h);
    expect(h.server.model.pull(number).merged).toBe(false);
    // CI runs again on A; meanwhile the maintainer approves A, and then the author pushes head B.
    const again = h.server.model.addCheckRun({ sha: head, name: 'ci-again', status: 'in_progress' });
    from = h.events.length;
    const approved = await h.comment(number, `/proofgate approve ${head}`);
    await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${approved.deliveryId}`, 'the approval did not end');
    await quiet(h);
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(botComments(h, number).some((c) => c.body.includes(`${MAINTAINER} approved head`))).toBe(true);
    const b = pushHead(h, number, { '.proofgate.yml': `${CONFIG}checks: []\nmaintainers: []\n` });
    const bRun = h.server.model.addCheckRun({ sha: b, name: 'ci', status: 'in_progress' });
    await sendSigned(h, 'pull_request', pullRequestBody(h, 'synchronize', number));
    await h.completeCheck(number, again.id);
    from = h.events.length;
    await h.completeCheck(number, bRun.id);
    await jobEvent(h, from, (e) => ended(e) && e.job.task === 'resume', 'the resume job did not run');
    await quiet(h);
    expect(h.server.model.pull(number).merged).toBe(false);
    const status = botComments(h, number).find((c) => c.body.startsWith('### proofgate automerge'));
    expect(status?.body).toContain(`Head \`${b}\``);
    expect(status?.body).toContain('approval-required');
    // Approving B merges B.
    await h.comment(number, `/proofgate approve ${b}`);
    await until(() => h.server.model.pull(number).merged, 'not merged after the approval of the current head');
    expect(h.server.model.headSha(number)).toBe(b);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
  });
});

describe('attack: lost deliveries and the reconciliation sweep', () => {
  it("after a restart the sweep runs the maintainer's lost command once and refuses a stranger's and proofgate's own", async () => {
    const h = (harness = await startServiceHarness());
    const { number, runId } = h.openPullRequest();
    // A second pull request that only looks like automerge is on: someone with triage put proofgate's labels on it.
    const labelled = openPullWith(h, 'labelled', { 'labelled.txt': 'x\n' });
    h.server.model.addLabels(labelled.number, ['proofgate:automerge', 'proofgate:merge-ready']);
    const labelledRun = h.server.model.checkRuns.find((r) => r.id === labelled.runId)!;
    labelledRun.status = 'completed';
    labelledRun.conclusion = 'success';
    await h.service.stop(0);
    // Comments whose deliveries never arrived.
    h.server.model.addComment(number, MAINTAINER, '/proofgate automerge');
    h.server.model.addComment(number, 'stranger', '/proofgate stop');
    h.server.model.addComment(number, BOT, '/proofgate stop');
    const run = h.server.model.checkRuns.find((r) => r.id === runId)!;
    run.status = 'completed';
    run.conclusion = 'success';
    run.completedAt = h.server.model.now();
    await h.restart();
    await until(() => h.server.model.pull(number).merged, 'the lost automerge was not found by the sweep');
    await quiet(h);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
    expect(h.server.model.pull(labelled.number).merged).toBe(false);
    expect(h.server.model.commentsOf(labelled.number)).toEqual([]);
  });
});

describe("attack: proofgate's own writes coming back as deliveries", () => {
  it('echoing every comment proofgate writes or edits back as a signed delivery (as GitHub does) settles: no write loop', async () => {
    const h = (harness = await startServiceHarness());
    const model = h.server.model;
    const echoes: string[] = [];
    const echo = (c: { id: number; issueNumber: number; body: string; createdAt: string; updatedAt: string; author: string }, action: 'created' | 'edited') => {
      if (c.author !== BOT) return;
      echoes.push(
        commentBody(h, {
          pr: c.issueNumber,
          body: c.body,
          author: BOT,
          authorType: 'Bot',
          commentId: c.id,
          createdAt: c.createdAt,
          updatedAt: c.updatedAt,
          action,
        }),
      );
    };
    const addComment = model.addComment.bind(model);
    model.addComment = (n: number, author: string, body: string) => {
      const c = addComment(n, author, body);
      echo(c, 'created');
      return c;
    };
    const editComment = model.editComment.bind(model);
    model.editComment = (id: number, body: string) => {
      const c = editComment(id, body);
      echo(c, 'edited');
      return c;
    };
    const { number, runId } = h.openPullRequest();
    await h.comment(number, '/proofgate automerge');
    await quiet(h);
    let rounds = 0;
    for (; echoes.length > 0 && rounds < 12; rounds++) {
      const batch = echoes.splice(0);
      const from = h.events.length;
      const sent = [];
      for (const body of batch) sent.push(await sendSigned(h, 'issue_comment', body));
      for (const s of sent.filter((a) => a.status === 202))
        await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${s.deliveryId}`, 'an echo job did not end');
      await quiet(h);
    }
    expect(rounds).toBeLessThan(6);
    expect(echoes).toEqual([]);
    expect(model.pull(number).merged).toBe(false);
    // And the change still merges when its check completes.
    await h.completeCheck(number, runId);
    await until(() => model.pull(number).merged, 'not merged after the echoes');
  });
});

describe('attack: a stop racing a running job', () => {
  // Was a defect: a change's comment jobs waited behind its running job on the change's queue, so the stop was read after the merge.
  it('a /proofgate stop delivered (202) while the head is being reviewed stops the merge that would follow the review', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let reviewing = false;
    const slow: Reviewer = async ({ repoDir, base, head }) => {
      reviewing = true;
      await gate;
      const live = await liveReviewBindings({ repoDir, base, head });
      return {
        verdict: 'CONFIRMED',
        reasons: [],
        findings: [],
        reviewRef: 'slow',
        bindings: { diff: live.diff, contract: live.contract, config: live.config },
        run: null,
      };
    };
    const h = (harness = await startServiceHarness({ reviewer: () => slow }));
    const { number, runId } = h.openPullRequest();
    const run = h.server.model.checkRuns.find((r) => r.id === runId)!;
    run.status = 'completed';
    run.conclusion = 'success';
    run.completedAt = h.server.model.now();
    await h.comment(number, '/proofgate automerge');
    await until(() => reviewing, 'the review did not start');
    const stop = await h.comment(number, '/proofgate stop');
    expect(stop.status).toBe(202);
    // The stop is routed on the command lane while the review still runs: it does not wait behind the change's job.
    await jobEvent(h, 0, (e) => ended(e) && e.job.key === `comment:${stop.deliveryId}`, 'the stop job did not run while the review ran');
    expect(reviewing).toBe(true);
    release();
    await quiet(h);
    expect(h.server.model.pull(number).merged).toBe(false);
  });
});

describe('attack: a write that fails once', () => {
  // Was a defect (router): the retried job found the command applied (redelivery) and never wrote the reply.
  it('a /proofgate status whose reply GitHub refuses once (500s) is answered when its job is retried', async () => {
    const h = (harness = await startServiceHarness());
    const { number } = h.openPullRequest();
    h.server.failNext({ method: 'POST', pathPrefix: `/repos/${h.server.model.owner}/${h.server.model.repo}/issues/${number}/comments`, status: 500, times: 3 });
    const sent = await h.comment(number, '/proofgate status');
    await jobEvent(h, 0, (e) => e.kind === 'failed' && e.job.key === `comment:${sent.deliveryId}`, 'the reply did not fail');
    await jobEvent(h, 0, (e) => e.kind === 'completed' && e.job.key === `comment:${sent.deliveryId}`, 'the job was not retried');
    expect(botComments(h, number)).toHaveLength(1);
  });
});

describe('attack: what the logs carry', () => {
  it('no log line carries comment text, an installation token, the App JWT, the webhook secret or a token pasted in a comment', async () => {
    const { logger, lines } = bufferLogger('trace');
    const h = (harness = await startServiceHarness({ logger }));
    const canary = `canary-${Date.now().toString(36)}`;
    const pasted = `ghp_${'Ab1'.repeat(12)}`;
    const { number, runId } = h.openPullRequest();
    await h.comment(number, `/proofgate automerge\n\n${canary} please merge, my token is ${pasted}`);
    await h.comment(number, `/proofgate stop ${canary}`, 'stranger');
    h.server.model.setCollaborator('reader', 'read');
    await h.comment(number, `/proofgate automerge ${canary}\n${canary}`, 'reader');
    await h.comment(number, `> /proofgate stop ${canary}\n\n${canary}`, 'casey');
    await h.completeCheck(number, runId);
    await until(() => h.server.model.pull(number).merged, 'not merged');
    await quiet(h);
    expect(lines.length).toBeGreaterThan(5);
    const text = lines.join('\n');
    expect(text).not.toContain(canary);
    expect(text).not.toContain(pasted);
    expect(text).not.toMatch(/ghs_[0-9a-f]{8}/);
    expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
    expect(text).not.toContain(WEBHOOK_SECRET);
    expect(text).not.toMatch(/BEGIN [A-Z ]*PRIVATE KEY/);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it('a token pasted on the line of an unknown or invalid command is redacted in the log', async () => {
    const { logger, lines } = bufferLogger('trace');
    const h = (harness = await startServiceHarness({ logger }));
    const pasted = `ghp_${'Zq9'.repeat(12)}`;
    const { number } = h.openPullRequest();
    const from = h.events.length;
    const sent = [await h.comment(number, `/proofgate ${pasted}`), await h.comment(number, `/proofgate approve ${pasted}`)];
    for (const s of sent) await jobEvent(h, from, (e) => ended(e) && e.job.key === `comment:${s.deliveryId}`, 'a command job did not end');
    expect(lines.filter((l) => l.includes('[redacted:github-token]'))).toHaveLength(2);
    expect(lines.join('\n')).not.toContain(pasted);
  });

  // Was a defect (service.ts onProgress): progress lines are logged whole; a maintainer's unknown command line of 20,000 characters is one 20 kB log line.
  it('the line of an unknown command is logged bounded, as the intake bounds what it logs from a payload', async () => {
    const { logger, lines } = bufferLogger('trace');
    const h = (harness = await startServiceHarness({ logger }));
    const { number } = h.openPullRequest();
    const sent = await h.comment(number, `/proofgate ${'x'.repeat(20_000)}`);
    await jobEvent(h, 0, (e) => ended(e) && e.job.key === `comment:${sent.deliveryId}`, 'the command job did not end');
    expect(lines.some((l) => l.includes('maint: unknown'))).toBe(true);
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThan(2_000);
  });
});
