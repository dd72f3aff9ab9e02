/**
 * The write API of `proofgate serve --repo` over real HTTP on loopback:
 * every write is made as the token's identity, permissions are the lower of
 * the token's and the trusted config's, refused writes change nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalForge } from '../../src/forge/local/index.js';
import { identityCeiling } from '../../src/service/api-write.js';
import { automergeActive } from '../../src/automerge/ledger.js';
import { openLocalAutomerge } from '../../src/automerge/loop/index.js';
import { openIdentityStore } from '../../src/service/identities.js';
import { MAINTAINER } from '../automerge/loop/local-support.js';
import { call, served, type Cleanups } from './write-support.js';

const cleanups: Cleanups = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function comments(repoDir: string, data: string): Promise<readonly { author: string; authorType: string; body: string }[]> {
  const opened = await openLocalForge({ repoDir, dataDir: data });
  try {
    return (await opened.forge.store.requireChange('1')).comments;
  } finally {
    await opened.close();
  }
}

describe('write API', () => {
  it('opens a change and comments as the token identity, whatever the body says', async () => {
    const { service, tokens, repo, data } = await served(cleanups);
    const opened = await call(service.url, '/api/changes', { token: tokens.alice, json: { head: 'alice/feature', title: 'the feature', author: 'proofgate' } });
    expect(opened.status).toBe(201);
    const change = opened.json.change as { id: string; author: { login: string }; base: { ref: string }; title: string };
    expect(change).toMatchObject({ id: '1', author: { login: 'alice' }, base: { ref: 'main' }, title: 'the feature' });

    const posted = await call(service.url, '/api/changes/1/comments', { token: tokens.bob, json: { body: 'looks fine', author: 'proofgate' } });
    expect(posted.status).toBe(201);
    expect(posted.json).toMatchObject({ comment: { author: 'bob', authorType: 'User', body: 'looks fine' }, refused: [], following: false });
    expect(await comments(repo.dir, data)).toEqual([expect.objectContaining({ author: 'bob', body: 'looks fine' })]);

    // The full snapshot a client prints, with the author's permission.
    const shown = await call(service.url, '/api/change-records/1');
    expect(shown.status).toBe(200);
    expect(shown.json.change).toMatchObject({ author: { login: 'alice', permission: 'write' }, comments: [{ author: 'bob' }] });
    const listed = await call(service.url, '/api/change-records');
    expect(listed.json.changes).toEqual([expect.objectContaining({ id: '1', author: 'alice', state: 'open' })]);
  });

  it('refuses writes without a token, with a read token, without JSON, and changes nothing', async () => {
    const { service, tokens, repo, data } = await served(cleanups, { openChange: true });
    const path = '/api/changes/1/comments';
    const none = await call(service.url, path, { json: { body: 'x' } });
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toContain('Bearer');
    const read = await call(service.url, path, { token: tokens.carol, json: { body: 'x' } });
    expect(read.status).toBe(403);
    expect(read.json.code).toBe('READ_ONLY');
    const plain = await call(service.url, path, { token: tokens.alice, body: '{"body":"x"}', headers: { 'content-type': 'text/plain' } });
    expect(plain.status).toBe(415);
    const malformed = await call(service.url, path, { token: tokens.alice, body: '{"body":', headers: { 'content-type': 'application/json' } });
    expect(malformed.status).toBe(400);
    const empty = await call(service.url, path, { token: tokens.alice, json: { body: '' } });
    expect(empty.status).toBe(400);
    expect(empty.json.code).toBe('INVALID_INPUT');
    const missing = await call(service.url, '/api/changes/9/comments', { token: tokens.alice, json: { body: 'x' } });
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe('NOT_FOUND');
    const big = await call(service.url, path, { token: tokens.alice, json: { body: 'x'.repeat(100_000) } });
    expect(big.status).toBe(413);
    const protectedHead = await call(service.url, '/api/changes', { token: tokens.alice, json: { head: 'main', base: 'main' } });
    expect(protectedHead.status).toBe(400);
    const otherMethod = await call(service.url, '/api/changes/1', { method: 'POST', token: tokens.alice, json: {} });
    expect(otherMethod.status).toBe(405);
    for (const reply of [none, read, plain, malformed, empty, missing, big, protectedHead, otherMethod]) {
      expect(reply.text.split('\n').filter((line) => line !== '')).toHaveLength(1);
      for (const token of Object.values(tokens)) expect(reply.text).not.toContain(token);
    }
    expect(await comments(repo.dir, data)).toEqual([]);
  });

  it('a triage token of a login the config gives write cannot start automerge by a comment', async () => {
    const { service, tokens, repo, data } = await served(cleanups, { openChange: true });
    const posted = await call(service.url, '/api/changes/1/comments', { token: tokens.bob, json: { body: '/proofgate automerge' } });
    expect(posted.status).toBe(201);
    expect(posted.json.following).toBe(false);
    const refused = posted.json.refused as { reason: string }[];
    expect(refused).toHaveLength(1);
    expect(refused[0]?.reason).toContain('permission triage');
    // The service's own route of the same comment refuses it too: automerge is not on.
    const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
    const automerge = await openLocalAutomerge({ forge: opened.forge, dataDir: data });
    try {
      expect(await opened.forge.permission('bob')).toBe('write');
      const { state, steps } = await automerge.env.store.load('1');
      expect(automergeActive(state)).toBe(false);
      // Routed once in the service (the API and its tail of the store share the route): one refusal recorded.
      expect(steps.filter((step) => step.step === 'command-refused')).toHaveLength(1);
    } finally {
      await automerge.close();
      await opened.close();
    }
    const stored = await comments(repo.dir, data);
    expect(stored.map((comment) => comment.author)).toEqual(['bob']);
  });

  it('closes only for write or for the change author, and runs checks for triage', async () => {
    const { service, tokens } = await served(cleanups, { openChange: true });
    const byBob = await call(service.url, '/api/changes/1/close', { token: tokens.bob, json: {} });
    expect(byBob.status).toBe(403);
    const checks = await call(service.url, '/api/changes/1/checks', { token: tokens.bob, json: {} });
    expect(checks.status).toBe(200);
    expect(checks.json).toMatchObject({ changeId: '1', results: [{ name: 'test', conclusion: 'success' }] });
    const byAlice = await call(service.url, '/api/changes/1/close', { token: tokens.alice, json: {} });
    expect(byAlice.status).toBe(200);
    expect(byAlice.json.change).toMatchObject({ id: '1', state: 'closed' });
    const again = await call(service.url, '/api/changes/1/checks', { token: tokens.alice, json: {} });
    expect(again.status).toBe(400);
  });

  it("the permission the router reads from the forge is capped by the login's token", async () => {
    const { repo, data } = await served(cleanups, { serve: false });
    const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
    const identities = openIdentityStore(data);
    try {
      expect(await opened.forge.permission('bob')).toBe('write');
      opened.forge.limitPermissions(identityCeiling(identities.store));
      expect(await opened.forge.permission('alice')).toBe('write');
      expect(await opened.forge.permission('BOB')).toBe('triage');
      expect(await opened.forge.permission('carol')).toBe('read');
      // No token: the config's permission (a person at the terminal).
      expect(await opened.forge.permission(MAINTAINER)).toBe('admin');
      expect(await opened.forge.permission('nobody')).toBe('read');
      // Revoked: nothing it posted counts any more.
      await identities.store.revoke('alice');
      expect(await opened.forge.permission('alice')).toBe('none');
    } finally {
      await identities.close();
      await opened.close();
    }
  });
});
