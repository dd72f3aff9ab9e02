import { afterEach, describe, expect, it } from 'vitest';
import { collectVerdicts } from '../../src/automerge/index.js';
import type { JobResult } from '../../src/automerge/loop/index.js';
import { CONFIG, githubLoop, SELF, type GitHubLoop } from './github-support.js';

let loop: GitHubLoop | null = null;
afterEach(async () => {
  await loop?.cleanup();
  loop = null;
});

async function finished(done: Promise<JobResult> | undefined) {
  if (done === undefined) throw new Error('no job was dispatched');
  const result = await done;
  if (result.kind !== 'ran') throw new Error('job held elsewhere');
  return result.outcome;
}

/** Resolves when the loop reports a progress line starting with `prefix`. */
function progressSeen(l: GitHubLoop, prefix: string): Promise<void> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (l.progress.some((p) => p.text.startsWith(prefix))) {
        clearInterval(timer);
        resolve();
      }
    }, 10);
  });
}

/** main (with the trusted config) and a feature branch in the real repo, mirrored into the model as PR #1. */
function openPullRequest(l: GitHubLoop): { base: string; head: string; runId: number } {
  const base = l.repo.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': CONFIG }, 'initial');
  const head = l.repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  l.syncRemote();
  const { model } = l.server;
  model.setBranch('main', l.mirrorCommit(base));
  l.mirrorCommit(head, base);
  const pr = model.openPullRequest({ author: 'casey', head: 'feature', headSha: head, title: 'Add feature' });
  const run = model.addCheckRun({ sha: head, name: 'ci', status: 'in_progress' });
  expect(pr.number).toBe(1);
  return { base, head, runId: run.id };
}

describe('automerge end to end on the GitHub API test server, driven by signed webhooks', () => {
  it('automerge comment -> exact-head review -> check webhook -> merge at the reviewed sha', async () => {
    const l = (loop = await githubLoop());
    const { head, runId } = openPullRequest(l);
    const before = l.server.requests.length;
    const routed = await l.comment(1, '/proofgate automerge');
    expect(routed.ran.map((c) => c.kind)).toEqual(['automerge']);
    await progressSeen(l, 'wait: checks pending');
    const waitedAt = Date.now();
    await l.completeCheck(1, runId);
    const outcome = await finished(routed.dispatch?.done);
    // Woken by the check_run delivery, not by the 5 s fallback poll.
    expect(Date.now() - waitedAt).toBeLessThan(4_000);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(outcome.head).toBe(head);
    const pr = l.server.model.pull(1);
    expect(pr.merged).toBe(true);
    expect(pr.mergeCommitSha).toBe(outcome.mergeCommit);
    const snapshot = await l.env.forge.snapshot('1');
    const { verdicts } = collectVerdicts(snapshot.comments, { selfLogin: SELF, secret: l.env.secret, changeId: '1' });
    expect(verdicts.map((v) => [v.fields.head, v.fields.verdict])).toEqual([[head, 'CONFIRMED']]);
    const final = snapshot.comments.filter((c) => c.author === SELF && c.body.includes('automerge: merged'));
    expect(final).toHaveLength(1);
    expect(final[0]?.body).toContain(`/commit/${outcome.mergeCommit ?? ''}`);
    const merges = l.server.requests.filter((r) => r.operation === 'pulls/merge');
    expect(merges.map((r) => r.status)).toEqual([200]);
    const used = l.server.requests.slice(before);
    // Figure for the report: API requests for one merged change on the happy path.
    console.info(`github api requests per merged change (happy path): ${used.length} (${[...new Set(used.map((r) => r.operation))].join(', ')})`);
    expect(used.length).toBeLessThan(40);
  });

  it('a head pushed right before the merge gets 409 -> HEAD_MOVED -> a review of the new head, then merges it', async () => {
    let moved = '';
    const l = (loop = await githubLoop({
      onProgress: (line) => {
        if (moved !== '' || !line.text.startsWith('merge:') || loop === null) return;
        // Someone pushes between the merge decision and the merge call.
        const next = loop.repo.commit('feature', { 'late.txt': 'late push\n' }, 'late push');
        loop.syncRemote();
        loop.server.model.pushHead(1, loop.mirrorCommit(next, loop.server.model.headSha(1)));
        loop.server.model.addCheckRun({ sha: next, name: 'ci' });
        moved = next;
      },
    }));
    const { head, runId } = openPullRequest(l);
    await l.completeCheck(1, runId);
    const routed = await l.comment(1, '/proofgate automerge');
    const outcome = await finished(routed.dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(moved).not.toBe('');
    expect(outcome.head).toBe(moved);
    const { state } = await l.env.store.load('1');
    expect(state.mergeFailures.map((f) => [f.head, f.code])).toEqual([[head, 'HEAD_MOVED']]);
    expect(state.reviews.map((r) => r.head)).toEqual([head, moved]);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([409, 200]);
  });

  it('a redelivered comment webhook runs nothing twice', async () => {
    const l = (loop = await githubLoop());
    const { runId } = openPullRequest(l);
    await l.completeCheck(1, runId);
    const first = await l.comment(1, '/proofgate automerge');
    const comment = l.server.model.commentsOf(1).find((c) => c.body === '/proofgate automerge');
    expect(comment).toBeDefined();
    const outcome = await finished(first.dispatch?.done);
    expect(outcome.kind).toBe('merged');
    // The same comment version delivered again (a new delivery id, same comment id and updated_at).
    const again = await l.router.handleComment('1', { id: String(comment?.id), author: 'maint', authorType: 'User', body: '/proofgate automerge', createdAt: comment?.createdAt ?? '', updatedAt: comment?.updatedAt ?? '' });
    expect(again.skipped).toBe('redelivery');
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge')).toHaveLength(1);
  });
});
