/**
 * The marker secret kept in PostgreSQL, for services that share one database
 * and were given no `PROOFGATE_MARKER_SECRET`: the first process to start
 * writes 32 random bytes into a one-row table, and every process (on any
 * machine) reads the same row. The value is never logged.
 */
import type pg from 'pg';
import { ProofgateError, errorMessage, randomHex } from '../../core/index.js';

export const SECRET_TABLE = 'proofgate_service_secret';

/** Two processes creating the table at once: one of them gets a unique violation on the catalog, and simply tries again. */
async function createTable(pool: pg.Pool): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await pool.query(
        `CREATE TABLE IF NOT EXISTS ${SECRET_TABLE} (name text PRIMARY KEY, value text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
      );
      return;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (attempt >= 3 || (code !== '23505' && code !== '42P07')) throw error;
    }
  }
}

export async function loadOrCreatePostgresSecret(pool: pg.Pool): Promise<Uint8Array> {
  try {
    await createTable(pool);
    await pool.query(`INSERT INTO ${SECRET_TABLE} (name, value) VALUES ('marker', $1) ON CONFLICT (name) DO NOTHING`, [randomHex(32)]);
    const { rows } = await pool.query<{ value: string }>(`SELECT value FROM ${SECRET_TABLE} WHERE name = 'marker'`);
    const value = rows[0]?.value ?? '';
    if (!/^[0-9a-f]{64}$/.test(value))
      throw new ProofgateError('CONFIG', `the marker secret in ${SECRET_TABLE} is not 64 hex digits; set PROOFGATE_MARKER_SECRET or fix the row`);
    return Uint8Array.from(Buffer.from(value, 'hex'));
  } catch (error) {
    if (error instanceof ProofgateError) throw error;
    throw new ProofgateError('IO', `cannot read the marker secret from PostgreSQL: ${errorMessage(error)}`);
  }
}
