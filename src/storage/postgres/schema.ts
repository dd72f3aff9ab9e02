import type { PoolClient } from 'pg';
import { ProofgateError } from '../../core/index.js';

/** The schema version this build creates and understands. */
export const POSTGRES_SCHEMA_VERSION = 1;
/** Advisory lock key held while the schema is created or migrated (ASCII "PRFG"). */
export const SCHEMA_LOCK_KEY = 0x50524647;

const OUR_TABLES = ['proofgate_namespaces', 'proofgate_streams', 'proofgate_events', 'proofgate_artifacts'] as const;

/**
 * The append, as one statement: lock the stream row, read the revision and the
 * stored events that share an id with the batch; when none does and the
 * revision matches, take positions from the namespace counter row (held
 * locked until commit, so positions become visible in order) and insert.
 * Otherwise nothing is written and what was read goes back to the caller,
 * whose pure `decideAppend` names the outcome.
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
 * are found before anything is written.
 */
export async function migratePostgres(client: PoolClient): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK_KEY]);
  let version = 0;
  if (await tableExists(client, 'proofgate_schema')) {
    const row = (await client.query<{ application: string; version: number }>(
      'SELECT application, version FROM proofgate_schema WHERE id = 1')).rows[0];
    if (row === undefined || row.application !== 'proofgate') {
      throw new ProofgateError('NOT_OUR_DATABASE', 'table proofgate_schema exists but was not written by proofgate; nothing was changed');
    }
    version = row.version;
    if (version > POSTGRES_SCHEMA_VERSION) {
      throw new ProofgateError('UNSUPPORTED_SCHEMA_VERSION', `the database has proofgate schema version ${version}; this build knows up to ${POSTGRES_SCHEMA_VERSION}`, { version });
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
  for (let step = version; step < POSTGRES_SCHEMA_VERSION; step += 1) {
    for (const statement of MIGRATIONS[step] ?? []) await client.query(statement);
  }
  if (version < POSTGRES_SCHEMA_VERSION) {
    await client.query('UPDATE proofgate_schema SET version = $1 WHERE id = 1', [POSTGRES_SCHEMA_VERSION]);
  }
}
