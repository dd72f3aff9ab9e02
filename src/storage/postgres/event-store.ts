import type { Pool } from 'pg';
import type { Clock } from '../../core/index.js';
import { decideAppend, settleDecision, type ExistingEvent } from '../append-decision.js';
import type { PreparedAppend, WriteGuard } from '../guard.js';
import { checkName, checkPrefix, checkReadAllOptions, checkReadOptions } from '../input.js';
import type { AppendResult, EventStore, NewEvent, ReadAllOptions, ReadOptions, StoredEvent, StreamInfo } from '../ports.js';
import { eventFromRow, type EventRow } from '../record.js';

const EVENT_COLUMNS = 'position, stream_id, revision, event_id, type, data, recorded_at';
const UNIQUE_VIOLATION = '23505';
const MAX_ATTEMPTS = 3;

interface AppendRow {
  current_revision: number;
  inserted: boolean;
  existing: ExistingEvent[] | null;
}

const EXISTING_EVENTS = `SELECT jsonb_agg(jsonb_build_object('id', e.event_id, 'streamId', e.stream_id, 'revision', e.revision,
  'type', e.type, 'dataText', e.data)) FROM proofgate_events e WHERE e.namespace = $1 AND e.event_id = ANY ($3)`;
/** A stream's revision is its largest stored one (a backward scan of the unique (namespace, stream_id, revision) index). */
const STREAM_REVISION = 'SELECT coalesce(max(revision), 0) FROM proofgate_events WHERE namespace = $1 AND stream_id = $2';

function isUniqueViolation(error: unknown): boolean {
  return error instanceof Error && (error as Error & { code?: unknown }).code === UNIQUE_VIOLATION;
}

/** The PostgreSQL event store of one namespace. `live()` throws CLOSED once the storage is closed. */
export function createPostgresEventStore(pool: Pool, guard: WriteGuard, clock: Clock, live: () => void): EventStore {
  const namespace = guard.namespace;

  /** One call of proofgate_append_v2 (see schema.ts): inserts, or returns what it read. */
  const tryAppend = async (batch: PreparedAppend, recordedAt: string): Promise<AppendRow> => {
    const result = await pool.query<AppendRow>({
      name: 'proofgate_append_v2',
      text: 'SELECT current_revision, inserted, existing FROM proofgate_append_v2($1, $2, $3, $4, $5, $6, $7)',
      values: [
        namespace,
        batch.streamId,
        batch.expectedRevision,
        batch.events.map((e) => e.id),
        batch.events.map((e) => e.type),
        batch.events.map((e) => e.dataText),
        recordedAt,
      ],
    });
    const row = result.rows[0];
    if (row === undefined) throw new Error('proofgate_append_v2 returned no row');
    return row;
  };

  /**
   * After a unique violation (a batch id is already stored; the append lock
   * means whoever stored it has committed): what the store holds now.
   */
  const diagnoseAppend = async (batch: PreparedAppend): Promise<AppendRow> => {
    const result = await pool.query<{ current_revision: number; existing: ExistingEvent[] | null }>({
      name: 'proofgate_diagnose_append_v2',
      text: `SELECT (${STREAM_REVISION}) AS current_revision, (${EXISTING_EVENTS}) AS existing`,
      values: [namespace, batch.streamId, batch.events.map((e) => e.id)],
    });
    const row = result.rows[0];
    if (row === undefined) throw new Error('the append diagnosis returned no row');
    return { ...row, inserted: false };
  };

  return {
    async append(streamId: string, expectedRevision: number, events: readonly NewEvent[]): Promise<AppendResult> {
      live();
      const batch = guard.prepareAppend(streamId, expectedRevision, events);
      const recordedAt = clock.now().toISOString();
      for (let attempt = 1; ; attempt += 1) {
        let row: AppendRow;
        let violation: unknown;
        try {
          row = await tryAppend(batch, recordedAt);
        } catch (error) {
          if (!isUniqueViolation(error)) throw error;
          violation = error;
          row = await diagnoseAppend(batch);
        }
        if (row.inserted) return { revision: row.current_revision, written: true };
        const decision = decideAppend(batch, row.current_revision, row.existing ?? []);
        if (decision.kind !== 'insert') return settleDecision(decision, batch.streamId);
        // Nothing stored explains the violation (possible only when a session
        // runs above READ COMMITTED and read a stale snapshot): try again, a
        // bounded number of times.
        if (attempt >= MAX_ATTEMPTS) throw violation ?? new Error('proofgate_append_v2 refused a batch that decideAppend would insert');
      }
    },

    async read(streamId: string, options?: ReadOptions): Promise<StoredEvent[]> {
      live();
      const stream = checkName(streamId, 'stream id');
      const { fromRevision, limit } = checkReadOptions(options);
      const result = await pool.query<EventRow>(
        `SELECT ${EVENT_COLUMNS} FROM proofgate_events WHERE namespace = $1 AND stream_id = $2 AND revision > $3 ORDER BY revision LIMIT $4`,
        [namespace, stream, fromRevision, limit ?? null],
      );
      return result.rows.map(eventFromRow);
    },

    async revision(streamId: string): Promise<number> {
      live();
      const result = await pool.query<{ revision: number }>(`SELECT (${STREAM_REVISION}) AS revision`, [namespace, checkName(streamId, 'stream id')]);
      return result.rows[0]?.revision ?? 0;
    },

    async listStreams(prefix?: string): Promise<StreamInfo[]> {
      live();
      const result = await pool.query<{ stream_id: string; revision: number }>(
        `SELECT s.stream_id, r.revision FROM proofgate_streams s
           CROSS JOIN LATERAL (SELECT max(e.revision) AS revision FROM proofgate_events e
             WHERE e.namespace = s.namespace AND e.stream_id = s.stream_id) r
         WHERE s.namespace = $1 AND starts_with(s.stream_id, $2) AND r.revision IS NOT NULL ORDER BY s.stream_id COLLATE "C"`,
        [namespace, checkPrefix(prefix)],
      );
      return result.rows.map((row) => ({ streamId: row.stream_id, revision: row.revision }));
    },

    async readAll(options?: ReadAllOptions): Promise<StoredEvent[]> {
      live();
      const { afterPosition, limit, streamPrefix } = checkReadAllOptions(options);
      const result = await pool.query<EventRow>(
        `SELECT ${EVENT_COLUMNS} FROM proofgate_events WHERE namespace = $1 AND position > $2 AND starts_with(stream_id, $3) ORDER BY position LIMIT $4`,
        [namespace, afterPosition, streamPrefix, limit ?? null],
      );
      return result.rows.map(eventFromRow);
    },
  };
}
