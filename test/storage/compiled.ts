import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';

const root = resolve(import.meta.dirname, '..', '..');

/** Where a private build of the storage adapters lives, for child processes to import. */
export interface CompiledStorage {
  readonly sqlite: string;
  readonly postgres: string;
  remove(): void;
}

/**
 * Compile the two storage adapters (and only what they import) into a private
 * directory under node_modules/.cache, so child processes run the current
 * source without racing other test files over dist/.
 */
export function compileStorage(): CompiledStorage {
  const outDir = join(root, 'node_modules', '.cache', `proofgate-storage-${process.pid}-${randomBytes(4).toString('hex')}`);
  mkdirSync(outDir, { recursive: true });
  execFileSync(
    process.execPath,
    [
      join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
      '--outDir',
      outDir,
      '--rootDir',
      join(root, 'src'),
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--target',
      'es2022',
      '--strict',
      '--skipLibCheck',
      '--types',
      'node',
      '--declaration',
      'false',
      join(root, 'src', 'storage', 'sqlite', 'index.ts'),
      join(root, 'src', 'storage', 'postgres', 'index.ts'),
      join(root, 'src', 'storage', 'index.ts'),
    ],
    { cwd: root, stdio: 'pipe' },
  );
  return {
    sqlite: join(outDir, 'storage', 'sqlite', 'index.js'),
    postgres: join(outDir, 'storage', 'postgres', 'index.js'),
    remove: () => rmSync(outDir, { recursive: true, force: true }),
  };
}

/** A child script in test/storage/children. */
export function childScript(name: string): string {
  return join(root, 'test', 'storage', 'children', name);
}
