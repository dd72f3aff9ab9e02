import { chmodSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { RUN_MARKER, RUN_ROOT, collectStrays, describeStrays } from './strays.js';

/**
 * vitest globalSetup: gives the run its own temporary folder (TMPDIR for
 * every worker, so every temp dir and fixture of the run lives under it) and
 * a marker in the environment every worker inherits. At the end it fails the
 * run, naming them, if any process that carries the marker or works inside
 * the folder is still alive (and kills them), then removes the folder.
 */
export function setup(): () => void {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'proofgate-test-run-')));
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
