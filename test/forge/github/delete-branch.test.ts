import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError, type ErrorCode } from '../../../src/core/index.js';
import { createGitHubClient } from '../../../src/forge/github/index.js';
import { error as githubError } from '../../support/github-server/rest-shapes.js';
import { countRequests, FAST, startHarness, type Harness } from './harness.js';

const code = (want: ErrorCode) => (e: unknown) => isProofgateError(e, want);

/** A plain client of the test server (no retries). */
const client = (h: Harness) => createGitHubClient({ ...FAST, auth: { kind: 'token', token: 'test-token' }, baseUrl: h.server.baseUrl, retry: { retries: 0 } });

/** Operations the server saw, in order (GraphQL as `graphql`). */
const operations = (h: Harness) => h.server.requests.map((r) => (r.operation.startsWith('graphql') ? 'graphql' : r.operation));

/** The trusted branch with a `.proofgate.yml` naming `release` as protected too. */
function protectRelease(h: Harness): void {
  const { model } = h.server;
  const main = model.resolve('main') as string;
  model.setBranch('main', model.commit({ parent: main, files: { '.proofgate.yml': 'protectedBranches: [main, release]\n' } }));
  model.setBranch('release', main);
}

/** A merged pull request whose head branch is still there: its number, head branch and head sha. */
function mergedPullRequest(h: Harness): { number: number; branch: string; head: string } {
  const { model } = h.server;
  const pr = model.openPullRequest({ author: 'ann' });
  const head = model.headSha(pr.number);
  model.merge(pr.number, 'squash');
  return { number: pr.number, branch: pr.headRef, head };
}

describe('GitHub forge: deleteBranch over the test server', () => {
  let h: Harness;
  afterEach(async () => h.close());

  it('deletes a merged head at the expected sha: the protected names, the open pull requests, the ref, then the delete', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const { model } = h.server;
    const merged = mergedPullRequest(h);
    await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head });
    expect(model.branches.has(merged.branch)).toBe(false);
    expect(operations(h)).toEqual(['repos/get-content', 'pulls/list', 'pulls/list', 'git/get-ref', 'git/delete-ref']);
    expect(h.server.requests.find((r) => r.operation === 'git/delete-ref')?.status).toBe(204);
    // The merged pull request reads as before: GitHub keeps showing the head it merged.
    const snapshot = await h.forge.snapshot(String(merged.number));
    expect(snapshot).toMatchObject({ state: 'merged', head: { ref: merged.branch, sha: merged.head } });
    // A second delete (a retried step) finds the branch gone: done, and nothing is deleted.
    await h.forge.deleteBranch?.({ branch: `refs/heads/${merged.branch}`, expectedSha: merged.head.toUpperCase() });
    expect(countRequests(h.server, 'git/delete-ref')).toBe(1);
  });

  it('keeps a branch that moved since (HEAD_MOVED) and sends no delete', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const { model } = h.server;
    const merged = mergedPullRequest(h);
    const pushed = model.commit({ parent: merged.head, files: { 'late.txt': 'pushed after the merge\n' } });
    model.setBranch(merged.branch, pushed);
    const failure = await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head }).catch((e: unknown) => e);
    expect(failure).toSatisfy(code('HEAD_MOVED'));
    expect((failure as Error).message).toContain(pushed);
    expect(model.branches.get(merged.branch)).toBe(pushed);
    expect(countRequests(h.server, 'git/delete-ref')).toBe(0);
  });

  it('refuses the trusted branch (any letter case) before sending anything, and the config’s protected branches before touching a ref', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const { model } = h.server;
    protectRelease(h);
    const main = model.resolve('main') as string;
    for (const branch of ['main', 'MAIN', 'refs/heads/main']) {
      await expect(h.forge.deleteBranch?.({ branch, expectedSha: main })).rejects.toSatisfy(code('PROTECTED_BRANCH'));
    }
    expect(h.server.requests).toEqual([]);
    for (const branch of ['release', 'Release']) {
      await expect(h.forge.deleteBranch?.({ branch, expectedSha: main })).rejects.toSatisfy(code('PROTECTED_BRANCH'));
    }
    // Only the trusted config was read: no pull request listed, no ref read or deleted.
    expect(new Set(operations(h))).toEqual(new Set(['repos/get-content']));
    expect([model.branches.get('main'), model.branches.get('release')]).toEqual([main, model.resolve('release')]);
  });

  it('asks the repository for its default branch when none is given, and refuses it', async () => {
    h = await startHarness();
    const main = h.server.model.resolve('main') as string;
    await expect(h.forge.deleteBranch?.({ branch: 'main', expectedSha: main })).rejects.toSatisfy(code('PROTECTED_BRANCH'));
    expect(operations(h)).toEqual(['repos/get']);
  });

  it('refuses a branch an open pull request uses as its base (GitHub would close it) or as its head, and deletes nothing', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const { model } = h.server;
    const merged = mergedPullRequest(h);
    // Someone opened a pull request onto the merged head.
    const stacked = model.openPullRequest({ author: 'bo', base: merged.branch, head: 'stacked' });
    const asBase = await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head }).catch((e: unknown) => e);
    expect(asBase).toSatisfy(code('INVALID_INPUT'));
    expect((asBase as Error).message).toContain(`#${stacked.number} (base)`);
    expect(stacked.state).toBe('open');
    expect(model.branches.get(merged.branch)).toBe(merged.head);

    model.closePullRequest(stacked.number);
    // Another open pull request from the same branch (onto another base).
    model.setBranch('next', model.resolve('main') as string);
    const again = model.openPullRequest({ author: 'ann', base: 'next', head: merged.branch, headSha: merged.head });
    const asHead = await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head }).catch((e: unknown) => e);
    expect(asHead).toSatisfy(code('INVALID_INPUT'));
    expect((asHead as Error).message).toContain(`#${again.number} (head)`);
    expect(model.branches.get(merged.branch)).toBe(merged.head);
    expect(countRequests(h.server, 'git/get-ref')).toBe(0);
    expect(countRequests(h.server, 'git/delete-ref')).toBe(0);

    // Closed ones and a fork's branch of the same name do not hold it.
    model.closePullRequest(again.number);
    model.openPullRequest({ author: 'fern', head: merged.branch, headSha: merged.head, crossRepository: true });
    model.setBranch(merged.branch, merged.head);
    await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head });
    expect(model.branches.has(merged.branch)).toBe(false);
  });

  it('counts a branch already gone as done, also when it goes between the read and the delete', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const { model } = h.server;
    const sha = model.resolve('main') as string;
    await h.forge.deleteBranch?.({ branch: 'never-there', expectedSha: sha });
    expect(operations(h)).toEqual(['repos/get-content', 'pulls/list', 'pulls/list', 'git/get-ref']);

    const merged = mergedPullRequest(h);
    h.server.failNext({ method: 'DELETE', pathPrefix: '/repos/octo-org/demo/git/refs/', status: 422, body: githubError('Reference does not exist', 422) });
    await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head });
    expect(h.server.requests.filter((r) => r.operation === 'git/delete-ref').map((r) => r.status)).toEqual([422]);
  });

  it('does not retry a failed delete, and says what failed', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const merged = mergedPullRequest(h);
    h.server.failNext({ method: 'DELETE', pathPrefix: '/repos/octo-org/demo/git/refs/', status: 502 });
    const failure = await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head }).catch((e: unknown) => e);
    expect(failure).toSatisfy(code('FORGE_API'));
    expect((failure as Error).message).toContain('delete branch');
    expect(countRequests(h.server, 'git/delete-ref')).toBe(1);
    expect(h.server.model.branches.get(merged.branch)).toBe(merged.head);
  });

  it('refuses a bad branch name or sha before sending anything', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const sha = h.server.model.resolve('main') as string;
    for (const request of [
      { branch: 'feature', expectedSha: 'abc123' },
      { branch: 'feature', expectedSha: '' },
      { branch: '', expectedSha: sha },
      { branch: 'a..b', expectedSha: sha },
      { branch: 'has space', expectedSha: sha },
    ]) {
      await expect(h.forge.deleteBranch?.(request)).rejects.toSatisfy(code('INVALID_INPUT'));
    }
    expect(h.server.requests).toEqual([]);
  });
});

describe('the test server’s git/delete-ref and pulls/list', () => {
  let h: Harness;
  afterEach(async () => h.close());

  it('deletes as GitHub does: 204, 422 for an unknown ref; open pull requests on the branch as base are closed, one with it as head stays', async () => {
    h = await startHarness();
    const { model } = h.server;
    const octokit = client(h);
    const target = { owner: model.owner, repo: model.repo };
    const feature = model.openPullRequest({ author: 'ann', head: 'feature' });
    const featureHead = model.headSha(feature.number);
    const onFeature = model.openPullRequest({ author: 'bo', base: 'feature', head: 'on-feature' });
    const closedOnFeature = model.openPullRequest({ author: 'bo', base: 'feature', head: 'older' });
    model.closePullRequest(closedOnFeature.number);
    const closedAt = closedOnFeature.closedAt;

    const listed = await octokit.request('GET /repos/{owner}/{repo}/pulls', { ...target, base: 'feature' });
    expect(listed.data.map((pr) => pr.number)).toEqual([onFeature.number]);
    expect(listed.data[0]).toMatchObject({ base: { ref: 'feature', sha: featureHead, label: 'octo-org:feature' }, head: { ref: 'on-feature' } });

    const deleted = await octokit.request('DELETE /repos/{owner}/{repo}/git/refs/{ref}', { ...target, ref: 'heads/feature' });
    expect(deleted.status).toBe(204);
    expect(model.branches.has('feature')).toBe(false);
    expect([onFeature.state, onFeature.merged]).toEqual(['closed', false]);
    expect(closedOnFeature.closedAt).toBe(closedAt);
    // The pull request whose head it was stays open, showing its last head.
    expect(feature.state).toBe('open');
    expect(model.headSha(feature.number)).toBe(featureHead);
    const open = await octokit.request('GET /repos/{owner}/{repo}/pulls', { ...target, base: 'feature' });
    expect(open.data).toEqual([]);

    const again = await octokit.request('DELETE /repos/{owner}/{repo}/git/refs/{ref}', { ...target, ref: 'heads/feature' }).catch((e: unknown) => e);
    expect(again).toMatchObject({ status: 422, response: { data: { message: 'Reference does not exist' } } });
    const tag = await octokit.request('DELETE /repos/{owner}/{repo}/git/refs/{ref}', { ...target, ref: 'tags/v1' }).catch((e: unknown) => e);
    expect(tag).toMatchObject({ status: 422 });
    // Creating the branch again shows its new sha.
    model.setBranch('feature', model.resolve('main') as string);
    expect(model.headSha(feature.number)).toBe(model.resolve('main'));
  });

  it('lists pull requests by state, base and head (owner:branch; a fork’s head is its author’s), sorted and paged', async () => {
    h = await startHarness();
    const { model } = h.server;
    const octokit = client(h);
    const target = { owner: model.owner, repo: model.repo };
    const [one, two, three] = model.openPullRequests(3, { author: 'ann' });
    const fork = model.openPullRequest({ author: 'fern', head: 'change-1', headSha: model.headSha(1), crossRepository: true });
    model.addLabels(two?.number ?? 0, ['automerge']);
    model.closePullRequest(three?.number ?? 0);
    const numbers = async (query: Record<string, string | number>) =>
      (await octokit.request('GET /repos/{owner}/{repo}/pulls', { ...target, ...query })).data.map((pr) => pr.number);

    expect(await numbers({})).toEqual([fork.number, two?.number, one?.number]);
    expect(await numbers({ state: 'closed' })).toEqual([three?.number]);
    expect(await numbers({ state: 'all', direction: 'asc' })).toEqual([1, 2, 3, 4]);
    expect(await numbers({ head: 'octo-org:change-1' })).toEqual([one?.number]);
    expect(await numbers({ head: 'FERN:change-1' })).toEqual([fork.number]);
    expect(await numbers({ base: 'main', sort: 'updated', direction: 'desc', per_page: 1, page: 1 })).toEqual([two?.number]);
    const invalid = await octokit.request('GET /repos/{owner}/{repo}/pulls', { ...target, state: 'merged' as 'open' }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 422 });
    const forkListed = (await octokit.request('GET /repos/{owner}/{repo}/pulls', { ...target, head: 'fern:change-1' })).data[0];
    expect(forkListed?.head).toMatchObject({ label: 'fern:change-1', repo: { full_name: 'fern/demo', fork: true } });
  });

  it('every answer fits its published schema, a 204 without a body among them', async () => {
    h = await startHarness({ forge: { trustedBranch: 'main' } });
    const { model } = h.server;
    const merged = mergedPullRequest(h);
    model.addLabels(merged.number, ['merged']);
    model.openPullRequest({ author: 'bo', base: 'main', head: 'other' });
    await h.forge.deleteBranch?.({ branch: 'other', expectedSha: model.resolve('other') as string }).catch(() => undefined);
    await h.forge.deleteBranch?.({ branch: merged.branch, expectedSha: merged.head });
    const octokit = client(h);
    await octokit.request('GET /repos/{owner}/{repo}/pulls', { owner: model.owner, repo: model.repo, state: 'all' });
    await octokit.request('DELETE /repos/{owner}/{repo}/git/refs/{ref}', { owner: model.owner, repo: model.repo, ref: 'heads/gone' }).catch(() => undefined);
    await octokit.request('GET /repos/{owner}/{repo}/pulls', { owner: model.owner, repo: model.repo, sort: 'sideways' as 'created' }).catch(() => undefined);

    const checks = h.server.schemaChecks;
    expect(checks.filter((c) => c.violations.length > 0)).toEqual([]);
    expect(checks.every((c) => c.checkedBy !== null)).toBe(true);
    const seen = new Set(checks.map((c) => `${c.operationId} ${c.status}`));
    for (const answer of ['git/delete-ref 204', 'git/delete-ref 422', 'pulls/list 200', 'pulls/list 422']) expect(seen).toContain(answer);
    // The 204 went out with no body: Octokit saw none.
    expect(h.server.requests.filter((r) => r.operation === 'git/delete-ref').map((r) => r.status)).toEqual([204, 422]);
  });
});
