/**
 * proofgate's own merge queue on GitHub (src/forge/github/staging-queue.ts),
 * bors-style: candidates built on `proofgate-staging/<base>` with the merges
 * API, the base's required checks read on exactly the built tip, and each
 * change landed on its own with `pulls/merge` pinned to its reviewed head,
 * only while the base is still what the checks saw. The port against the
 * GitHub API test server first; the automerge loop on it follows.
 */
import { schema as published } from '@octokit/graphql-schema';
import { buildSchema, parse, validate } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../../src/core/index.js';
import type { CandidateBuild, CheckConclusion, ForgeCheck, MergeCandidate, MergeQueuePort } from '../../../src/forge/port.js';
import { COMMIT_CHECKS_QUERY, gitBlobId, judgeCandidateChecks, stagingBranch } from '../../../src/forge/github/staging-queue.js';
import { countRequests, type Harness } from './harness.js';
import { rmSync } from 'node:fs';
import type { LoopOutcome } from '../../../src/automerge/loop/index.js';
import { describeQueueItem, queueHistory } from '../../../src/automerge/queue/queue.js';
import { until } from '../../support/wait.js';
import { CONFIG, githubLoop, type GitHubLoop } from '../../e2e/github-support.js';
import {
  commentsOn,
  openStagingBase,
  outcomeOf,
  pausedQueue,
  queueEvents,
  queuedChanges,
  stagingCi,
  withFastStaging,
  caught,
  stagingPort,
} from './merge-queue-support.js';

const NEVER_MS = 3_600_000;
const WAIT_FOREVER = { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS };

let harness: Harness | null = null;
afterEach(async () => {
  await harness?.close();
  harness = null;
});

/** A harness whose base `main` requires `ci` (branch protection), with the staging queue polling fast. */
async function stagingHarness(timeoutMs = 60_000): Promise<{ h: Harness; port: MergeQueuePort }> {
  const started = await stagingPort(timeoutMs);
  harness = started.h;
  return started;
}

/** Open a pull request on main changing `files`, with a green `ci` on its head. */
function openPr(h: Harness, files: Record<string, string>, options: { crossRepository?: boolean } = {}): { number: number; head: string; changeId: string } {
  const pr = h.server.model.openPullRequest({ author: 'casey', files, ...options });
  const head = h.server.model.headSha(pr.number);
  h.server.model.addCheckRun({ sha: head, name: 'ci' });
  return { number: pr.number, head, changeId: String(pr.number) };
}

const entry = (pr: { changeId: string; head: string }) => ({ changeId: pr.changeId, headSha: pr.head, title: `Change ${pr.changeId}` });

function built(build: CandidateBuild): MergeCandidate {
  if (build.kind !== 'built') throw new Error(`refused: ${build.code}: ${build.reason}`);
  return build.candidate;
}

describe('the staging branch name', () => {
  it('is proofgate-staging/<base> for a plain branch name', () => {
    expect(stagingBranch('main')).toBe('proofgate-staging/main');
    expect(stagingBranch('release/1.x')).toBe('proofgate-staging/release/1.x');
  });

  it.each([
    '../main',
    'main/../../x',
    'refs/heads/main',
    '-main',
    'main.lock',
    'ma in',
    'main\nx',
    'main@{1}',
    'a..b',
    'main~1',
    'main^',
    'x:y',
    'main?',
    'ma*n',
    'main%2f..',
    'main#frag',
    '',
    '/main',
    'main/',
    'main.',
    '.hidden',
    'a//b',
  ])('attack: the hostile base name %j gets no staging branch (INVALID_INPUT)', (name) => {
    const refusal = (() => {
      try {
        stagingBranch(name);
      } catch (error) {
        return error;
      }
      return null;
    })();
    expect(isProofgateError(refusal, 'INVALID_INPUT')).toBe(true);
  });

  it('attack: a candidate of a hostile base moves no ref at all', async () => {
    const { h, port } = await stagingHarness();
    const pr = openPr(h, { 'a.txt': 'a\n' });
    const before = new Map(h.server.model.branches);
    const refusal = await caught(port.buildCandidate('../main', [entry(pr)]));
    expect(isProofgateError(refusal, 'INVALID_INPUT')).toBe(true);
    expect(new Map(h.server.model.branches)).toEqual(before);
    expect(countRequests(h.server, 'git/update-ref') + countRequests(h.server, 'git/create-ref') + countRequests(h.server, 'repos/merge')).toBe(0);
  });
});

describe("the staging queue's documents and judgments", () => {
  it("the commit checks query is valid against GitHub's published schema", () => {
    const schema = buildSchema(published.idl, { assumeValidSDL: true });
    expect(validate(schema, parse(COMMIT_CHECKS_QUERY)).map((e) => e.message)).toEqual([]);
    expect(validate(schema, parse(COMMIT_CHECKS_QUERY.replace('object(oid: $oid)', 'object(sha: $oid)'))).length).toBeGreaterThan(0);
  });

  it('only required checks on the exact tip count: another name, another sha, a pending run never pass; a failed one fails', () => {
    const tip = 'a'.repeat(40);
    const other = 'b'.repeat(40);
    const run = (name: string, sha: string, conclusion: CheckConclusion | null): ForgeCheck =>
      ({
        kind: 'check_run',
        name,
        workflow: null,
        status: conclusion === null ? 'in_progress' : 'completed',
        conclusion,
        startedAt: null,
        completedAt: null,
        url: `https://ci/${name}`,
        headSha: sha,
      }) as const;
    expect(judgeCandidateChecks(['ci'], tip, [run('ci', tip, 'success')])).toEqual({ kind: 'passed' });
    expect(judgeCandidateChecks(['ci'], tip, [run('lint', tip, 'success'), run('ci', other, 'success')])).toEqual({ kind: 'pending', names: ['ci'] });
    expect(judgeCandidateChecks(['ci'], tip, [run('ci', tip, null)])).toEqual({ kind: 'pending', names: ['ci'] });
    expect(judgeCandidateChecks(['ci'], tip, [run('ci', tip, 'failure')])).toMatchObject({ kind: 'failed', check: { name: 'ci', conclusion: 'failure' } });
    expect(judgeCandidateChecks(['ci', 'e2e'], tip, [run('ci', tip, 'success'), run('e2e', tip, 'cancelled')])).toMatchObject({ kind: 'failed' });
  });
});

describe('the staging queue against the GitHub API test server', () => {
  it('builds on proofgate-staging/main, checks the exact tip, lands each change as its own squash pinned to its head; the base ends on the checked tree', async () => {
    const { h, port } = await stagingHarness();
    const { model } = h.server;
    model.setBranch('main', model.commit({ parent: model.resolve('main') ?? '', files: { '.proofgate.yml': CONFIG } }));
    const a = openPr(h, { 'a.txt': 'a\n' });
    const b = openPr(h, { 'b.txt': 'b\n', 'docs/b.md': 'b\n' });
    const ci = stagingCi(model, () => [{ name: 'ci', conclusion: 'success' }]);
    const base = model.resolve('main') ?? '';
    const candidate = built(await port.buildCandidate('main', [entry(a), entry(b)]));
    expect(candidate.baseSha).toBe(base);
    expect(model.resolve('proofgate-staging/main')).toBe(candidate.tip);
    expect(candidate.commits.map((c) => [c.changeId, c.headSha, c.paths])).toEqual([
      [a.changeId, a.head, ['a.txt']],
      [b.changeId, b.head, ['b.txt', 'docs/b.md']],
    ]);
    expect(candidate.tree).toBe(model.treeOf(candidate.tip));
    expect(candidate.configKey).toBe(gitBlobId(model.file(base, '.proofgate.yml') ?? new Uint8Array()));
    expect(model.parentsOf(candidate.tip)).toEqual([candidate.commits[0]?.commit, b.head]);
    // Nothing lands while building: the base and the heads are where they were.
    expect(model.resolve('main')).toBe(base);
    expect(model.headSha(a.number)).toBe(a.head);

    const checked = await port.checkCandidate(candidate, { passedTrees: [] });
    expect(checked).toEqual({ passed: true, reused: false, key: `${candidate.configKey}|${candidate.tree}`, failure: null });
    expect(ci.runs.some((r) => r.sha === candidate.tip)).toBe(true);
    // The same tree under the same config passed before: no check is read.
    const reads = countRequests(h.server, 'graphql:ProofgateCommitChecks');
    expect(await port.checkCandidate(candidate, { passedTrees: [checked.key] })).toMatchObject({ passed: true, reused: true });
    expect(countRequests(h.server, 'graphql:ProofgateCommitChecks')).toBe(reads);

    const landing = await port.landCandidate(candidate);
    expect(landing.untested).toBeNull();
    expect(landing.stopped).toBeNull();
    expect(landing.landed.map((l) => [l.changeId, l.headSha])).toEqual([
      [a.changeId, a.head],
      [b.changeId, b.head],
    ]);
    const [first, second] = landing.landed;
    expect(model.pull(a.number)).toMatchObject({ merged: true, mergeMethod: 'squash', mergeCommitSha: first?.mergeCommit });
    expect(model.pull(b.number)).toMatchObject({ merged: true, mergeMethod: 'squash', mergeCommitSha: second?.mergeCommit });
    // Two squash commits in queue order, one parent each, and the base holds exactly the checked tree.
    expect(model.parentsOf(first?.mergeCommit ?? '')).toEqual([base]);
    expect(model.parentsOf(second?.mergeCommit ?? '')).toEqual([first?.mergeCommit]);
    expect(model.resolve('main')).toBe(second?.mergeCommit);
    expect(model.treeOf(model.resolve('main') ?? '')).toBe(candidate.tree);
    expect(countRequests(h.server, 'pulls/merge')).toBe(2);
  });

  it('requests: a candidate of two built, checked once and landed', async () => {
    const { h, port } = await stagingHarness();
    const a = openPr(h, { 'a.txt': 'a\n' });
    const b = openPr(h, { 'b.txt': 'b\n' });
    stagingCi(h.server.model, () => [{ name: 'ci', conclusion: 'success' }]);
    const used = (from: number): Record<string, number> => {
      const counts: Record<string, number> = {};
      for (const r of h.server.requests.slice(from)) counts[r.operation] = (counts[r.operation] ?? 0) + 1;
      return counts;
    };
    let from = h.server.requests.length;
    const candidate = built(await port.buildCandidate('main', [entry(a), entry(b)]));
    const build = used(from);
    from = h.server.requests.length;
    await port.checkCandidate(candidate, { passedTrees: [] });
    const check = used(from);
    from = h.server.requests.length;
    await port.landCandidate(candidate);
    const land = used(from);
    expect(build).toEqual({
      'graphql:ProofgateChangeSnapshot': 2,
      'repos/get-content': 1,
      'git/get-ref': 1,
      'git/update-ref': 1,
      'git/create-ref': 1,
      'git/get-commit': 1,
      'repos/merge': 2,
      'pulls/list-files': 2,
    });
    expect(check).toEqual({ 'graphql:ProofgateChangeSnapshot': 1, 'graphql:ProofgateCommitChecks': 1 });
    expect(land).toEqual({ 'git/get-ref': 2, 'graphql:ProofgateChangeSnapshot': 2, 'pulls/merge': 2, 'git/get-commit': 3 });
    console.info(`staging queue figures (2 changes): ${JSON.stringify({ build, check, land })}`);
  });

  it('a change whose patch does not apply to the candidate base is refused (CONFLICT) and lands nothing; one already contained is EMPTY', async () => {
    const { h, port } = await stagingHarness();
    const { model } = h.server;
    const a = openPr(h, { 'shared.txt': 'from a\n' });
    const b = openPr(h, { 'shared.txt': 'from b\n' });
    const build = await port.buildCandidate('main', [entry(a), entry(b)]);
    expect(build).toMatchObject({ kind: 'refused', changeId: b.changeId, code: 'CONFLICT' });
    expect(model.pull(a.number).merged).toBe(false);
    expect(model.pull(b.number).merged).toBe(false);
    // A head that is already in the base: GitHub's merges API answers 204, the change is EMPTY.
    const tip = model.resolve('main') ?? '';
    const empty = model.openPullRequest({ author: 'casey', headSha: tip });
    model.addCheckRun({ sha: tip, name: 'ci' });
    expect(await port.buildCandidate('main', [{ changeId: String(empty.number), headSha: tip, title: 'empty' }])).toMatchObject({
      kind: 'refused',
      code: 'EMPTY',
    });
  });

  it('refuses a change that is not open, merged or moved before building anything', async () => {
    const { h, port } = await stagingHarness();
    const { model } = h.server;
    const a = openPr(h, { 'a.txt': 'a\n' });
    const b = openPr(h, { 'b.txt': 'b\n' });
    model.pushHead(b.number);
    expect(await port.buildCandidate('main', [entry(a), entry(b)])).toMatchObject({ kind: 'refused', changeId: b.changeId, code: 'HEAD_MOVED' });
    expect(model.resolve('proofgate-staging/main')).toBeNull();
    model.closePullRequest(a.number);
    expect(await port.buildCandidate('main', [entry(a)])).toMatchObject({ kind: 'refused', code: 'NOT_OPEN' });
    const c = openPr(h, { 'c.txt': 'c\n' });
    const merged = await h.forge.merge(c.changeId, { expectedHeadSha: c.head, title: 't', message: 'm' });
    expect(await port.buildCandidate('main', [entry(c)])).toMatchObject({
      kind: 'refused',
      code: 'MERGED',
      merged: { mergeCommit: merged.sha, head: c.head },
    });
  });

  it('a failing required check fails the candidate with its name, conclusion and details URL; a cancelled one too', async () => {
    const { h, port } = await stagingHarness();
    const a = openPr(h, { 'a.txt': 'a\n' });
    stagingCi(h.server.model, () => [
      { name: 'lint', conclusion: 'success' },
      { name: 'ci', conclusion: 'failure' },
    ]);
    const candidate = built(await port.buildCandidate('main', [entry(a)]));
    const checked = await port.checkCandidate(candidate, { passedTrees: [] });
    expect(checked).toMatchObject({
      passed: false,
      failure: { check: 'ci', conclusion: 'failure', log: `https://ci.example.test/ci/${candidate.tip.slice(0, 12)}` },
    });
    stagingCi(h.server.model, () => [{ name: 'ci', conclusion: 'cancelled' }]);
    const again = built(await port.buildCandidate('main', [entry(a)]));
    expect((await port.checkCandidate(again, { passedTrees: [] })).failure).toMatchObject({ check: 'ci', conclusion: 'cancelled' });
  });

  it('required checks that never report time out (a failure, "timed out"); the abort signal ends the wait (ABORTED)', async () => {
    const { h, port } = await stagingHarness(30);
    const a = openPr(h, { 'a.txt': 'a\n' });
    const candidate = built(await port.buildCandidate('main', [entry(a)]));
    expect(await port.checkCandidate(candidate, { passedTrees: [] })).toMatchObject({
      passed: false,
      failure: { check: 'ci', conclusion: 'timed out', log: null },
    });
    const controller = new AbortController();
    const waiting = port.checkCandidate(candidate, { passedTrees: [], signal: controller.signal });
    controller.abort();
    expect(isProofgateError(await caught(waiting), 'ABORTED')).toBe(true);
  });

  it('the base moved before landing: BASE_MOVED, nothing merged', async () => {
    const { h, port } = await stagingHarness();
    const { model } = h.server;
    const a = openPr(h, { 'a.txt': 'a\n' });
    const candidate = built(await port.buildCandidate('main', [entry(a)]));
    const pushed = model.commit({ parent: candidate.baseSha, files: { 'other.txt': 'someone else\n' } });
    model.setBranch('main', pushed);
    expect(isProofgateError(await caught(port.landCandidate(candidate)), 'BASE_MOVED')).toBe(true);
    expect(model.pull(a.number).merged).toBe(false);
    expect(model.resolve('main')).toBe(pushed);
    expect(countRequests(h.server, 'pulls/merge')).toBe(0);
  });

  it('GitHub refuses to merge a change (405): NOT_MERGEABLE naming it, nothing lands; after one landed, the landing stops there', async () => {
    const { h, port } = await stagingHarness();
    const { model } = h.server;
    const a = openPr(h, { 'a.txt': 'a\n' });
    const b = openPr(h, { 'b.txt': 'b\n' });
    const candidate = built(await port.buildCandidate('main', [entry(a), entry(b)]));
    model.setMergeable(a.number, 'MERGEABLE', 'BLOCKED');
    const refusal = await caught(port.landCandidate(candidate));
    expect(isProofgateError(refusal, 'NOT_MERGEABLE')).toBe(true);
    expect((refusal as { details?: { changeId?: string } }).details?.changeId).toBe(a.changeId);
    expect(model.pull(a.number).merged).toBe(false);
    model.setMergeable(a.number, 'MERGEABLE', 'CLEAN');
    model.setMergeable(b.number, 'MERGEABLE', 'BLOCKED');
    const landing = await port.landCandidate(candidate);
    expect(landing.landed.map((l) => l.changeId)).toEqual([a.changeId]);
    expect(landing.stopped).toMatchObject({ code: 'NOT_MERGEABLE', changeId: b.changeId });
  });

  it('the base moved in the window between the read and the merge: the untested landing is reported, the rest waits, the new tip is staged', async () => {
    const { h, port } = await stagingHarness();
    const { model } = h.server;
    const a = openPr(h, { 'a.txt': 'a\n' });
    const b = openPr(h, { 'b.txt': 'b\n' });
    const ci = stagingCi(model, () => [{ name: 'ci', conclusion: 'success' }]);
    const candidate = built(await port.buildCandidate('main', [entry(a), entry(b)]));
    let pushed = '';
    model.beforePullMerge = () => {
      model.beforePullMerge = null;
      pushed = model.commit({ parent: model.resolve('main') ?? '', files: { 'other.txt': 'someone else\n' } });
      model.setBranch('main', pushed);
    };
    const landing = await port.landCandidate(candidate);
    expect(landing.landed.map((l) => l.changeId)).toEqual([a.changeId]);
    const landed = landing.landed[0]?.mergeCommit ?? '';
    expect(model.parentsOf(landed)).toEqual([pushed]);
    // The squash kept what the other push brought (a three-way squash), and it is not the tested tree.
    expect(model.file(landed, 'other.txt')).not.toBeNull();
    expect(model.file(landed, 'a.txt')).not.toBeNull();
    expect(landing.untested).toEqual({
      tip: landed,
      tree: model.treeOf(landed),
      testedTree: candidate.commits[0]?.tree,
      reason: expect.stringContaining('in the window between its read and the merge') as unknown as string,
      staged: { ref: 'proofgate-staging/main', sha: landed },
    });
    expect(landing.stopped?.code).toBe('BASE_MOVED');
    expect(model.pull(b.number).merged).toBe(false);
    // The staging branch holds the new tip, and CI (on pushes there) tests it.
    expect(model.resolve('proofgate-staging/main')).toBe(landed);
    expect(ci.runs.some((r) => r.sha === landed)).toBe(true);
  });

  it('a fork pull request is staged and landed by sha; its head branch is never pushed to', async () => {
    const { h, port } = await stagingHarness();
    const { model } = h.server;
    const fork = openPr(h, { 'fork.txt': 'from a fork\n' }, { crossRepository: true });
    const headRef = model.pull(fork.number).headRef;
    const ci = stagingCi(model, () => [{ name: 'ci', conclusion: 'success' }]);
    const candidate = built(await port.buildCandidate('main', [entry(fork)]));
    expect((await port.checkCandidate(candidate, { passedTrees: [] })).passed).toBe(true);
    const landing = await port.landCandidate(candidate);
    expect(landing.landed.map((l) => l.headSha)).toEqual([fork.head]);
    expect(model.resolve(headRef)).toBe(fork.head);
    // Only the staging branch and (by the merge) the base moved; the fork's head branch never did.
    expect([...new Set(ci.pushes.map((p) => p.branch))].sort()).toEqual(['main', 'proofgate-staging/main']);
  });
});

describe("the automerge loop on a GitHub base that opts in to proofgate's own queue", () => {
  let loop: GitHubLoop | null = null;
  let workspaces: string | null = null;
  afterEach(async () => {
    await loop?.cleanup();
    loop = null;
    if (workspaces !== null) rmSync(workspaces, { recursive: true, force: true });
    workspaces = null;
  });

  async function start(): Promise<GitHubLoop> {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    workspaces = withFastStaging(l);
    return l;
  }

  /** Ask automerge on every pull request while the queue is paused, so they form one batch; resume once all are queued. */
  async function queueAll(l: GitHubLoop, numbers: readonly number[]): Promise<(index: number) => Promise<LoopOutcome>> {
    const paused = await pausedQueue(l);
    const outcomes: Promise<LoopOutcome>[] = [];
    for (const number of numbers) {
      outcomes.push(outcomeOf((await l.comment(number, '/proofgate automerge')).dispatch?.done));
      // Queue order is the order the changes were ready in: each is queued before the next is asked.
      await until(async () => (await queuedChanges(l)).includes(String(number)), `#${number} was not queued`);
    }
    await paused.resume();
    return (index) => outcomes[index] ?? Promise.reject(new Error(`no change at ${index}`));
  }

  it('several changes: each lands as its own squash in queue order, pinned to its reviewed head, on the checked tree', async () => {
    const l = await start();
    const { base, heads } = openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }, { files: { 'b.txt': 'b\n' } }, { files: { 'c.txt': 'c\n' } }]);
    const { model } = l.server;
    const ci = stagingCi(model, () => [{ name: 'ci', conclusion: 'success' }]);
    const outcome = await queueAll(l, [1, 2, 3]);
    const outcomes = await Promise.all([0, 1, 2].map(outcome));
    expect(outcomes.map((o) => [o.kind, o.head])).toEqual(heads.map((head) => ['merged', head]));
    const merges = [1, 2, 3].map((n) => model.pull(n).mergeCommitSha ?? '');
    expect([1, 2, 3].map((n) => model.pull(n).mergeMethod)).toEqual(['squash', 'squash', 'squash']);
    // One squash per change, in queue order: each the only parent of the next.
    expect(model.parentsOf(merges[0] ?? '')).toEqual([base]);
    expect(model.parentsOf(merges[1] ?? '')).toEqual([merges[0]]);
    expect(model.parentsOf(merges[2] ?? '')).toEqual([merges[1]]);
    expect(model.resolve('main')).toBe(merges[2]);
    const events = await queueEvents(l);
    const candidates = events.filter((e) => e.type === 'queue-candidate');
    expect(candidates.map((e) => e.data.changes)).toEqual([['1', '2', '3']]);
    // The base holds exactly the tree the checks passed on, and they ran on exactly that candidate's tip.
    expect(model.treeOf(model.resolve('main') ?? '')).toBe(candidates[0]?.data.tree);
    expect(ci.runs.some((r) => r.sha === candidates[0]?.data.tip && r.conclusion === 'success')).toBe(true);
    expect(events.some((e) => e.type === 'queue-untested')).toBe(false);
    expect(commentsOn(l, 2)).toContain('automerge: merged');
  });

  it('a batch with one breaking change: bisection ejects it with the check name and URL on its status comment; the others land', async () => {
    const l = await start();
    openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }, { files: { 'break.txt': 'breaks the build\n' } }, { files: { 'c.txt': 'c\n' } }]);
    const { model } = l.server;
    // CI on the staging branch fails any tree with break.txt (the change's own head passed alone).
    const ci = stagingCi(model, (sha) => [{ name: 'ci', conclusion: model.file(sha, 'break.txt') === null ? 'success' : 'failure' }]);
    const outcome = await queueAll(l, [1, 2, 3]);
    const ejected = await outcome(1);
    expect(ejected.kind, ejected.reason).toBe('blocked');
    expect(ejected.code).toBe('queue-ejected');
    const failing = ci.runs.find((r) => r.conclusion === 'failure' && model.file(r.sha, 'break.txt') !== null && model.file(r.sha, 'a.txt') !== null);
    expect(failing).toBeDefined();
    expect(commentsOn(l, 2)).toContain('check "ci" failed (failure)');
    expect(commentsOn(l, 2)).toMatch(/https:\/\/ci\.example\.test\/ci\/[0-9a-f]{12}/);
    expect([(await outcome(0)).kind, (await outcome(2)).kind]).toEqual(['merged', 'merged']);
    expect(model.pull(2).merged).toBe(false);
    expect(model.file(model.resolve('main') ?? '', 'break.txt')).toBeNull();
    const events = await queueEvents(l);
    expect(events.filter((e) => e.type === 'queue-bisect').length).toBeGreaterThan(0);
    expect(events.filter((e) => e.type === 'queue-ejected').map((e) => e.data.change)).toEqual(['2']);
  });

  it('a change whose patch conflicts with the candidate base leaves the queue (CONFLICT); the other lands', async () => {
    const l = await start();
    openStagingBase(l, [{ files: { 'shared.txt': 'from one\n' } }, { files: { 'shared.txt': 'from two\n' } }]);
    const { model } = l.server;
    stagingCi(model, () => [{ name: 'ci', conclusion: 'success' }]);
    // GitHub finds #2 conflicting once #1 landed.
    model.beforePullMerge = (number) => {
      if (number === 1) model.setMergeable(2, 'CONFLICTING');
    };
    const outcome = await queueAll(l, [1, 2]);
    expect((await outcome(0)).kind).toBe('merged');
    await until(
      async () => (await queueEvents(l)).some((e) => e.type === 'queue-removed' && e.data.change === '2' && e.data.code === 'CONFLICT'),
      '#2 did not leave the queue',
    );
    const removed = (await queueEvents(l)).find((e) => e.type === 'queue-removed' && e.data.change === '2');
    expect(removed?.type === 'queue-removed' ? removed.data.reason : '').toContain('does not apply to the candidate base');
    await l.comment(2, '/proofgate stop');
    expect((await outcome(1)).kind).not.toBe('merged');
    expect(model.pull(2).merged).toBe(false);
    expect(model.file(model.resolve('main') ?? '', 'shared.txt')).toEqual(new TextEncoder().encode('from one\n'));
  });

  it('the base moved (someone pushed) while the candidate was checked: BASE_MOVED, the candidate is built again on the new tip, and lands; no human needed', async () => {
    const l = await start();
    openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }]);
    const { model } = l.server;
    let pushed = '';
    stagingCi(model, (sha) => {
      if (pushed === '' && model.file(sha, 'a.txt') !== null) {
        pushed = model.commit({ parent: model.resolve('main') ?? '', files: { 'other.txt': 'someone else\n' } });
        model.setBranch('main', pushed);
      }
      return [{ name: 'ci', conclusion: 'success' }];
    });
    const outcome = await (await queueAll(l, [1]))(0);
    expect(outcome.kind, outcome.reason).toBe('merged');
    const merge = model.pull(1).mergeCommitSha ?? '';
    expect(model.parentsOf(merge)).toEqual([pushed]);
    const candidates = (await queueEvents(l)).filter((e) => e.type === 'queue-candidate');
    expect(candidates).toHaveLength(2);
    expect(candidates[1]?.data.base).toBe(pushed);
    expect(model.treeOf(model.resolve('main') ?? '')).toBe(candidates[1]?.data.tree);
    expect(l.progress.some((p) => p.text.includes('moved outside the queue'))).toBe(true);
    expect((await queueEvents(l)).some((e) => e.type === 'queue-untested')).toBe(false);
  });

  it('GitHub refuses the merge at landing (405): the change leaves the queue (NOT_MERGEABLE), the runner goes on, nothing merged', async () => {
    const l = await start();
    openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }]);
    const { model } = l.server;
    stagingCi(model, (sha) => {
      // Branch protection starts to block the change (a required review, say) while its candidate is checked.
      if (model.file(sha, 'a.txt') !== null) model.setMergeable(1, 'MERGEABLE', 'BLOCKED');
      return [{ name: 'ci', conclusion: 'success' }];
    });
    const outcome = await queueAll(l, [1]);
    await until(
      async () => (await queueEvents(l)).some((e) => e.type === 'queue-removed' && e.data.code === 'NOT_MERGEABLE'),
      'the refused change did not leave the queue',
    );
    await l.comment(1, '/proofgate stop');
    expect((await outcome(0)).kind).not.toBe('merged');
    expect(model.pull(1).merged).toBe(false);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge').every((r) => r.status === 405)).toBe(true);
  });

  it('the base moved in the window between the tip check and the merge: the untested landing is recorded, the new tip goes to staging, the change says so', async () => {
    const l = await start();
    openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }]);
    const { model } = l.server;
    const ci = stagingCi(model, () => [{ name: 'ci', conclusion: 'success' }]);
    let pushed = '';
    model.beforePullMerge = () => {
      model.beforePullMerge = null;
      pushed = model.commit({ parent: model.resolve('main') ?? '', files: { 'other.txt': 'someone else\n' } });
      model.setBranch('main', pushed);
    };
    const outcome = await (await queueAll(l, [1]))(0);
    expect(outcome.kind, outcome.reason).toBe('merged');
    const merge = model.pull(1).mergeCommitSha ?? '';
    expect(model.parentsOf(merge)).toEqual([pushed]);
    const events = await queueEvents(l);
    const untested = events.find((e) => e.type === 'queue-untested');
    const candidate = events.find((e) => e.type === 'queue-candidate');
    expect(untested?.type === 'queue-untested' ? untested.data : null).toMatchObject({
      changes: ['1'],
      tip: merge,
      tree: model.treeOf(merge),
      testedTree: candidate?.type === 'queue-candidate' ? candidate.data.tree : '',
      staged: { ref: 'proofgate-staging/main', sha: merge },
    });
    // The landed tip is on the staging branch, where CI tests it.
    expect(model.resolve('proofgate-staging/main')).toBe(merge);
    expect(ci.runs.some((r) => r.sha === merge)).toBe(true);
    // The runner waited for the landed tip's checks on the staging branch and recorded them.
    const checked = events.find((e) => e.type === 'queue-untested-checked');
    expect(checked?.type === 'queue-untested-checked' ? checked.data : null).toMatchObject({ changes: ['1'], tip: merge, passed: true, failure: null });
    expect(commentsOn(l, 1)).toContain('the landed tree was not the tested one');
    expect(commentsOn(l, 1)).toContain("the landed tree's checks passed");
    const history = queueHistory('main', events, '1').map(describeQueueItem);
    expect(history.some((line) => line.includes('the landed tree was not the tested one') && line.includes('proofgate-staging/main'))).toBe(true);
    expect(history).toContain(`the landed tree ${merge.slice(0, 12)} was checked afterwards: checks passed`);
  });

  it('an untested landing whose tree then fails its checks: the failure, its check and URL are recorded and said on the change', async () => {
    const l = await start();
    openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }]);
    const { model } = l.server;
    // CI fails any tree holding both the change and the other push: only the landed (untested) tree does.
    stagingCi(model, (sha) => [{ name: 'ci', conclusion: model.file(sha, 'a.txt') !== null && model.file(sha, 'other.txt') !== null ? 'failure' : 'success' }]);
    model.beforePullMerge = () => {
      model.beforePullMerge = null;
      model.setBranch('main', model.commit({ parent: model.resolve('main') ?? '', files: { 'other.txt': 'someone else\n' } }));
    };
    const outcome = await (await queueAll(l, [1]))(0);
    expect(outcome.kind, outcome.reason).toBe('merged');
    const merge = model.pull(1).mergeCommitSha ?? '';
    const checked = (await queueEvents(l)).find((e) => e.type === 'queue-untested-checked');
    expect(checked?.type === 'queue-untested-checked' ? checked.data : null).toMatchObject({
      tip: merge,
      passed: false,
      failure: { check: 'ci', conclusion: 'failure', log: `https://ci.example.test/ci/${merge.slice(0, 12)}` },
    });
    expect(commentsOn(l, 1)).toContain("the landed tree's checks failed: ci (failure)");
  });
});
