import type pg from 'pg';
import { ProofgateError, canonicalJson, errorMessage, lazyModule, systemClock, type Clock } from '../../core/index.js';
import type { RunStorage, StoragePolicy, StorageRecord } from '../policy-types.js';
import { checkStoredNamespace, closedError, planOpen, type StoredNamespace } from '../record.js';
import { createPostgresArtifactStore } from './artifact-store.js';
import { createPostgresEventStore } from './event-store.js';
import { migratePostgres } from './schema.js';
import { inTransaction } from './transaction.js';

export { inTransaction } from './transaction.js';

export { POSTGRES_SCHEMA_VERSION } from './schema.js';

/** The PostgreSQL driver, loaded when a PostgreSQL store is first opened. */
export const loadPg = lazyModule<typeof pg>('pg');

export interface PostgresRunStorageOptions {
  /** `postgres://...`; ignored when `pool` is given. */
  readonly connectionString?: string;
  readonly namespace: string;
  readonly policy: StoragePolicy;
  /** Secret values that must never be stored; kept in memory only. */
  readonly knownSecrets?: readonly string[];
  /** A pool owned by the caller (not ended by `close()`). */
  readonly pool?: pg.Pool;
  /** Connections in the pool this storage creates (default 4). */
  readonly maxConnections?: number;
  /** Source of `recordedAt` (default: the system clock). */
  readonly clock?: Clock;
}

async function openSchemaAndNamespace(pool: pg.Pool, record: StorageRecord, now: string): Promise<void> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new ProofgateError('IO', `cannot connect to PostgreSQL: ${errorMessage(error)}`, undefined, { cause: error });
  }
  await inTransaction(client, async () => {
    await migratePostgres(client);
    const stored = (
      await client.query<StoredNamespace>('SELECT provider, policy_digest AS "policyDigest" FROM proofgate_namespaces WHERE namespace = $1', [record.namespace])
    ).rows[0];
    if (stored === undefined) {
      await client.query('INSERT INTO proofgate_namespaces (namespace, provider, policy_digest, policy, created_at) VALUES ($1, $2, $3, $4, $5)', [
        record.namespace,
        record.provider,
        record.policyDigest,
        canonicalJson(record.policy),
        now,
      ]);
    } else {
      checkStoredNamespace(record, stored);
    }
  });
}

/**
 * Open the PostgreSQL storage: creates or migrates proofgate's tables (all
 * named `proofgate_*`) under an advisory lock, then registers or checks the
 * namespace. Errors are typed like the SQLite adapter's; an unreachable
 * server is `IO`.
 */
export async function createPostgresRunStorage(options: PostgresRunStorageOptions): Promise<RunStorage> {
  const { record, guard } = planOpen('postgres', options.namespace, options.policy, options.knownSecrets);
  const clock = options.clock ?? systemClock;
  if (options.pool === undefined && (typeof options.connectionString !== 'string' || options.connectionString === '')) {
    throw new ProofgateError('INVALID_INPUT', 'connectionString must be a postgres:// URL (or pass a pool)');
  }
  const ownsPool = options.pool === undefined;
  const pool = options.pool ?? new (loadPg().Pool)({ connectionString: options.connectionString, max: options.maxConnections ?? 4 });
  if (ownsPool) pool.on('error', () => undefined);
  try {
    await openSchemaAndNamespace(pool, record, clock.now().toISOString());
  } catch (error) {
    if (ownsPool) await pool.end().catch(() => undefined);
    throw error;
  }
  let closed = false;
  const live = (): void => {
    if (closed) throw closedError();
  };
  return Object.freeze({
    record,
    eventStore: createPostgresEventStore(pool, guard, clock, live),
    artifactStore: createPostgresArtifactStore(pool, guard, clock, live),
    prepareJson: (value: unknown, where?: string) => guard.prepareJson(value, where),
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      if (ownsPool) await pool.end();
    },
  });
}
