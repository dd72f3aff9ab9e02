import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { ProofgateError, canonicalJson, errorMessage, systemClock, type Clock } from '../../core/index.js';
import type { RunStorage, StoragePolicy } from '../policy-types.js';
import { checkStoredNamespace, closedError, planOpen, type StoredNamespace } from '../record.js';
import { createSqliteArtifactStore } from './artifact-store.js';
import { DATABASE_FILE } from './constants.js';
import { sqliteFailure, withSqliteErrors } from './errors.js';
import { createSqliteEventStore } from './event-store.js';
import { openSqliteDatabase } from './schema.js';

export { DATABASE_FILE, SQLITE_SCHEMA_VERSION } from './constants.js';
export { openLocalStoreReader, type LocalStoreReaderOptions } from './reader.js';

export interface LocalRunStorageOptions {
  /** Directory holding the database file (created if missing). */
  readonly directory: string;
  /** Streams, positions and artifacts are separate per namespace; one file may hold several. */
  readonly namespace: string;
  readonly policy: StoragePolicy;
  /** Secret values that must never be stored; kept in memory only. */
  readonly knownSecrets?: readonly string[];
  /** Source of `recordedAt` (default: the system clock). */
  readonly clock?: Clock;
  /** How long a writer waits for another process's write lock (default 10 s). */
  readonly busyTimeoutMs?: number;
}

function registerNamespace(db: Database.Database, storage: Pick<RunStorage, 'record'>, now: string): void {
  const { record } = storage;
  db.transaction(() => {
    const stored = db
      .prepare<[string], StoredNamespace>('SELECT provider, policy_digest AS policyDigest FROM proofgate_namespaces WHERE namespace = ?')
      .get(record.namespace);
    if (stored !== undefined) {
      checkStoredNamespace(record, stored);
      return;
    }
    db.prepare('INSERT INTO proofgate_namespaces (namespace, provider, policy_digest, policy, created_at) VALUES (?, ?, ?, ?, ?)').run(
      record.namespace,
      record.provider,
      record.policyDigest,
      canonicalJson(record.policy),
      now,
    );
  }).immediate();
}

/**
 * Open the embedded SQLite storage: one WAL-mode database file in `directory`.
 * Synchronous: the binding is ready when this returns. Errors are typed
 * (`POLICY_VIOLATION`, `UNSUPPORTED_SCHEMA_VERSION`, `NOT_OUR_DATABASE`,
 * `CORRUPT_DATABASE`, `STORAGE_MISMATCH`, `INVALID_INPUT`, and `IO` when the
 * directory cannot be created: a path that is a file, a parent that is a
 * file, no permission). Damage or an I/O failure that SQLite only finds
 * later, when a statement reads a broken page, is the same typed
 * `CORRUPT_DATABASE` / `IO` error naming the file, from any store method.
 */
export function createLocalRunStorage(options: LocalRunStorageOptions): RunStorage {
  const { record, guard } = planOpen('sqlite', options.namespace, options.policy, options.knownSecrets);
  const clock = options.clock ?? systemClock;
  if (typeof options.directory === 'string' && options.directory !== '') {
    try {
      mkdirSync(options.directory, { recursive: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const why =
        code === 'EEXIST'
          ? 'it is a file, not a directory'
          : code === 'ENOTDIR'
            ? 'a parent of it is a file, not a directory'
            : code === 'EACCES' || code === 'EPERM'
              ? 'permission denied'
              : errorMessage(error);
      throw new ProofgateError('IO', `cannot use ${options.directory} as a data directory: ${why}`, { directory: options.directory });
    }
  }
  const db = openSqliteDatabase(options.directory, options.busyTimeoutMs ?? 10_000);
  const file = join(options.directory, DATABASE_FILE);
  let closed = false;
  try {
    registerNamespace(db, { record }, clock.now().toISOString());
  } catch (error) {
    db.close();
    throw sqliteFailure(error, file);
  }
  const live = (): void => {
    if (closed) throw closedError();
  };
  return Object.freeze({
    record,
    eventStore: withSqliteErrors(createSqliteEventStore(db, guard, clock, live), file),
    artifactStore: withSqliteErrors(createSqliteArtifactStore(db, guard, clock, live), file),
    prepareJson: (value: unknown, where?: string) => guard.prepareJson(value, where),
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      db.close();
    },
  });
}
