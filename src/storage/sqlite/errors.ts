import { ProofgateError } from '../../core/index.js';

/** A better-sqlite3 error: an Error whose `code` is an extended SQLite result code name. */
export function isSqliteError(error: unknown): error is Error & { code: string } {
  const code = error instanceof Error ? (error as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('SQLITE_');
}

export function corruptDatabase(file: string, reason: string): ProofgateError {
  return new ProofgateError('CORRUPT_DATABASE', `${file} is not a readable SQLite database: ${reason}`, { file });
}

/**
 * Map what SQLite says about the file itself to a typed error naming it:
 * damaged or foreign bytes (`SQLITE_CORRUPT*`, `SQLITE_NOTADB`) are
 * `CORRUPT_DATABASE`; the operating system refusing to read or write it
 * (`SQLITE_IOERR*`, `SQLITE_FULL`, `SQLITE_CANTOPEN`, `SQLITE_READONLY*`) is
 * `IO`. Anything else (constraint violations the stores handle, busy
 * timeouts, our own typed errors) passes through unchanged.
 */
export function sqliteFailure(error: unknown, file: string): unknown {
  if (!isSqliteError(error)) return error;
  if (/^SQLITE_(NOTADB|CORRUPT)/.test(error.code)) return corruptDatabase(file, `${error.message} (${error.code})`);
  if (/^SQLITE_(IOERR|FULL|CANTOPEN|READONLY)/.test(error.code)) {
    return new ProofgateError('IO', `cannot use the database ${file}: ${error.message} (${error.code})`, { file });
  }
  return error;
}

type AsyncMethods<T> = { [K in keyof T]: T[K] extends (...args: never[]) => Promise<unknown> ? T[K] : never };

/**
 * The same store with every method's failure passed through `sqliteFailure`:
 * the one place where a statement's raw SQLite error (corruption found on a
 * page read long after open, an I/O error) becomes a typed error.
 */
export function withSqliteErrors<T extends AsyncMethods<T>>(store: T, file: string): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(store) as [string, (...args: unknown[]) => Promise<unknown>][]) {
    wrapped[name] = async (...args: unknown[]): Promise<unknown> => {
      try {
        return await method(...args);
      } catch (error) {
        throw sqliteFailure(error, file);
      }
    };
  }
  return Object.freeze(wrapped) as T;
}
