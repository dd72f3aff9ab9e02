import { accessSync, chmodSync, constants, mkdtempSync, realpathSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { RUN_MARKER, RUN_ROOT, collectStrays, describeStrays } from './strays.js';

/**
 * vitest globalSetup: gives the run its own temporary folder (TMPDIR for
 * every worker, so every temp dir and fixture of the run lives under it) and
 * a marker in the environment every worker inherits. At the end it fails the
 * run, naming them, if any process that carries the marker or works inside
 * the folder is still alive (and kills them), then removes the folder.
 *
 * The folder is made in memory (/dev/shm) when the machine has one with room
 * to spare, else in the system's temporary folder: the tests' stores commit
 * with fsync and their repositories write many small files, and on a disk
 * that costs the run time without testing anything more (measured on the
 * 2-core CI machine: 250 s -> 236 s for the whole suite, 30 s less system
 * CPU). `PROOFGATE_TEST_TMPDIR` names another parent folder.
 */
export function setup(): () => void {
  const root = realpathSync(mkdtempSync(join(runParent(), 'proofgate-test-run-')));
  // Searchable by others: the jail's uid must reach the job dirs made under it.
  chmodSync(root, 0o711);
  process.env[RUN_MARKER] = basename(root);
  process.env[RUN_ROOT] = root;
  process.env.TMPDIR = root;
  return () => {
    const strays = collectStrays();
    if (strays.length > 0) {
      process.stderr.write(describeStrays(strays));
      process.exitCode = 1;
    }
    rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  };
}

/** Free space /dev/shm must have to hold a run (a container's default of 64 MiB does not). */
const MEMORY_FOLDER_MIN_FREE = 2 * 1024 ** 3;

function runParent(): string {
  const named = process.env.PROOFGATE_TEST_TMPDIR;
  if (named !== undefined && named !== '') return named;
  try {
    accessSync('/dev/shm', constants.W_OK | constants.X_OK);
    const fs = statfsSync('/dev/shm');
    if (fs.bavail * fs.bsize >= MEMORY_FOLDER_MIN_FREE) return '/dev/shm';
  } catch {
    // No /dev/shm (not Linux) or not writable: the system's temporary folder.
  }
  return tmpdir();
}
