import { resolve } from 'node:path';
import { GitRepository, defaultLocalDataDir } from '../forge/local/index.js';

/**
 * Where a command keeps its state: `--data DIR`, else `PROOFGATE_DATA_DIR`,
 * else the command's own default (each command names it in its --help).
 */
export function resolveDataDir(flag: string | undefined, fallback: string): string {
  if (flag !== undefined && flag !== '') return resolve(flag);
  const fromEnv = process.env.PROOFGATE_DATA_DIR;
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  return resolve(fallback);
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
