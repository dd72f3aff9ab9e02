import type { PoolClient } from 'pg';
import { ProofgateError } from '../../core/index.js';

/** The schema version this build creates and understands. */
export const POSTGRES_SCHEMA_VERSION = 3;
/** Advisory lock key held while the schema is created or migrated (ASCII "PRFG"). */
export const SCHEMA_LOCK_KEY = 0x50524647;

const OUR_TABLES = ['proofgate_namespaces', 'proofgate_streams', 'proofgate_events', 'proofgate_artifacts'] as const;

/**
 * Version 1's append (kept because version 1 is still created on the way to
 * version 2; migration 2 drops it): lock the stream row, read the revision
 * and the stored events that share an id with the batch, take positions from
 * the namespace counter row (locked until commit), insert, update the
 * stream's revision.
 */
const APPEND_FUNCTION = `
CREATE OR REPLACE FUNCTION proofgate_append_v1(
  p_namespace text, p_stream text, p_expected integer,
  p_ids text[], p_types text[], p_data text[], p_recorded_at text
) RETURNS TABLE (current_revision integer, inserted boolean, existing jsonb)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_current integer;
  v_existing jsonb;
  v_count integer := cardinality(p_ids);
  v_last bigint;
BEGIN
  SELECT s.revision INTO v_current FROM proofgate_streams s
    WHERE s.namespace = p_namespace AND s.stream_id = p_stream FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO proofgate_streams (namespace, stream_id, revision) VALUES (p_namespace, p_stream, 0)
      ON CONFLICT DO NOTHING;
    SELECT s.revision INTO v_current FROM proofgate_streams s
      WHERE s.namespace = p_namespace AND s.stream_id = p_stream FOR UPDATE;
  END IF;
  SELECT jsonb_agg(jsonb_build_object('id', e.event_id, 'streamId', e.stream_id, 'revision', e.revision,
      'type', e.type, 'dataText', e.data))
    INTO v_existing FROM proofgate_events e
    WHERE e.namespace = p_namespace AND e.event_id = ANY (p_ids);
  IF v_existing IS NOT NULL OR v_current <> p_expected THEN
    RETURN QUERY SELECT v_current, false, v_existing;
    RETURN;
  END IF;
  UPDATE proofgate_namespaces n SET last_position = n.last_position + v_count
    WHERE n.namespace = p_namespace RETURNING n.last_position INTO v_last;
  INSERT INTO proofgate_events (namespace, position, stream_id, revision, event_id, type, data, recorded_at)
    SELECT p_namespace, v_last - v_count + t.ord, p_stream, p_expected + t.ord::integer, t.id, t.type, t.data, p_recorded_at
    FROM unnest(p_ids, p_types, p_data) WITH ORDINALITY AS t (id, type, data, ord);
  UPDATE proofgate_streams s SET revision = p_expected + v_count
    WHERE s.namespace = p_namespace AND s.stream_id = p_stream;
  RETURN QUERY SELECT p_expected + v_count, true, NULL::jsonb;
END
$fn$`;

/**
 * Class key of the per-namespace append lock, `pg_advisory_xact_lock(key,
 * hashtext(namespace))`. The two-key form is a separate key space from
 * SCHEMA_LOCK_KEY's one-key form.
 */
export const APPEND_LOCK_KEY = 0x50524647;

/**
 * Version 2's append, one statement with one write on the common path:
 *
 * 1. take the namespace's append lock (held until commit): appends to one
 *    namespace take turns from here to their commit, so the next append
 *    reads every position and revision committed before it;
 * 2. read the stream's revision as the largest stored one (a backward scan of
 *    the unique (namespace, stream_id, revision) index); when it is not the
 *    expected one, write nothing and return it with the stored events that
 *    share an id with the batch, for the caller's `decideAppend`;
 * 3. positions continue from the largest stored one (the primary key's
 *    index), so they stay gap-free and commit in order;
 * 4. insert; an event id that is already stored raises a unique violation
 *    (the whole statement rolls back) and the caller asks `diagnoseAppend`
 *    what is stored;
 * 5. a new stream gets its row in proofgate_streams (the list of streams).
 *
 * The unique indexes stay the last fence: whatever a reader saw, no two
 * events share a position, an id or a stream revision.
 */
const APPEND_FUNCTION_V2 = `
CREATE FUNCTION proofgate_append_v2(
  p_namespace text, p_stream text, p_expected integer,
  p_ids text[], p_types text[], p_data text[], p_recorded_at text
) RETURNS TABLE (current_revision integer, inserted boolean, existing jsonb)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_current integer;
  v_last bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(${APPEND_LOCK_KEY}, hashtext(p_namespace));
  SELECT coalesce(max(e.revision), 0) INTO v_current FROM proofgate_events e
    WHERE e.namespace = p_namespace AND e.stream_id = p_stream;
  IF v_current <> p_expected THEN
    RETURN QUERY SELECT v_current, false, (SELECT jsonb_agg(jsonb_build_object('id', e.event_id,
        'streamId', e.stream_id, 'revision', e.revision, 'type', e.type, 'dataText', e.data))
      FROM proofgate_events e WHERE e.namespace = p_namespace AND e.event_id = ANY (p_ids));
    RETURN;
  END IF;
  SELECT coalesce(max(e.position), 0) INTO v_last FROM proofgate_events e WHERE e.namespace = p_namespace;
  INSERT INTO proofgate_events (namespace, position, stream_id, revision, event_id, type, data, recorded_at)
    SELECT p_namespace, v_last + t.ord, p_stream, p_expected + t.ord::integer, t.id, t.type, t.data, p_recorded_at
    FROM unnest(p_ids, p_types, p_data) WITH ORDINALITY AS t (id, type, data, ord);
  IF p_expected = 0 THEN
    INSERT INTO proofgate_streams (namespace, stream_id) VALUES (p_namespace, p_stream) ON CONFLICT DO NOTHING;
  END IF;
  RETURN QUERY SELECT p_expected + cardinality(p_ids), true, NULL::jsonb;
END
$fn$`;

/**
 * The service's secrets shared by every process on the database (the marker
 * secret: `src/service/github/secret.ts`), one row per name. Services before
 * schema version 3 created this table themselves, so migration 3 takes one
 * that exists as it is.
 */
export const SERVICE_SECRET_TABLE = 'proofgate_service_secret';

/** Each entry takes the schema from version index to index + 1. */
const MIGRATIONS: readonly (readonly string[])[] = [
  [
    `CREATE TABLE proofgate_namespaces (
      namespace text PRIMARY KEY,
      provider text NOT NULL,
      policy_digest text NOT NULL,
      policy text NOT NULL,
      last_position bigint NOT NULL DEFAULT 0,
      created_at text NOT NULL
    )`,
    `CREATE TABLE proofgate_streams (
      namespace text NOT NULL,
      stream_id text NOT NULL,
      revision integer NOT NULL,
      PRIMARY KEY (namespace, stream_id)
    )`,
    `CREATE TABLE proofgate_events (
      namespace text NOT NULL,
      position bigint NOT NULL,
      stream_id text NOT NULL,
      revision integer NOT NULL,
      event_id text NOT NULL,
      type text NOT NULL,
      data text NOT NULL,
      recorded_at text NOT NULL,
      PRIMARY KEY (namespace, position),
      UNIQUE (namespace, stream_id, revision),
      UNIQUE (namespace, event_id)
    )`,
    `CREATE TABLE proofgate_artifacts (
      namespace text NOT NULL,
      run_id text NOT NULL,
      digest text NOT NULL,
      byte_length integer NOT NULL,
      media_type text NOT NULL,
      purpose text NOT NULL,
      bytes bytea NOT NULL,
      created_at text NOT NULL,
      PRIMARY KEY (namespace, run_id, digest)
    )`,
    APPEND_FUNCTION,
  ],
  [
    // Revisions and positions are read from the events' own indexes from now
    // on; the counters that version 1 updated on every append go away.
    'DROP FUNCTION proofgate_append_v1(text, text, integer, text[], text[], text[], text)',
    'DELETE FROM proofgate_streams WHERE revision = 0',
    'ALTER TABLE proofgate_streams DROP COLUMN revision',
    'ALTER TABLE proofgate_namespaces DROP COLUMN last_position',
    APPEND_FUNCTION_V2,
  ],
  [
    `CREATE TABLE IF NOT EXISTS ${SERVICE_SECRET_TABLE} (
      name text PRIMARY KEY,
      value text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`,
  ],
];

async function tableExists(client: PoolClient, name: string): Promise<boolean> {
  const result = await client.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AS found', [name]);
  return result.rows[0]?.found === true;
}

/**
 * Create or migrate proofgate's tables. Runs inside the caller's transaction,
 * under a transaction-scoped advisory lock so that concurrent openers take
 * turns. Tables named like ours without our schema row are
 * `NOT_OUR_DATABASE`; a newer schema is `UNSUPPORTED_SCHEMA_VERSION`. Both
 * are found before anything is written. `target` (default: this build's
 * version) lets tests build an older schema to migrate from.
 */
export async function migratePostgres(client: PoolClient, target: number = POSTGRES_SCHEMA_VERSION): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_KEY]);
  let version = 0;
  if (await tableExists(client, 'proofgate_schema')) {
    const row = (await client.query<{ application: string; version: number }>('SELECT application, version FROM proofgate_schema WHERE id = 1')).rows[0];
    if (row === undefined || row.application !== 'proofgate') {
      throw new ProofgateError('NOT_OUR_DATABASE', 'table proofgate_schema exists but was not written by proofgate; nothing was changed');
    }
    version = row.version;
    if (version > POSTGRES_SCHEMA_VERSION) {
      throw new ProofgateError(
        'UNSUPPORTED_SCHEMA_VERSION',
        `the database has proofgate schema version ${version}; this build knows up to ${POSTGRES_SCHEMA_VERSION}`,
        { version },
      );
    }
  } else {
    for (const table of OUR_TABLES) {
      if (await tableExists(client, table)) {
        throw new ProofgateError('NOT_OUR_DATABASE', `table ${table} exists but proofgate did not create it; nothing was changed`, { table });
      }
    }
    await client.query(`CREATE TABLE proofgate_schema (
      id integer PRIMARY KEY CHECK (id = 1),
      application text NOT NULL,
      version integer NOT NULL
    )`);
    await client.query("INSERT INTO proofgate_schema (id, application, version) VALUES (1, 'proofgate', 0)");
  }
  for (let step = version; step < target; step += 1) {
    for (const statement of MIGRATIONS[step] ?? []) await client.query(statement);
  }
  if (version < target) {
    await client.query('UPDATE proofgate_schema SET version = $1 WHERE id = 1', [target]);
  }
}
