import { lstat, mkdir, realpath } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { JAIL_UID, JAIL_GID, isInside } from './plan.js';
import { chownTree, runsAsRoot } from './jobdir.js';

/** The real path of `path`, or of its nearest existing ancestor joined with the rest. */
async function realish(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    const parent = dirname(path);
    if (parent === path) return path;
    return `${(await realish(parent)).replace(/\/$/, '')}/${path.slice(parent.length).replace(/^\//, '')}`;
  }
}

/**
 * A cache directory jobs share (named by the trusted config), checked at use:
 * it must be absolute and must neither lie inside nor contain any of
 * `protectedPaths` (the repository's git dir, proofgate's data dir), after
 * resolving symlinks; a bad one is a `CONFIG` error. It is created when
 * missing and handed to the jail's uid. Returns its real path.
 */
export async function prepareCacheDir(cacheDir: string, protectedPaths: readonly string[]): Promise<string> {
  if (!cacheDir.startsWith('/')) throw new ProofgateError('CONFIG', `cacheDir must be an absolute path: ${cacheDir}`);
  const real = await realish(cacheDir);
  for (const path of protectedPaths) {
    const guarded = await realish(path);
    if (isInside(guarded, real) || isInside(real, guarded)) {
      throw new ProofgateError(
        'CONFIG',
        `cacheDir ${cacheDir} overlaps ${guarded}: a shared cache may never hold the repository's .git or proofgate's data dir`,
        { cacheDir },
      );
    }
  }
  await mkdir(real, { recursive: true, mode: 0o755 });
  if (runsAsRoot() && (await lstat(real)).uid !== JAIL_UID) await chownTree(real, JAIL_UID, JAIL_GID);
  return real;
}
