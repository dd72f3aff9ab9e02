import { describe, expect, it } from 'vitest';
import { checkResponse, RepositoryModel, responseSchema, validateSchema, type SchemaObject } from '../../support/github-server/index.js';
import { issueComment } from '../../support/github-server/rest-shapes.js';
import { startHarness } from './harness.js';
import { testKeyPair } from '../../support/keys.js';

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

  it("catches a body that drifts from GitHub's published merge answer", () => {
    expect(checkResponse('pulls/merge', 200, { sha: 'abc', merged: true, message: 'ok' }).violations).toEqual([]);
    expect(checkResponse('pulls/merge', 200, { merged: 'yes', message: 'ok' }).violations.length).toBeGreaterThan(0);
    expect(responseSchema('pulls/merge', 409)?.source).toBe('own');
    expect(responseSchema('pulls/merge', 401)?.source).toBe('stand-in');
  });
});

describe('the OpenAPI 3.0 dialect on ajv', () => {
  // Each row: a schema as GitHub writes it, a value, and where the violations are ([] when the value fits).
  it.each<[string, SchemaObject, unknown, string[]]>([
    ['nullable without a type lets null through', { allOf: [{ type: 'object', required: ['name'] }], nullable: true }, null, []],
    ['nullable without a type still checks a value', { allOf: [{ type: 'object', required: ['name'] }], nullable: true }, {}, ['$']],
    ['nullable without a type still checks the type', { anyOf: [{ type: 'string' }, { type: 'integer' }], nullable: true }, true, ['$']],
    ['a nullable enum lets null through', { type: 'string', enum: ['success', 'failure'], nullable: true }, null, []],
    ['a nullable enum still checks a value', { type: 'string', enum: ['success', 'failure'], nullable: true }, 'neutral', ['$']],
    ['without nullable, null is refused', { type: 'string', enum: ['success'] }, null, ['$', '$']],
    ['a property called nullable is a property', { type: 'object', properties: { nullable: { type: 'string' } } }, { nullable: 1 }, ['$.nullable']],
    ['x- extensions are ignored', { type: 'string', 'x-github-breaking-changes': [{ changeset: 'x' }] }, 'a', []],
    ['examples are annotations', { type: 'integer', example: 'not an integer' }, 3, []],
    ['int64 is an integer (type and format both say so)', { type: 'integer', format: 'int64' }, 1.5, ['$', '$']],
    ['a uri', { type: 'string', format: 'uri' }, 'not a uri', ['$']],
    ['an email', { type: 'string', format: 'email' }, 'nobody', ['$']],
    ['an array item, by index', { type: 'array', items: { type: 'object', properties: { n: { type: 'integer' } } } }, [{ n: 1 }, { n: 'x' }], ['$[1].n']],
  ])('%s', (_what, schema, value, paths) => {
    expect(validateSchema(schema, value).map((v) => v.path)).toEqual(paths);
  });

  it('refuses a validation keyword it does not know instead of skipping it', () => {
    expect(() => validateSchema({ type: 'string', patternz: '^a' }, 'b')).toThrow(/unknown keyword: "patternz"/);
  });

  describe("GitHub's issue comment answer (issues/create-comment 201, with $refs)", () => {
    const model = new RepositoryModel('octo-org', 'demo');
    const pr = model.openPullRequest({ author: 'maya' });
    const comment = model.addComment(pr.number, 'maya', 'hello');
    const valid = issueComment(model, comment, 'https://github.example', 'https://api.github.example');
    const user = valid.user as Record<string, unknown>;

    // Each row is an answer the earlier hand-written validator also refused, and the path of the violation.
    it.each<[string, Record<string, unknown>, string[]]>([
      ['the answer the server sends', valid, []],
      ['a user that is null (simple-user is nullable)', { ...valid, user: null }, []],
      ['a missing required field', Object.fromEntries(Object.entries(valid).filter(([key]) => key !== 'node_id')), ['$']],
      ['an id that is a string', { ...valid, id: String(valid.id) }, ['$.id']],
      ['a date that is not a date-time', { ...valid, created_at: 'yesterday' }, ['$.created_at']],
      ['a url that is not a uri', { ...valid, html_url: 'a comment' }, ['$.html_url']],
      ['an author association outside the enum', { ...valid, author_association: 'BOSS' }, ['$.author_association']],
      ['a user without a login (through $ref)', { ...valid, user: Object.fromEntries(Object.entries(user).filter(([key]) => key !== 'login')) }, ['$.user']],
      ['a user whose site_admin is not a boolean', { ...valid, user: { ...user, site_admin: 'no' } }, ['$.user.site_admin']],
    ])('%s', (_what, body, paths) => {
      expect(checkResponse('issues/create-comment', 201, body).violations.map((v) => v.path)).toEqual(paths);
    });
  });
});

describe('GitHub API test server answers match the published response schemas', () => {
  it('validates every kind of REST answer the adapter meets', async () => {
    const h = await startHarness();
    const { server, forge } = h;
    const { model } = server;
    const { privateKey, publicKey } = testKeyPair();
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
    const app = await startHarness({
      forge: { auth: { kind: 'app', appId: 9, privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), installationId: 3 } },
    });
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
    const octokit = (await import('../../../src/forge/github/index.js')).createGitHubClient({
      auth: { kind: 'token', token: 'test-token' },
      baseUrl: h.server.baseUrl,
      retry: { retries: 0 },
    });
    const error = await octokit.graphql('query Probe { repository(owner: "octo-org", name: "demo") { stargazerCount } }').catch((e: unknown) => e);
    expect(String((error as Error).message)).toContain("Field 'stargazerCount' doesn't exist on type 'Repository'");
    await h.close();
  });
});
