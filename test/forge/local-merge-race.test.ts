import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { localFixture, type LocalFixture } from './local-support.js';

/**
 * Another process commits to `main` in a tight loop (plumbing + compare-and-swap
 * update-ref, like any well-behaved writer) while the forge merges changes.
 * Every merge must either land exactly once on top of the base it read, or
 * fail with BASE_MOVED and leave no trace; no commit of the other writer may
 * be lost.
 */
const COMMITTER = String.raw`
set -u
i=0
while [ ! -f "$STOP_FILE" ]; do
  i=$((i+1))
  old=$(git rev-parse refs/heads/main)
  export GIT_INDEX_FILE="$INDEX_FILE"
  git read-tree "$old"
  blob=$(echo "noise $i" | git hash-object -w --stdin)
  git update-index --add --cacheinfo "100644,$blob,noise/n$i.txt"
  tree=$(git write-tree)
  new=$(git commit-tree "$tree" -p "$old" -m "noise $i")
  if git update-ref refs/heads/main "$new" "$old" 2>/dev/null; then echo "$new"; fi
  sleep 0.03
done
`;

let fixture: LocalFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});

describe('local forge: merge while another process commits to the base', () => {
  it('lands each merge exactly once or refuses with BASE_MOVED, and loses no foreign commit', async () => {
    fixture = await localFixture();
    const { forge, repo } = fixture;
    const changes: Array<{ id: string; head: string }> = [];
    for (let n = 1; n <= 6; n += 1) {
      repo.commit(`work-${n}`, { [`work/${n}.txt`]: `work ${n}\n` }, `work ${n}`, 'main');
      const change = await forge.openChange({ head: `work-${n}`, base: 'main' });
      changes.push({ id: change.id, head: change.head.sha });
    }
    const stopFile = join(repo.dir, '..', 'stop');
    const child = spawn('sh', ['-c', COMMITTER], {
      cwd: repo.dir,
      env: { ...process.env, STOP_FILE: stopFile, INDEX_FILE: join(repo.dir, '..', 'committer-index') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const foreign: string[] = [];
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      foreign.push(...lines.filter((line) => line !== ''));
    });
    const merged: string[] = [];
    let baseMoved = 0;
    try {
      // Let the other writer get going before the first merge.
      while (foreign.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));
      for (const change of changes) {
        for (let attempt = 0; attempt < 200; attempt += 1) {
          try {
            const result = await forge.merge(change.id, { expectedHeadSha: change.head, title: `merge ${change.id}`, message: '' });
            merged.push(result.sha);
            break;
          } catch (error) {
            if (!isProofgateError(error, 'BASE_MOVED')) throw error;
            baseMoved += 1;
            expect((await forge.snapshot(change.id)).state).toBe('open');
          }
        }
      }
    } finally {
      writeFileSync(stopFile, '');
      await once(child, 'close');
    }
    expect(merged).toHaveLength(changes.length);
    const history = repo.git(['rev-list', 'refs/heads/main']).split('\n');
    for (const sha of [...merged, ...foreign]) expect(history).toContain(sha);
    // Exactly one commit per change names it, and each merge commit's parent was the base it was built on.
    const trailers = repo.git(['log', '--format=%(trailers:key=Proofgate-Change,valueonly)', 'refs/heads/main']).split('\n').filter((line) => line !== '');
    expect(trailers.sort()).toEqual(changes.map((change) => change.id).sort());
    for (const change of changes) {
      const snapshot = await forge.snapshot(change.id);
      expect(snapshot.state).toBe('merged');
      const parent = repo.git(['log', '-1', '--format=%P', snapshot.mergeCommitSha!]);
      expect(repo.git(['log', '-1', '--format=%(trailers:key=Proofgate-Base,valueonly)', snapshot.mergeCommitSha!])).toBe(parent);
      expect(repo.git(['show', `${snapshot.mergeCommitSha!}:work/${change.id}.txt`])).toBe(`work ${change.id}`);
    }
    // Figures for the report: how often the race was actually hit.
    console.info(`merge race: ${changes.length} merges, ${baseMoved} BASE_MOVED refusals, ${foreign.length} foreign commits`);
  }, 60_000);
});
