import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultStoragePolicy, type RunStorage } from '../../src/storage/index.js';
import { POSTGRES_SCHEMA_VERSION, createPostgresRunStorage } from '../../src/storage/postgres/index.js';
import { describePostgres, uniqueNamespace } from '../support/postgres.js';
import { expectCode, storageConformance, type StorageHarness } from './conformance.js';

describePostgres('PostgreSQL storage', (url) => {
  let pool: pg.Pool;
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: url, max: 2 });
  });
  afterAll(async () => {
    await pool.end();
  });

  const harness: StorageHarness = {
    async open({ namespace, policy, knownSecrets }) {
      return createPostgresRunStorage({
        connectionString: url,
        namespace,
        policy: policy ?? defaultStoragePolicy,
        maxConnections: 2,
        ...(knownSecrets ? { knownSecrets } : {}),
      });
    },
    async dump(namespace) {
      const parts: Buffer[] = [];
      for (const table of ['proofgate_namespaces', 'proofgate_streams', 'proofgate_events', 'proofgate_artifacts']) {
        const result = await pool.query(`SELECT * FROM ${table} WHERE namespace = $1`, [namespace]);
        for (const row of result.rows as Record<string, unknown>[]) {
          for (const value of Object.values(row)) parts.push(Buffer.isBuffer(value) ? value : Buffer.from(String(value)));
        }
      }
      return Buffer.concat(parts);
    },
    async corruptArtifact(namespace, runId, digest) {
      await pool.query('UPDATE proofgate_artifacts SET bytes = $4 WHERE namespace = $1 AND run_id = $2 AND digest = $3', [
        namespace,
        runId,
        digest,
        Buffer.alloc(800, 0x41),
      ]);
    },
  };

  describe('conformance', () => {
    storageConformance(() => harness);
  });

  describe('schema handling', () => {
    const schema = `proofgate_test_${process.pid}_${Date.now().toString(36)}`;
    const schemaPool = (name: string) => new pg.Pool({ connectionString: url, max: 3, options: `-c search_path=${name}` });
    const opened: RunStorage[] = [];
    afterAll(async () => {
      await Promise.all(opened.map((storage) => storage.close()));
      for (const suffix of ['fresh', 'foreign', 'newer']) await pool.query(`DROP SCHEMA IF EXISTS ${schema}_${suffix} CASCADE`);
    });

    it('creates the schema once when several openers race, and records its version', async () => {
      const name = `${schema}_fresh`;
      await pool.query(`CREATE SCHEMA ${name}`);
      const own = schemaPool(name);
      try {
        const storages = await Promise.all(
          Array.from({ length: 4 }, (_, i) =>
            createPostgresRunStorage({
              connectionString: url,
              pool: own,
              namespace: `race-${i % 2}`,
              policy: defaultStoragePolicy,
            }),
          ),
        );
        opened.push(...storages);
        const version = await own.query('SELECT application, version FROM proofgate_schema');
        expect(version.rows).toEqual([{ application: 'proofgate', version: POSTGRES_SCHEMA_VERSION }]);
        await storages[0]!.eventStore.append('s', 0, [{ id: 'a', type: 't', data: 1 }]);
        expect(await storages[2]!.eventStore.revision('s')).toBe(1);
        expect(await storages[1]!.eventStore.revision('s')).toBe(0);
      } finally {
        await Promise.all(opened.splice(0).map((storage) => storage.close()));
        await own.end();
      }
    });

    it('refuses tables it did not create and a newer schema, changing nothing', async () => {
      const foreign = `${schema}_foreign`;
      await pool.query(`CREATE SCHEMA ${foreign}`);
      await pool.query(`CREATE TABLE ${foreign}.proofgate_events (id serial primary key, note text)`);
      const foreignPool = schemaPool(foreign);
      try {
        await expectCode(createPostgresRunStorage({ pool: foreignPool, namespace: 'x', policy: defaultStoragePolicy }), 'NOT_OUR_DATABASE');
        const tables = await pool.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [foreign]);
        expect(tables.rows).toEqual([{ table_name: 'proofgate_events' }]);
      } finally {
        await foreignPool.end();
      }
      const newer = `${schema}_newer`;
      await pool.query(`CREATE SCHEMA ${newer}`);
      const newerPool = schemaPool(newer);
      try {
        const storage = await createPostgresRunStorage({ pool: newerPool, namespace: 'x', policy: defaultStoragePolicy });
        await storage.close();
        await newerPool.query('UPDATE proofgate_schema SET version = 99');
        await expectCode(createPostgresRunStorage({ pool: newerPool, namespace: 'y', policy: defaultStoragePolicy }), 'UNSUPPORTED_SCHEMA_VERSION');
        expect((await newerPool.query('SELECT namespace FROM proofgate_namespaces')).rows).toEqual([{ namespace: 'x' }]);
      } finally {
        await newerPool.end();
      }
    });

    it('reports an unreachable server as IO and a reopen under another provider policy as STORAGE_MISMATCH', async () => {
      await expectCode(
        createPostgresRunStorage({ connectionString: 'postgres://nobody@127.0.0.1:1/none', namespace: 'x', policy: defaultStoragePolicy }),
        'IO',
      );
      const namespace = uniqueNamespace('mismatch');
      const storage = await harness.open({ namespace });
      await storage.close();
      await pool.query("UPDATE proofgate_namespaces SET provider = 'sqlite' WHERE namespace = $1", [namespace]);
      await expectCode(harness.open({ namespace }), 'STORAGE_MISMATCH');
    });
  });
});
