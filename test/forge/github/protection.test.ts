import type { Octokit } from '@octokit/core';
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../../src/core/index.js';
import { createGitHubForge } from '../../../src/forge/github/index.js';
import { requiredChecks } from '../../../src/forge/github/snapshot-mapping.js';
import type { MergeMethod } from '../../../src/forge/port.js';
import { collectingLogger, countRequests, SELF, startHarness, type Harness } from './harness.js';

const code = (want: string) => (e: unknown) => isProofgateError(e) && e.code === want;

describe('required checks of a branch protection rule (pure)', () => {
  it.each([
    ['no rule', null, []],
    [
      'a rule that does not require checks',
      { requiresStatusChecks: false, requiredStatusCheckContexts: ['build'], requiredStatusChecks: [{ context: 'build' }] },
      [],
    ],
    ['contexts only (older GitHub)', { requiresStatusChecks: true, requiredStatusCheckContexts: ['build', null, 'lint'] }, ['build', 'lint']],
    [
      'both lists, each name once, first spelling kept',
      {
        requiresStatusChecks: true,
        requiredStatusCheckContexts: ['build', 'Lint'],
        requiredStatusChecks: [{ context: 'lint' }, { context: 'security' }, { context: '' }],
      },
      ['build', 'Lint', 'security'],
    ],
    ['null lists', { requiresStatusChecks: true, requiredStatusCheckContexts: null, requiredStatusChecks: null }, []],
  ] as const)('%s', (_name, rule, want) => {
    expect(requiredChecks(rule)).toEqual(want);
  });
});

describe('required checks of the rulesets active on the base (pure)', () => {
  const rules = (...nodes: ({ type: string; parameters?: { requiredStatusChecks?: { context: string }[] | null } | null } | null)[]) => ({
    pageInfo: { hasNextPage: false },
    nodes,
  });
  const required = (...names: string[]) => ({ type: 'REQUIRED_STATUS_CHECKS', parameters: { requiredStatusChecks: names.map((context) => ({ context })) } });
  it.each([
    ['rulesets alone, without a protection rule', null, rules(required('build'), required('security')), ['build', 'security']],
    [
      'added to the protection rule, each name once',
      { requiresStatusChecks: true, requiredStatusCheckContexts: ['build'] },
      rules(required('Build', 'lint')),
      ['build', 'lint'],
    ],
    [
      'a rule that does not require checks still leaves the rulesets',
      { requiresStatusChecks: false, requiredStatusCheckContexts: ['build'] },
      rules(required('lint')),
      ['lint'],
    ],
    ['other rule types and empty nodes require nothing', null, rules({ type: 'DELETION', parameters: null }, null, { type: 'PULL_REQUEST' }), []],
    [
      'only the required-status-checks type counts, even if another carries the field',
      null,
      rules({ type: 'MERGE_QUEUE', parameters: { requiredStatusChecks: [{ context: 'x' }] } }),
      [],
    ],
    ['null connection or nodes', null, { pageInfo: { hasNextPage: false }, nodes: null }, []],
  ] as const)('%s', (_name, rule, given, want) => {
    expect(requiredChecks(rule, given)).toEqual(want);
  });

  it('more rules than one page is FORGE_API, never a required check counted as absent', () => {
    let thrown: unknown;
    try {
      requiredChecks(null, { pageInfo: { hasNextPage: true }, nodes: [] });
    } catch (error) {
      thrown = error;
    }
    expect(code('FORGE_API')(thrown)).toBe(true);
  });
});

describe('branch protection and forks in the GitHub snapshot', () => {
  let h: Harness;
  afterEach(async () => h.close());

  it("reads the base rule's required checks and isCrossRepository within the one GraphQL request", async () => {
    h = await startHarness();
    const { model } = h.server;
    model.protectBranch('main', { requiredChecks: ['build', { context: 'security', app: 'Scanner' }] });
    const pr = model.openPullRequest({ author: 'dana' });
    const fork = model.openPullRequest({ author: 'erin', crossRepository: true });

    const snap = await h.forge.snapshot(String(pr.number));
    expect(snap.requiredChecks).toEqual(['build', 'security']);
    expect(snap.crossRepository).toBe(false);
    expect(countRequests(h.server, 'graphql')).toBe(1);
    expect(h.server.requests).toHaveLength(1);
    expect((await h.forge.snapshot(String(fork.number))).crossRepository).toBe(true);
  });

  it("a ruleset's required checks count with the protection rule's, in the same one request, and the server refuses the merge until they pass", async () => {
    h = await startHarness();
    const { model } = h.server;
    model.protectBranch('main', { requiredChecks: ['build'] });
    model.addRuleset('main', { name: 'org checks', requiredChecks: ['security', 'Build'] });
    model.addRuleset('main', { name: 'no checks' });
    model.addRuleset('release', { requiredChecks: ['elsewhere'] });
    const pr = model.openPullRequest({ author: 'dana' });

    const snap = await h.forge.snapshot(String(pr.number));
    expect(snap.requiredChecks).toEqual(['build', 'security']);
    expect(countRequests(h.server, 'graphql')).toBe(1);
    expect(model.missingRequiredChecks('main', snap.head.sha)).toEqual(['build', 'security', 'Build']);
  });

  it('an unprotected base, a rule without required checks and an unreadable rule all require nothing', async () => {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'dana' });
    expect((await h.forge.snapshot(String(pr.number))).requiredChecks).toEqual([]);
    model.protectBranch('main', { requiredChecks: ['build'], requiresStatusChecks: false });
    expect((await h.forge.snapshot(String(pr.number))).requiredChecks).toEqual([]);
    // GitHub answers null for a rule the App may not read (no administration: read).
    model.protectBranch('main', { requiredChecks: ['build'], readable: false });
    expect((await h.forge.snapshot(String(pr.number))).requiredChecks).toEqual([]);
    model.protectBranch('main', { requiredChecks: ['build'] });
    expect((await h.forge.snapshot(String(pr.number))).requiredChecks).toEqual(['build']);
  });
});

/** A GraphQL client that answers the snapshot query with `answer` (thrown when it is an Error-like object with errors). */
function fakeOctokit(answer: () => unknown): Octokit {
  const pr = {
    number: 7,
    title: 'Fork change',
    url: 'https://github.example/o/r/pull/7',
    state: 'OPEN',
    isDraft: false,
    merged: false,
    mergeCommit: null,
    baseRefName: 'main',
    baseRefOid: 'b'.repeat(40),
    baseRef: { branchProtectionRule: null },
    headRefName: 'feature',
    headRefOid: 'a'.repeat(40),
    isCrossRepository: false,
    author: { __typename: 'Bot', login: 'renovate' },
    mergeable: 'MERGEABLE',
    mergeStateStatus: 'CLEAN',
    reviewDecision: null,
    labels: { nodes: [] },
    commits: { nodes: [{ commit: { oid: 'a'.repeat(40), statusCheckRollup: null } }] },
    comments: { pageInfo: { hasPreviousPage: false, startCursor: null }, nodes: [] },
  };
  return {
    graphql: async () => {
      const result = answer();
      if (result instanceof Error) throw result;
      return result;
    },
    request: async () => {
      throw new Error('no REST call expected');
    },
    auth: async () => ({}),
    __pr: pr,
  } as unknown as Octokit & { __pr: typeof pr };
}

/** The error @octokit/graphql throws for an answer with errors: the message, `errors` and the partial `data`. */
function responseError(errors: unknown[], data: unknown): Error {
  return Object.assign(new Error('Request failed due to following response errors'), { name: 'GraphqlResponseError', errors, data });
}

describe('a branch protection rule GitHub refuses to show (FORBIDDEN beside the data)', () => {
  it('counts as no rule, warns once, and keeps the rest of the snapshot', async () => {
    const lines: string[] = [];
    const octokit = fakeOctokit(() => {
      const pr = (octokit as unknown as { __pr: Record<string, unknown> }).__pr;
      const forbidden = {
        type: 'FORBIDDEN',
        path: ['repository', 'pullRequest', 'baseRef', 'branchProtectionRule'],
        message: 'Resource not accessible by integration',
      };
      return responseError([forbidden], { repository: { pullRequest: { ...pr, baseRef: { branchProtectionRule: null } } } });
    });
    const forge = createGitHubForge({ octokit, owner: 'o', repo: 'r', selfLogin: SELF, logger: collectingLogger(lines) });
    const first = await forge.snapshot('7');
    expect(first).toMatchObject({ number: 7, title: 'Fork change', requiredChecks: [], crossRepository: false, author: { login: 'renovate[bot]' } });
    await forge.snapshot('7');
    const warnings = lines.filter((line) => line.includes('branch protection is not readable'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('Resource not accessible by integration');
  });

  it('any other error in the answer still fails the read', async () => {
    const octokit = fakeOctokit(() => {
      const pr = (octokit as unknown as { __pr: Record<string, unknown> }).__pr;
      const errors = [
        { type: 'FORBIDDEN', path: ['repository', 'pullRequest', 'baseRef', 'branchProtectionRule'], message: 'no' },
        { type: 'FORBIDDEN', path: ['repository', 'pullRequest', 'comments'], message: 'no comments for you' },
      ];
      return responseError(errors, { repository: { pullRequest: pr } });
    });
    const forge = createGitHubForge({ octokit, owner: 'o', repo: 'r', selfLogin: SELF });
    await expect(forge.snapshot('7')).rejects.toSatisfy(code('FORGE_API'));
  });

  it('a head whose repository GitHub does not say is treated as a fork', async () => {
    const octokit = fakeOctokit(() => {
      const pr = (octokit as unknown as { __pr: Record<string, unknown> }).__pr;
      const { isCrossRepository: _dropped, ...rest } = pr;
      return { repository: { pullRequest: rest } };
    });
    const forge = createGitHubForge({ octokit, owner: 'o', repo: 'r', selfLogin: SELF });
    expect((await forge.snapshot('7')).crossRepository).toBe(true);
  });
});

describe('merge methods on the GitHub API test server', () => {
  let h: Harness;
  afterEach(async () => h.close());

  async function merged(method: MergeMethod | undefined) {
    h = await startHarness();
    const { model } = h.server;
    const pr = model.openPullRequest({ author: 'dana' });
    const base = model.baseSha(pr.number);
    const first = model.headSha(pr.number);
    const head = model.pushHead(pr.number);
    const result = await h.forge.merge(String(pr.number), {
      expectedHeadSha: head,
      title: 'Change (#1)',
      message: 'body',
      ...(method === undefined ? {} : { method }),
    });
    expect(model.branches.get('main')).toBe(result.sha);
    return { model, pr: model.pull(pr.number), base, first, head, sha: result.sha };
  }

  it('squash by default: one new commit whose only parent is the base', async () => {
    const m = await merged(undefined);
    expect(m.pr.mergeMethod).toBe('squash');
    expect(m.model.parentsOf(m.sha)).toEqual([m.base]);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
  });

  it('merge: a merge commit whose parents are the base and the reviewed head', async () => {
    const m = await merged('merge');
    expect(m.pr.mergeMethod).toBe('merge');
    expect(m.model.parentsOf(m.sha)).toEqual([m.base, m.head]);
    expect(m.pr.mergeCommitSha).toBe(m.sha);
  });

  it("rebase: the head's commits replayed onto the base, one new commit each", async () => {
    const m = await merged('rebase');
    expect(m.pr.mergeMethod).toBe('rebase');
    const [parent = ''] = m.model.parentsOf(m.sha);
    expect(m.sha).not.toBe(m.head);
    expect(parent).not.toBe(m.first);
    expect(m.model.parentsOf(parent)).toEqual([m.base]);
    expect(m.model.isAncestor(m.head, m.sha)).toBe(false);
  });

  it('a method the repository does not allow is NOT_MERGEABLE and nothing changes', async () => {
    h = await startHarness();
    const { model } = h.server;
    model.mergeMethods.delete('rebase');
    const pr = model.openPullRequest({ author: 'dana' });
    const base = model.baseSha(pr.number);
    const error = await h.forge
      .merge(String(pr.number), { expectedHeadSha: model.headSha(pr.number), title: 't', message: '', method: 'rebase' })
      .catch((e: unknown) => e);
    expect(isProofgateError(error, 'NOT_MERGEABLE')).toBe(true);
    expect(String((error as Error).message)).toContain('Rebase merges are not allowed');
    expect(model.branches.get('main')).toBe(base);
    expect(model.pull(pr.number).merged).toBe(false);
  });

  it('the server refuses a merge while a required check has not passed (405), as GitHub does', async () => {
    h = await startHarness();
    const { model } = h.server;
    model.protectBranch('main', { requiredChecks: ['security'] });
    const pr = model.openPullRequest({ author: 'dana' });
    const head = model.headSha(pr.number);
    const base = model.baseSha(pr.number);
    const request = { expectedHeadSha: head, title: 't', message: '' };
    await expect(h.forge.merge(String(pr.number), request)).rejects.toSatisfy(code('NOT_MERGEABLE'));
    model.addCheckRun({ sha: head, name: 'security', status: 'in_progress' });
    await expect(h.forge.merge(String(pr.number), request)).rejects.toSatisfy(code('NOT_MERGEABLE'));
    expect(model.branches.get('main')).toBe(base);
    model.addCheckRun({ sha: head, name: 'security', conclusion: 'success' });
    await expect(h.forge.merge(String(pr.number), request)).resolves.toMatchObject({ merged: true });
  });
});
