import type Database from 'better-sqlite3';
import { ProofgateError, systemClock } from '../../core/index.js';
import type { RunStorage } from '../policy-types.js';
import type { AppendResult, ArtifactRef } from '../ports.js';
import { checkName } from '../input.js';
import { closedError, planOpen } from '../record.js';
import { createSqliteArtifactStore } from './artifact-store.js';
import { sqliteFailure, withSqliteErrors } from './errors.js';
import { createSqliteEventStore } from './event-store.js';
import { openSqliteReadOnly } from './schema.js';

export interface LocalStoreReaderOptions {
  /** Directory holding the database file; nothing is created in it. */
  readonly directory: string;
  /** The namespace to inspect; it must already exist in the file. */
  readonly namespace: string;
}

interface NamespaceRow {
  readonly provider: string;
  readonly policy_digest: string;
  readonly policy: string;
}

function storedPolicy(row: NamespaceRow, namespace: string, file: string): unknown {
  try {
    return JSON.parse(row.policy) as unknown;
  } catch {
    throw new ProofgateError('INVALID_STORED_VALUE', `the stored policy of namespace ${namespace} in ${file} is not valid JSON`, { namespace, file });
  }
}

function readOnlyError(file: string): ProofgateError {
  return new ProofgateError('READ_ONLY', `${file} is open read-only, for inspection; writes go through createLocalRunStorage`, { file });
}

function namespaceRow(db: Database.Database, namespace: string): NamespaceRow | undefined {
  return db.prepare<[string], NamespaceRow>('SELECT provider, policy_digest, policy FROM proofgate_namespaces WHERE namespace = ?').get(namespace);
}

/**
 * Open an existing namespace of the local SQLite store for inspection, with
 * no policy of the caller's: the record is the namespace's stored one (its
 * provider, policy and policy digest, checked against each other). The file
 * is opened read-only and never created, migrated or registered into, so the
 * database file's bytes stay as they were. Reads work as on a normal binding;
 * `append` and artifact `write` fail with `READ_ONLY` before touching SQLite.
 *
 * Errors: `NOT_FOUND` when there is no database file or the namespace is not
 * in it (an empty file included); `CORRUPT_DATABASE`, `NOT_OUR_DATABASE`,
 * `UNSUPPORTED_SCHEMA_VERSION` as on a normal open; `INVALID_STORED_VALUE`
 * when the stored policy is not JSON or does not match its digest, and the
 * validator's own error when it does not validate; `INVALID_INPUT` for a
 * namespace that is not a valid name.
 */
export function openLocalStoreReader(options: LocalStoreReaderOptions): RunStorage {
  const namespace = checkName(options.namespace, 'namespace');
  const { db, file, identity } = openSqliteReadOnly(options.directory);
  try {
    const row = identity.kind === 'fresh' ? undefined : namespaceRow(db, namespace);
    if (row === undefined) {
      throw new ProofgateError('NOT_FOUND', `namespace ${namespace} is not in ${file}`, { namespace, file });
    }
    if (row.provider !== 'sqlite') {
      throw new ProofgateError('STORAGE_MISMATCH', `namespace ${namespace} in ${file} was created by provider ${row.provider}, not sqlite`, { namespace });
    }
    const { record, guard } = planOpen('sqlite', namespace, storedPolicy(row, namespace, file), undefined);
    if (record.policyDigest !== row.policy_digest) {
      throw new ProofgateError(
        'INVALID_STORED_VALUE',
        `the stored policy of namespace ${namespace} in ${file} does not match its digest ${row.policy_digest}`,
        { namespace, file },
      );
    }
    let closed = false;
    const live = (): void => {
      if (closed) throw closedError();
    };
    const events = createSqliteEventStore(db, guard, systemClock, live);
    const artifacts = createSqliteArtifactStore(db, guard, systemClock, live);
    return Object.freeze({
      record,
      eventStore: withSqliteErrors(
        {
          ...events,
          async append(): Promise<AppendResult> {
            live();
            throw readOnlyError(file);
          },
        },
        file,
      ),
      artifactStore: withSqliteErrors(
        {
          ...artifacts,
          async write(): Promise<ArtifactRef> {
            live();
            throw readOnlyError(file);
          },
        },
        file,
      ),
      prepareJson: (value: unknown, where?: string) => guard.prepareJson(value, where),
      async close(): Promise<void> {
        if (closed) return;
        closed = true;
        db.close();
      },
    });
  } catch (error) {
    db.close();
    throw sqliteFailure(error, file);
  }
}
