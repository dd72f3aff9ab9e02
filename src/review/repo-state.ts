import { createHash, type Hash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { git, gitText } from './git.js';

/**
 * A digest of what a reviewer could use to change a review's outcome or to
 * attack proofgate itself, and nothing else (unrelated activity in the
 * repository during a lane, such as a new untracked file or another branch,
 * must not hold the review):
 * - HEAD (its commit and the branch it names),
 * - what the review's base and head names resolve to,
 * - tracked-file modifications in the main work tree (`git status`, untracked
 *   files left out; proofgate's data directory left out),
 * - the git directory's `config` (and `config.worktree`), `hooks/` and
 *   `info/` (attributes, excludes): where a program git would run is named.
 * Config, hooks and info are read as files, never through git, so reading
 * them runs nothing.
 */
export async function repositoryFingerprint(repoDir: string, dataDir?: string, refNames: readonly string[] = []): Promise<string> {
  const top = await gitText(repoDir, ['rev-parse', '--show-toplevel']).catch(() => repoDir);
  const pathspec: string[] = [];
  if (dataDir !== undefined) {
    const rel = relative(top, dataDir);
    if (rel !== '' && !rel.startsWith('..') && !isAbsolute(rel)) pathspec.push('--', '.', `:(exclude)${rel}`);
  }
  const absolute = (dir: string) => (isAbsolute(dir) ? dir : resolve(repoDir, dir));
  const [head, symbolic, named, status, commonDir, gitDir] = await Promise.all([
    git(repoDir, ['rev-parse', 'HEAD'], { allowFail: true }),
    git(repoDir, ['symbolic-ref', '-q', 'HEAD'], { allowFail: true }),
    Promise.all(refNames.map((name) => git(repoDir, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${name}^{commit}`], { allowFail: true }))),
    git(top, ['status', '--porcelain=v1', '-z', '--untracked-files=no', '--ignore-submodules=none', ...pathspec]),
    gitText(repoDir, ['rev-parse', '--git-common-dir']).then(absolute),
    gitText(repoDir, ['rev-parse', '--git-dir']).then(absolute),
  ]);
  const hash = createHash('sha256');
  for (const part of [head, symbolic, ...named, status]) hash.update(part).update('\0');
  const dirs = commonDir === gitDir ? [commonDir] : [commonDir, gitDir];
  for (const dir of dirs) {
    for (const entry of ['config', 'config.worktree', 'hooks', 'info']) await hashEntry(hash, join(dir, entry), entry);
  }
  return hash.digest('hex');
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
