import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveAcceptedResult, readRunEvents, type AcceptedResultQuery } from '../../src/runtime/index.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { prepareReviewInputs, reviewBindingParts, runReviewOnRuntime } from '../../src/review/index.js';
import { makeRepo, sh, type TestRepo } from './repo-fixture.js';

let repo: TestRepo;
let dir: string;

beforeAll(() => {
  repo = makeRepo();
  repo.branch('feature');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => b + a;\n', 'test/calc.test.ts': 'commutes\n' }, 'commute');
  repo.switchTo('main');
  dir = mkdtempSync(join(tmpdir(), 'pg-review-runtime-'));
});

afterAll(() => {
  repo.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('a review as a graph run', () => {
  it('stores lane results as run events and the panel verdict as an accepted result bound to head and diff', async () => {
    const storage = createLocalRunStorage({ directory: join(dir, 'store'), namespace: `review-${Date.now()}`, policy: defaultStoragePolicy });
    const reviewed = await runReviewOnRuntime({ repoDir: repo.dir, base: 'main', head: 'feature', dataDir: join(dir, 'data'), storage });
    expect(reviewed.outcome.verdict).toBe('CONFIRMED');
    expect(reviewed.record.binding.result).toEqual({ verdict: 'CONFIRMED', reasons: reviewed.outcome.reasons });
    expect(reviewed.record.binding.inputHashes.diff).toBe(reviewed.outcome.diff.sha256);
    expect(reviewed.record.binding.workspaceAnchor.head).toBe(sh(repo.dir, ['rev-parse', 'feature']));
    expect(reviewed.record.binding.reviewerIdentity).toMatchObject({ lanes: [{ lane_id: 'rules' }, { lane_id: 'tests' }] });

    const events = await readRunEvents(storage.eventStore, reviewed.runId);
    const text = JSON.stringify(events);
    for (const lane of reviewed.outcome.lanes) expect(text).toContain(lane.context_id);

    const { result: _result, ...query } = reviewed.binding;
    expect((await resolveAcceptedResult(storage, reviewed.runId, reviewed.position, query)).kind).toBe('accepted');

    // The head moves: rebuild the live binding from a review of the new head.
    repo.switchTo('feature');
    repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => a + b;\n' }, 'revert');
    repo.switchTo('main');
    const live = await prepareReviewInputs({ repoDir: repo.dir, base: 'main', head: 'feature', reviewDir: join(dir, 'live'), mode: 'fresh-context' });
    const moved: AcceptedResultQuery = { ...query, ...reviewBindingParts({ repoDir: repo.dir, inputs: live }, reviewed.outcome.lanes) };
    const waitHead = await resolveAcceptedResult(storage, reviewed.runId, reviewed.position, moved);
    expect(waitHead).toEqual({ kind: 'wait', reason: 'inputHashes changed' });

    // Same head, other diff bytes.
    const otherDiff: AcceptedResultQuery = { ...query, inputHashes: { ...query.inputHashes, diff: `sha256:${'0'.repeat(64)}` } };
    const waitDiff = await resolveAcceptedResult(storage, reviewed.runId, reviewed.position, otherDiff);
    expect(waitDiff).toEqual({ kind: 'wait', reason: 'inputHashes changed' });

    // Other reviewers: the identity is part of the binding too.
    const otherReviewers: AcceptedResultQuery = { ...query, reviewerIdentity: { lanes: [] } };
    expect((await resolveAcceptedResult(storage, reviewed.runId, reviewed.position, otherReviewers)).kind).toBe('wait');
  });
});
