import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError, type ErrorCode } from '../../../src/core/index.js';
import { countRequests, SELF, startHarness, type Harness } from './harness.js';

const code = (want: ErrorCode) => (e: unknown) => isProofgateError(e, want);

describe('GitHub adapter actions over the test server', () => {
  let h: Harness;
  afterEach(async () => h.close());

  it('creates and edits comments as its own identity', async () => {
    h = await startHarness();
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    const created = await h.forge.createComment(String(pr.number), 'status: waiting');
    expect(created).toMatchObject({ author: SELF, authorType: 'User', body: 'status: waiting' });
    const edited = await h.forge.editComment(String(pr.number), created.id, 'status: merged');
    expect(edited).toMatchObject({ id: created.id, body: 'status: merged', createdAt: created.createdAt });
    expect(edited.updatedAt > created.updatedAt).toBe(true);
    expect(h.server.model.commentsOf(pr.number).map((c) => c.body)).toEqual(['status: merged']);
    await expect(h.forge.editComment(String(pr.number), '424242', 'x')).rejects.toSatisfy(code('NOT_FOUND'));
    await expect(h.forge.createComment('77', 'x')).rejects.toSatisfy(code('NOT_FOUND'));
    await expect(h.forge.editComment(String(pr.number), 'abc', 'x')).rejects.toSatisfy(code('INVALID_INPUT'));
  });

  it('adds labels once and removes them; removing an absent label is a no-op', async () => {
    h = await startHarness();
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    const id = String(pr.number);
    await h.forge.addLabels(id, ['automerge', 'proof']);
    await h.forge.addLabels(id, ['automerge']);
    await h.forge.addLabels(id, []);
    expect(pr.labels).toEqual(['automerge', 'proof']);
    await h.forge.removeLabel(id, 'proof');
    await h.forge.removeLabel(id, 'proof');
    expect(pr.labels).toEqual(['automerge']);
    await expect(h.forge.addLabels('99', ['x'])).rejects.toSatisfy(code('NOT_FOUND'));
    await expect(h.forge.removeLabel('99', 'x')).rejects.toSatisfy(code('NOT_FOUND'));
  });

  it('merges with sha and squash, and refuses a moved head (409) without changing anything', async () => {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'ann' });
    const reviewed = model.headSha(pr.number);
    const base = model.baseSha(pr.number);
    const moved = model.pushHead(pr.number);
    await expect(h.forge.merge(String(pr.number), { expectedHeadSha: reviewed, title: 't', message: 'm' })).rejects.toSatisfy(code('HEAD_MOVED'));
    expect([pr.state, pr.merged, model.baseSha(pr.number)]).toEqual(['open', false, base]);
    const result = await h.forge.merge(String(pr.number), { expectedHeadSha: moved, title: 't', message: 'm' });
    expect(result.merged).toBe(true);
    expect(model.baseSha(pr.number)).toBe(result.sha);
    expect(model.isAncestor(base, result.sha)).toBe(true);
  });

  it.each([
    ['conflicting', (m: Harness['server']['model'], n: number) => m.setMergeable(n, 'CONFLICTING')],
    ['blocked by required checks', (m: Harness['server']['model'], n: number) => m.setMergeable(n, 'MERGEABLE', 'BLOCKED')],
    ['behind its base', (m: Harness['server']['model'], n: number) => m.setMergeable(n, 'MERGEABLE', 'BEHIND')],
    ['a draft', (m: Harness['server']['model'], n: number) => void (m.pull(n).draft = true)],
    ['closed', (m: Harness['server']['model'], n: number) => void (m.pull(n).state = 'closed')],
  ])('refuses to merge a pull request that is %s (405 -> NOT_MERGEABLE), nothing changes', async (_name, arrange) => {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'ann' });
    arrange(model, pr.number);
    const base = model.baseSha(pr.number);
    const state = pr.state;
    await expect(h.forge.merge(String(pr.number), { expectedHeadSha: model.headSha(pr.number), title: 't', message: '' })).rejects.toSatisfy(
      code('NOT_MERGEABLE'),
    );
    expect([pr.state, pr.merged, model.baseSha(pr.number)]).toEqual([state, false, base]);
    // A refusal is an answer, not a transport failure: it is not retried.
    expect(countRequests(h.server, 'pulls/merge')).toBe(1);
  });

  it('requires a full expected head sha to merge', async () => {
    h = await startHarness();
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    await expect(h.forge.merge(String(pr.number), { expectedHeadSha: 'abc', title: 't', message: '' })).rejects.toSatisfy(code('INVALID_INPUT'));
    expect(h.server.requests).toHaveLength(0);
  });

  it('pushes a branch by compare-and-swap', async () => {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'ann' });
    const old = model.headSha(pr.number);
    const next = model.commit({ parent: old, files: { 'fix.txt': 'fixed\n' } });
    await h.forge.pushBranch({ branch: pr.headRef, newSha: next, expectedOldSha: old });
    expect(model.headSha(pr.number)).toBe(next);
    // The same push again (a retried job) finds the branch already there: no second effect.
    await h.forge.pushBranch({ branch: pr.headRef, newSha: next, expectedOldSha: old });
    expect(countRequests(h.server, 'git/update-ref')).toBe(1);

    const stale = model.commit({ parent: old });
    await expect(h.forge.pushBranch({ branch: pr.headRef, newSha: stale, expectedOldSha: old })).rejects.toSatisfy(code('HEAD_MOVED'));
    expect(countRequests(h.server, 'git/update-ref')).toBe(1);
    // Expected sha right but not a fast-forward: GitHub's 422 is HEAD_MOVED too.
    await expect(h.forge.pushBranch({ branch: pr.headRef, newSha: stale, expectedOldSha: next })).rejects.toSatisfy(code('HEAD_MOVED'));
    expect(model.headSha(pr.number)).toBe(next);

    await h.forge.pushBranch({ branch: 'refs/heads/fresh', newSha: stale, expectedOldSha: null });
    expect(model.branches.get('fresh')).toBe(stale);
    await expect(h.forge.pushBranch({ branch: 'fresh', newSha: next, expectedOldSha: null })).rejects.toSatisfy(code('HEAD_MOVED'));
    await expect(h.forge.pushBranch({ branch: 'gone', newSha: next, expectedOldSha: old })).rejects.toSatisfy(code('HEAD_MOVED'));
    await expect(h.forge.pushBranch({ branch: 'a..b', newSha: next, expectedOldSha: old })).rejects.toSatisfy(code('INVALID_INPUT'));
  });

  it('reads files at a ref; a missing file or ref is null', async () => {
    h = await startHarness();
    const { model } = h.server;
    const bytes = new Uint8Array(Array.from({ length: 300 }, (_, i) => (i * 7) % 256));
    const sha = model.commit({ parent: model.resolve('main') as string, files: { '.proofgate.yml': 'checks: []\n', 'bin/data.bin': bytes } });
    model.setBranch('main', sha);
    expect(new TextDecoder().decode((await h.forge.readFile('main', '.proofgate.yml')) as Uint8Array)).toBe('checks: []\n');
    expect(await h.forge.readFile(sha, 'bin/data.bin')).toEqual(bytes);
    expect(await h.forge.readFile('main', 'missing.txt')).toBeNull();
    expect(await h.forge.readFile('no-such-branch', '.proofgate.yml')).toBeNull();
    await expect(h.forge.readFile('main', 'bin')).rejects.toSatisfy(code('INVALID_INPUT'));
    await expect(h.forge.readFile('main', '../etc/passwd')).rejects.toSatisfy(code('INVALID_INPUT'));
  });

  it('looks up permissions by role', async () => {
    h = await startHarness();
    const { model } = h.server;
    for (const role of ['admin', 'maintain', 'write', 'triage', 'read'] as const) model.setCollaborator(`user-${role}`, role);
    model.user('stranger');
    for (const role of ['admin', 'maintain', 'write', 'triage', 'read'] as const) expect(await h.forge.permission(`user-${role}`)).toBe(role);
    expect(await h.forge.permission('stranger')).toBe('none');
    expect(await h.forge.permission('nobody-at-all')).toBe('none');
  });
});
