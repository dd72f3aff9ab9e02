import { closeSync, existsSync, mkdirSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { ProofgateError, lazyModule } from '../../core/index.js';
import { corruptDatabase, isSqliteError, sqliteFailure } from './errors.js';

import { APPLICATION_ID, DATABASE_FILE, SQLITE_SCHEMA_VERSION } from './constants.js';

export { APPLICATION_ID, DATABASE_FILE, SQLITE_SCHEMA_VERSION };

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * better-sqlite3, loaded when a database is first opened: its modules would
 * cost every command that opens none (`--help`, `digest`, `github manifest`)
 * about 7 ms of CPU at its start (docs/cli.md).
 */
export const loadBetterSqlite: () => typeof Database = lazyModule<typeof Database>('better-sqlite3');

/** Each entry takes the schema from version index to index + 1. */
const MIGRATIONS: readonly (readonly string[])[] = [
  [
    `CREATE TABLE proofgate_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID`,
    `CREATE TABLE proofgate_namespaces (
      namespace TEXT PRIMARY KEY,
      provider TEXT NOT NULL,
      policy_digest TEXT NOT NULL,
      policy TEXT NOT NULL,
      created_at TEXT NOT NULL
    ) WITHOUT ROWID`,
    `CREATE TABLE proofgate_streams (
      namespace TEXT NOT NULL,
      stream_id TEXT NOT NULL,
      revision INTEGER NOT NULL,
      PRIMARY KEY (namespace, stream_id)
    ) WITHOUT ROWID`,
    `CREATE TABLE proofgate_events (
      position INTEGER PRIMARY KEY AUTOINCREMENT,
      namespace TEXT NOT NULL,
      stream_id TEXT NOT NULL,
      revision INTEGER NOT NULL,
      event_id TEXT NOT NULL,
      type TEXT NOT NULL,
      data TEXT NOT NULL,
      recorded_at TEXT NOT NULL,
      UNIQUE (namespace, stream_id, revision),
      UNIQUE (namespace, event_id)
    )`,
    `CREATE INDEX proofgate_events_by_position ON proofgate_events (namespace, position)`,
    `CREATE TABLE proofgate_artifacts (
      namespace TEXT NOT NULL,
      run_id TEXT NOT NULL,
      digest TEXT NOT NULL,
      byte_length INTEGER NOT NULL,
      media_type TEXT NOT NULL,
      purpose TEXT NOT NULL,
      bytes BLOB NOT NULL,
      created_at TEXT NOT NULL,
      PRIMARY KEY (namespace, run_id, digest)
    ) WITHOUT ROWID`,
  ],
];

/** Refuse a nonempty file that does not start with the SQLite header, before SQLite touches it. */
function checkHeader(file: string): void {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    return;
  }
  if (size === 0) return;
  const header = Buffer.alloc(SQLITE_HEADER.length);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  if (size < 100 || !header.equals(SQLITE_HEADER)) throw corruptDatabase(file, "the file header is not SQLite's");
}

export type Identity = { kind: 'fresh' } | { kind: 'ours'; version: number };

/** The three facts `identify` judges, read in one read transaction (or in the caller's). */
function identityFacts(db: Database.Database): { applicationId: number; version: number; objects: number } {
  const read = () => ({
    applicationId: db.pragma('application_id', { simple: true }) as number,
    version: db.pragma('user_version', { simple: true }) as number,
    objects: (db.prepare('SELECT count(*) AS n FROM sqlite_master').get() as { n: number }).n,
  });
  // Read one by one, each in its own snapshot, a file another process is creating at this moment could show its
  // ids from before that process's commit and its tables from after it, and read as someone else's database.
  return db.inTransaction ? read() : db.transaction(read).deferred();
}

/** Read-only: is this file empty, ours (at which version), or someone else's? */
function identify(db: Database.Database, file: string): Identity {
  const { applicationId, version, objects } = identityFacts(db);
  if (applicationId === APPLICATION_ID) {
    if (version > SQLITE_SCHEMA_VERSION) {
      throw new ProofgateError(
        'UNSUPPORTED_SCHEMA_VERSION',
        `${file} has proofgate schema version ${version}; this build knows up to ${SQLITE_SCHEMA_VERSION}`,
        { file, version },
      );
    }
    return { kind: 'ours', version };
  }
  if (applicationId === 0 && version === 0 && objects === 0) return { kind: 'fresh' };
  throw new ProofgateError('NOT_OUR_DATABASE', `${file} is a SQLite database that proofgate did not create; it was left untouched`, { file });
}

function migrate(db: Database.Database, file: string): void {
  const run = db.transaction(() => {
    const identity = identify(db, file);
    const from = identity.kind === 'fresh' ? 0 : identity.version;
    for (let version = from; version < SQLITE_SCHEMA_VERSION; version += 1) {
      for (const statement of MIGRATIONS[version] ?? []) db.exec(statement);
    }
    if (from < SQLITE_SCHEMA_VERSION) {
      db.prepare('INSERT OR REPLACE INTO proofgate_meta (key, value) VALUES (?, ?)').run('application', 'proofgate');
      db.prepare('INSERT OR REPLACE INTO proofgate_meta (key, value) VALUES (?, ?)').run('schema_version', String(SQLITE_SCHEMA_VERSION));
      db.pragma(`application_id = ${APPLICATION_ID}`);
      db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
    }
  });
  run.immediate();
}

function setWal(db: Database.Database, deadline: number): void {
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if (!isSqliteError(error) || !error.code.startsWith('SQLITE_BUSY') || Date.now() > deadline) throw error;
    }
  }
}

/**
 * Open (creating if missing) the proofgate database in `directory`. The file
 * is identified before anything is written: a file that is not SQLite or is
 * damaged is `CORRUPT_DATABASE`, another program's database is
 * `NOT_OUR_DATABASE`, a newer schema is `UNSUPPORTED_SCHEMA_VERSION`; in each
 * case the file is left as it was. Then WAL mode, a busy timeout so that a
 * second writer waits, and migrations inside one IMMEDIATE transaction.
 */
export function openSqliteDatabase(directory: string, busyTimeoutMs: number): Database.Database {
  if (typeof directory !== 'string' || directory === '') throw new ProofgateError('INVALID_INPUT', 'directory must be a nonempty path');
  mkdirSync(directory, { recursive: true });
  const file = join(directory, DATABASE_FILE);
  checkHeader(file);
  let db: Database.Database;
  try {
    db = new (loadBetterSqlite())(file, { timeout: busyTimeoutMs });
  } catch (error) {
    throw sqliteFailure(error, file);
  }
  try {
    identify(db, file);
    setWal(db, Date.now() + busyTimeoutMs);
    db.pragma('synchronous = FULL');
    migrate(db, file);
    return db;
  } catch (error) {
    db.close();
    throw sqliteFailure(error, file);
  }
}

/** A database opened for inspection only: SQLite refuses every write on it. */
export interface ReadOnlyDatabase {
  readonly db: Database.Database;
  readonly file: string;
  readonly identity: Identity;
}

/**
 * Open the proofgate database in `directory` read-only, for inspection: the
 * file must exist (else `NOT_FOUND`) and is identified as on a normal open
 * (`CORRUPT_DATABASE`, `NOT_OUR_DATABASE`, `UNSUPPORTED_SCHEMA_VERSION`), but
 * nothing is created, migrated or switched to WAL, and the connection cannot
 * write. An empty file reads as `fresh`. SQLite may create the `-wal` and
 * `-shm` side files next to a WAL database; the database file itself is not
 * changed.
 */
export function openSqliteReadOnly(directory: string): ReadOnlyDatabase {
  if (typeof directory !== 'string' || directory === '') throw new ProofgateError('INVALID_INPUT', 'directory must be a nonempty path');
  const file = join(directory, DATABASE_FILE);
  if (!existsSync(file)) throw new ProofgateError('NOT_FOUND', `no proofgate database at ${file}`, { file });
  checkHeader(file);
  let db: Database.Database;
  try {
    db = new (loadBetterSqlite())(file, { readonly: true, fileMustExist: true });
  } catch (error) {
    throw sqliteFailure(error, file);
  }
  try {
    const identity = identify(db, file);
    if (identity.kind === 'ours' && identity.version < SQLITE_SCHEMA_VERSION) {
      throw new ProofgateError(
        'UNSUPPORTED_SCHEMA_VERSION',
        `${file} has proofgate schema version ${identity.version}; open it for writing once to migrate it to ${SQLITE_SCHEMA_VERSION}`,
        { file, version: identity.version },
      );
    }
    return { db, file, identity };
  } catch (error) {
    db.close();
    throw sqliteFailure(error, file);
  }
}
