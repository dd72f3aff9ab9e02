import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportTree } from './git.js';

/** A lane's private place: a read-only snapshot of the head, a scratch HOME and TMPDIR. */
export interface LaneSandbox {
  readonly root: string;
  readonly snapshot: string;
  readonly home: string;
  readonly tmp: string;
  /** Digest of the snapshot right after it was made (paths, types, modes, bytes). */
  readonly manifest: string;
}

async function walk(dir: string, visit: (path: string, isDir: boolean) => Promise<void>): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await walk(path, visit);
    await visit(path, entry.isDirectory());
  }
}

/** Remove every write bit below `dir` (and on `dir` itself). */
async function makeReadOnly(dir: string): Promise<void> {
  await walk(dir, async (path) => {
    const info = await lstat(path);
    if (!info.isSymbolicLink()) await chmod(path, info.mode & 0o555);
  });
  await chmod(dir, 0o555);
}

/**
 * A digest of everything below `dir`: each entry's relative path, type, mode
 * and content (a symlink's target). Any write into the snapshot changes it.
 */
export async function treeManifest(dir: string): Promise<string> {
  const lines: string[] = [];
  const rootInfo = await lstat(dir);
  lines.push(`.\0dir\0${(rootInfo.mode & 0o7777).toString(8)}`);
  await walk(dir, async (path) => {
    const info = await lstat(path);
    const rel = path.slice(dir.length + 1);
    const mode = (info.mode & 0o7777).toString(8);
    if (info.isSymbolicLink()) lines.push(`${rel}\0link\0${await readlink(path)}`);
    else if (info.isDirectory()) lines.push(`${rel}\0dir\0${mode}`);
    else if (info.isFile()) lines.push(`${rel}\0file\0${mode}\0${createHash('sha256').update(await readFile(path)).digest('hex')}`);
    else lines.push(`${rel}\0other\0${mode}`);
  });
  lines.sort();
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

/** Make a sandbox holding a read-only export of `headSha` (the repository itself is not touched). */
export async function createSandbox(repoDir: string, headSha: string): Promise<LaneSandbox> {
  const root = await mkdtemp(join(tmpdir(), 'proofgate-lane-'));
  try {
    const snapshot = join(root, 'head');
    const home = join(root, 'home');
    const tmp = join(root, 'tmp');
    await Promise.all([mkdir(snapshot), mkdir(home), mkdir(tmp)]);
    const indexFile = join(root, 'export.index');
    await exportTree(repoDir, headSha, `${snapshot}/`, indexFile);
    await rm(indexFile, { force: true });
    await makeReadOnly(snapshot);
    return { root, snapshot, home, tmp, manifest: await treeManifest(snapshot) };
  } catch (error) {
    await removeSandbox(root);
    throw error;
  }
}

/** Delete a sandbox, restoring write bits on its directories first so that nothing read-only stays behind. */
export async function removeSandbox(root: string): Promise<void> {
  await walkTopDown(root, async (path) => {
    await chmod(path, 0o700).catch(() => undefined);
  });
  await rm(root, { recursive: true, force: true });
}

async function walkTopDown(dir: string, visit: (path: string) => Promise<void>): Promise<void> {
  const info = await lstat(dir).catch(() => undefined);
  if (!info?.isDirectory()) return;
  await visit(dir);
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.isDirectory()) await walkTopDown(join(dir, entry.name), visit);
  }
}
