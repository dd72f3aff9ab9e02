import { resolve } from 'node:path';
import { GitRepository, checkDataDir, defaultLocalDataDir } from '../forge/local/index.js';

/**
 * Where a command keeps its state: `--data DIR`, else `PROOFGATE_DATA_DIR`,
 * else the command's own default (each command names it in its --help). A
 * directory proofgate cannot use (a file, or `proofgate.sqlite` that is a
 * directory) is one `DATA_DIR` error, before anything is opened.
 */
export function resolveDataDir(flag: string | undefined, fallback: string): string {
  const fromEnv = process.env.PROOFGATE_DATA_DIR;
  const dir = flag !== undefined && flag !== '' ? resolve(flag) : fromEnv !== undefined && fromEnv !== '' ? resolve(fromEnv) : resolve(fallback);
  checkDataDir(dir);
  return dir;
}

/**
 * The default state directory of a repository: `proofgate/` inside its common
 * git directory, so the work tree stays clean; null when `dir` is not inside a
 * git repository.
 */
export async function repositoryStateDir(dir: string): Promise<string | null> {
  const repo = await GitRepository.open(dir).catch(() => null);
  return repo === null ? null : defaultLocalDataDir(repo);
}
