/**
 * The rebase repair on GitHub: the workspace is a clone of the git remote (a
 * local bare repository here), the rebased head is published with a real
 * `git push --force-with-lease` to it, and the harness then plays GitHub: the
 * model learns the new head from the bare repository and a signed
 * `pull_request.synchronize` webhook is delivered.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collectVerdicts } from '../../src/automerge/index.js';
import type { JobResult } from '../../src/automerge/loop/index.js';
import { pushWithLease } from '../../src/forge/github/git-push.js';
import { CONFIG, githubLoop, SELF, type GitHubLoop } from './github-support.js';

let loop: GitHubLoop | null = null;
const dirs: string[] = [];
afterEach(async () => {
  await loop?.cleanup();
  loop = null;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function finished(done: Promise<JobResult> | undefined) {
  if (done === undefined) throw new Error('no job was dispatched');
  const result = await done;
  if (result.kind !== 'ran') throw new Error('job held elsewhere');
  return result.outcome;
}

const CHANGELOG = '# Changelog\n\n## Unreleased\n\n';

describe('rebase repair on GitHub: git push with lease, re-review, merge at the pushed sha', () => {
  it('a PR behind its base with a CHANGELOG.md conflict is rebased, pushed with the lease, re-reviewed and merged at exactly that sha', async () => {
    const l = (loop = await githubLoop({ repair: true }));
    const root = l.repo.commit('main', { 'README.md': '# demo\n', 'CHANGELOG.md': CHANGELOG, '.proofgate.yml': CONFIG }, 'initial');
    const head = l.repo.commit('feature', { 'feature.txt': 'a feature\n', 'CHANGELOG.md': `${CHANGELOG}- add the feature\n` }, 'add feature', 'main');
    const base = l.repo.commit('main', { 'CHANGELOG.md': `${CHANGELOG}- something else landed first\n` }, 'other change');
    l.syncRemote();
    const { model } = l.server;
    l.mirrorCommit(root);
    model.setBranch('main', l.mirrorCommit(base, root));
    l.mirrorCommit(head, root);
    model.openPullRequest({ author: 'casey', head: 'feature', headSha: head, title: 'Add feature' });
    model.setMergeable(1, 'CONFLICTING');
    model.addCheckRun({ sha: head, name: 'ci' });
    const pushed = l.followPushes(1, 'feature');

    const outcome = await finished((await l.comment(1, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, `${outcome.reason}\n${l.progress.map((p) => p.text).join('\n')}`).toBe('merged');
    expect(pushed).toHaveLength(1);
    const newHead = pushed[0] ?? '';
    expect(outcome.head).toBe(newHead);
    // The pushed head is a rebase of the change onto the base, with both CHANGELOG entries.
    const git = (args: string[]) => execFileSync('git', ['-C', l.remote, ...args], { encoding: 'utf8' }).trim();
    expect(git(['rev-parse', `${newHead}^`])).toBe(base);
    const changelog = git(['show', `${newHead}:CHANGELOG.md`]);
    expect(changelog).toContain('- add the feature');
    expect(changelog).toContain('- something else landed first');
    // Published by git (the REST ref API was never asked to move the branch), reviewed at the new head, merged at it.
    expect(l.server.requests.some((r) => r.operation.startsWith('git/'))).toBe(false);
    const { state, steps } = await l.env.store.load('1');
    expect(state.repairs.map((r) => [r.repair, r.status, r.head, r.newHead])).toEqual([['rebase', 'pushed', head, newHead]]);
    expect(steps.filter((s) => s.step === 'repair-push').map((s) => [s.oldSha, s.newSha])).toEqual([[head, newHead]]);
    expect(state.reviews.map((r) => [r.head, r.verdict])).toEqual([[newHead, 'CONFIRMED']]);
    const snapshot = await l.env.forge.snapshot('1');
    const { verdicts } = collectVerdicts(snapshot.comments, { selfLogin: SELF, secret: l.env.secret, changeId: '1' });
    expect(verdicts.map((v) => v.fields.head)).toEqual([newHead]);
    const pr = model.pull(1);
    expect(pr.merged).toBe(true);
    expect(pr.mergeCommitSha).toBe(outcome.mergeCommit);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
  });

  it('the push is a compare-and-swap on the remote: a moved branch is HEAD_MOVED and nothing changes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'proofgate-lease-'));
    dirs.push(dir);
    const git = (cwd: string, args: string[]) => execFileSync('git', ['-C', cwd, ...args], { encoding: 'utf8' }).trim();
    const work = join(dir, 'work');
    const remote = join(dir, 'remote.git');
    execFileSync('git', ['init', '-q', '-b', 'main', work]);
    git(work, ['-c', 'user.name=t', '-c', 'user.email=t@example.test', 'commit', '-q', '--allow-empty', '-m', 'one']);
    const one = git(work, ['rev-parse', 'HEAD']);
    git(work, ['-c', 'user.name=t', '-c', 'user.email=t@example.test', 'commit', '-q', '--allow-empty', '-m', 'two']);
    const two = git(work, ['rev-parse', 'HEAD']);
    git(work, ['-c', 'user.name=t', '-c', 'user.email=t@example.test', 'commit', '-q', '--allow-empty', '-m', 'three']);
    const three = git(work, ['rev-parse', 'HEAD']);
    execFileSync('git', ['init', '-q', '--bare', remote]);
    git(work, ['push', '-q', remote, `${two}:refs/heads/feature`]);
    // The branch is at `two`, not the expected `one`: refused, the remote keeps `two`.
    const refused = await pushWithLease({ dir: work, remoteUrl: remote, branch: 'feature', newSha: three, expectedOldSha: one }).catch(
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ code: 'HEAD_MOVED' });
    expect(git(remote, ['rev-parse', 'refs/heads/feature'])).toBe(two);
    // A non-fast-forward move with the right lease goes through (that is what a rebase needs).
    await pushWithLease({ dir: work, remoteUrl: remote, branch: 'feature', newSha: one, expectedOldSha: two });
    expect(git(remote, ['rev-parse', 'refs/heads/feature'])).toBe(one);
    // A retry of that push changes nothing and succeeds.
    await pushWithLease({ dir: work, remoteUrl: remote, branch: 'feature', newSha: one, expectedOldSha: two });
    expect(git(remote, ['rev-parse', 'refs/heads/feature'])).toBe(one);
    // A branch expected absent must not exist.
    await expect(pushWithLease({ dir: work, remoteUrl: remote, branch: 'feature', newSha: three, expectedOldSha: null })).rejects.toMatchObject({
      code: 'HEAD_MOVED',
    });
    await pushWithLease({ dir: work, remoteUrl: remote, branch: 'fresh', newSha: three, expectedOldSha: null });
    expect(git(remote, ['rev-parse', 'refs/heads/fresh'])).toBe(three);
  });
});
