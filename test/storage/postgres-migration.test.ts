import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { canonicalJson } from '../../src/core/index.js';
import { defaultStoragePolicy, policyDigest } from '../../src/storage/index.js';
import { POSTGRES_SCHEMA_VERSION, createPostgresRunStorage } from '../../src/storage/postgres/index.js';
import { migratePostgres } from '../../src/storage/postgres/schema.js';
import { describePostgres, uniqueNamespace } from '../support/postgres.js';
import { expectCode } from './conformance.js';

describePostgres('PostgreSQL schema migration', (url) => {
  const schema = `proofgate_migrate_${process.pid}_${Date.now().toString(36)}`;
  let admin: pg.Pool;
  let pool: pg.Pool;
  beforeAll(async () => {
    admin = new pg.Pool({ connectionString: url, max: 1 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    pool = new pg.Pool({ connectionString: url, max: 3, options: `-c search_path=${schema}` });
  });
  afterAll(async () => {
    await pool.end();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  });

  /** Build a version-1 database and append through version 1's function, as a build of that version did. */
  async function versionOneDatabase(namespace: string): Promise<void> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await migratePostgres(client, 1);
      await client.query('INSERT INTO proofgate_namespaces (namespace, provider, policy_digest, policy, created_at) VALUES ($1, $2, $3, $4, $5)', [
        namespace,
        'postgres',
        policyDigest(defaultStoragePolicy),
        canonicalJson(defaultStoragePolicy),
        new Date().toISOString(),
      ]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const append = async (stream: string, expected: number, ids: string[]) =>
      (
        await pool.query<{ current_revision: number; inserted: boolean }>(
          'SELECT current_revision, inserted FROM proofgate_append_v1($1, $2, $3, $4, $5, $6, $7)',
          [namespace, stream, expected, ids, ids.map(() => 'old.event'), ids.map((id) => canonicalJson({ id })), new Date().toISOString()],
        )
      ).rows[0];
    expect(await append('run/a', 0, ['a1', 'a2'])).toEqual({ current_revision: 2, inserted: true });
    expect(await append('run/b', 0, ['b1'])).toEqual({ current_revision: 1, inserted: true });
    expect(await append('run/a', 2, ['a3'])).toEqual({ current_revision: 3, inserted: true });
    // Version 1 leaves a stream row at revision 0 behind when an append to a new stream is refused.
    expect(await append('run/empty', 4, ['x1'])).toEqual({ current_revision: 0, inserted: false });
  }

  it('migrates a version-1 database on open and keeps its events, revisions and positions', async () => {
    const namespace = uniqueNamespace('migrate');
    await versionOneDatabase(namespace);
    expect((await pool.query('SELECT version FROM proofgate_schema')).rows).toEqual([{ version: 1 }]);

    const storage = await createPostgresRunStorage({ pool, namespace, policy: defaultStoragePolicy });
    try {
      expect(POSTGRES_SCHEMA_VERSION).toBe(3);
      expect((await pool.query('SELECT version FROM proofgate_schema')).rows).toEqual([{ version: 3 }]);
      expect((await pool.query("SELECT to_regprocedure('proofgate_append_v1(text, text, integer, text[], text[], text[], text)') AS fn")).rows).toEqual([
        { fn: null },
      ]);
      const store = storage.eventStore;
      expect((await store.readAll()).map((e) => [e.id, e.position, e.revision])).toEqual([
        ['a1', 1, 1],
        ['a2', 2, 2],
        ['b1', 3, 1],
        ['a3', 4, 3],
      ]);
      expect(await store.revision('run/a')).toBe(3);
      expect(await store.revision('run/empty')).toBe(0);
      expect(await store.listStreams()).toEqual([
        { streamId: 'run/a', revision: 3 },
        { streamId: 'run/b', revision: 1 },
      ]);

      // Appends continue where version 1 stopped, with the same fences.
      expect(
        await store.append('run/a', 0, [
          { id: 'a1', type: 'old.event', data: { id: 'a1' } },
          { id: 'a2', type: 'old.event', data: { id: 'a2' } },
        ]),
      ).toEqual({ revision: 2, written: false });
      await expectCode(store.append('run/a', 2, [{ id: 'late', type: 't', data: 1 }]), 'REVISION_CONFLICT');
      await expectCode(store.append('run/c', 0, [{ id: 'b1', type: 't', data: 1 }]), 'DUPLICATE_EVENT_ID');
      expect(await store.append('run/a', 3, [{ id: 'a4', type: 't', data: 4 }])).toEqual({ revision: 4, written: true });
      expect(await store.append('run/empty', 0, [{ id: 'e1', type: 't', data: 1 }])).toEqual({ revision: 1, written: true });
      expect((await store.readAll({ afterPosition: 4 })).map((e) => [e.id, e.position, e.revision])).toEqual([
        ['a4', 5, 4],
        ['e1', 6, 1],
      ]);
      expect((await store.listStreams('run/')).map((s) => s.streamId)).toEqual(['run/a', 'run/b', 'run/empty']);
    } finally {
      await storage.close();
    }

    // A second open finds version 3 and changes nothing.
    const again = await createPostgresRunStorage({ pool, namespace, policy: defaultStoragePolicy });
    expect(await again.eventStore.revision('run/a')).toBe(4);
    await again.close();
  });

  it('keeps positions gap-free: a refused or failed append takes none', async () => {
    const namespace = uniqueNamespace('gapfree');
    const storage = await createPostgresRunStorage({ connectionString: url, namespace, policy: defaultStoragePolicy, maxConnections: 1 });
    try {
      const store = storage.eventStore;
      await store.append('s', 0, [{ id: 'one', type: 't', data: 1 }]);
      await expectCode(store.append('s', 0, [{ id: 'two', type: 't', data: 2 }]), 'REVISION_CONFLICT');
      await expectCode(
        store.append('s', 1, [
          { id: 'new', type: 't', data: 3 },
          { id: 'one', type: 't', data: 9 },
        ]),
        'DUPLICATE_EVENT_ID',
      );
      await expectCode(store.append('t', 0, [{ id: 'one', type: 't', data: 1 }]), 'DUPLICATE_EVENT_ID');
      expect(await store.listStreams()).toEqual([{ streamId: 's', revision: 1 }]);
      await store.append('s', 1, [
        { id: 'two', type: 't', data: 2 },
        { id: 'three', type: 't', data: 3 },
      ]);
      expect((await store.readAll()).map((e) => [e.id, e.position])).toEqual([
        ['one', 1],
        ['two', 2],
        ['three', 3],
      ]);
    } finally {
      await storage.close();
    }
  });
});
