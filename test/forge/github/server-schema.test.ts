import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkResponse, responseSchema, validateSchema } from '../../support/github-server/index.js';
import { startHarness } from './harness.js';

describe('JSON-schema checker', () => {
  const schema = {
    type: 'object',
    required: ['id', 'user'],
    properties: {
      id: { type: 'integer' },
      at: { type: 'string', format: 'date-time' },
      user: { type: 'object', nullable: true, required: ['login'], properties: { login: { type: 'string' } } },
      kind: { type: 'string', enum: ['a', 'b'] },
      any: { oneOf: [{ type: 'string' }, { type: 'integer' }] },
      list: { type: 'array', items: { type: 'integer' } },
    },
  } as const;

  it.each([
    [{ id: 1, user: null }, 0],
    [{ id: 1, user: { login: 'x' }, at: '2026-01-01T00:00:00Z', kind: 'a', any: 3, list: [1, 2] }, 0],
    [{ user: null }, 1],
    [{ id: 1.5, user: null }, 1],
    [{ id: 1, user: {} }, 1],
    [{ id: 1, user: null, at: 'yesterday' }, 1],
    [{ id: 1, user: null, kind: 'c' }, 1],
    [{ id: 1, user: null, any: true }, 1],
    [{ id: 1, user: null, list: [1, 'x'] }, 1],
    [{ id: null, user: null }, 1],
    [[], 1],
  ])('%j has %i violation(s)', (value, count) => {
    expect(validateSchema(schema, value)).toHaveLength(count);
  });

  it('catches a body that drifts from GitHub\'s published merge answer', () => {
    expect(checkResponse('pulls/merge', 200, { sha: 'abc', merged: true, message: 'ok' }).violations).toEqual([]);
    expect(checkResponse('pulls/merge', 200, { merged: 'yes', message: 'ok' }).violations.length).toBeGreaterThan(0);
    expect(responseSchema('pulls/merge', 409)?.source).toBe('own');
    expect(responseSchema('pulls/merge', 401)?.source).toBe('stand-in');
  });
});

describe('GitHub API test server answers match the published response schemas', () => {
  it('validates every kind of REST answer the adapter meets', async () => {
    const h = await startHarness();
    const { server, forge } = h;
    const { model } = server;
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    server.registerApp({ appId: 9, slug: 'schema-app', publicKey, installationId: 3 });
    model.setCollaborator('maya', 'maintain');
    model.user('noel');
    const pr = model.openPullRequest({ author: 'maya' });
    const id = String(pr.number);
    const ignore = (p: Promise<unknown>) => p.catch(() => undefined);

    const comment = await forge.createComment(id, 'one');
    await forge.editComment(id, comment.id, 'two');
    await ignore(forge.editComment(id, '999999', 'x'));
    await ignore(forge.createComment('404', 'x'));
    await forge.addLabels(id, ['a', 'b']);
    await forge.removeLabel(id, 'a');
    await forge.removeLabel(id, 'a');
    await forge.permission('maya');
    await forge.permission('noel');
    await forge.permission('ghost-of-nobody');
    await forge.readFile('main', 'README.md');
    await forge.readFile('main', 'nope.md');
    model.setBranch('main', model.commit({ parent: model.resolve('main') as string, files: { 'dir/x.txt': 'x' } }));
    await ignore(forge.readFile('main', 'dir'));
    const head = model.headSha(pr.number);
    const next = model.commit({ parent: head });
    await forge.pushBranch({ branch: pr.headRef, newSha: next, expectedOldSha: head });
    await ignore(forge.pushBranch({ branch: pr.headRef, newSha: model.commit({ parent: head }), expectedOldSha: next }));
    await forge.pushBranch({ branch: 'new-branch', newSha: head, expectedOldSha: null });
    await ignore(forge.merge(id, { expectedHeadSha: head, title: 't', message: '' }));
    model.setMergeable(pr.number, 'CONFLICTING');
    await ignore(forge.merge(id, { expectedHeadSha: next, title: 't', message: '' }));
    model.setMergeable(pr.number, 'MERGEABLE');
    await forge.merge(id, { expectedHeadSha: next, title: 't', message: '' });
    await ignore(forge.merge('404', { expectedHeadSha: next, title: 't', message: '' }));
    const app = await startHarness({ forge: { auth: { kind: 'app', appId: 9, privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), installationId: 3 } } });
    app.server.registerApp({ appId: 9, slug: 'schema-app', publicKey, installationId: 3 });
    await app.forge.permission('x');
    const bad = await startHarness({ forge: { auth: { kind: 'token', token: 'nope' } } });
    await ignore(bad.forge.permission('x'));

    const checks = [...server.schemaChecks, ...app.server.schemaChecks, ...bad.server.schemaChecks];
    await Promise.all([h.close(), app.close(), bad.close()]);
    expect(checks.filter((c) => c.violations.length > 0)).toEqual([]);
    const seen = new Set(checks.map((c) => `${c.operationId} ${c.status}`));
    expect([...seen].sort()).toEqual(
      [
        'apps/create-installation-access-token 201',
        'git/create-ref 201',
        'git/get-ref 200',
        'git/get-ref 404',
        'git/update-ref 200',
        'git/update-ref 422',
        'issues/add-labels 200',
        'issues/create-comment 201',
        'issues/create-comment 404',
        'issues/remove-label 200',
        'issues/remove-label 404',
        'issues/update-comment 200',
        'issues/update-comment 404',
        'pulls/merge 200',
        'pulls/merge 404',
        'pulls/merge 405',
        'pulls/merge 409',
        'repos/get-collaborator-permission-level 200',
        'repos/get-collaborator-permission-level 401',
        'repos/get-collaborator-permission-level 404',
        'repos/get-content 200',
        'repos/get-content 404',
      ].sort(),
    );
    // Each answer was checked by a schema from the published description.
    expect(checks.every((c) => c.checkedBy !== null)).toBe(true);
  });

  it('refuses a GraphQL field it does not know, as GitHub does', async () => {
    const h = await startHarness();
    const octokit = (await import('../../../src/forge/github/index.js')).createGitHubClient({ auth: { kind: 'token', token: 'test-token' }, baseUrl: h.server.baseUrl, retry: { retries: 0 } });
    const error = await octokit.graphql('query Probe { repository(owner: "octo-org", name: "demo") { stargazerCount } }').catch((e: unknown) => e);
    expect(String((error as Error).message)).toContain("Field 'stargazerCount' doesn't exist on type 'Repository'");
    await h.close();
  });
});
