import { lchown, lstat, mkdir, mkdtemp, readdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { JAIL_GID, JAIL_UID } from './plan.js';

/**
 * Job directories. When proofgate runs as root the job runs as JAIL_UID, and
 * bubblewrap (already that uid) resolves every bind source itself: a job dir
 * must be owned by JAIL_UID and every directory above it searchable by others.
 */

/** True when proofgate runs as root, so the jail drops to JAIL_UID first. */
export function runsAsRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Whether uid JAIL_UID can search `dir` (owner, group or other execute bit). */
function searchable(info: { uid: number; gid: number; mode: number }): boolean {
  if (info.uid === JAIL_UID) return (info.mode & 0o100) !== 0;
  if (info.gid === JAIL_GID) return (info.mode & 0o010) !== 0;
  return (info.mode & 0o001) !== 0;
}

/** bubblewrap runs as the jail's uid, so it must be able to reach every bind source; say which directory is in the way. */
export async function assertReachable(path: string): Promise<void> {
  const info = await stat(path).catch(() => undefined);
  if (info === undefined) throw new ProofgateError('INVALID_INPUT', `jail: ${path} does not exist`);
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const parent = await stat(dir);
    if (!searchable(parent)) {
      throw new ProofgateError(
        'INVALID_INPUT',
        `jail: uid ${JAIL_UID} cannot reach ${path}: ${dir} is not searchable by others (put job directories under a world-searchable parent)`,
      );
    }
    if (dir === '/') return;
  }
}

let baseCache: Promise<string> | undefined;

/** Whether every directory above `path` (and `path` itself) is searchable by the jail's uid. */
async function reachable(path: string): Promise<boolean> {
  for (let dir = path; ; dir = dirname(dir)) {
    const info = await stat(dir).catch(() => undefined);
    if (info === undefined || !searchable(info)) return false;
    if (dir === '/') return true;
  }
}

/**
 * Where job directories go: the system temporary directory when the jail's
 * uid can reach it (bubblewrap resolves bind sources as that uid), else /tmp
 * or /var/tmp. When proofgate does not run as root, the jail runs as its own
 * uid and the temporary directory always does.
 */
function jobBase(): Promise<string> {
  baseCache ??= (async () => {
    if (!runsAsRoot()) return tmpdir();
    for (const candidate of [tmpdir(), '/tmp', '/var/tmp']) if (await reachable(candidate)) return candidate;
    throw new ProofgateError(
      'JAIL_UNAVAILABLE',
      `no temporary directory that uid ${JAIL_UID} can reach (${tmpdir()}, /tmp, /var/tmp): make one world-searchable`,
    );
  })();
  return baseCache;
}

/** A fresh, empty job directory (mkdtemp under a base the jail's uid can reach), prepared with `prepareJobDir`; the caller removes it. */
export async function makeJobDir(prefix = 'proofgate-job-'): Promise<string> {
  const dir = await mkdtemp(join(await jobBase(), prefix));
  await prepareJobDir(dir);
  return dir;
}

/** Make `dir` a job directory the jailed uid can write: created if missing, and (when proofgate runs as root) it and everything below owned by JAIL_UID. */
export async function prepareJobDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (!runsAsRoot()) return;
  await chownTree(dir, JAIL_UID, JAIL_GID);
}

/** lchown `path` and everything below it (symlinks are not followed). */
export async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  await lchown(path, uid, gid);
  const info = await lstat(path);
  if (!info.isDirectory()) return;
  for (const entry of await readdir(path, { withFileTypes: true })) await chownTree(join(path, entry.name), uid, gid);
}
