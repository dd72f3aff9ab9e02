/**
 * proofgate's data directory: whether it is usable, and the settings it keeps
 * (the trusted branch). An unusable data directory is one `DATA_DIR` error
 * naming the path and what is wrong with it, before any store is opened.
 */
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync, type Stats } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ProofgateError, errorMessage } from '../../core/index.js';
import { DATABASE_FILE } from '../../storage/sqlite/index.js';

/** The settings file inside the data directory. */
export const SETTINGS_FILE = 'settings.json';

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ENOTDIR') throw new ProofgateError('DATA_DIR', `cannot use ${path}: a parent of it is a file, not a directory`, { path });
    throw new ProofgateError('DATA_DIR', `cannot use ${path}: ${code ?? errorMessage(error)}`, { path });
  }
}

/**
 * Refuse (`DATA_DIR`) a data directory proofgate cannot use: a path that is a
 * file, under a file, or that holds one of proofgate's files (the database,
 * the settings, and `files`) as something other than a regular file. A
 * directory that does not exist yet is fine: it is created when first written.
 */
export function checkDataDir(dir: string, files: readonly string[] = []): void {
  const path = resolve(dir);
  const info = statOrNull(path);
  if (info === null) {
    let parent = dirname(path);
    for (;;) {
      const above = statOrNull(parent);
      if (above !== null) {
        if (!above.isDirectory())
          throw new ProofgateError('DATA_DIR', `cannot use ${path} as a data directory: ${parent} is a file, not a directory`, { path });
        return;
      }
      if (dirname(parent) === parent) return;
      parent = dirname(parent);
    }
  }
  if (!info.isDirectory()) throw new ProofgateError('DATA_DIR', `cannot use ${path} as a data directory: it is a file, not a directory`, { path });
  for (const name of [DATABASE_FILE, SETTINGS_FILE, ...files]) {
    const entry = statOrNull(join(path, name));
    if (entry !== null && !entry.isFile()) {
      throw new ProofgateError(
        'DATA_DIR',
        `cannot use ${path} as a data directory: ${name} is ${entry.isDirectory() ? 'a directory' : 'not a regular file'}; move it away`,
        { path, file: name },
      );
    }
  }
}

/** A raw operating-system failure while opening the data directory, as one `DATA_DIR` error (typed errors pass unchanged). */
export function dataDirFailure(dir: string, error: unknown): unknown {
  if (error instanceof ProofgateError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code !== 'string' || !/^E[A-Z]+$/.test(code)) return error;
  return new ProofgateError('DATA_DIR', `cannot use ${resolve(dir)} as a data directory: ${code}`, { path: resolve(dir), errno: code });
}

export interface DataDirSettings {
  /** The branch whose `.proofgate.yml` is trusted (unset: `main`, else `master`, fixed at first use). */
  readonly trustedBranch?: string;
}

/** The settings of a data directory ({} when it has none). */
export function readDataDirSettings(dir: string): DataDirSettings {
  const file = join(dir, SETTINGS_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw dataDirFailure(dir, error);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = null;
  }
  const branch = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>).trustedBranch : null;
  if (branch !== undefined && (typeof branch !== 'string' || branch === '')) {
    throw new ProofgateError(
      'DATA_DIR',
      `${file} is not a valid settings file (expected {"trustedBranch": "NAME"}); fix it or set the branch again with \`proofgate config trusted-branch NAME\``,
      { file },
    );
  }
  return branch === undefined ? {} : { trustedBranch: branch };
}

/** Write the settings of a data directory (atomically: a reader sees the old file or the new one). */
export function writeDataDirSettings(dir: string, settings: DataDirSettings): void {
  checkDataDir(dir);
  const file = join(dir, SETTINGS_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(temporary, `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
    renameSync(temporary, file);
  } catch (error) {
    throw dataDirFailure(dir, error);
  }
}
