import { afterEach, describe, expect, it } from 'vitest';
import type { JobResult } from '../../src/automerge/loop/index.js';
import { CONFIG, githubLoop, type GitHubLoop } from './github-support.js';
import { until, within } from '../support/wait.js';

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

/** Longer than any test: a loop given these waits moves on only when something wakes it. */
const NEVER_MS = 3_600_000;
const WAIT_FOREVER = { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS };

/**
 * main (with the trusted config) and a feature branch in the real repo,
 * mirrored into the model as PR #1 with a running `ci` check
 * (`crossRepository`: its head lives in a fork).
 */
function openPullRequest(l: GitHubLoop, config: string, options: { crossRepository?: boolean } = {}): { base: string; head: string; ci: number } {
  const base = l.repo.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': config }, 'initial');
  const head = l.repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  l.syncRemote();
  const { model } = l.server;
  model.setBranch('main', l.mirrorCommit(base));
  l.mirrorCommit(head, base);
  const pr = model.openPullRequest({ author: 'casey', head: 'feature', headSha: head, title: 'Add feature', ...options });
  expect(pr.number).toBe(1);
  return { base, head, ci: model.addCheckRun({ sha: head, name: 'ci', status: 'in_progress' }).id };
}

describe('branch protection and merge settings, end to end on the GitHub API test server', () => {
  it('a required check that never ran is pending: the loop waits for it, then merges with a merge commit and deletes the head branch', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { model } = l.server;
    model.protectBranch('main', { requiredChecks: ['ci', 'security'] });
    const { base, head, ci } = openPullRequest(l, `${CONFIG}automerge:\n  mergeMethod: merge\n  deleteHeadBranch: true\n`);
    await l.completeCheck(1, ci);
    const routed = await l.comment(1, '/proofgate automerge');
    // Every check that ran is green; the one branch protection requires has not started.
    await until(
      () => l.progress.some((p) => p.text.startsWith('wait: ') && p.text.includes('required, not reported yet: security')),
      'no wait for the required check',
    );
    expect(model.pull(1).merged).toBe(false);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);

    const security = model.addCheckRun({ sha: head, name: 'security', status: 'in_progress', app: 'Scanner', workflow: null });
    await l.completeCheck(1, security.id);
    const outcome = await within(finished(routed.dispatch?.done), 'the check_run delivery did not wake the loop waiting for the required check');
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(outcome.head).toBe(head);
    const pr = model.pull(1);
    expect(pr.mergeMethod).toBe('merge');
    expect(model.parentsOf(pr.mergeCommitSha ?? '')).toEqual([base, head]);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
    // deleteHeadBranch: the merged head is gone from GitHub, read at the merged sha first, and the ledger says so.
    expect(model.branches.has('feature')).toBe(false);
    expect(l.server.requests.filter((r) => r.operation === 'git/delete-ref').map((r) => r.status)).toEqual([204]);
    const steps = (await l.env.store.load('1')).steps.filter((s) => s.step.startsWith('head-branch-'));
    expect(steps).toEqual([expect.objectContaining({ step: 'head-branch-deleted', branch: 'feature', sha: head })]);
    expect(l.server.schemaChecks.filter((c) => c.violations.length > 0)).toEqual([]);
  });

  it("a fork's head branch is kept after the merge, and nothing is asked about it", async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { model } = l.server;
    const { head, ci } = openPullRequest(l, `${CONFIG}automerge:\n  deleteHeadBranch: true\n`, { crossRepository: true });
    await l.completeCheck(1, ci);
    const routed = await l.comment(1, '/proofgate automerge');
    const outcome = await within(finished(routed.dispatch?.done), 'the automerge job did not finish');
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(model.pull(1)).toMatchObject({ merged: true, mergeMethod: 'squash' });
    expect(model.branches.get('feature')).toBe(head);
    const steps = (await l.env.store.load('1')).steps.filter((s) => s.step.startsWith('head-branch-'));
    expect(steps).toEqual([expect.objectContaining({ step: 'head-branch-kept', branch: 'feature', code: 'fork' })]);
    expect(l.server.requests.filter((r) => r.operation === 'git/delete-ref' || r.operation === 'git/get-ref' || r.operation === 'pulls/list')).toEqual([]);
    expect(l.server.schemaChecks.filter((c) => c.violations.length > 0)).toEqual([]);
  });
});
