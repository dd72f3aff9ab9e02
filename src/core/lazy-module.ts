import { createRequire } from 'node:module';

const requireHere = createRequire(import.meta.url);

/**
 * A package (or one of Node's own modules) loaded on first use instead of
 * when the program starts. Every `proofgate` command is a new process, and
 * most never touch PostgreSQL, the job queue or the service's logger, whose
 * loading would cost more CPU than many commands' own work
 * (bench/cli-startup.bench.mjs). For Node's modules and the CommonJS packages
 * the CLI bundle leaves outside (scripts/bundle-cli.mjs) only.
 */
export function lazyModule<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= requireHere(name) as T);
}
