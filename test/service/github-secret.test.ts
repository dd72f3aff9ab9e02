import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadOrCreatePostgresSecret, SECRET_TABLE } from '../../src/service/github/secret.js';
import { defaultStoragePolicy } from '../../src/storage/index.js';
import { POSTGRES_SCHEMA_VERSION, createPostgresRunStorage } from '../../src/storage/postgres/index.js';
import { migratePostgres } from '../../src/storage/postgres/schema.js';
import { describePostgres, uniqueNamespace } from '../support/postgres.js';

describePostgres('the marker secret on PostgreSQL', (url) => {
  const prefix = `proofgate_secret_${process.pid}_${Date.now().toString(36)}`;
  let admin: pg.Pool;
  const pools: pg.Pool[] = [];
  let schemas = 0;

  /** A pool on a schema of its own: a database proofgate has never seen. */
  const freshDatabase = async (): Promise<pg.Pool> => {
    const schema = `${prefix}_${(schemas += 1)}`;
    await admin.query(`CREATE SCHEMA ${schema}`);
    return poolOn(schema, 3);
  };
  const poolOn = (schema: string, connections: number): pg.Pool => {
    const pool = new pg.Pool({ connectionString: url, max: connections, options: `-c search_path=${schema}` });
    pools.push(pool);
    return pool;
  };
  const tableExists = async (pool: pg.Pool): Promise<boolean> =>
    (await pool.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AS found', [SECRET_TABLE])).rows[0]?.found === true;
  const schemaVersion = async (pool: pg.Pool): Promise<number | undefined> =>
    (await pool.query<{ version: number }>('SELECT version FROM proofgate_schema')).rows[0]?.version;

  beforeAll(async () => {
    admin = new pg.Pool({ connectionString: url, max: 1 });
  });
  afterAll(async () => {
    for (const pool of pools) await pool.end();
    for (let i = 1; i <= schemas; i += 1) await admin.query(`DROP SCHEMA IF EXISTS ${prefix}_${i} CASCADE`);
    await admin.end();
  });

  it('is a table of the store: opening the store creates it, and the service only uses it', async () => {
    const pool = await freshDatabase();
    const storage = await createPostgresRunStorage({ pool, namespace: uniqueNamespace('secret'), policy: defaultStoragePolicy });
    await storage.close();
    expect(await schemaVersion(pool)).toBe(POSTGRES_SCHEMA_VERSION);
    expect(await tableExists(pool)).toBe(true);
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${SECRET_TABLE}`)).rows).toEqual([{ n: 0 }]);

    const secret = await loadOrCreatePostgresSecret(pool);
    expect(secret.byteLength).toBe(32);
    expect(Buffer.from(await loadOrCreatePostgresSecret(pool)).equals(Buffer.from(secret))).toBe(true);
    expect(await schemaVersion(pool)).toBe(POSTGRES_SCHEMA_VERSION);
  });

  it('on a database no store has opened yet, brings the schema to this version first', async () => {
    const pool = await freshDatabase();
    const secret = await loadOrCreatePostgresSecret(pool);
    expect(secret.byteLength).toBe(32);
    expect(await schemaVersion(pool)).toBe(POSTGRES_SCHEMA_VERSION);
    // The store opens the same database afterwards without finding anything foreign.
    const storage = await createPostgresRunStorage({ pool, namespace: uniqueNamespace('secret'), policy: defaultStoragePolicy });
    await storage.close();
    expect(Buffer.from(await loadOrCreatePostgresSecret(pool)).equals(Buffer.from(secret))).toBe(true);
  });

  it('keeps the secret a service before schema version 3 created in its own table', async () => {
    const pool = await freshDatabase();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await migratePostgres(client, 2);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    // What such a service did on its own.
    await pool.query(`CREATE TABLE ${SECRET_TABLE} (name text PRIMARY KEY, value text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
    const old = 'ab'.repeat(32);
    await pool.query(`INSERT INTO ${SECRET_TABLE} (name, value) VALUES ('marker', $1)`, [old]);
    expect(await schemaVersion(pool)).toBe(2);

    const storage = await createPostgresRunStorage({ pool, namespace: uniqueNamespace('secret'), policy: defaultStoragePolicy });
    await storage.close();
    expect(await schemaVersion(pool)).toBe(POSTGRES_SCHEMA_VERSION);
    expect(Buffer.from(await loadOrCreatePostgresSecret(pool)).toString('hex')).toBe(old);
  });

  it('is the same for processes that start at once on a fresh database', async () => {
    const schema = `${prefix}_${(schemas += 1)}`;
    await admin.query(`CREATE SCHEMA ${schema}`);
    // One pool per process, each with its own connection.
    const processes = Array.from({ length: 5 }, () => poolOn(schema, 1));
    const secrets = await Promise.all(processes.map((pool) => loadOrCreatePostgresSecret(pool)));
    const hex = secrets.map((secret) => Buffer.from(secret).toString('hex'));
    expect(new Set(hex).size).toBe(1);
    expect(hex[0]).toMatch(/^[0-9a-f]{64}$/);
    expect((await processes[0]!.query(`SELECT count(*)::int AS n FROM ${SECRET_TABLE}`)).rows).toEqual([{ n: 1 }]);
    expect(await schemaVersion(processes[0]!)).toBe(POSTGRES_SCHEMA_VERSION);
  });

  it('refuses a row that is not 64 hex digits, naming the setting and never the value', async () => {
    const pool = await freshDatabase();
    await loadOrCreatePostgresSecret(pool);
    await pool.query(`UPDATE ${SECRET_TABLE} SET value = 'not-a-secret-value' WHERE name = 'marker'`);
    const error = await loadOrCreatePostgresSecret(pool).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toMatchObject({ code: 'CONFIG' });
    expect(String((error as Error).message)).toContain('PROOFGATE_MARKER_SECRET');
    expect(String((error as Error).message)).not.toContain('not-a-secret-value');
  });
});
