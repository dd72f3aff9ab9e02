import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GitRepository } from '../../src/forge/local/index.js';
import { beginCheckoutMove, readBetweenCheckoutMoves } from '../../src/host/index.js';
import { repositoryFingerprint } from '../../src/review/repo-state.js';
import { makeSeededRepo, type TempRepo } from '../forge/git-fixture.js';
import { within } from '../support/wait.js';

/**
 * proofgate moves a branch checked out in a work tree in two steps: the ref, then the work tree
 * (`git read-tree -m -u`). In between, `git status` shows the work tree lagging the ref. A review's
 * repository fingerprint must not count that as the reviewer's doing, and must still count a
 * reviewer's edit.
 */

let fixture: TempRepo & { mainSha: string };
let repo: GitRepository;
/** A commit on top of main (made on another branch: main does not move). */
let next: string;

beforeEach(async () => {
  fixture = makeSeededRepo('proofgate-checkout-move-', { 'a.txt': 'a\n', 'b.txt': 'b\n' });
  fixture.git(['checkout', '-q', 'main']);
  next = fixture.commit('next', { 'a.txt': 'a, merged\n', 'c.txt': 'c\n' }, 'merged change', 'main');
  repo = await GitRepository.open(fixture.dir);
});
afterEach(() => {
  repo.close();
  fixture.cleanup();
});

/** `git status` of tracked files as the fingerprint reads it (no index refresh). */
function status(): string {
  return fixture.git(['status', '--porcelain', '--untracked-files=no'], { GIT_OPTIONAL_LOCKS: '0' });
}

describe('a repository fingerprint taken while proofgate moves the checked-out base', () => {
  it('waits for the move and equals the fingerprints before and after it (the status in between is dirty)', async () => {
    const before = await repositoryFingerprint(fixture.dir);
    // The mover's steps, held open between the ref update and the work tree following it.
    const move = await beginCheckoutMove(repo.commonDir);
    fixture.git(['update-ref', 'refs/heads/main', next, fixture.mainSha]);
    expect(status()).not.toBe('');
    // Read without waiting for the move (what the status heuristic alone gives): the lagging work tree counts.
    expect(await repositoryFingerprint(fixture.dir, undefined, [], { waitMs: 0 })).not.toBe(before);

    let waiting: () => void = () => undefined;
    const waited = new Promise<'waiting'>((resolve) => (waiting = () => resolve('waiting')));
    const during = repositoryFingerprint(fixture.dir, undefined, [], { onWait: waiting });
    expect(await within(Promise.race([during, waited]), 'the fingerprint waits for the move')).toBe('waiting');

    fixture.git(['read-tree', '-m', '-u', fixture.mainSha, next]);
    await move.end();
    expect(status()).toBe('');
    const after = await repositoryFingerprint(fixture.dir);
    expect(after).toBe(before);
    expect(await during).toBe(after);
  });

  it('GitRepository.moveBranch holds the guard for a checked-out branch, and only for one', async () => {
    // A read during which proofgate moves the checked-out main is read again.
    let reads = 0;
    const moved = await readBetweenCheckoutMoves(repo.commonDir, async () => {
      reads += 1;
      return reads === 1 ? repo.moveBranch('main', next, fixture.mainSha, 'test: move main') : null;
    });
    expect(reads).toBe(2);
    expect(moved).toBeNull();
    expect(fixture.sha('main')).toBe(next);
    expect(status()).toBe('');

    // A branch no work tree has checked out moves without it.
    reads = 0;
    const other = await readBetweenCheckoutMoves(repo.commonDir, async () => {
      reads += 1;
      return repo.moveBranch('next', fixture.mainSha, next, 'test: move next');
    });
    expect(other).toEqual({ swapped: true, left: [] });
    expect(reads).toBe(1);
  });
});

describe('a reviewer edit during a lane', () => {
  it('still changes the fingerprint, also when proofgate moved the base during the lane', async () => {
    const before = await repositoryFingerprint(fixture.dir);
    expect(await repo.moveBranch('main', next, fixture.mainSha, 'test: merge')).toEqual({ swapped: true, left: [] });
    expect(await repositoryFingerprint(fixture.dir)).toBe(before);
    writeFileSync(join(fixture.dir, 'b.txt'), 'b, edited by the reviewer\n');
    expect(await repositoryFingerprint(fixture.dir)).not.toBe(before);
  });
});
