import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { repairGit, repairGitText } from './git.js';

/**
 * How proofgate turns the tree an untrusted command edited into a commit,
 * without running anything in that tree and without a work tree the command
 * ever saw: compare the job's files with the commit they were exported from,
 * hash the changed ones into the repository's object store, and build the
 * new tree through a temporary index of proofgate's own. Nothing is
 * followed: a path whose parent is not a real directory is gone, a symlink is
 * kept as a link. Left out, with the reason: anything under a `.git`
 * directory, symlinks that point outside the tree, nested repositories and
 * special files (fifos, sockets, devices). New files the repository's ignore
 * rules match are left out too, as `git add --all` would.
 */

export interface RefusedPath {
  readonly path: string;
  readonly reason: string;
}

interface IndexRecord {
  readonly mode: string;
  readonly oid: string;
  readonly path: string;
}

export interface TreeChanges {
  /** `update-index --index-info` records: removals (mode 0) first, then additions and edits. */
  readonly records: readonly IndexRecord[];
  readonly refused: readonly RefusedPath[];
}

const GIT_COMPONENT = /(?:^|\/)\.git(?:\/|$)/i;

function split(out: Buffer): string[] {
  return out
    .toString('utf8')
    .split('\0')
    .filter((part) => part !== '');
}

/** The object id git gives `bytes` as a blob (sha1 or sha256 repositories). */
function blobId(format: string, bytes: Buffer): string {
  return createHash(format === 'sha256' ? 'sha256' : 'sha1')
    .update(`blob ${bytes.length}\0`)
    .update(bytes)
    .digest('hex');
}

/** lstat of `rel` below `root`, or null when it or any parent is missing or not a real directory. */
async function lstatInside(root: string, rel: string): Promise<Awaited<ReturnType<typeof lstat>> | null> {
  const parts = rel.split('/');
  for (let i = 1; i < parts.length; i += 1) {
    const parent = await lstat(join(root, ...parts.slice(0, i))).catch(() => null);
    if (parent === null || !parent.isDirectory()) return null;
  }
  return lstat(join(root, rel)).catch(() => null);
}

async function readRegular(path: string): Promise<Buffer> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/** Whether a symlink at `rel` with `target` stays inside the tree. */
function linkStaysInside(rel: string, target: string): boolean {
  if (target === '' || posix.isAbsolute(target)) return false;
  const resolved = posix.normalize(posix.join(posix.dirname(rel), target));
  return resolved !== '..' && !resolved.startsWith('../') && !GIT_COMPONENT.test(resolved);
}

/** The changes of the files below `dir` against the tree of `commit`. */
export async function treeChanges(repoDir: string, commit: string, dir: string, indexFile: string): Promise<TreeChanges> {
  const format = await repairGitText(repoDir, ['rev-parse', '--show-object-format']);
  const listed = await repairGit(repoDir, ['ls-tree', '-r', '-z', '--full-tree', commit]);
  const tracked = new Map<string, { mode: string; oid: string }>();
  for (const record of split(listed.stdout)) {
    const tab = record.indexOf('\t');
    const [mode = '', , oid = ''] = record.slice(0, tab).split(' ');
    tracked.set(record.slice(tab + 1), { mode, oid });
  }
  // New files: git lists what is not tracked and not ignored, never descending into a `.git` or following a symlink.
  const env = { GIT_INDEX_FILE: indexFile };
  await repairGit(repoDir, ['read-tree', commit], { env });
  const others = split((await repairGit(repoDir, ['--work-tree', dir, 'ls-files', '-z', '--others', '--exclude-standard'], { env })).stdout);
  const refused: RefusedPath[] = [];
  const top = await lstat(join(dir, '.git')).catch(() => null);
  if (top !== null) refused.push({ path: '.git', reason: 'a .git directory is never committed' });
  const removals: IndexRecord[] = [];
  const writes: IndexRecord[] = [];
  const zero = '0'.repeat(format === 'sha256' ? 64 : 40);
  for (const path of [...tracked.keys(), ...others]) {
    const was = tracked.get(path);
    if (was?.mode === '160000') continue; // a submodule is not the job's to change
    if (path.endsWith('/')) {
      refused.push({ path, reason: 'a nested git repository is never committed' });
      continue;
    }
    if (GIT_COMPONENT.test(path)) {
      refused.push({ path, reason: 'nothing under .git is committed' });
      continue;
    }
    const info = await lstatInside(dir, path);
    let next: { mode: string; bytes: Buffer } | null = null;
    if (info?.isSymbolicLink() === true) {
      const target = await readlink(join(dir, path));
      if (!linkStaysInside(path, target)) {
        refused.push({ path, reason: `symlink to ${JSON.stringify(target)} points outside the tree` });
        continue;
      }
      next = { mode: '120000', bytes: Buffer.from(target, 'utf8') };
    } else if (info?.isFile() === true) {
      next = { mode: (Number(info.mode) & 0o100) !== 0 ? '100755' : '100644', bytes: await readRegular(join(dir, path)) };
    } else if (info !== null && !info.isDirectory()) {
      refused.push({ path, reason: 'not a regular file, directory or symlink' });
      continue;
    }
    if (next === null) {
      if (was !== undefined) removals.push({ mode: '0', oid: zero, path });
      continue;
    }
    const oid = blobId(format, next.bytes);
    if (was !== undefined && was.mode === next.mode && was.oid === oid) continue;
    const written = await repairGitText(repoDir, ['hash-object', '-w', '--no-filters', '--stdin'], { input: next.bytes });
    writes.push({ mode: next.mode, oid: written, path });
  }
  return { records: [...removals, ...writes], refused };
}

/**
 * Make the commit: the tree of `from` with `changes` applied, through the
 * temporary index `indexFile` (already holding `from`'s tree), parents
 * `parents`. Returns null when the tree did not change.
 */
export async function commitChanges(
  repoDir: string,
  from: string,
  changes: TreeChanges,
  indexFile: string,
  commit: { readonly parents: readonly string[]; readonly message: string; readonly env: Readonly<Record<string, string>> },
): Promise<string | null> {
  const env = { GIT_INDEX_FILE: indexFile };
  if (changes.records.length > 0) {
    const input = changes.records.map((record) => `${record.mode} ${record.oid}\t${record.path}\0`).join('');
    await repairGit(repoDir, ['update-index', '-z', '--index-info'], { env, input });
  }
  const tree = await repairGitText(repoDir, ['write-tree'], { env });
  if (tree === (await repairGitText(repoDir, ['rev-parse', `${from}^{tree}`]))) return null;
  const parents = commit.parents.flatMap((parent) => ['-p', parent]);
  return repairGitText(repoDir, ['commit-tree', tree, ...parents, '-F', '-'], { input: commit.message, env: commit.env });
}
