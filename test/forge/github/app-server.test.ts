/**
 * The GitHub API test server's App operations (GET /app, GET /app/installations,
 * GET /installation/repositories) and its issue list (GET /repos/{owner}/{repo}/issues),
 * over real HTTP with Octokit: answers, auth refusals, filters and paging, and
 * every answer checked against GitHub's published schema.
 */
import { createSign, type KeyObject } from 'node:crypto';
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_APP_EVENTS, DEFAULT_APP_PERMISSIONS, startGitHubServer, type GitHubTestServer } from '../../support/github-server/index.js';
import { testKeyPair } from '../../support/keys.js';

const APP_ID = 4321;
const INSTALLATION_ID = 55;
const keys = testKeyPair();
const PEM = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

interface Issue {
  number: number;
  state: string;
  title: string;
  labels: { name: string }[];
  comments: number;
  created_at: string;
  updated_at: string;
  closed_at: string | null;
  pull_request: { url: string; merged_at: string | null };
}

/** The `status` and `message` of a refused request. */
async function refusal(p: Promise<unknown>): Promise<{ status: number; message: string }> {
  const error = (await p.then(
    () => null,
    (e: unknown) => e,
  )) as { status?: number; response?: { data?: { message?: string } } } | null;
  if (error === null) throw new Error('expected the request to be refused');
  return { status: error.status ?? 0, message: error.response?.data?.message ?? '' };
}

/** A JWT as an App would sign it, with the claims given. */
function jwt(claims: Record<string, unknown>, key: KeyObject = keys.privateKey): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const unsigned = `${part({ alg: 'RS256', typ: 'JWT' })}.${part(claims)}`;
  return `${unsigned}.${createSign('RSA-SHA256').update(unsigned).sign(key).toString('base64url')}`;
}

function nextLink(link: string | undefined): string | null {
  return /<([^>]+)>; rel="next"/.exec(link ?? '')?.[1] ?? null;
}

function pageOf(link: string | undefined, rel: string): number | null {
  const url = new RegExp(`<([^>]+)>; rel="${rel}"`).exec(link ?? '')?.[1];
  return url === undefined ? null : Number(new URL(url).searchParams.get('page'));
}

describe('GitHub API test server: App operations and the issue list', () => {
  let server: GitHubTestServer;
  let asApp: Octokit;
  let asInstallation: Octokit;
  let asUser: Octokit;

  beforeEach(async () => {
    server = await startGitHubServer();
    server.registerApp({
      appId: APP_ID,
      slug: 'proofgate-test',
      name: 'Proofgate Test',
      publicKey: keys.publicKey,
      installationId: INSTALLATION_ID,
      permissions: { contents: 'write', pull_requests: 'write', metadata: 'read' },
      events: ['pull_request', 'issue_comment'],
    });
    asApp = new Octokit({ baseUrl: server.baseUrl, authStrategy: createAppAuth, auth: { appId: APP_ID, privateKey: PEM } });
    asInstallation = new Octokit({
      baseUrl: server.baseUrl,
      authStrategy: createAppAuth,
      auth: { appId: APP_ID, privateKey: PEM, installationId: INSTALLATION_ID },
    });
    asUser = new Octokit({ baseUrl: server.baseUrl, auth: 'test-token' });
  });

  afterEach(async () => {
    await server.close();
    // Every answer, refusals included, fits GitHub's published schema for its operation and status.
    expect(server.schemaChecks.filter((c) => c.violations.length > 0)).toEqual([]);
    expect(server.schemaChecks.every((c) => c.checkedBy !== null)).toBe(true);
  });

  const seen = () => new Set(server.schemaChecks.map((c) => `${c.operationId} ${c.status}`));

  describe('GET /app', () => {
    it('answers the App its JWT names, as registered', async () => {
      const { data } = await asApp.request('GET /app');
      expect(data).toMatchObject({
        id: APP_ID,
        slug: 'proofgate-test',
        name: 'Proofgate Test',
        owner: { login: 'octo-org', type: 'Organization' },
        permissions: { contents: 'write', pull_requests: 'write', metadata: 'read' },
        events: ['pull_request', 'issue_comment'],
        installations_count: 1,
      });
      expect(typeof data?.node_id).toBe('string');
      expect(seen()).toEqual(new Set(['apps/get-authenticated 200']));
    });

    it('tells Apps apart, and defaults what a registration leaves out', async () => {
      const other = testKeyPair(1);
      server.registerApp({ appId: 99, slug: 'second', publicKey: other.publicKey, installationId: 7 });
      const second = new Octokit({
        baseUrl: server.baseUrl,
        authStrategy: createAppAuth,
        auth: { appId: 99, privateKey: other.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() },
      });
      const { data } = await second.request('GET /app');
      expect(data).toMatchObject({
        id: 99,
        slug: 'second',
        name: 'second',
        description: null,
        permissions: DEFAULT_APP_PERMISSIONS,
        events: DEFAULT_APP_EVENTS,
      });
      expect((await asApp.request('GET /app')).data?.id).toBe(APP_ID);
    });

    it('refuses anything but a valid JWT of a registered App (401, as GitHub)', async () => {
      const { token } = (await asInstallation.auth({ type: 'installation' })) as { token: string };
      expect(server.installationOf(token)?.appId).toBe(APP_ID);
      const withToken = (t: string) => new Octokit({ baseUrl: server.baseUrl, auth: t });
      const undecodable = { status: 401, message: 'A JSON web token could not be decoded' };
      // An installation token, a user token, no credential at all.
      expect(await refusal(withToken(token).request('GET /app'))).toEqual(undecodable);
      expect(await refusal(asUser.request('GET /app'))).toEqual(undecodable);
      expect(await refusal(new Octokit({ baseUrl: server.baseUrl }).request('GET /app'))).toEqual(undecodable);

      const now = Math.floor(Date.now() / 1000);
      const bearer = (claims: Record<string, unknown>, key?: KeyObject) => new Octokit({ baseUrl: server.baseUrl, auth: jwt(claims, key) }).request('GET /app');
      // Signed by a key the App does not have; naming an App nobody registered.
      expect(await refusal(bearer({ iss: APP_ID, iat: now - 30, exp: now + 500 }, testKeyPair(2).privateKey))).toEqual(undecodable);
      expect(await refusal(bearer({ iss: 1, iat: now - 30, exp: now + 500 }))).toEqual(undecodable);
      // Expired, too long-lived, issued in the future: GitHub's own messages (auth-app reads them to fix its clock).
      expect(await refusal(bearer({ iss: APP_ID, iat: now - 700, exp: now - 100 }))).toEqual({
        status: 401,
        message: "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
      });
      expect(await refusal(bearer({ iss: APP_ID, iat: now, exp: now + 3600 }))).toEqual({
        status: 401,
        message: "'Expiration time' claim ('exp') is too far in the future",
      });
      expect(await refusal(bearer({ iss: APP_ID, iat: now + 300, exp: now + 500 }))).toEqual({
        status: 401,
        message: "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
      });
      // The same hand-made JWT, valid, is accepted: the refusals above come from the claims.
      expect((await bearer({ iss: APP_ID, iat: now - 30, exp: now + 500 })).status).toBe(200);
      expect(seen()).toEqual(new Set(['apps/create-installation-access-token 201', 'apps/get-authenticated 401', 'apps/get-authenticated 200']));
    });
  });

  describe('GET /app/installations', () => {
    it("lists the App's installation on the model's owner", async () => {
      const { data } = await asApp.request('GET /app/installations');
      expect(data).toHaveLength(1);
      expect(data[0]).toMatchObject({
        id: INSTALLATION_ID,
        account: { login: 'octo-org', type: 'Organization' },
        app_id: APP_ID,
        app_slug: 'proofgate-test',
        target_type: 'Organization',
        target_id: server.model.user('octo-org').id,
        repository_selection: 'selected',
        permissions: { contents: 'write', pull_requests: 'write', metadata: 'read' },
        events: ['pull_request', 'issue_comment'],
        suspended_at: null,
      });
      expect(data[0]?.access_tokens_url).toBe(`${server.baseUrl}/app/installations/${INSTALLATION_ID}/access_tokens`);
    });

    it('pages (per_page, page, link)', async () => {
      const first = await asApp.request('GET /app/installations', { per_page: 1, page: 1 });
      expect(first.data).toHaveLength(1);
      expect(first.headers.link).toBeUndefined();
      const beyond = await asApp.request('GET /app/installations', { per_page: 1, page: 2 });
      expect(beyond.data).toEqual([]);
      expect(pageOf(beyond.headers.link, 'prev')).toBe(1);
      expect(pageOf(beyond.headers.link, 'first')).toBe(1);
      expect(pageOf(beyond.headers.link, 'next')).toBeNull();
    });

    it('refuses an installation token or a user token (401)', async () => {
      const token = ((await asInstallation.auth({ type: 'installation' })) as { token: string }).token;
      expect(await refusal(new Octokit({ baseUrl: server.baseUrl, auth: token }).request('GET /app/installations'))).toEqual({
        status: 401,
        message: 'A JSON web token could not be decoded',
      });
      expect((await refusal(asUser.request('GET /app/installations'))).status).toBe(401);
      expect(seen()).toEqual(new Set(['apps/create-installation-access-token 201', 'apps/list-installations 401']));
    });
  });

  describe('GET /installation/repositories', () => {
    it("answers the model's repository to an installation token", async () => {
      server.model.openPullRequests(2, { author: 'ann' });
      const { data } = await asInstallation.request('GET /installation/repositories');
      expect(data.total_count).toBe(1);
      expect(data.repository_selection).toBe('selected');
      expect(data.repositories).toHaveLength(1);
      expect(data.repositories[0]).toMatchObject({
        id: server.model.repositoryId,
        name: 'demo',
        full_name: 'octo-org/demo',
        owner: { login: 'octo-org' },
        default_branch: 'main',
        private: false,
        open_issues_count: 2,
        url: `${server.baseUrl}/repos/octo-org/demo`,
      });
      const beyond = await asInstallation.request('GET /installation/repositories', { per_page: 1, page: 2 });
      expect(beyond.data).toMatchObject({ total_count: 1, repositories: [] });
      expect(seen()).toEqual(new Set(['apps/create-installation-access-token 201', 'apps/list-repos-accessible-to-installation 200']));
    });

    it('answers GET /repos/{owner}/{repo} (the default branch the forge asks for) with the full repository shape', async () => {
      const { data } = await asInstallation.request('GET /repos/{owner}/{repo}', { owner: 'octo-org', repo: 'demo' });
      expect(data).toMatchObject({ full_name: 'octo-org/demo', default_branch: 'main', network_count: 0, subscribers_count: 0 });
      expect(seen()).toEqual(new Set(['apps/create-installation-access-token 201', 'repos/get 200']));
    });

    it("refuses the App's JWT and a user token (403), and an unknown token (401)", async () => {
      const message = 'You must authenticate with an installation access token in order to list repositories for an installation.';
      const now = Math.floor(Date.now() / 1000);
      const withJwt = new Octokit({ baseUrl: server.baseUrl, auth: jwt({ iss: APP_ID, iat: now - 30, exp: now + 500 }) });
      expect(await refusal(withJwt.request('GET /installation/repositories'))).toEqual({ status: 403, message });
      expect(await refusal(asUser.request('GET /installation/repositories'))).toEqual({ status: 403, message });
      expect(await refusal(new Octokit({ baseUrl: server.baseUrl, auth: 'ghs_unknown' }).request('GET /installation/repositories'))).toEqual({
        status: 401,
        message: 'Bad credentials',
      });
      expect(seen()).toEqual(new Set(['apps/list-repos-accessible-to-installation 403', 'apps/list-repos-accessible-to-installation 401']));
    });

    it('acts as the bot of the App the token was minted for', async () => {
      const pr = server.model.openPullRequest({ author: 'ann' });
      await asInstallation.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
        owner: 'octo-org',
        repo: 'demo',
        issue_number: pr.number,
        body: 'hi',
      });
      expect(server.model.commentsOf(pr.number)[0]?.author).toBe('proofgate-test[bot]');
    });
  });

  describe('GET /repos/{owner}/{repo}/issues', () => {
    const list = async (query: Record<string, string | number> = {}) => {
      const response = await asInstallation.request('GET /repos/{owner}/{repo}/issues', { owner: 'octo-org', repo: 'demo', ...query });
      return { issues: response.data as unknown as Issue[], link: response.headers.link };
    };
    const numbers = (issues: readonly Issue[]) => issues.map((i) => i.number);

    it('lists pull requests as issues, open and newest first by default', async () => {
      const [a, b, c] = server.model.openPullRequests(3, { author: 'ann' }).map((p) => p.number) as [number, number, number];
      server.model.closePullRequest(b);
      const { issues, link } = await list();
      expect(numbers(issues)).toEqual([c, a]);
      expect(link).toBeUndefined();
      expect(issues[0]).toMatchObject({
        number: c,
        state: 'open',
        title: `Change ${c}`,
        closed_at: null,
        comments: 0,
        pull_request: { url: `${server.baseUrl}/repos/octo-org/demo/pulls/${c}`, merged_at: null },
      });
      expect(seen()).toEqual(new Set(['apps/create-installation-access-token 201', 'issues/list-for-repo 200']));
    });

    it('filters by state: closed and merged ones under closed, everything under all', async () => {
      const [a, b, c] = server.model.openPullRequests(3, { author: 'ann' }).map((p) => p.number) as [number, number, number];
      server.model.closePullRequest(a);
      server.model.squashMerge(b);
      const closed = (await list({ state: 'closed' })).issues;
      expect(numbers(closed)).toEqual([b, a]);
      expect(closed[0]?.pull_request.merged_at).toBe(closed[0]?.closed_at);
      expect(closed[0]?.closed_at).not.toBeNull();
      expect(closed[1]?.pull_request.merged_at).toBeNull();
      expect(numbers((await list({ state: 'all' })).issues)).toEqual([c, b, a]);
      expect(numbers((await list({ state: 'open' })).issues)).toEqual([c]);
      server.model.reopenPullRequest(a);
      expect(numbers((await list()).issues)).toEqual([c, a]);
    });

    it('filters by labels: every listed label, without case', async () => {
      const [a, b, c] = server.model.openPullRequests(3, { author: 'ann' }).map((p) => p.number) as [number, number, number];
      for (const [n, labels] of [
        [a, ['automerge', 'bug']],
        [b, ['automerge']],
        [c, ['bug']],
      ] as const) {
        await asInstallation.request('POST /repos/{owner}/{repo}/issues/{issue_number}/labels', {
          owner: 'octo-org',
          repo: 'demo',
          issue_number: n,
          labels: [...labels],
        });
      }
      expect(numbers((await list({ labels: 'automerge' })).issues)).toEqual([b, a]);
      expect(numbers((await list({ labels: 'AutoMerge,bug' })).issues)).toEqual([a]);
      expect(numbers((await list({ labels: 'bug, automerge,' })).issues)).toEqual([a]);
      expect(numbers((await list({ labels: 'nothing' })).issues)).toEqual([]);
      expect((await list({ labels: 'automerge' })).issues[0]?.labels.map((l) => l.name)).toEqual(['automerge']);
    });

    it('filters by since: comments, edits, labels, pushes and closing update a pull request', async () => {
      const { model } = server;
      const prs = model.openPullRequests(7, { author: 'ann' }).map((p) => p.number);
      const [p1, p2, p3, p4, p5, p6, p7] = prs as [number, number, number, number, number, number, number];
      const early = model.addComment(p1, 'ann', 'early');
      const opened = model.latest();
      const quiet = (await list({ since: opened, state: 'all' })).issues;
      // At or after: the pull request updated at exactly `since` is listed.
      expect(numbers(quiet)).toEqual([p1]);

      const after = new Date(Date.parse(opened) + 1000).toISOString();
      expect((await list({ since: after })).issues).toEqual([]);
      const owner = 'octo-org';
      const repo = 'demo';
      await asInstallation.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner, repo, issue_number: p2, body: 'new' });
      await asInstallation.request('PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', { owner, repo, comment_id: early.id, body: 'edited' });
      await asInstallation.request('POST /repos/{owner}/{repo}/issues/{issue_number}/labels', { owner, repo, issue_number: p3, labels: ['x'] });
      await asInstallation.request('DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}', { owner, repo, issue_number: p3, name: 'x' });
      model.pushHead(p4);
      model.closePullRequest(p5);
      const head6 = model.headSha(p6);
      await asInstallation.request('PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge', { owner, repo, pull_number: p6, sha: head6, merge_method: 'squash' });
      const changed = (await list({ since: after, state: 'all', sort: 'updated', direction: 'asc' })).issues;
      expect(numbers(changed)).toEqual([p2, p1, p3, p4, p5, p6]);
      expect(numbers(changed).includes(p7)).toBe(false);
      // Each listed updated_at is at or after since, and they rise in the order the changes happened.
      const times = changed.map((i) => Date.parse(i.updated_at));
      expect(times.every((t) => t >= Date.parse(after))).toBe(true);
      expect([...times].sort((x, y) => x - y)).toEqual(times);
      // A label added twice changes nothing the second time.
      const before = model.pull(p3).updatedAt;
      model.addLabels(p3, ['y']);
      const labelled = model.pull(p3).updatedAt;
      expect(labelled > before).toBe(true);
      model.addLabels(p3, ['Y']);
      expect(model.pull(p3).updatedAt).toBe(labelled);
      // A comment whose updatedAt a test sets by hand still moves its pull request.
      early.updatedAt = model.now();
      expect(model.pullUpdatedAt(p1)).toBe(early.updatedAt);
    });

    it('sorts by created or updated, either direction, and by comments', async () => {
      const [a, b, c] = server.model.openPullRequests(3, { author: 'ann' }).map((p) => p.number) as [number, number, number];
      server.model.addComment(a, 'ann', 'one');
      server.model.addComment(a, 'ann', 'two');
      server.model.addComment(b, 'ann', 'one');
      expect(numbers((await list({ direction: 'asc' })).issues)).toEqual([a, b, c]);
      expect(numbers((await list({ sort: 'updated' })).issues)).toEqual([b, a, c]);
      expect(numbers((await list({ sort: 'updated', direction: 'asc' })).issues)).toEqual([c, a, b]);
      expect(numbers((await list({ sort: 'comments' })).issues)).toEqual([a, b, c]);
      expect((await list({ sort: 'comments' })).issues.map((i) => i.comments)).toEqual([2, 1, 0]);
    });

    it('filters by creator', async () => {
      const a = server.model.openPullRequest({ author: 'ann' }).number;
      server.model.openPullRequest({ author: 'bob' });
      expect(numbers((await list({ creator: 'ann' })).issues)).toEqual([a]);
    });

    it('pages 30 by default, at most 100, with a link header Octokit can follow', async () => {
      server.model.openPullRequests(205, { author: 'ann' });
      const first = await list();
      expect(numbers(first.issues)).toEqual(Array.from({ length: 30 }, (_, i) => 205 - i));
      expect(pageOf(first.link, 'next')).toBe(2);
      expect(pageOf(first.link, 'last')).toBe(7);
      expect(pageOf(first.link, 'prev')).toBeNull();

      const big = await list({ per_page: 500, page: 2 });
      expect(numbers(big.issues)).toEqual(Array.from({ length: 100 }, (_, i) => 105 - i));
      expect(pageOf(big.link, 'prev')).toBe(1);
      expect(pageOf(big.link, 'next')).toBe(3);
      expect(pageOf(big.link, 'last')).toBe(3);
      expect(pageOf(big.link, 'first')).toBe(1);

      // Following the next links, as a paginating client does, walks every pull request once; the filters ride along.
      server.model.closePullRequest(1);
      const walked: number[] = [];
      let url: string | null = `${server.baseUrl}/repos/octo-org/demo/issues?state=open&per_page=100`;
      while (url !== null) {
        const page: { data: unknown; headers: { link?: string } } = await asInstallation.request(`GET ${url}`);
        walked.push(...numbers(page.data as Issue[]));
        url = nextLink(page.headers.link);
      }
      expect(walked).toEqual(Array.from({ length: 204 }, (_, i) => 205 - i));
    });

    it('refuses bad filter values (422) and another repository (404)', async () => {
      server.model.openPullRequest({ author: 'ann' });
      for (const [name, value] of [
        ['state', 'merged'],
        ['sort', 'popularity'],
        ['direction', 'up'],
        ['since', 'yesterday'],
      ] as const) {
        const error = (await asInstallation
          .request('GET /repos/{owner}/{repo}/issues', { owner: 'octo-org', repo: 'demo', [name]: value })
          .catch((e: unknown) => e)) as {
          status: number;
          response: { data: { message: string; errors: unknown[] } };
        };
        expect(error.status).toBe(422);
        expect(error.response.data).toMatchObject({ message: 'Validation Failed', errors: [{ resource: 'Issue', field: name, code: 'invalid', value }] });
      }
      expect((await refusal(asUser.request('GET /repos/{owner}/{repo}/issues', { owner: 'octo-org', repo: 'other' }))).status).toBe(404);
      expect(seen()).toEqual(new Set(['apps/create-installation-access-token 201', 'issues/list-for-repo 422', 'issues/list-for-repo 404']));
    });
  });
});
