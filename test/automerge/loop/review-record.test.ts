/**
 * The stored accepted-result record of a review, checked the way the loop
 * checks it (`resolveReviewRecord` against `liveReviewBindings`), on a real
 * repository with the real panel and run store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { liveReviewBindings, resolveReviewRecord, runReviewOnRuntime } from '../../../src/review/index.js';
import { defaultStoragePolicy } from '../../../src/storage/policy.js';
import { createLocalRunStorage } from '../../../src/storage/sqlite/index.js';
import { makeTempRepo, type TempRepo } from '../../forge/git-fixture.js';

let repo: TempRepo | null = null;
let dir: string | null = null;
afterEach(() => {
  repo?.cleanup();
  if (dir !== null) rmSync(dir, { recursive: true, force: true });
  repo = null;
  dir = null;
});

describe('resolveReviewRecord', () => {
  it('accepts while head, diff, contract and config are unchanged, whatever the base tip; waits once the config changes', async () => {
    const r = (repo = makeTempRepo('proofgate-record-'));
    const d = (dir = mkdtempSync(join(tmpdir(), 'proofgate-record-data-')));
    r.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': 'requireUpToDate: false\n' }, 'initial');
    r.commit('feature', { 'feature.txt': 'a feature\n' }, 'feature', 'main');
    const storage = createLocalRunStorage({ directory: d, namespace: 'reviews', policy: defaultStoragePolicy });
    try {
      const reviewed = await runReviewOnRuntime({ repoDir: r.dir, base: 'main', head: 'feature', dataDir: d, storage });
      expect(reviewed.outcome.verdict).toBe('CONFIRMED');
      expect(reviewed.record.binding.inputHashes.config).toBe(reviewed.outcome.config_digest);
      const live = () => liveReviewBindings({ repoDir: r.dir, base: 'main', head: 'feature' });

      expect((await resolveReviewRecord(storage, reviewed.runId, await live())).kind).toBe('accepted');
      r.commit('main', { 'NOTES.md': 'unrelated\n' }, 'unrelated');
      expect((await resolveReviewRecord(storage, reviewed.runId, await live())).kind).toBe('accepted');

      r.commit('main', { '.proofgate.yml': 'requireUpToDate: true\n' }, 'stricter');
      expect(await resolveReviewRecord(storage, reviewed.runId, await live())).toEqual({ kind: 'wait', reason: 'inputHashes changed' });
      expect(await resolveReviewRecord(storage, 'review-unknown', await live())).toEqual({
        kind: 'wait',
        reason: 'review run review-unknown has no accepted-result record',
      });
    } finally {
      await storage.close();
    }
  });
});
