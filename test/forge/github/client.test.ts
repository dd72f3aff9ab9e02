import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError, type ErrorCode } from '../../../src/core/index.js';
import { createGitHubClient, createGitHubForge, redactSecrets } from '../../../src/forge/github/index.js';
import { collectingLogger, countRequests, FAST, startHarness, TOKEN, type Harness } from './harness.js';
import { testKeyPair } from '../../support/keys.js';

const code = (want: ErrorCode) => (e: unknown) => isProofgateError(e, want);

describe('GitHub client: auth, retry, throttling, base URL', () => {
  let h: Harness;
  afterEach(async () => h.close());

  it('turns a bad token into FORGE_AUTH without echoing the token', async () => {
    h = await startHarness({ forge: { auth: { kind: 'token', token: 'ghp_wrongwrongwrongwrong1234' } } });
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    const error = await h.forge.createComment(String(pr.number), 'hi').catch((e: unknown) => e);
    expect(isProofgateError(error, 'FORGE_AUTH')).toBe(true);
    expect(String((error as Error).message)).toContain('401');
    expect(JSON.stringify({ message: (error as Error).message, details: (error as { details?: unknown }).details })).not.toContain('ghp_wrong');
    await expect(h.forge.snapshot(String(pr.number))).rejects.toSatisfy(code('FORGE_AUTH'));
    expect(h.logLines.join('\n')).not.toContain('ghp_wrong');
  });

  it('authenticates as a GitHub App installation and acts as its bot', async () => {
    const { privateKey, publicKey } = testKeyPair();
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    h = await startHarness({ forge: { auth: { kind: 'app', appId: 4242, privateKey: pem, installationId: 77 }, selfLogin: 'proofgate[bot]' } });
    h.server.registerApp({ appId: 4242, slug: 'proofgate', publicKey, installationId: 77 });
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    const comment = await h.forge.createComment(String(pr.number), 'hello from the app');
    expect(comment).toMatchObject({ author: 'proofgate[bot]', authorType: 'Bot' });
    const snap = await h.forge.snapshot(String(pr.number));
    // GraphQL spells the bot without [bot]; the adapter normalises it so it matches selfLogin.
    expect(snap.comments[0]).toMatchObject({ author: h.forge.selfLogin, authorType: 'Bot' });
    // One installation token, reused.
    expect(countRequests(h.server, 'apps/create-installation-access-token')).toBe(1);
    expect(h.logLines.join('\n')).not.toContain('PRIVATE KEY');
  });

  it('refuses an App whose key GitHub does not know (FORGE_AUTH)', async () => {
    const { privateKey } = testKeyPair();
    const { publicKey: otherPublic } = testKeyPair(1);
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    h = await startHarness({ forge: { auth: { kind: 'app', appId: 5, privateKey: pem, installationId: 1 }, selfLogin: 'x[bot]' } });
    h.server.registerApp({ appId: 5, slug: 'x', publicKey: otherPublic, installationId: 1 });
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    const error = await h.forge.snapshot(String(pr.number)).catch((e: unknown) => e);
    expect(isProofgateError(error, 'FORGE_AUTH')).toBe(true);
    expect(String((error as Error).message)).not.toContain('PRIVATE KEY');
  });

  it('retries a transient 5xx on reads, but never a comment create', async () => {
    h = await startHarness();
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    h.server.failNext({ method: 'POST', pathPrefix: '/graphql', status: 502, times: 2 });
    const snap = await h.forge.snapshot(String(pr.number));
    expect(snap.number).toBe(pr.number);
    expect(countRequests(h.server, 'graphql')).toBe(3);

    h.server.failNext({ method: 'POST', pathPrefix: `/repos/octo-org/demo/issues/${pr.number}/comments`, status: 502 });
    await expect(h.forge.createComment(String(pr.number), 'once')).rejects.toSatisfy(code('FORGE_API'));
    expect(countRequests(h.server, 'issues/create-comment')).toBe(1);
  });

  it('waits out a primary rate limit and retries', async () => {
    h = await startHarness();
    h.server.model.setCollaborator('ann', 'write');
    // The limit resets in 100 s; one second of GitHub's lasts 1 ms here (FAST), so the wait is about 100 ms.
    const reset = String(Math.floor(Date.now() / 1000) + 100);
    h.server.failNext({
      pathPrefix: '/repos/octo-org/demo/collaborators/',
      status: 403,
      headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset },
      body: { message: 'API rate limit exceeded for installation ID 1.', documentation_url: 'https://docs.github.com/rest' },
    });
    expect(await h.forge.permission('ann')).toBe('write');
    expect(countRequests(h.server, 'repos/get-collaborator-permission-level')).toBe(2);
    // The wait came from the reset header (seconds until the reset, plus one), and the client chose to retry.
    const limits = h.logLines
      .map((l) => JSON.parse(l) as { msg?: string; retryAfter?: number; retryCount?: number; again?: boolean })
      .filter((l) => l.msg === 'GitHub primary rate limit');
    expect(limits.map((l) => [l.retryCount, l.again])).toEqual([[0, true]]);
    expect(limits[0]?.retryAfter).toBeGreaterThan(1);
    expect(limits[0]?.retryAfter).toBeLessThanOrEqual(101);
  });

  it('talks to a GitHub Enterprise layout (/api/v3 and /api/graphql)', async () => {
    h = await startHarness({ server: { enterprise: true } });
    expect(h.server.baseUrl.endsWith('/api/v3')).toBe(true);
    const pr = h.server.model.openPullRequest({ author: 'ann' });
    await h.forge.addLabels(String(pr.number), ['ghe']);
    expect((await h.forge.snapshot(String(pr.number))).labels).toEqual(['ghe']);
    expect(h.server.requests.map((r) => r.path)).toContain('/api/graphql');
  });

  it('accepts a ready-made Octokit client', async () => {
    h = await startHarness();
    const octokit = createGitHubClient({ auth: { kind: 'token', token: TOKEN }, baseUrl: h.server.baseUrl, logger: collectingLogger([]), ...FAST });
    const forge = createGitHubForge({ octokit, owner: 'octo-org', repo: 'demo', selfLogin: 'proofgate-bot' });
    h.server.model.setCollaborator('ann', 'triage');
    expect(await forge.permission('ann')).toBe('triage');
  });

  it('refuses empty credentials and bad settings up front', () => {
    expect(() => createGitHubClient({ auth: { kind: 'token', token: ' ' } })).toThrow(/token is empty/);
    expect(() => createGitHubForge({ auth: { kind: 'token', token: 't' }, owner: 'o', repo: 'r', selfLogin: 's', pageSize: 500 })).toThrow(/pageSize/);
    h = { close: async () => undefined } as Harness;
  });
});

describe('redactSecrets', () => {
  it.each([
    ['Authorization: token ghp_abcdefghijklmnop1234', 'ghp_abcdefghijklmnop1234'],
    ['{"authorization":"bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOjF9.c2lnbmF0dXJl"}', 'eyJhbGciOiJSUzI1NiJ9'],
    ['token ghs_0123456789abcdef0123', 'ghs_0123456789abcdef0123'],
    ['-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----', 'MIIEabc'],
    ['https://x/y?access_token=s3cr3tvalue&a=1', 's3cr3tvalue'],
    ['pat github_pat_11ABCDEFG0123456789', 'github_pat_11ABCDEFG0123456789'],
  ])('removes credentials from %j', (text, secret) => {
    const out = redactSecrets(text);
    expect(out).not.toContain(secret);
    expect(out).toContain('[redacted:');
  });

  it('keeps ordinary text', () => {
    expect(redactSecrets('Pull Request is not mergeable')).toBe('Pull Request is not mergeable');
  });
});
