import { resolve } from 'node:path';

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
