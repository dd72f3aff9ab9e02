import type Database from 'better-sqlite3';
import type { Clock } from '../../core/index.js';
import { decideAppend, settleDecision, type ExistingEvent } from '../append-decision.js';
import type { PreparedAppend, WriteGuard } from '../guard.js';
import { checkName, checkPrefix, checkReadAllOptions, checkReadOptions } from '../input.js';
import type { AppendResult, EventStore, NewEvent, ReadAllOptions, ReadOptions, StoredEvent, StreamInfo } from '../ports.js';
import { eventFromRow, type EventRow } from '../record.js';

const EVENT_COLUMNS = 'position, stream_id, revision, event_id, type, data, recorded_at';
const NO_LIMIT = -1;
function isUniqueViolation(error: unknown): boolean {
  return error instanceof Error && (error as Error & { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE';
}
const twice = (text: string): [string, string] => [text, text];

/** The SQLite event store of one namespace. `live()` throws CLOSED once the storage is closed. */
export function createSqliteEventStore(db: Database.Database, guard: WriteGuard, clock: Clock, live: () => void): EventStore {
  const namespace = guard.namespace;
  const statements = {
    revision: db.prepare<[string, string], { revision: number }>('SELECT revision FROM proofgate_streams WHERE namespace = ? AND stream_id = ?'),
    byId: db.prepare<[string, string], ExistingEvent>(
      'SELECT event_id AS id, stream_id AS streamId, revision, type, data AS dataText FROM proofgate_events WHERE namespace = ? AND event_id = ?',
    ),
    insert: db.prepare<[string, string, number, string, string, string, string]>(
      'INSERT INTO proofgate_events (namespace, stream_id, revision, event_id, type, data, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    setRevision: db.prepare<[string, string, number]>(
      'INSERT INTO proofgate_streams (namespace, stream_id, revision) VALUES (?, ?, ?) ON CONFLICT (namespace, stream_id) DO UPDATE SET revision = excluded.revision',
    ),
    read: db.prepare<[string, string, number, number], EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM proofgate_events WHERE namespace = ? AND stream_id = ? AND revision > ? ORDER BY revision LIMIT ?`,
    ),
    readAll: db.prepare<[string, number, number], EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM proofgate_events WHERE namespace = ? AND position > ? ORDER BY position LIMIT ?`,
    ),
    readAllPrefix: db.prepare<[string, number, string, string, number], EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM proofgate_events WHERE namespace = ? AND position > ? AND substr(stream_id, 1, length(?)) = ? ORDER BY position LIMIT ?`,
    ),
    list: db.prepare<[string, string, string], { stream_id: string; revision: number }>(
      'SELECT stream_id, revision FROM proofgate_streams WHERE namespace = ? AND revision > 0 AND substr(stream_id, 1, length(?)) = ? ORDER BY stream_id',
    ),
  };

  const insertBatch = (batch: PreparedAppend, recordedAt: string): AppendResult => {
    let revision = batch.expectedRevision;
    for (const event of batch.events) {
      revision += 1;
      statements.insert.run(namespace, batch.streamId, revision, event.id, event.type, event.dataText, recordedAt);
    }
    statements.setRevision.run(namespace, batch.streamId, revision);
    return { revision, written: true };
  };

  // Common case first: the revision matches, so insert at once and let the
  // unique index on event ids find a known id (which rolls the whole
  // transaction back and sends the batch to the full decision below).
  const fastAppend = db.transaction((batch: PreparedAppend, recordedAt: string): AppendResult | undefined => {
    const current = statements.revision.get(namespace, batch.streamId)?.revision ?? 0;
    if (decideAppend(batch, current, []).kind !== 'insert') return undefined;
    return insertBatch(batch, recordedAt);
  });

  const fullAppend = db.transaction((batch: PreparedAppend, recordedAt: string): AppendResult => {
    const current = statements.revision.get(namespace, batch.streamId)?.revision ?? 0;
    const existing: ExistingEvent[] = [];
    for (const event of batch.events) {
      const found = statements.byId.get(namespace, event.id);
      if (found !== undefined) existing.push(found);
    }
    const decision = decideAppend(batch, current, existing);
    if (decision.kind !== 'insert') return settleDecision(decision, batch.streamId);
    return insertBatch(batch, recordedAt);
  });

  const appendBatch = (batch: PreparedAppend, recordedAt: string): AppendResult => {
    try {
      const result = fastAppend.immediate(batch, recordedAt);
      if (result !== undefined) return result;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
    }
    return fullAppend.immediate(batch, recordedAt);
  };

  return {
    async append(streamId: string, expectedRevision: number, events: readonly NewEvent[]): Promise<AppendResult> {
      live();
      const batch = guard.prepareAppend(streamId, expectedRevision, events);
      return appendBatch(batch, clock.now().toISOString());
    },

    async read(streamId: string, options?: ReadOptions): Promise<StoredEvent[]> {
      live();
      const stream = checkName(streamId, 'stream id');
      const { fromRevision, limit } = checkReadOptions(options);
      return statements.read.all(namespace, stream, fromRevision, limit ?? NO_LIMIT).map(eventFromRow);
    },

    async revision(streamId: string): Promise<number> {
      live();
      return statements.revision.get(namespace, checkName(streamId, 'stream id'))?.revision ?? 0;
    },

    async listStreams(prefix?: string): Promise<StreamInfo[]> {
      live();
      return statements.list.all(namespace, ...twice(checkPrefix(prefix))).map((row) => ({ streamId: row.stream_id, revision: row.revision }));
    },

    async readAll(options?: ReadAllOptions): Promise<StoredEvent[]> {
      live();
      const { afterPosition, limit, streamPrefix } = checkReadAllOptions(options);
      const rows =
        streamPrefix === ''
          ? statements.readAll.all(namespace, afterPosition, limit ?? NO_LIMIT)
          : statements.readAllPrefix.all(namespace, afterPosition, ...twice(streamPrefix), limit ?? NO_LIMIT);
      return rows.map(eventFromRow);
    },
  };
}
