/**
 * The marker secret kept in PostgreSQL, for services that share one database
 * and were given no `PROOFGATE_MARKER_SECRET`: the first process to start
 * writes 32 random bytes into a one-row table, and every process (on any
 * machine) reads the same row. The value is never logged.
 *
 * The table is part of proofgate's schema (`SERVICE_SECRET_TABLE`, created by
 * the store's migrations): the schema is brought to this build's version
 * first, the same way opening the store does, so the table is there however
 * the service orders its start.
 */
import type pg from 'pg';
import { ProofgateError, errorMessage, randomHex } from '../../core/index.js';
import { SERVICE_SECRET_TABLE, migratePostgres } from '../../storage/postgres/schema.js';
import { inTransaction } from '../../storage/postgres/transaction.js';

export { SERVICE_SECRET_TABLE as SECRET_TABLE } from '../../storage/postgres/schema.js';

/** Create or migrate proofgate's tables in one transaction, under the schema lock (a no-op on a database at this build's version). */
async function migrated(pool: pg.Pool): Promise<void> {
  await inTransaction(await pool.connect(), (client) => migratePostgres(client));
}

export async function loadOrCreatePostgresSecret(pool: pg.Pool): Promise<Uint8Array> {
  try {
    await migrated(pool);
    await pool.query(`INSERT INTO ${SERVICE_SECRET_TABLE} (name, value) VALUES ('marker', $1) ON CONFLICT (name) DO NOTHING`, [randomHex(32)]);
    const { rows } = await pool.query<{ value: string }>(`SELECT value FROM ${SERVICE_SECRET_TABLE} WHERE name = 'marker'`);
    const value = rows[0]?.value ?? '';
    if (!/^[0-9a-f]{64}$/.test(value))
      throw new ProofgateError('CONFIG', `the marker secret in ${SERVICE_SECRET_TABLE} is not 64 hex digits; set PROOFGATE_MARKER_SECRET or fix the row`);
    return Uint8Array.from(Buffer.from(value, 'hex'));
  } catch (error) {
    if (error instanceof ProofgateError) throw error;
    throw new ProofgateError('IO', `cannot read the marker secret from PostgreSQL: ${errorMessage(error)}`);
  }
}
