import { randomBytes } from 'node:crypto';
import { link, mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { processGone } from './process.js';

/**
 * The checkout guard: how proofgate processes sharing one repository tell each other that a branch checked out in a
 * work tree is being moved (its ref updated, then its work trees brought along with `git read-tree -m -u`). Between
 * those two steps `git status` shows the work tree lagging the ref; a reader that must not mistake that for an edit
 * (a review's repository fingerprint) reads only between moves, seqlock-style, and movers of the same repository
 * follow one another.
 *
 * State: the directory `proofgate-checkout` in the repository's common git directory (a name git does not use),
 * holding one file per move, `move.<generation>`, made with one atomic `link` (a second mover for the same
 * generation gets EEXIST). It holds the mover's pid while the move runs and `done` once it ended (written by atomic
 * rename). A move runs while its file names a pid that is alive; the pid of a mover that died (process.kill(pid, 0)
 * fails with ESRCH) frees it, and nothing ever has to delete a stale file to get past it. Only a file above every
 * other is a move; a mover whose file is not (its view was stale) gives it up and tries again, so the highest
 * generation only grows. Every wait is bounded; past the bound a mover moves anyway and a reader reads as without
 * the guard.
 */

/** The guard's directory in the common git directory. */
export const CHECKOUT_GUARD_DIR = 'proofgate-checkout';

/** How long a reader or mover waits for moves in progress by default. */
const WAIT_MS = 10_000;
/** How often a waiter looks again (there is no event across processes). */
const POLL_MS = 5;
/** Generations stay far below 2^53: a longer number is not a move file. */
const MOVE_FILE = /^move\.(\d{1,15})$/;
const TEMP_FILE = /^tmp\.(\d+)\.[0-9a-f]+$/;
const DONE = 'done';

export interface CheckoutGuardOptions {
  /** How long to wait for moves in progress (default 10 s); past it a mover moves anyway and a reader reads anyway. */
  readonly waitMs?: number;
  /** How often to look again while waiting (default 5 ms). */
  readonly pollMs?: number;
  /** Called each time the caller waits because a move is in progress (tests observe the wait with it). */
  readonly onWait?: () => void;
}

/** A move in progress; `end()` once every work tree followed (or the move was given up). Never throws. */
export interface CheckoutMove {
  end(): Promise<void>;
}

interface Sight {
  /** Every move file and what it held, in generation order: equal sights mean nothing moved in between. */
  readonly key: string;
  /** The highest generation (0: none). */
  readonly top: number;
  /** A move is in progress: a file names a pid that is alive. */
  readonly busy: boolean;
  /** Files of moves that ended or whose mover is gone (with their generation), and temp files of gone processes (0). */
  readonly over: readonly { readonly name: string; readonly generation: number }[];
}

const alive = (pid: number): boolean => !processGone(pid);

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function tempName(dir: string): string {
  return join(dir, `tmp.${process.pid}.${randomBytes(8).toString('hex')}`);
}

/**
 * What the guard directory holds now (a missing directory: nothing). A file gone between listing and reading was a
 * move that had ended or was given up, and is left out.
 */
async function look(dir: string): Promise<Sight> {
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  const moves: { generation: number; name: string; held: string }[] = [];
  const over: { name: string; generation: number }[] = [];
  for (const name of names) {
    const temp = TEMP_FILE.exec(name);
    if (temp !== null) {
      if (!alive(Number(temp[1]))) over.push({ name, generation: 0 });
      continue;
    }
    const move = MOVE_FILE.exec(name);
    if (move === null) continue;
    const held = await readFile(join(dir, name), 'utf8').catch(() => null);
    if (held !== null) moves.push({ generation: Number(move[1]), name, held: held.trim() });
  }
  moves.sort((a, b) => a.generation - b.generation);
  let busy = false;
  for (const move of moves) {
    const pid = /^\d+$/.test(move.held) ? Number(move.held) : null;
    if (pid !== null && alive(pid)) busy = true;
    else over.push({ name: move.name, generation: move.generation });
  }
  return {
    key: moves.map((move) => `${move.generation}:${move.held}`).join('\n'),
    top: moves.length === 0 ? 0 : (moves[moves.length - 1]?.generation ?? 0),
    busy,
    over,
  };
}

const NO_MOVE: CheckoutMove = { end: () => Promise.resolve() };

/**
 * Begin a move of a branch checked out in a work tree of the repository whose common git directory is `commonDir`:
 * call before the ref update, `end()` after the last work tree followed. Waits (bounded) while another move runs. A
 * guard that cannot be written (a read-only git directory) is no guard: the move runs as without it.
 */
export async function beginCheckoutMove(commonDir: string, options: CheckoutGuardOptions = {}): Promise<CheckoutMove> {
  const dir = join(commonDir, CHECKOUT_GUARD_DIR);
  const deadline = Date.now() + (options.waitMs ?? WAIT_MS);
  const temp = tempName(dir);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(temp, `${process.pid}\n`);
  } catch {
    return NO_MOVE;
  }
  try {
    for (;;) {
      const seen = await look(dir);
      const late = Date.now() >= deadline;
      if (seen.busy && !late) {
        options.onWait?.();
        await sleep(options.pollMs ?? POLL_MS);
        continue;
      }
      const generation = seen.top + 1;
      const path = join(dir, `move.${generation}`);
      const made = await link(temp, path).then(
        () => true,
        (error: NodeJS.ErrnoException) => {
          if (error.code === 'EEXIST') return false;
          throw error;
        },
      );
      if (made) {
        // A view that went stale between the look and the link may have taken a generation a cleanup had freed:
        // only a file above every other is a move.
        const top = await look(dir).then(
          (sight) => sight.top,
          () => null,
        );
        if (top === generation) return heldMove(dir, path, generation);
        await unlink(path).catch(() => undefined);
        if (top === null) return NO_MOVE;
      }
      if (late) return NO_MOVE;
    }
  } catch {
    return NO_MOVE;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}

function heldMove(dir: string, path: string, generation: number): CheckoutMove {
  let ended: Promise<void> | null = null;
  const end = async () => {
    try {
      const temp = tempName(dir);
      await writeFile(temp, `${DONE}\n`);
      await rename(temp, path);
      // Files below this one whose move is over, and temp files of gone processes: never one of a live move.
      const seen = await look(dir);
      await Promise.all(seen.over.filter((entry) => entry.generation < generation).map((entry) => unlink(join(dir, entry.name)).catch(() => undefined)));
    } catch {
      // A move file left naming this process counts as free once the process is gone.
    }
  };
  return {
    end: () => {
      ended ??= end();
      return ended;
    },
  };
}

/**
 * `read()` at a moment no checked-out branch of the repository moved (seqlock-style): wait while a move is in
 * progress, read, and keep the result only when the guard is just as it was before the read (no move began or
 * ended meanwhile); else read again. Past the wait bound, or when the guard cannot be read, the result of a plain
 * `read()` is returned.
 */
export async function readBetweenCheckoutMoves<T>(commonDir: string, read: () => Promise<T>, options: CheckoutGuardOptions = {}): Promise<T> {
  const dir = join(commonDir, CHECKOUT_GUARD_DIR);
  const deadline = Date.now() + (options.waitMs ?? WAIT_MS);
  for (;;) {
    const before = await look(dir).catch(() => null);
    if (before === null) return read();
    if (before.busy) {
      if (Date.now() >= deadline) return read();
      options.onWait?.();
      await sleep(options.pollMs ?? POLL_MS);
      continue;
    }
    const value = await read();
    const after = await look(dir).catch(() => null);
    if (after === null || after.key === before.key) return value;
    if (Date.now() >= deadline) return read();
  }
}
