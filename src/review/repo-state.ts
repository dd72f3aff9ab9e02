import { createHash, type Hash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { ProofgateError } from '../core/index.js';
import { commitOf, objectInfo, readBetweenCheckoutMoves, runGit, type CheckoutGuardOptions } from '../host/index.js';
import { git } from './git.js';

/**
 * A digest of what a reviewer could use to change a review's outcome or to
 * attack proofgate itself, and nothing else (unrelated activity in the
 * repository during a lane, such as a new untracked file or another branch,
 * must not hold the review):
 * - HEAD: the branch it names, or its commit when detached (a checked-out
 *   branch moving by a merge is not the reviewer's doing; its files count
 *   through `git status`),
 * - what the review's base and head names resolve to,
 * - tracked-file modifications in the main work tree (`git status`, untracked
 *   files left out; proofgate's data directory left out),
 * - the git directory's `config` (and `config.worktree`), `hooks/` and
 *   `info/` (attributes, excludes): where a program git would run is named.
 * Config, hooks and info are read as files, never through git, so reading
 * them runs nothing.
 *
 * HEAD, the named refs and the status are read between proofgate's moves of a
 * checked-out branch (the checkout guard, src/host/checkout-guard.ts): from
 * the ref update until the work trees followed, `git status` shows the work
 * tree lagging the ref, which is not the reviewer's doing. `guard` bounds that
 * wait (and lets tests see it).
 */
export async function repositoryFingerprint(
  repoDir: string,
  dataDir?: string,
  refNames: readonly string[] = [],
  guard: CheckoutGuardOptions = {},
): Promise<string> {
  // One git for the three directories: the git dirs first, then the top level, which a bare repository lacks (128).
  const found = await runGit(repoDir, ['rev-parse', '--git-common-dir', '--git-dir', '--show-toplevel'], { okExitCodes: [128] });
  const [commonLine = '', gitDirLine = '', topLine = ''] = found.stdout.toString('utf8').split('\n');
  if (commonLine === '' || gitDirLine === '') throw new ProofgateError('GIT', `not a git repository: ${repoDir}`, { path: repoDir });
  const top = found.exitCode === 0 && topLine !== '' ? topLine : repoDir;
  const pathspec: string[] = [];
  if (dataDir !== undefined) {
    const rel = relative(top, dataDir);
    if (rel !== '' && !rel.startsWith('..') && !isAbsolute(rel)) pathspec.push('--', '.', `:(exclude)${rel}`);
  }
  const absolute = (dir: string) => (isAbsolute(dir) ? dir : resolve(repoDir, dir));
  const commonDir = absolute(commonLine);
  const gitDir = absolute(gitDirLine);
  // HEAD and the named refs through the repository's object reader: the bytes `git rev-parse` would print.
  const printed = (oid: string | null) => Buffer.from(oid === null ? '' : `${oid}\n`);
  const [head, symbolic, named, status] = await readBetweenCheckoutMoves(
    commonDir,
    () =>
      Promise.all([
        objectInfo(repoDir, 'HEAD')
          .catch(() => null)
          .then((info) => printed(info?.oid ?? null)),
        symbolicHead(repoDir, gitDir),
        Promise.all(
          refNames.map((name) =>
            commitOf(repoDir, name)
              .catch(() => null)
              .then(printed),
          ),
        ),
        settledStatus(top, pathspec),
      ]),
    guard,
  );
  const hash = createHash('sha256');
  // A HEAD that names a branch counts by that name (and the branch's files by `git status`), not by the commit the
  // branch points at: proofgate's own merges move a checked-out base while other changes' reviews run. A branch the
  // review names is still counted through `refNames`; a detached HEAD counts by its commit.
  const headPart = symbolic.toString().trim() === '' ? head : Buffer.alloc(0);
  for (const part of [headPart, symbolic, ...named, status]) hash.update(part).update('\0');
  const dirs = commonDir === gitDir ? [commonDir] : [commonDir, gitDir];
  for (const dir of dirs) {
    for (const entry of ['config', 'config.worktree', 'hooks', 'info']) await hashEntry(hash, join(dir, entry), entry);
  }
  return hash.digest('hex');
}

/**
 * What `git symbolic-ref -q HEAD` prints (the branch HEAD names, or nothing when it is detached), read from the
 * HEAD file of the git dir (`ref: <name>`), which is where git reads it; a HEAD that is not a plain file asks git.
 */
async function symbolicHead(repoDir: string, gitDir: string): Promise<Buffer> {
  const path = join(gitDir, 'HEAD');
  const info = await lstat(path).catch(() => null);
  if (info === null || !info.isFile()) return git(repoDir, ['symbolic-ref', '-q', 'HEAD'], { allowFail: true });
  const target = /^ref:\s*(\S+)\s*$/.exec((await readFile(path, 'utf8')).trim())?.[1];
  return Buffer.from(target === undefined ? '' : `${target}\n`);
}

/**
 * `git status` of the tracked files, read only (no index refresh, so it never
 * holds index.lock while proofgate moves a checked-out branch). A status that
 * shows something is read again 25 ms later until two reads agree (at most 5
 * times): files being written at that moment settle, while a reviewer's edit
 * stays. proofgate's own moves are waited out by the checkout guard; this is
 * also what is left when the guard's wait runs out.
 */
async function settledStatus(top: string, pathspec: readonly string[]): Promise<Buffer> {
  const read = () =>
    git(top, ['status', '--porcelain=v1', '-z', '--untracked-files=no', '--ignore-submodules=none', ...pathspec], { env: { GIT_OPTIONAL_LOCKS: '0' } });
  let last = await read();
  for (let attempt = 0; attempt < 5 && last.length > 0; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    const next = await read();
    if (next.equals(last)) return last;
    last = next;
  }
  return last;
}

/** Fold a file, symlink or directory tree (names, modes, link targets, bytes) into `hash`. */
async function hashEntry(hash: Hash, path: string, name: string): Promise<void> {
  const info = await lstat(path).catch(() => null);
  hash.update(`${name}\0`);
  if (info === null) {
    hash.update('absent\0');
    return;
  }
  hash.update(`${info.mode.toString(8)}\0`);
  if (info.isSymbolicLink()) {
    hash.update(`${await readlink(path)}\0`);
  } else if (info.isDirectory()) {
    const children = (await readdir(path)).sort();
    for (const child of children) await hashEntry(hash, join(path, child), `${name}/${child}`);
  } else if (info.isFile()) {
    hash.update(await readFile(path)).update('\0');
  }
}
