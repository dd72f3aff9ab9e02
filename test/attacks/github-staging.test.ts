/**
 * The hostile change author against proofgate's own merge queue on GitHub
 * (docs/automerge.md, "Merge queue" on GitHub): the author controls their
 * head (and can push to it at any moment), may have push access to the
 * repository's other branches (the staging branches included), can post
 * check runs and statuses under any name on any commit their CI token
 * reaches, and writes the change's own `.proofgate.yml`. None of it may land
 * an unreviewed head, count as the candidate's checks, or turn the queue on.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import type { CandidateBuild, MergeCandidate, MergeQueuePort } from '../../src/forge/port.js';
import { STAGING_PREFIX, stagingBranch } from '../../src/forge/github/index.js';
import { until } from '../support/wait.js';
import { CONFIG, githubLoop, type GitHubLoop } from '../e2e/github-support.js';
import { countRequests, type Harness } from '../forge/github/harness.js';
import {
  openStagingBase,
  outcomeOf,
  queueEvents,
  queuedChanges,
  stagingCi,
  withFastStaging,
  STAGING_CONFIG,
  statusComment,
  caught,
  stagingPort,
} from '../forge/github/merge-queue-support.js';

const NEVER_MS = 3_600_000;
const WAIT_FOREVER = { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS };
const AUTHOR = 'casey';

let harness: Harness | null = null;
let loop: GitHubLoop | null = null;
let workspaces: string | null = null;
afterEach(async () => {
  await harness?.close();
  harness = null;
  await loop?.cleanup();
  loop = null;
  if (workspaces !== null) rmSync(workspaces, { recursive: true, force: true });
  workspaces = null;
});

/** The port on a base requiring `ci`, whose candidate checks time out after `timeoutMs`. */
async function port(timeoutMs = 40): Promise<{ h: Harness; queue: MergeQueuePort }> {
  const started = await stagingPort(timeoutMs);
  harness = started.h;
  return { h: started.h, queue: started.port };
}

function openPr(h: Harness, files: Record<string, string>): { changeId: string; headSha: string; title: string; number: number } {
  const pr = h.server.model.openPullRequest({ author: AUTHOR, files });
  const headSha = h.server.model.headSha(pr.number);
  h.server.model.addCheckRun({ sha: headSha, name: 'ci' });
  return { changeId: String(pr.number), headSha, title: pr.title, number: pr.number };
}

function built(build: CandidateBuild): MergeCandidate {
  if (build.kind !== 'built') throw new Error(`refused: ${build.code}: ${build.reason}`);
  return build.candidate;
}

describe('attack: pushing to the head after the candidate was built', () => {
  it('the port: the merge is pinned to the reviewed head, GitHub refuses it (HEAD_MOVED), nothing lands; the next build refuses the change', async () => {
    const { h, queue } = await port(60_000);
    const { model } = h.server;
    const pr = openPr(h, { 'a.txt': 'a\n' });
    stagingCi(model, () => [{ name: 'ci', conclusion: 'success' }]);
    const candidate = built(await queue.buildCandidate('main', [pr]));
    expect((await queue.checkCandidate(candidate, { passedTrees: [] })).passed).toBe(true);
    const unreviewed = model.pushHead(pr.number, model.commit({ parent: pr.headSha, files: { 'a.txt': 'a\n', 'evil.txt': 'unreviewed\n' } }));
    const base = model.resolve('main');
    expect(isProofgateError(await caught(queue.landCandidate(candidate)), 'HEAD_MOVED')).toBe(true);
    expect(model.pull(pr.number).merged).toBe(false);
    expect(model.resolve('main')).toBe(base);
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([409]);
    expect(await queue.buildCandidate('main', [pr])).toMatchObject({ kind: 'refused', code: 'HEAD_MOVED' });
    expect(model.file(model.resolve('main') ?? '', 'evil.txt')).toBeNull();
    expect(model.headSha(pr.number)).toBe(unreviewed);
  });

  it('the loop: the pushed head is never landed unreviewed; it leaves the queue and only lands after its own review', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    workspaces = withFastStaging(l);
    const { heads } = openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }]);
    const { model } = l.server;
    let pushed = '';
    stagingCi(model, (sha) => {
      // CI of the first candidate: the author pushes a new head while it runs.
      if (pushed === '' && model.file(sha, 'a.txt') !== null) {
        const next = l.repo.commit('feature-1', { 'evil.txt': 'pushed after the build\n' }, 'late push');
        l.syncRemote();
        model.pushHead(1, l.mirrorCommit(next, heads[0]));
        model.addCheckRun({ sha: next, name: 'ci' });
        pushed = next;
      }
      return [{ name: 'ci', conclusion: 'success' }];
    });
    const outcome = await outcomeOf((await l.comment(1, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    // What landed is the new head, and only after proofgate reviewed it; the merge of the old head was refused.
    expect(outcome.head).toBe(pushed);
    const { state } = await l.env.store.load('1');
    expect(state.reviews.some((r) => r.head === pushed && r.status === 'finished')).toBe(true);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([409, 200]);
    const removed = (await queueEvents(l)).filter((e) => e.type === 'queue-removed');
    expect(removed.map((e) => (e.type === 'queue-removed' ? [e.data.head, e.data.code] : []))).toEqual([[heads[0], 'HEAD_MOVED']]);
  });
});

describe('attack: the author pushes to the staging branch with green checks', () => {
  it('a staging branch the author made first is reset to the base; their green commit never answers for the candidate', async () => {
    const { h, queue } = await port();
    const { model } = h.server;
    const pr = openPr(h, { 'a.txt': 'a\n' });
    const evil = model.commit({ parent: model.resolve('main') ?? '', files: { 'evil.txt': 'x\n' } });
    model.setBranch(stagingBranch('main'), evil);
    model.addCheckRun({ sha: evil, name: 'ci' });
    model.addStatus({ sha: evil, context: 'ci', state: 'success' });
    // CI answers only for the author's commit.
    stagingCi(model, (sha) => (sha === evil ? [{ name: 'ci', conclusion: 'success' }] : []));
    const candidate = built(await queue.buildCandidate('main', [pr]));
    expect(candidate.tip).not.toBe(evil);
    expect(model.file(candidate.tip, 'evil.txt')).toBeNull();
    expect(await queue.checkCandidate(candidate, { passedTrees: [] })).toMatchObject({ passed: false, failure: { check: 'ci', conclusion: 'timed out' } });
  });

  it('moving the staging branch to their green commit after the build changes nothing: checks count only on the exact tip proofgate built', async () => {
    const { h, queue } = await port();
    const { model } = h.server;
    const pr = openPr(h, { 'a.txt': 'a\n' });
    const candidate = built(await queue.buildCandidate('main', [pr]));
    const evil = model.commit({ parent: candidate.tip, files: { 'evil.txt': 'x\n' } });
    model.setBranch(stagingBranch('main'), evil);
    model.addCheckRun({ sha: evil, name: 'ci' });
    expect(await queue.checkCandidate(candidate, { passedTrees: [] })).toMatchObject({ passed: false, failure: { conclusion: 'timed out' } });
    // The control: the same check on proofgate's tip passes it.
    model.addCheckRun({ sha: candidate.tip, name: 'ci' });
    expect(await queue.checkCandidate(candidate, { passedTrees: [] })).toMatchObject({ passed: true });
  });

  it('a commit pushed onto the staging branch while the candidate is built is never part of it: the candidate is built again from the base', async () => {
    const { h, queue } = await port(60_000);
    const { model } = h.server;
    const a = openPr(h, { 'a.txt': 'a\n' });
    const b = openPr(h, { 'b.txt': 'b\n' });
    let evil = '';
    model.afterBranchSet = (branch, sha) => {
      if (evil !== '' || branch !== stagingBranch('main') || model.file(sha, 'a.txt') === null) return;
      evil = model.commit({ parent: sha, files: { 'evil.txt': 'x\n' } });
      model.setBranch(branch, evil);
    };
    const candidate = built(await queue.buildCandidate('main', [a, b]));
    expect(evil).not.toBe('');
    expect(model.file(candidate.tip, 'evil.txt')).toBeNull();
    expect(model.isAncestor(evil, candidate.tip)).toBe(false);
    expect(candidate.commits.map((c) => c.headSha)).toEqual([a.headSha, b.headSha]);
  });
});

describe('attack: checks posted on the staging tip under the wrong name or failing', () => {
  it('a green check or status under another name never passes; a failing required run or status fails the candidate with its URL', async () => {
    const { h, queue } = await port();
    const { model } = h.server;
    const pr = openPr(h, { 'a.txt': 'a\n' });
    const candidate = built(await queue.buildCandidate('main', [pr]));
    model.addCheckRun({ sha: candidate.tip, name: 'ci-lookalike' });
    model.addCheckRun({ sha: candidate.tip, name: 'ci ', conclusion: 'success' });
    model.addStatus({ sha: candidate.tip, context: 'CI/fake', state: 'success' });
    // The head's own green ci is not the candidate's.
    expect(model.checkRuns.some((r) => r.headSha === pr.headSha && r.name === 'ci')).toBe(true);
    expect(await queue.checkCandidate(candidate, { passedTrees: [] })).toMatchObject({ passed: false, failure: { check: 'ci', conclusion: 'timed out' } });
    model.addStatus({ sha: candidate.tip, context: 'ci', state: 'failure', targetUrl: 'https://ci.example.test/status/1' });
    expect(await queue.checkCandidate(candidate, { passedTrees: [] })).toMatchObject({
      passed: false,
      failure: { check: 'ci', conclusion: 'failure', log: 'https://ci.example.test/status/1' },
    });
    const again = built(await queue.buildCandidate('main', [pr]));
    model.addCheckRun({ sha: again.tip, name: 'ci', conclusion: 'failure', detailsUrl: 'https://ci.example.test/run/2' });
    expect(await queue.checkCandidate(again, { passedTrees: [] })).toMatchObject({
      passed: false,
      failure: { check: 'ci', conclusion: 'failure', log: 'https://ci.example.test/run/2' },
    });
  });
});

describe('attack: hostile base branch names', () => {
  it.each(['main/../../heads/main', 'refs/heads/main', 'main@{0}', '..', 'main%2F..%2Fx', ' main', '-f'])(
    '%j: no staging branch is made, no ref moves, nothing is merged',
    async (name) => {
      const { h, queue } = await port();
      const pr = openPr(h, { 'a.txt': 'a\n' });
      const before = [...h.server.model.branches.entries()];
      expect(isProofgateError(await caught(queue.buildCandidate(name, [pr])), 'INVALID_INPUT')).toBe(true);
      expect([...h.server.model.branches.entries()]).toEqual(before);
      expect(countRequests(h.server, 'repos/merge') + countRequests(h.server, 'git/update-ref') + countRequests(h.server, 'git/create-ref')).toBe(0);
    },
  );

  it('a staging branch is always under proofgate-staging/, never a base itself', () => {
    for (const base of ['main', 'release/2.0', 'proofgate-staging', 'x']) expect(stagingBranch(base).startsWith(STAGING_PREFIX)).toBe(true);
    expect(stagingBranch('main')).not.toBe('main');
  });
});

describe('attack: turning the queue on without the base opting in', () => {
  it('without the opt-in a change merges on its own (pulls/merge at its head): no staging branch, no candidate', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    workspaces = withFastStaging(l);
    const { heads } = openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }], CONFIG);
    const outcome = await outcomeOf((await l.comment(1, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(outcome.head).toBe(heads[0]);
    expect(l.server.model.resolve(stagingBranch('main'))).toBeNull();
    expect(countRequests(l.server, 'repos/merge')).toBe(0);
    expect(await queueEvents(l)).toEqual([]);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge').map((r) => r.status)).toEqual([200]);
  });

  it("a change that turns the queue on in its own .proofgate.yml changes nothing: the base's trusted config decides, and the change waits for a maintainer", async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    workspaces = withFastStaging(l);
    openStagingBase(l, [{ files: { '.proofgate.yml': STAGING_CONFIG } }], CONFIG);
    await l.comment(1, '/proofgate automerge');
    // It waits (its loop does not end) for a maintainer's approval of the trusted path: said on its status comment.
    await until(() => /approv/i.test(statusComment(l)), 'the change never said it waits for an approval');
    expect(statusComment(l)).toMatch(/\.proofgate\.yml/);
    expect(l.server.model.resolve(stagingBranch('main'))).toBeNull();
    expect(countRequests(l.server, 'repos/merge')).toBe(0);
    expect(countRequests(l.server, 'pulls/merge')).toBe(0);
    expect(await queueEvents(l)).toEqual([]);
  });

  it("a base whose ruleset requires GitHub's merge queue goes there even with the opt-in: never to proofgate's staging queue", async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    workspaces = withFastStaging(l);
    openStagingBase(l, [{ files: { 'a.txt': 'a\n' } }]);
    l.server.model.addRuleset('main', { name: 'merge queue', mergeQueue: true });
    await l.comment(1, '/proofgate automerge');
    await until(() => l.server.model.mergeQueue.entry(1) !== null, "the change was not put in GitHub's merge queue");
    expect(l.server.model.resolve(stagingBranch('main'))).toBeNull();
    expect(countRequests(l.server, 'repos/merge')).toBe(0);
    expect(await queuedChanges(l)).toEqual([]);
    await l.comment(1, '/proofgate stop');
  });
});
