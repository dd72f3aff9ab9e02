import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, copyFile, lstat, mkdir, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalJson } from '../core/index.js';
import type { BoundFile, ReviewRequestV1 } from '../contracts/index.js';
import { exportCommit, makeJobDir, prepareJobDir } from '../host/index.js';
import { verifyRequestInputs } from './request.js';

/**
 * A command lane's places on the host, all under `root` (which
 * `removeSandbox` deletes). The program and its working directory come from
 * `program`, an export of the TRUSTED commit (the base the review's config
 * was read from); the head under review is `snapshot`, data the program
 * reads. Both are read-only (read-only mounts in the jail, no write bits
 * besides). `jobDir` is the one writable tree and the only other thing the
 * jail sees: HOME, TMPDIR, an evidence directory, and read-only copies of the
 * request, the diff and the contract. Nothing of proofgate's data dir is
 * mounted: `request` is the lane's request with its paths moved into the job
 * dir (the same digests), and proofgate collects the evidence from there
 * after the program ended.
 */
export interface LaneSandbox {
  readonly root: string;
  readonly jobDir: string;
  readonly program: string;
  readonly snapshot: string;
  readonly home: string;
  readonly tmp: string;
  readonly requestFile: string;
  /** The request as the reviewer sees it: the staged copies, the job's evidence directory. */
  readonly request: ReviewRequestV1;
  /** `request` as canonical JSON (the request file's text and the reviewer's stdin). */
  readonly requestText: string;
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
export async function makeReadOnly(dir: string): Promise<void> {
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
    else if (info.isFile())
      lines.push(
        `${rel}\0file\0${mode}\0${createHash('sha256')
          .update(await readFile(path))
          .digest('hex')}`,
      );
    else lines.push(`${rel}\0other\0${mode}`);
  });
  lines.sort();
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

/** Copy a bound input into the job dir as a read-only file proofgate owns; the copy keeps the binding's digest. */
async function stageBound(file: BoundFile, path: string): Promise<BoundFile> {
  await copyFile(file.path, path, constants.COPYFILE_EXCL);
  await chmod(path, 0o444);
  return { path, sha256: file.sha256 };
}

/**
 * Make a lane's sandbox: read-only exports of `trustedSha` (the program tree)
 * and of the request's head (the data), and a job directory the jailed
 * program may write, holding its HOME, TMPDIR and evidence directory, and
 * read-only copies of the diff, the contract and the request naming them.
 * The copies are checked against the bound digests before anything runs
 * (MUTABLE_INPUT). The repository and the data dir are not touched.
 */
export async function createSandbox(repoDir: string, trustedSha: string, laneRequest: ReviewRequestV1): Promise<LaneSandbox> {
  const root = await makeJobDir('proofgate-lane-');
  try {
    const jobDir = join(root, 'job');
    const program = join(root, 'trusted');
    const snapshot = join(root, 'head');
    const home = join(jobDir, 'home');
    const tmp = join(jobDir, 'tmp');
    const evidenceDir = join(jobDir, 'evidence');
    await Promise.all([mkdir(program), mkdir(snapshot), mkdir(jobDir)]);
    await Promise.all([mkdir(home), mkdir(tmp), mkdir(evidenceDir)]);
    await exportCommit(repoDir, trustedSha, program);
    await exportCommit(repoDir, laneRequest.head_sha, snapshot);
    await Promise.all([makeReadOnly(program), makeReadOnly(snapshot)]);
    await prepareJobDir(jobDir);
    // Staged after prepareJobDir, so they stay proofgate's files: the jailed uid reads them but cannot rewrite them in
    // place, and a copy it replaces no longer matches its digest (the result's validation re-reads them).
    const request: ReviewRequestV1 = {
      ...laneRequest,
      diff: await stageBound(laneRequest.diff, join(jobDir, 'change.diff')),
      acceptance_contract: await stageBound(laneRequest.acceptance_contract, join(jobDir, 'acceptance-contract.md')),
      evidence_dir: evidenceDir,
    };
    await verifyRequestInputs(request);
    const requestText = `${canonicalJson(request)}\n`;
    const requestFile = join(jobDir, 'request.json');
    await writeFile(requestFile, requestText, { mode: 0o444, flag: 'wx' });
    return { root, jobDir, program, snapshot, home, tmp, requestFile, request, requestText, manifest: await treeManifest(snapshot) };
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
