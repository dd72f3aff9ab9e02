/**
 * The observer dashboard's stored projection: one row per change (its stage,
 * the reason, its head, its timeline, the verdicts per head, its place in its
 * base's merge queue), the reviews' durations, each change's merge queue
 * history and samples of the merge queues' depth, kept in SQLite tables: the
 * data directory's file next to the event store (`serve --repo`), or a
 * database in memory (`openFeedProjection` with no data directory: the GitHub
 * App service, whose store may be PostgreSQL).
 *
 * What it reads is a `ProjectionFeed`: the event stores whose events name
 * changes (each followed by its stored position) and a reader of one
 * change's facts. `localFeed` reads the local forge and its ledger; the
 * GitHub service's feed (src/service/github/changes.ts) reads the change
 * facts it records and each repository's ledger. It is written only here: at
 * start (`rebuild`: every change again; the merge queue streams read once
 * from the start) and whenever the service sees events move (`refresh`: the
 * events of every store after the positions it stored, the changes they
 * name recomputed, rows and positions written in one transaction). The merge
 * queues (streams `automerge/queue/<base>` of the automerge namespace) are folded as their
 * events pass (`foldQueue`'s step, kept in memory per base); each event's
 * history items (`queueHistoryItems`) are stored under the event's position,
 * so an event read twice is stored once; a depth sample is taken at an
 * event's own time whenever the total of waiting changes moves. Requests
 * read the rows (`list`, `change`, `timeline`, `summary`); no request
 * replays events.
 *
 * What a row holds is computed by pure functions (`projectChange`,
 * `summarize`, `percentile`) tested with tables; untrusted text (titles,
 * branch names, comment text, reasons) is kept as data and only ever leaves
 * as a JSON string.
 */
import type Database from 'better-sqlite3';
import { ProofgateError } from '../core/index.js';
import { isChangeStage, type ChangeStage } from '../automerge/stage.js';
import {
  changeQueueView,
  initialQueue,
  parseQueueEvent,
  queueHistoryItems,
  reduceQueue,
  type QueueEvent,
  type QueueHistoryItem,
  type QueueState,
} from '../automerge/queue/queue.js';
import { QUEUE_STREAM_PREFIX, queueBaseOf } from '../automerge/queue/store.js';
import { loadBetterSqlite, openSqliteDatabase } from '../storage/sqlite/schema.js';
import type { EventStore, StoredEvent } from '../storage/ports.js';
import { projectChange, type ChangeRow, type HeadRecord, type ProjectedChange, type QueueSummary, type TimelineItem } from './dashboard/change-view.js';
import { mergeQueueDepth, summarize, listQueryFrom, type ListQuery, type Summary } from './dashboard/summary.js';
import { localFeed, type FeedChange, type ProjectionFeed, type ProjectionSources } from './dashboard/feed.js';

export * from './dashboard/change-view.js';
export * from './dashboard/summary.js';
export * from './dashboard/feed.js';

/** The version of the projection's tables (`proofgate_meta` key `projection_schema_version`); another version is rebuilt. */
export const PROJECTION_SCHEMA_VERSION = 3;
/** Queue-depth samples kept (the newest). */
export const MAX_QUEUE_SAMPLES = 5000;

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS proofgate_projection_changes (
     id TEXT PRIMARY KEY, ord INTEGER NOT NULL, number INTEGER NOT NULL, repo TEXT NOT NULL, title TEXT NOT NULL, state TEXT NOT NULL,
     stage TEXT NOT NULL, stage_detail TEXT, stage_code TEXT, base TEXT NOT NULL, head TEXT NOT NULL, head_sha TEXT NOT NULL,
     author TEXT NOT NULL, opened_at TEXT NOT NULL, updated_at TEXT NOT NULL, automerge_on INTEGER NOT NULL,
     automerge_at TEXT, merged_at TEXT, merge_commit TEXT, timeline TEXT NOT NULL, heads TEXT NOT NULL, queue TEXT)`,
  'CREATE INDEX IF NOT EXISTS proofgate_projection_changes_stage ON proofgate_projection_changes (stage, ord)',
  'CREATE INDEX IF NOT EXISTS proofgate_projection_changes_ord ON proofgate_projection_changes (ord)',
  `CREATE TABLE IF NOT EXISTS proofgate_projection_reviews (
     change_id TEXT NOT NULL, review_id TEXT NOT NULL, head TEXT NOT NULL, started_at TEXT NOT NULL,
     finished_at TEXT, verdict TEXT, PRIMARY KEY (change_id, review_id))`,
  // A sample taken at a queue event carries the event's position: a second service on the same data directory stores it once.
  'CREATE TABLE IF NOT EXISTS proofgate_projection_queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, depth INTEGER NOT NULL, position INTEGER UNIQUE)',
  'CREATE TABLE IF NOT EXISTS proofgate_projection_positions (namespace TEXT PRIMARY KEY, position INTEGER NOT NULL)',
  `CREATE TABLE IF NOT EXISTS proofgate_projection_queue_history (
     position INTEGER NOT NULL, idx INTEGER NOT NULL, change_id TEXT NOT NULL, item TEXT NOT NULL, PRIMARY KEY (position, idx))`,
  'CREATE INDEX IF NOT EXISTS proofgate_projection_queue_history_change ON proofgate_projection_queue_history (change_id, position, idx)',
];

/** A candidate's changes, kept until its check result names it (key: base and candidate id). */
const candidateKey = (base: string, candidate: string): string => `${base}\n${candidate}`;

// ---------------------------------------------------------------- the store

interface RowRecord {
  id: string;
  number: number;
  repo: string;
  title: string;
  state: string;
  stage: string;
  stage_detail: string | null;
  stage_code: string | null;
  base: string;
  head: string;
  head_sha: string;
  author: string;
  opened_at: string;
  updated_at: string;
  automerge_on: number;
  automerge_at: string | null;
  merged_at: string | null;
  merge_commit: string | null;
}

function rowOf(record: RowRecord): ChangeRow {
  return {
    id: record.id,
    repo: record.repo,
    number: record.number,
    title: record.title,
    state: record.state as ChangeRow['state'],
    stage: record.stage as ChangeStage,
    stageDetail: record.stage_detail,
    stageCode: record.stage_code,
    base: record.base,
    head: record.head,
    headSha: record.head_sha,
    author: record.author,
    openedAt: record.opened_at,
    updatedAt: record.updated_at,
    automergeOn: record.automerge_on === 1,
    automergeAt: record.automerge_at,
    mergedAt: record.merged_at,
    mergeCommit: record.merge_commit,
  };
}

const ROW_COLUMNS =
  'id, number, repo, title, state, stage, stage_detail, stage_code, base, head, head_sha, author, opened_at, updated_at, automerge_on, automerge_at, merged_at, merge_commit';

export interface ChangeProjection {
  /** Recompute every change; returns how many. */
  rebuild(): Promise<number>;
  /** Catch up with the events after the stored positions (and recompute `touched` too); returns how many changes were recomputed. */
  refresh(touched?: Iterable<string>): Promise<number>;
  list(query: ListQuery): { readonly changes: ChangeRow[]; readonly nextCursor: string | null };
  /** The repositories of the rows, by name. */
  repos(): string[];
  /** The open changes whose head is one of `branches`. */
  openOnHeads(branches: readonly string[]): string[];
  change(id: string): ChangeRow | null;
  timeline(
    id: string,
  ): { readonly change: ChangeRow; readonly timeline: TimelineItem[]; readonly heads: HeadRecord[]; readonly queue: QueueSummary | null } | null;
  summary(): Summary;
  /** Wait for the write under way, then close the connection. */
  close(): Promise<void>;
}

const BUSY_TIMEOUT_MS = 10_000;
const TAIL_PAGE = 1000;

/** Open the projection of a local repository in the data directory's SQLite file (its tables are created, or rebuilt on another version). */
export function openChangeProjection(dataDir: string, sources: ProjectionSources): ChangeProjection {
  return openFeedProjection(localFeed(sources), { dataDir, ...(sources.now === undefined ? {} : { now: sources.now }) });
}

export interface FeedProjectionOptions {
  /** The data directory whose SQLite file keeps the tables; null: a database in memory, rebuilt at each start. */
  readonly dataDir: string | null;
  readonly now?: () => Date;
}

/** Open the projection of a feed (its tables are created, or rebuilt on another version, here). */
export function openFeedProjection(feed: ProjectionFeed, options: FeedProjectionOptions): ChangeProjection {
  const db: Database.Database = options.dataDir === null ? openMemoryDatabase() : openSqliteDatabase(options.dataDir, BUSY_TIMEOUT_MS);
  const now = options.now ?? (() => new Date());
  try {
    db.transaction(() => {
      const stored = db.prepare<[string], { value: string }>('SELECT value FROM proofgate_meta WHERE key = ?').get('projection_schema_version');
      if (stored !== undefined && Number(stored.value) !== PROJECTION_SCHEMA_VERSION) {
        for (const table of ['changes', 'reviews', 'queue', 'positions', 'queue_history']) db.exec(`DROP TABLE IF EXISTS proofgate_projection_${table}`);
      }
      for (const statement of SCHEMA) db.exec(statement);
      db.prepare('INSERT OR REPLACE INTO proofgate_meta (key, value) VALUES (?, ?)').run('projection_schema_version', String(PROJECTION_SCHEMA_VERSION));
    }).immediate();
  } catch (error) {
    db.close();
    throw error;
  }

  const upsert = db.prepare(
    `INSERT OR REPLACE INTO proofgate_projection_changes (${ROW_COLUMNS}, ord, timeline, heads, queue)
     VALUES (@id, @number, @repo, @title, @state, @stage, @stage_detail, @stage_code, @base, @head, @head_sha, @author, @opened_at, @updated_at,
             @automerge_on, @automerge_at, @merged_at, @merge_commit, @ord, @timeline, @heads, @queue)`,
  );
  const deleteReviews = db.prepare('DELETE FROM proofgate_projection_reviews WHERE change_id = ?');
  const insertReview = db.prepare(
    'INSERT OR REPLACE INTO proofgate_projection_reviews (change_id, review_id, head, started_at, finished_at, verdict) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const setPosition = db.prepare('INSERT OR REPLACE INTO proofgate_projection_positions (namespace, position) VALUES (?, ?)');
  const getPosition = db.prepare<[string], { position: number }>('SELECT position FROM proofgate_projection_positions WHERE namespace = ?');
  const insertHistory = db.prepare('INSERT OR IGNORE INTO proofgate_projection_queue_history (position, idx, change_id, item) VALUES (?, ?, ?, ?)');
  const historyOf = db.prepare<[string], { item: string }>('SELECT item FROM proofgate_projection_queue_history WHERE change_id = ? ORDER BY position, idx');
  const lastSample = db.prepare<[], { depth: number }>('SELECT depth FROM proofgate_projection_queue ORDER BY seq DESC LIMIT 1');
  const addSample = db.prepare('INSERT OR IGNORE INTO proofgate_projection_queue (at, depth, position) VALUES (?, ?, ?)');
  const trimSamples = db.prepare(
    `DELETE FROM proofgate_projection_queue WHERE seq <= (SELECT seq FROM proofgate_projection_queue ORDER BY seq DESC LIMIT 1 OFFSET ${MAX_QUEUE_SAMPLES})`,
  );

  // The merge queues, folded as their events pass (each event once: `queueFolded` is the position of the last one applied).
  const queues = new Map<string, QueueState>();
  const candidates = new Map<string, readonly string[]>();
  let queueFolded = 0;
  // Changes whose queue view moved and whose rows are not written yet (kept until a refresh writes them).
  const queueTouched = new Set<string>();
  const queueOf = (base: string): QueueState => queues.get(base) ?? initialQueue(base);
  const depthNow = (): number => mergeQueueDepth(queues.values());

  /**
   * Fold queue events (in position order; those folded already are skipped), store their history items and the depth
   * samples in one transaction, and return the changes whose view moved: those the events name and, when a line
   * moved, every change waiting in it before or after.
   */
  const foldQueueEvents = (stored: readonly StoredEvent[]): Set<string> => {
    const rows: { position: number; idx: number; change: string; item: QueueHistoryItem }[] = [];
    const samples: { at: string; depth: number; position: number }[] = [];
    let depth = depthNow();
    for (const event of stored) {
      if (event.position <= queueFolded || !event.streamId.startsWith(QUEUE_STREAM_PREFIX)) continue;
      queueFolded = event.position;
      const parsed: QueueEvent | null = parseQueueEvent(event.type, event.data);
      if (parsed === null || parsed.type === 'queue-lease') continue;
      const base = queueBaseOf(event.streamId);
      const before = queueOf(base);
      const items = queueHistoryItems(before, parsed, (candidate) => candidates.get(candidateKey(base, candidate)) ?? []);
      if (parsed.type === 'queue-candidate') candidates.set(candidateKey(base, parsed.data.candidate), parsed.data.changes);
      if (parsed.type === 'queue-checked') candidates.delete(candidateKey(base, parsed.data.candidate));
      const after = reduceQueue(before, parsed);
      queues.set(base, after);
      items.forEach((item, idx) => {
        rows.push({ position: event.position, idx, change: item.change, item });
        queueTouched.add(item.change);
      });
      if (after.entries !== before.entries || after.paused !== before.paused) {
        for (const entry of [...before.entries, ...after.entries]) queueTouched.add(entry.change);
      }
      const next = depthNow();
      if (next !== depth) {
        depth = next;
        samples.push({ at: 'at' in parsed.data ? parsed.data.at : event.recordedAt, depth, position: event.position });
      }
    }
    if (rows.length > 0 || samples.length > 0) {
      db.transaction(() => {
        for (const row of rows) insertHistory.run(row.position, row.idx, row.change, JSON.stringify(row.item));
        for (const sample of samples) addSample.run(sample.at, sample.depth, sample.position);
        if (samples.length > 0) trimSamples.run();
      }).immediate();
    }
    return queueTouched;
  };

  const compute = async (read: (id: string) => Promise<FeedChange | null>, changeId: string): Promise<{ change: ProjectedChange; order: number } | null> => {
    const found = await read(changeId);
    if (found === null) return null;
    const { record } = found.facts;
    const queueHistory = historyOf.all(changeId).map((row) => JSON.parse(row.item) as QueueHistoryItem);
    const queue = changeQueueView(
      queueOf(record.baseRef),
      changeId,
      queueHistory.filter((item) => item.base === record.baseRef),
    );
    return { change: projectChange({ ...found.facts, queue, queueHistory }), order: found.order };
  };

  const write = (projected: readonly { change: ProjectedChange; order: number }[], positions: Readonly<Record<string, number>>): void => {
    db.transaction(() => {
      for (const { change, order } of projected) {
        const { row, timeline, heads, reviews, queue } = change;
        upsert.run({
          id: row.id,
          ord: order,
          number: row.number,
          repo: row.repo,
          title: row.title,
          state: row.state,
          stage: row.stage,
          stage_detail: row.stageDetail,
          stage_code: row.stageCode,
          base: row.base,
          head: row.head,
          head_sha: row.headSha,
          author: row.author,
          opened_at: row.openedAt,
          updated_at: row.updatedAt,
          automerge_on: row.automergeOn ? 1 : 0,
          automerge_at: row.automergeAt,
          merged_at: row.mergedAt,
          merge_commit: row.mergeCommit,
          timeline: JSON.stringify(timeline),
          heads: JSON.stringify(heads),
          queue: queue === null ? null : JSON.stringify(queue),
        });
        deleteReviews.run(row.id);
        for (const review of reviews) insertReview.run(row.id, review.reviewId, review.head, review.startedAt, review.finishedAt, review.verdict);
      }
      for (const [namespace, position] of Object.entries(positions)) setPosition.run(namespace, position);
      // The first sample of a board: the depth now (later ones are taken at the queue events that move it).
      if (lastSample.get() === undefined) addSample.run(now().toISOString(), depthNow(), null);
    }).immediate();
  };

  /** The change ids named by events after `after` in one namespace, and the last position read. */
  const tail = async (
    events: EventStore,
    after: number,
    idOf: (event: StoredEvent) => readonly string[],
    onPage?: (page: readonly StoredEvent[]) => Iterable<string>,
  ): Promise<{ ids: Set<string>; position: number }> => {
    const ids = new Set<string>();
    let position = after;
    for (;;) {
      const page = await events.readAll({ afterPosition: position, limit: TAIL_PAGE });
      for (const event of page) {
        for (const id of idOf(event)) ids.add(id);
        position = event.position;
      }
      if (onPage !== undefined) for (const id of onPage(page)) ids.add(id);
      if (page.length < TAIL_PAGE) return { ids, position };
    }
  };
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(work: () => Promise<T>): Promise<T> => {
    const next = chain.then(work, work);
    chain = next.catch(() => undefined);
    return next;
  };
  let closed = false;
  const open = (): void => {
    if (closed) throw new ProofgateError('CLOSED', 'the projection is closed');
  };

  const recompute = async (ids: Iterable<string>, positions: Record<string, number>): Promise<number> => {
    const read = await feed.reader();
    const projected: { change: ProjectedChange; order: number }[] = [];
    for (const id of ids) {
      const change = await compute(read, id);
      if (change !== null) projected.push(change);
    }
    open();
    write(projected, positions);
    return projected.length;
  };

  const parseJson = <T>(text: string): T => JSON.parse(text) as T;

  return {
    rebuild: () =>
      serial(async () => {
        open();
        const tails = await feed.tails();
        // Positions first: whatever is appended while the rebuild reads is found by the next refresh.
        const positions: Record<string, number> = {};
        for (const { key, events } of tails) positions[key] = await lastPosition(events);
        // The merge queues again from their start, up to that position (the next refresh reads on from there).
        queues.clear();
        candidates.clear();
        queueFolded = 0;
        db.transaction(() => {
          db.exec('DELETE FROM proofgate_projection_queue_history');
          db.exec('DELETE FROM proofgate_projection_queue');
        }).immediate();
        for (const { key, events } of tails.filter((entry) => entry.queues === true)) {
          const upToPosition = positions[key] ?? 0;
          let after = 0;
          for (;;) {
            const page = await events.readAll({ afterPosition: after, limit: TAIL_PAGE, streamPrefix: QUEUE_STREAM_PREFIX });
            const upTo = page.filter((event) => event.position <= upToPosition);
            foldQueueEvents(upTo);
            const last = page[page.length - 1];
            if (last === undefined || page.length < TAIL_PAGE || upTo.length < page.length) break;
            after = last.position;
          }
          queueFolded = upToPosition;
        }
        const count = await recompute(await feed.changeIds(), positions);
        queueTouched.clear();
        return count;
      }),
    refresh: (touched = []) =>
      serial(async () => {
        open();
        const ids = new Set(touched);
        const positions: Record<string, number> = {};
        for (const entry of await feed.tails()) {
          const read = await tail(entry.events, getPosition.get(entry.key)?.position ?? 0, entry.idsOf, entry.queues === true ? foldQueueEvents : undefined);
          for (const id of read.ids) ids.add(id);
          positions[entry.key] = read.position;
        }
        for (const id of queueTouched) ids.add(id);
        if (ids.size === 0) {
          write([], positions);
          return 0;
        }
        const count = await recompute(ids, positions);
        for (const id of ids) queueTouched.delete(id);
        return count;
      }),
    list(query) {
      open();
      const where: string[] = [];
      const args: (string | number)[] = [];
      if (query.stage !== null) {
        where.push('stage = ?');
        args.push(query.stage);
      }
      if (query.repo !== null) {
        where.push('repo = ?');
        args.push(query.repo);
      }
      if (query.cursor !== null) {
        where.push('ord < ?');
        args.push(query.cursor);
      }
      const sql = `SELECT ${ROW_COLUMNS}, ord FROM proofgate_projection_changes ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ord DESC LIMIT ?`;
      const rows = db.prepare<(string | number)[], RowRecord & { ord: number }>(sql).all(...args, query.limit + 1);
      const changes = rows.slice(0, query.limit).map(rowOf);
      const lastRow = rows[query.limit - 1];
      return { changes, nextCursor: rows.length > query.limit && lastRow !== undefined ? String(lastRow.ord) : null };
    },
    openOnHeads(branches) {
      open();
      const wanted = new Set(branches);
      return db
        .prepare<[], { id: string; head: string }>("SELECT id, head FROM proofgate_projection_changes WHERE state = 'open'")
        .all()
        .filter((row) => wanted.has(row.head))
        .map((row) => row.id);
    },
    repos() {
      open();
      return db
        .prepare<[], { repo: string }>('SELECT DISTINCT repo FROM proofgate_projection_changes ORDER BY repo')
        .all()
        .map((row) => row.repo);
    },
    change(id) {
      open();
      const record = db.prepare<[string], RowRecord>(`SELECT ${ROW_COLUMNS} FROM proofgate_projection_changes WHERE id = ?`).get(id);
      return record === undefined ? null : rowOf(record);
    },
    timeline(id) {
      open();
      const record = db
        .prepare<[string], RowRecord & { timeline: string; heads: string; queue: string | null }>(
          `SELECT ${ROW_COLUMNS}, timeline, heads, queue FROM proofgate_projection_changes WHERE id = ?`,
        )
        .get(id);
      if (record === undefined) return null;
      return {
        change: rowOf(record),
        timeline: parseJson<TimelineItem[]>(record.timeline),
        heads: parseJson<HeadRecord[]>(record.heads),
        queue: record.queue === null ? null : parseJson<QueueSummary>(record.queue),
      };
    },
    summary() {
      open();
      const leads = db
        .prepare<[], { automergeAt: string; mergedAt: string }>(
          'SELECT automerge_at AS automergeAt, merged_at AS mergedAt FROM proofgate_projection_changes WHERE automerge_at IS NOT NULL AND merged_at IS NOT NULL',
        )
        .all();
      const reviews = db
        .prepare<[], { startedAt: string; finishedAt: string }>(
          'SELECT started_at AS startedAt, finished_at AS finishedAt FROM proofgate_projection_reviews WHERE finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT 2000',
        )
        .all();
      const samples = db
        .prepare<[], { at: string; depth: number }>(
          `SELECT at, depth FROM (SELECT seq, at, depth FROM proofgate_projection_queue ORDER BY seq DESC LIMIT ${MAX_QUEUE_SAMPLES}) ORDER BY seq`,
        )
        .all();
      const counts = Object.fromEntries(
        ['arriving', 'reviewing', 'proving', 'repairing', 'waiting', 'merged', 'blocked', 'closed'].map((stage) => [stage, 0]),
      ) as Record<ChangeStage, number>;
      for (const { stage, n } of db
        .prepare<[], { stage: string; n: number }>('SELECT stage, COUNT(*) AS n FROM proofgate_projection_changes GROUP BY stage')
        .all()) {
        if (isChangeStage(stage)) counts[stage] = n;
      }
      return summarize(leads, reviews, samples, counts, now());
    },
    async close() {
      if (closed) return;
      closed = true;
      await chain;
      db.close();
    },
  };
}

/** A database in memory with the one table the projection shares with the store's file (`proofgate_meta`). */
function openMemoryDatabase(): Database.Database {
  const db = new (loadBetterSqlite())(':memory:');
  db.exec('CREATE TABLE proofgate_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID');
  return db;
}

/** The position of the newest event of a namespace (0: none). */
async function lastPosition(events: EventStore): Promise<number> {
  let position = 0;
  for (;;) {
    const page = await events.readAll({ afterPosition: position, limit: TAIL_PAGE });
    const last = page[page.length - 1];
    if (last !== undefined) position = last.position;
    if (page.length < TAIL_PAGE) return position;
  }
}

/** Longest change id a path may name (a GitHub change is `owner/name#number`). */
const MAX_ID = 200;

/**
 * The change id a path segment names, percent-decoded (`acme%2Fwidgets%2312`: `acme/widgets#12`), or null when it
 * cannot name one: a malformed escape, a spelling other than `encodeURIComponent`'s (`%31` for `1`: one id, one
 * path), too long, a control character. Pure.
 */
export function changeIdOf(segment: string): string | null {
  let id: string;
  try {
    id = decodeURIComponent(segment);
  } catch {
    return null;
  }
  return id.length === 0 || id.length > MAX_ID || /\p{Cc}/u.test(id) || encodeURIComponent(id) !== segment ? null : id;
}

/** A read API answer (status and JSON body). */
export interface ReadAnswer {
  readonly status: number;
  readonly body: Readonly<Record<string, unknown>>;
}

/**
 * The answer of the projection's read routes (`GET /api/changes`,
 * `/api/changes/:id/timeline`, `/api/summary`), or null when `path` is not
 * one of them. A bad query is 400 with a typed one-line error.
 */
export function projectionAnswer(projection: ChangeProjection, path: string, query: URLSearchParams): ReadAnswer | null {
  if (path === '/api/changes') {
    let parsed: ListQuery;
    try {
      parsed = listQueryFrom(query);
    } catch (error) {
      if (error instanceof ProofgateError) return { status: 400, body: { error: error.message, code: error.code } };
      throw error;
    }
    const page = projection.list(parsed);
    return { status: 200, body: { changes: page.changes, nextCursor: page.nextCursor, repos: projection.repos() } };
  }
  const timeline = /^\/api\/changes\/([^/]+)\/timeline$/.exec(path);
  if (timeline !== null) {
    const id = changeIdOf(timeline[1] as string);
    const found = id === null ? null : projection.timeline(id);
    return found === null ? { status: 404, body: { error: 'no such change' } } : { status: 200, body: { ...found } };
  }
  if (path === '/api/summary') return { status: 200, body: { ...projection.summary() } };
  return null;
}
