import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

/**
 * Requests each GitHub adapter call makes, counted by the GitHub API test
 * server. The figures are printed as one line (`github requests per call:
 * {json}`) that bench/github.bench.mjs reads.
 */

interface Count {
  readonly graphql: number;
  readonly rest: number;
  /** Distinct operations, in order of first use. */
  readonly operations: readonly string[];
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Run `call` and count the requests the server saw meanwhile. */
async function measure<T>(harness: Harness, call: () => Promise<T>): Promise<{ value: T; count: Count }> {
  const before = harness.server.requests.length;
  const value = await call();
  const used = harness.server.requests.slice(before);
  const graphql = used.filter((request) => request.operation.startsWith('graphql')).length;
  return { value, count: { graphql, rest: used.length - graphql, operations: [...new Set(used.map((request) => request.operation))] } };
}

describe('GitHub requests per snapshot and per action', () => {
  it('a snapshot with up to 100 checks and 100 comments takes one GraphQL request; every call is counted', async () => {
    const harness = await startHarness();
    h = harness;
    const { model } = harness.server;
    model.setCollaborator('rita', 'write');
    const counts: Record<string, Count> = {};

    // 100 checks (95 check runs and 5 commit statuses) and 100 comments.
    const full = model.openPullRequest({ author: 'rita' });
    const fullHead = model.headSha(full.number);
    for (let i = 0; i < 95; i++) model.addCheckRun({ sha: fullHead, name: `run-${i}` });
    for (let i = 0; i < 5; i++) model.addStatus({ sha: fullHead, context: `status-${i}`, state: 'success' });
    for (let i = 0; i < 100; i++) model.addComment(full.number, 'rita', `comment ${i}`);
    const snapshot = await measure(harness, () => harness.forge.snapshot(String(full.number)));
    expect([snapshot.value.checks.length, snapshot.value.comments.length]).toEqual([100, 100]);
    expect(snapshot.count.graphql).toBe(1);
    counts['snapshot (100 checks, 100 comments)'] = snapshot.count;

    // Past one page: 150 checks and 250 comments.
    const paged = model.openPullRequest({ author: 'rita' });
    const pagedHead = model.headSha(paged.number);
    for (let i = 0; i < 150; i++) model.addCheckRun({ sha: pagedHead, name: `run-${i}` });
    for (let i = 0; i < 250; i++) model.addComment(paged.number, 'rita', `comment ${i}`);
    const pagedSnapshot = await measure(harness, () => harness.forge.snapshot(String(paged.number)));
    expect([pagedSnapshot.value.checks.length, pagedSnapshot.value.comments.length]).toEqual([150, 250]);
    counts['snapshot (150 checks, 250 comments)'] = pagedSnapshot.count;

    const pr = model.openPullRequest({ author: 'rita' });
    const id = String(pr.number);
    const created = await measure(harness, () => harness.forge.createComment(id, 'first words'));
    counts.createComment = created.count;
    const edited = await measure(harness, () => harness.forge.editComment(id, created.value.id, 'better words'));
    expect(edited.value.body).toBe('better words');
    counts.editComment = edited.count;
    counts.addLabels = (await measure(harness, () => harness.forge.addLabels(id, ['automerge', 'reviewed']))).count;
    counts.removeLabel = (await measure(harness, () => harness.forge.removeLabel(id, 'reviewed'))).count;
    expect(model.pull(pr.number).labels).toEqual(['automerge']);

    const old = model.headSha(pr.number);
    model.setBranch('side', old);
    const next = model.commit({ parent: old, files: { 'side.txt': 'side\n' } });
    counts.pushBranch = (await measure(harness, () => harness.forge.pushBranch({ branch: 'side', newSha: next, expectedOldSha: old }))).count;
    expect(model.branches.get('side')).toBe(next);

    const file = await measure(harness, () => harness.forge.readFile(old, `change-${pr.number}.txt`));
    expect(new TextDecoder().decode(file.value ?? new Uint8Array())).toBe(`change ${pr.number}\n`);
    counts.readFile = file.count;
    const permission = await measure(harness, () => harness.forge.permission('rita'));
    expect(permission.value).toBe('write');
    counts.permission = permission.count;

    const merged = await measure(harness, () => harness.forge.merge(id, { expectedHeadSha: old, title: 'Change', message: '' }));
    expect(model.pull(pr.number).merged).toBe(true);
    expect(merged.value.sha).toBe(model.baseSha(pr.number));
    counts.merge = merged.count;

    // Figures for bench/github.bench.mjs: one line, JSON after the colon.
    console.info(`github requests per call: ${JSON.stringify(counts)}`);
    for (const [call, count] of Object.entries(counts)) expect(count.graphql + count.rest, call).toBeGreaterThan(0);
  });
});
