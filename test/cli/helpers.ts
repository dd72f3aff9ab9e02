import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** Run the built CLI as a user would. */
export function runCli(args: readonly string[], options: { input?: string; cwd?: string; env?: NodeJS.ProcessEnv } = {}): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    input: options.input ?? '',
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    timeout: 60_000,
  });
}
