import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { startTestProcess, stopTestProcess } from '../support/processes.js';
import { localFixture, type LocalFixture } from './local-support.js';

/**
 * Another process commits to `main` (plumbing + compare-and-swap update-ref,
 * like any well-behaved writer) while the forge merges changes. Every merge
 * must either land exactly once on top of the base it read, or fail with
 * BASE_MOVED and leave no trace; no commit of the other writer may be lost.
 *
 * The other writer makes a fixed number of commits and then ends: a writer
 * that never stops can starve every merge for good on a loaded machine (each
 * merge attempt spawns a dozen git processes between reading the base and
 * swapping it, longer than the writer needs for one commit), which is what
 * made this test time out. Once the writer has ended, a merge must land on
 * its first attempt.
 */
const FOREIGN_COMMITS = 20;
const COMMITTER = String.raw`
set -u
i=0
made=0
while [ "$made" -lt "$FOREIGN_COMMITS" ]; do
  # The test's worker is gone (killed, crashed): stop too.
  kill -0 "$WATCH_PID" 2>/dev/null || exit 0
  i=$((i+1))
  old=$(git rev-parse refs/heads/main)
  export GIT_INDEX_FILE="$INDEX_FILE"
  git read-tree "$old"
  blob=$(echo "noise $i" | git hash-object -w --stdin)
  git update-index --add --cacheinfo "100644,$blob,noise/n$i.txt"
  tree=$(git write-tree)
  new=$(git commit-tree "$tree" -p "$old" -m "noise $i")
  if git update-ref refs/heads/main "$new" "$old" 2>/dev/null; then echo "$new"; made=$((made+1)); fi
  sleep 0.03
done
`;

let fixture: LocalFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});

describe('local forge: merge while another process commits to the base', () => {
  it('lands each merge exactly once or refuses with BASE_MOVED, and loses no foreign commit', async ({ signal }) => {
    fixture = await localFixture();
    const { forge, repo } = fixture;
    const changes: Array<{ id: string; head: string }> = [];
    for (let n = 1; n <= 6; n += 1) {
      repo.commit(`work-${n}`, { [`work/${n}.txt`]: `work ${n}\n` }, `work ${n}`, 'main');
      const change = await forge.openChange({ head: `work-${n}`, base: 'main' });
      changes.push({ id: change.id, head: change.head.sha });
    }
    const child = startTestProcess('sh', ['-c', COMMITTER], {
      cwd: repo.dir,
      env: { ...process.env, FOREIGN_COMMITS: String(FOREIGN_COMMITS), WATCH_PID: String(process.pid), INDEX_FILE: join(repo.dir, '..', 'committer-index') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let writerEnded = false;
    // 'close': its output has been read to the end too.
    const ended = new Promise<void>((resolve) => child.once('close', () => resolve()));
    void ended.then(() => {
      writerEnded = true;
    });
    const foreign: string[] = [];
    let buffered = '';
    // Resolves once the other writer has made three commits (or has ended).
    const warmedUp = new Promise<void>((resolve) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop() ?? '';
        foreign.push(...lines.filter((line) => line !== ''));
        if (foreign.length >= 3) resolve();
      });
      void ended.then(() => resolve());
    });
    const merged: string[] = [];
    let baseMoved = 0;
    try {
      await warmedUp;
      expect(foreign.length).toBeGreaterThanOrEqual(3);
      for (const change of changes) {
        for (;;) {
          if (signal.aborted) throw new Error('the test was stopped');
          const afterWriter = writerEnded;
          try {
            const result = await forge.merge(change.id, { expectedHeadSha: change.head, title: `merge ${change.id}`, message: '' });
            merged.push(result.sha);
            break;
          } catch (error) {
            if (!isProofgateError(error, 'BASE_MOVED')) throw error;
            // Nobody else writes once the other writer has ended: the base cannot have moved.
            expect(afterWriter, 'BASE_MOVED although the other writer had ended').toBe(false);
            baseMoved += 1;
            expect((await forge.snapshot(change.id)).state).toBe('open');
          }
        }
      }
      await ended;
    } finally {
      await stopTestProcess(child);
    }
    expect(child.exitCode).toBe(0);
    expect(foreign).toHaveLength(FOREIGN_COMMITS);
    expect(merged).toHaveLength(changes.length);
    const history = repo.git(['rev-list', 'refs/heads/main']).split('\n');
    for (const sha of [...merged, ...foreign]) expect(history).toContain(sha);
    // Exactly one commit per change names it, and each merge commit's parent was the base it was built on.
    const trailers = repo
      .git(['log', '--format=%(trailers:key=Proofgate-Change,valueonly)', 'refs/heads/main'])
      .split('\n')
      .filter((line) => line !== '');
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
  }, 120_000);
});
