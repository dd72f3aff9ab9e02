import type pg from 'pg';

/**
 * Run `work` in one transaction on `client` (taken from a pool): committed
 * when it resolves, rolled back when it throws (its error is the one
 * thrown), and the client is given back to its pool either way.
 */
export async function inTransaction<T>(client: pg.PoolClient, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
