import { chmod, lstat, mkdir, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { runGit } from '../git.js';
import { chownTree } from './jobdir.js';

/**
 * A job's tree: the exact bytes of one commit, written by proofgate itself
 * from git's object store (`ls-tree` and `cat-file --batch`), so no checkout
 * machinery runs: no filter, hook, attribute or configured driver of the
 * repository. Nothing in the result points back at the repository. With
 * `git: true` the job gets a standalone clone of the commit instead (objects
 * fetched over git's own transport: no alternates, no remote, no FETCH_HEAD).
 * When proofgate runs as root the files end up owned by the owner of `dir`
 * (or of its parent when `dir` is new), so a prepared job dir stays the job's.
 */

const SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
/** Objects are read in batches of about this many bytes. */
const BATCH_BYTES = 64 * 1024 * 1024;

interface TreeEntry {
  readonly mode: string;
  readonly type: string;
  readonly oid: string;
  readonly size: number;
  readonly path: string;
}

function unsafe(path: string, why: string): ProofgateError {
  return new ProofgateError('INVALID_INPUT', `export: refusing tree entry ${JSON.stringify(path)}: ${why}`);
}

/** Parse `ls-tree -r -z -l` output; refuse paths that could leave `dir` or name a `.git`. */
export function parseTree(out: Buffer): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (const record of out.toString('utf8').split('\0')) {
    if (record === '') continue;
    const tab = record.indexOf('\t');
    const [mode = '', type = '', oid = '', size = ''] = record.slice(0, tab).trim().split(/\s+/);
    const path = record.slice(tab + 1);
    const parts = path.split('/');
    if (path.startsWith('/') || parts.some((part) => part === '' || part === '.' || part === '..')) throw unsafe(path, 'not a relative path');
    if (parts.some((part) => part.toLowerCase() === '.git')) throw unsafe(path, 'a .git component');
    entries.push({ mode, type, oid, size: size === '-' ? 0 : Number(size), path });
  }
  return entries;
}

/** Read blobs through one `cat-file --batch` per batch; returns oid -> bytes. */
async function readBlobs(repoDir: string, oids: readonly string[]): Promise<Map<string, Buffer>> {
  const blobs = new Map<string, Buffer>();
  if (oids.length === 0) return blobs;
  const { stdout } = await runGit(repoDir, ['cat-file', '--batch'], { input: `${oids.join('\n')}\n`, maxBuffer: BATCH_BYTES * 2 + 1024 * 1024 });
  let at = 0;
  while (at < stdout.length) {
    const eol = stdout.indexOf(0x0a, at);
    const header = stdout.subarray(at, eol).toString('utf8');
    const [oid = '', type = '', size = ''] = header.split(' ');
    if (type !== 'blob') throw new ProofgateError('GIT', `export: object ${oid} is ${type || 'missing'}, not a blob`);
    const start = eol + 1;
    const end = start + Number(size);
    blobs.set(oid, stdout.subarray(start, end));
    at = end + 1;
  }
  return blobs;
}

async function ownerOf(dir: string): Promise<{ uid: number; gid: number }> {
  const info = await lstat(dir).catch(() => lstat(dirname(dir)));
  return { uid: info.uid, gid: info.gid };
}

async function assertEmptyDir(dir: string): Promise<void> {
  const info = await lstat(dir).catch(() => undefined);
  if (info === undefined) {
    await mkdir(dir, { recursive: true, mode: 0o755 });
    return;
  }
  if (!info.isDirectory() || (await readdir(dir)).length > 0) throw new ProofgateError('INVALID_INPUT', `export: ${dir} must be an empty directory`);
}

async function resolveCommit(repoDir: string, sha: string): Promise<void> {
  if (!SHA.test(sha)) throw new ProofgateError('INVALID_INPUT', `export: not a full commit id: ${sha}`);
  const type = await runGit(repoDir, ['cat-file', '-t', sha], { okExitCodes: [1, 128] });
  if (type.stdout.toString('utf8').trim() !== 'commit') throw new ProofgateError('GIT', `export: ${sha} is not a commit of ${repoDir}`);
}

async function writeTree(repoDir: string, sha: string, dir: string): Promise<void> {
  const tree = await runGit(repoDir, ['ls-tree', '-r', '-z', '-l', '--full-tree', sha]);
  const entries = parseTree(tree.stdout);
  const made = new Set<string>(['']);
  const ensureParent = async (path: string) => {
    const parts = path.split('/').slice(0, -1);
    for (let i = 1; i <= parts.length; i += 1) {
      const rel = parts.slice(0, i).join('/');
      if (made.has(rel)) continue;
      // A fresh directory of ours: mkdir fails on anything already there (a symlink an earlier entry wrote included).
      await mkdir(join(dir, rel), { mode: 0o755 });
      made.add(rel);
    }
  };
  const files = entries.filter((entry) => entry.type === 'blob');
  for (let start = 0; start < files.length;) {
    let bytes = 0;
    let end = start;
    while (end < files.length && (end === start || bytes + (files[end]?.size ?? 0) <= BATCH_BYTES)) {
      bytes += files[end]?.size ?? 0;
      end += 1;
    }
    const batch = files.slice(start, end);
    const blobs = await readBlobs(repoDir, [...new Set(batch.map((entry) => entry.oid))]);
    for (const entry of batch) {
      await ensureParent(entry.path);
      const target = join(dir, entry.path);
      const content = blobs.get(entry.oid) ?? Buffer.alloc(0);
      if (entry.mode === '120000') await symlink(content.toString('utf8'), target);
      else {
        await writeFile(target, content, { flag: 'wx', mode: entry.mode === '100755' ? 0o755 : 0o644 });
        await chmod(target, entry.mode === '100755' ? 0o755 : 0o644);
      }
    }
    start = end;
  }
  // Submodules (gitlinks) become empty directories, as a checkout without them leaves them.
  for (const entry of entries.filter((item) => item.type === 'commit')) {
    await ensureParent(entry.path);
    await mkdir(join(dir, entry.path), { mode: 0o755 });
  }
}

async function cloneCommit(repoDir: string, sha: string, dir: string): Promise<void> {
  const config: [string, string][] = [['safe.directory', dir]];
  await runGit(dir, ['init', '--quiet', '--template=', '.'], { config, isolated: true });
  // The one local transfer: `file` into the new repository (nothing lazily fetched there); the upload-pack it starts in
  // the repository fetches nothing lazily either (GIT_NO_LAZY_FETCH, see gitEnvironment).
  await runGit(dir, ['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--', repoDir, sha], { config, isolated: true, transport: ['file'] });
  await runGit(dir, ['checkout', '--quiet', '--detach', sha], { config, isolated: true });
  await rm(join(dir, '.git', 'FETCH_HEAD'), { force: true });
}

/** Write the tree of commit `sha` of the repository into `dir` (empty or missing; no .git pointing back); with `git: true`, a standalone clone of that sha instead. */
export async function exportCommit(repoDir: string, sha: string, dir: string, options: { git?: boolean } = {}): Promise<void> {
  await resolveCommit(repoDir, sha);
  const owner = await ownerOf(dir);
  await assertEmptyDir(dir);
  if (options.git === true) await cloneCommit(repoDir, sha, dir);
  else await writeTree(repoDir, sha, dir);
  if (process.getuid?.() === 0 && owner.uid !== 0) await chownTree(dir, owner.uid, owner.gid);
}
