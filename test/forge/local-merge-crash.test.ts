/**
 * A real SIGKILL between the base ref swap and the merge record: a child
 * process runs the built local forge (dist/) and merges with
 * PROOFGATE_TEST_CRASH_AT=merge-base-updated, which kills it right after
 * `git update-ref` moved the base. The next reader finds the squash commit on
 * the base by its trailers and records the change as merged; no second merge
 * is possible. Needs `npx tsc -p tsconfig.build.json` first.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { localFixture, rejectionOf, type LocalFixture } from './local-support.js';

const DIST = pathToFileURL(resolve('dist/forge/local/index.js')).href;

const MERGE_SCRIPT = `
import { openLocalForge } from ${JSON.stringify(DIST)};
const [repoDir, dataDir, changeId, head] = process.argv.slice(2);
const opened = await openLocalForge({ repoDir, dataDir });
await opened.forge.merge(changeId, { expectedHeadSha: head, title: 'crash test', message: '' });
console.log('merge returned');
await opened.close();
`;

let fixture: LocalFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

describe('local forge: a crash after the base moved and before the merge is recorded', () => {
  it('is reconciled from the squash commit trailers: merged once, never twice', async () => {
    const f = (fixture = await localFixture());
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const script = join(f.dataDir, 'merge.mjs');
    writeFileSync(script, MERGE_SCRIPT);
    const child = spawnSync(process.execPath, [script, f.repo.dir, f.dataDir, change.id, change.head.sha], {
      env: { ...process.env, PROOFGATE_TEST_CRASH_AT: 'merge-base-updated' },
      encoding: 'utf8',
    });
    expect(child.signal).toBe('SIGKILL');
    expect(child.stdout).not.toContain('merge returned');
    // The base moved to the squash commit; the store never heard of it.
    const squash = f.repo.sha('main');
    expect(squash).not.toBe(change.base.sha);
    expect(f.repo.git(['log', '-1', '--format=%B', squash])).toContain(`Proofgate-Reviewed-Head: ${change.head.sha}`);
    // A fresh reader (another process) reconciles on its first snapshot.
    const other = await f.reopen();
    const after = await other.snapshot(change.id);
    expect(after.state).toBe('merged');
    expect(after.mergeCommitSha).toBe(squash);
    expect(after.head.sha).toBe(change.head.sha);
    expect((await f.forge.listChanges()).find((r) => r.changeId === change.id)?.merge?.reviewedHeadSha).toBe(change.head.sha);
    // A retried merge (the restarted loop) is refused and changes nothing.
    const retry = await rejectionOf(other.merge(change.id, { expectedHeadSha: change.head.sha, title: 'again', message: '' }));
    expect(retry.code).toBe('NOT_MERGEABLE');
    expect(f.repo.sha('main')).toBe(squash);
    expect(f.repo.git(['rev-list', '--count', `${change.base.sha}..main`])).toBe('1');
  });

  it('a merge that was never written (crash before the ref swap) is not invented', async () => {
    const f = (fixture = await localFixture());
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    // Another commit on main that merely quotes the trailer in its message does not count.
    f.repo.commit(
      'main',
      { 'other.txt': 'x\n' },
      `unrelated\n\nProofgate-Change: ${change.id}\nProofgate-Reviewed-Head: ${change.head.sha}\nProofgate-Base: ${'0'.repeat(40)}`,
    );
    const snapshot = await f.forge.snapshot(change.id);
    expect(snapshot.state).toBe('open');
    const merged = await f.forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'merge', message: '' });
    expect((await f.forge.snapshot(change.id)).mergeCommitSha).toBe(merged.sha);
  });
});
