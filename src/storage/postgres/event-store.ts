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

function isUniqueViolation(error: unknown): boolean {
  return error instanceof Error && (error as Error & { code?: unknown }).code === UNIQUE_VIOLATION;
}

/** The PostgreSQL event store of one namespace. `live()` throws CLOSED once the storage is closed. */
export function createPostgresEventStore(pool: Pool, guard: WriteGuard, clock: Clock, live: () => void): EventStore {
  const namespace = guard.namespace;

  const appendOnce = async (batch: PreparedAppend, recordedAt: string): Promise<AppendResult> => {
    const result = await pool.query<AppendRow>({
      name: 'proofgate_append_v1',
      text: 'SELECT current_revision, inserted, existing FROM proofgate_append_v1($1, $2, $3, $4, $5, $6, $7)',
      values: [
        namespace, batch.streamId, batch.expectedRevision,
        batch.events.map((e) => e.id), batch.events.map((e) => e.type), batch.events.map((e) => e.dataText),
        recordedAt,
      ],
    });
    const row = result.rows[0];
    if (row === undefined) throw new Error('proofgate_append_v1 returned no row');
    if (row.inserted) return { revision: row.current_revision, written: true };
    const decision = decideAppend(batch, row.current_revision, row.existing ?? []);
    if (decision.kind === 'insert') throw new Error('proofgate_append_v1 refused a batch that decideAppend would insert');
    return settleDecision(decision, batch.streamId);
  };

  return {
    async append(streamId: string, expectedRevision: number, events: readonly NewEvent[]): Promise<AppendResult> {
      live();
      const batch = guard.prepareAppend(streamId, expectedRevision, events);
      const recordedAt = clock.now().toISOString();
      for (let attempt = 1; ; attempt += 1) {
        try {
          return await appendOnce(batch, recordedAt);
        } catch (error) {
          // A concurrent batch took one of these ids or revisions first; it has
          // committed by now, so the next attempt reads it and decides.
          if (!isUniqueViolation(error) || attempt >= MAX_ATTEMPTS) throw error;
        }
      }
    },

    async read(streamId: string, options?: ReadOptions): Promise<StoredEvent[]> {
      live();
      const stream = checkName(streamId, 'stream id');
      const { fromRevision, limit } = checkReadOptions(options);
      const result = await pool.query<EventRow>(
        `SELECT ${EVENT_COLUMNS} FROM proofgate_events WHERE namespace = $1 AND stream_id = $2 AND revision > $3 ORDER BY revision LIMIT $4`,
        [namespace, stream, fromRevision, limit ?? null]);
      return result.rows.map(eventFromRow);
    },

    async revision(streamId: string): Promise<number> {
      live();
      const result = await pool.query<{ revision: number }>(
        'SELECT revision FROM proofgate_streams WHERE namespace = $1 AND stream_id = $2', [namespace, checkName(streamId, 'stream id')]);
      return result.rows[0]?.revision ?? 0;
    },

    async listStreams(prefix?: string): Promise<StreamInfo[]> {
      live();
      const result = await pool.query<{ stream_id: string; revision: number }>(
        'SELECT stream_id, revision FROM proofgate_streams WHERE namespace = $1 AND revision > 0 AND starts_with(stream_id, $2) ORDER BY stream_id COLLATE "C"',
        [namespace, checkPrefix(prefix)]);
      return result.rows.map((row) => ({ streamId: row.stream_id, revision: row.revision }));
    },

    async readAll(options?: ReadAllOptions): Promise<StoredEvent[]> {
      live();
      const { afterPosition, limit, streamPrefix } = checkReadAllOptions(options);
      const result = await pool.query<EventRow>(
        `SELECT ${EVENT_COLUMNS} FROM proofgate_events WHERE namespace = $1 AND position > $2 AND starts_with(stream_id, $3) ORDER BY position LIMIT $4`,
        [namespace, afterPosition, streamPrefix, limit ?? null]);
      return result.rows.map(eventFromRow);
    },
  };
}
