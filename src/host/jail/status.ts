import { access, constants, lstat, readlink, rm } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { runProcess } from '../process.js';
import { makeJobDir, runsAsRoot } from './jobdir.js';
import { BWRAP_ENV, jailArgv, type JailTools, type SystemLayout } from './plan.js';
import type { JailStatus } from './types.js';

/**
 * Whether the jail works here, found by running it once (some distributions
 * restrict unprivileged user namespaces, so the binary existing proves
 * nothing). The answer is cached for the life of the process.
 */

const INSTALL_HINT = 'install the Debian package bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces';

let cached: Promise<JailStatus> | undefined;
let layoutCache: Promise<SystemLayout> | undefined;
let toolsCache: Promise<JailTools> | undefined;

/** The first executable `name` on proofgate's PATH (then the system directories); the bare name when there is none, so spawning it fails plainly. */
async function findTool(name: string): Promise<string> {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/bin', '/usr/bin', '/bin', '/usr/sbin', '/sbin'].filter((dir) => isAbsolute(dir));
  for (const dir of dirs) {
    const path = join(dir, name);
    if (
      await access(path, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return path;
  }
  return name;
}

/** Where prlimit, setpriv, bwrap and slirp4netns are (looked up once). */
export function jailTools(): Promise<JailTools> {
  toolsCache ??= (async () => ({
    prlimit: await findTool('prlimit'),
    setpriv: await findTool('setpriv'),
    // PROOFGATE_BWRAP names the bwrap binary to use instead of the one on PATH (a bubblewrap outside PATH; tests point
    // it at a missing file to see proofgate refuse untrusted code on a machine without a working jail).
    bwrap: process.env.PROOFGATE_BWRAP || (await findTool('bwrap')),
    slirp4netns: await findTool('slirp4netns'),
  }))();
  return toolsCache;
}

export function systemLayout(): Promise<SystemLayout> {
  layoutCache ??= (async () => {
    const entries: { name: string; link: string | null }[] = [];
    for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
      const info = await lstat(`/${name}`).catch(() => undefined);
      if (info?.isSymbolicLink() === true) entries.push({ name, link: await readlink(`/${name}`) });
      else if (info?.isDirectory() === true) entries.push({ name, link: null });
    }
    return entries;
  })();
  return layoutCache;
}

async function probe(): Promise<JailStatus> {
  const dir = await makeJobDir('proofgate-jail-probe-');
  try {
    const argv = jailArgv({
      request: { argv: ['true'], sandbox: 'jail', jobDir: dir, cwd: dir, env: { PATH: '/usr/bin:/bin' }, timeoutMs: 20_000, output: { maxBytes: 4096 } },
      layout: await systemLayout(),
      tools: await jailTools(),
      dropRoot: runsAsRoot(),
    });
    const result = await runProcess({ argv, cwd: '/', env: BWRAP_ENV, timeoutMs: 20_000, output: { maxBytes: 4096 }, killGraceMs: 0 });
    if (result.exitCode === 0) return { available: true };
    const why = result.startError ?? (result.output.toString('utf8').trim().split('\n')[0] || `exit code ${result.exitCode ?? result.signal ?? 'unknown'}`);
    return { available: false, reason: `bubblewrap does not work here (${why}): ${INSTALL_HINT}` };
  } finally {
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

export function jailStatus(): Promise<JailStatus> {
  cached ??= probe().catch((error: unknown) => ({
    available: false as const,
    reason: `jail probe failed (${error instanceof Error ? error.message : String(error)}): ${INSTALL_HINT}`,
  }));
  return cached;
}

/** Throw JAIL_UNAVAILABLE unless the jail works. */
export async function requireJail(): Promise<void> {
  const status = await jailStatus();
  if (!status.available) throw new ProofgateError('JAIL_UNAVAILABLE', status.reason);
}
