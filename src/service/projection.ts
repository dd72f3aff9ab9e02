/**
 * The observer dashboard's stored projection: one row per change (its stage,
 * the reason, its head, its timeline, the verdicts per head), the reviews'
 * durations and samples of the merge queue's depth, kept in tables of the
 * data directory's SQLite file next to the event store.
 *
 * It is written only here: at start (`rebuild`: every change again, from the
 * forge's and the automerge ledger's events and one snapshot of the
 * branches) and whenever the service sees events move (`refresh`: the
 * events of both namespaces after the positions it stored, the changes they
 * name recomputed, rows and positions written in one transaction). Requests
 * read the rows (`list`, `change`, `timeline`, `summary`); no request
 * replays events.
 *
 * What a row holds is computed by pure functions (`projectChange`,
 * `summarize`, `percentile`) tested with tables; untrusted text (titles,
 * branch names, comment text, reasons) is kept as data and only ever leaves
 * as a JSON string.
 */
import { basename } from 'node:path';
import type Database from 'better-sqlite3';
import { ProofgateError } from '../core/index.js';
import { collectVerdicts, type MarkerSecret } from '../automerge/markers.js';
import { AUTOMERGE_STREAM_PREFIX, type LoadedLedger } from '../automerge/loop/ledger-store.js';
import { isChangeStage, type ChangeStage } from '../automerge/stage.js';
import type { LocalForge } from '../forge/local/index.js';
import { CHANGE_STREAM_PREFIX, REGISTRY_STREAM, changeStream, foldChange } from '../forge/local/records.js';
import type { ForgeCheck } from '../forge/port.js';
import { openSqliteDatabase } from '../storage/sqlite/schema.js';
import type { EventStore, StoredEvent } from '../storage/ports.js';
import { projectChange, type ChangeRow, type HeadRecord, type ProjectedChange, type TimelineItem, type VerdictBindings } from './dashboard/change-view.js';
import { summarize, listQueryFrom, type ListQuery, type Summary } from './dashboard/summary.js';

export * from './dashboard/change-view.js';
export * from './dashboard/summary.js';

/** The version of the projection's tables (`proofgate_meta` key `projection_schema_version`); another version is rebuilt. */
export const PROJECTION_SCHEMA_VERSION = 1;
/** Queue-depth samples kept (the newest). */
export const MAX_QUEUE_SAMPLES = 5000;

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS proofgate_projection_changes (
     id TEXT PRIMARY KEY, number INTEGER NOT NULL, repo TEXT NOT NULL, title TEXT NOT NULL, state TEXT NOT NULL,
     stage TEXT NOT NULL, stage_detail TEXT, stage_code TEXT, base TEXT NOT NULL, head TEXT NOT NULL, head_sha TEXT NOT NULL,
     author TEXT NOT NULL, opened_at TEXT NOT NULL, updated_at TEXT NOT NULL, automerge_on INTEGER NOT NULL,
     automerge_at TEXT, merged_at TEXT, merge_commit TEXT, timeline TEXT NOT NULL, heads TEXT NOT NULL)`,
  'CREATE INDEX IF NOT EXISTS proofgate_projection_changes_stage ON proofgate_projection_changes (stage, number)',
  'CREATE INDEX IF NOT EXISTS proofgate_projection_changes_number ON proofgate_projection_changes (number)',
  `CREATE TABLE IF NOT EXISTS proofgate_projection_reviews (
     change_id TEXT NOT NULL, review_id TEXT NOT NULL, head TEXT NOT NULL, started_at TEXT NOT NULL,
     finished_at TEXT, verdict TEXT, PRIMARY KEY (change_id, review_id))`,
  'CREATE TABLE IF NOT EXISTS proofgate_projection_queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, depth INTEGER NOT NULL)',
  'CREATE TABLE IF NOT EXISTS proofgate_projection_positions (namespace TEXT PRIMARY KEY, position INTEGER NOT NULL)',
];

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

/** What the projection reads its changes from. */
export interface ProjectionSources {
  readonly forge: LocalForge;
  /** The automerge ledger (`LedgerStore`): its fold of a change, and its event store for the tail. */
  readonly ledger: { load(changeId: string): Promise<LoadedLedger>; readonly events: EventStore };
  /** The marker secret, to read the verdicts' bindings from proofgate's own comments (null: bindings unknown). */
  readonly secret: MarkerSecret | null;
  /** The repository's name on the board (default: the repository directory's name). */
  readonly repo?: string;
  readonly now?: () => Date;
}

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
  timeline(id: string): { readonly change: ChangeRow; readonly timeline: TimelineItem[]; readonly heads: HeadRecord[] } | null;
  summary(): Summary;
  /** Wait for the write under way, then close the connection. */
  close(): Promise<void>;
}

const BUSY_TIMEOUT_MS = 10_000;
const TAIL_PAGE = 1000;

/** Open the projection in the data directory's SQLite file (its tables are created, or rebuilt on another version, by `rebuild`). */
export function openChangeProjection(dataDir: string, sources: ProjectionSources): ChangeProjection {
  const db: Database.Database = openSqliteDatabase(dataDir, BUSY_TIMEOUT_MS);
  const now = sources.now ?? (() => new Date());
  const repo = sources.repo ?? basename(sources.forge.repo.root);
  const { forge } = sources;
  try {
    db.transaction(() => {
      const stored = db.prepare<[string], { value: string }>('SELECT value FROM proofgate_meta WHERE key = ?').get('projection_schema_version');
      if (stored !== undefined && Number(stored.value) !== PROJECTION_SCHEMA_VERSION) {
        for (const table of ['changes', 'reviews', 'queue', 'positions']) db.exec(`DROP TABLE IF EXISTS proofgate_projection_${table}`);
      }
      for (const statement of SCHEMA) db.exec(statement);
      db.prepare('INSERT OR REPLACE INTO proofgate_meta (key, value) VALUES (?, ?)').run('projection_schema_version', String(PROJECTION_SCHEMA_VERSION));
    }).immediate();
  } catch (error) {
    db.close();
    throw error;
  }

  const upsert = db.prepare(
    `INSERT OR REPLACE INTO proofgate_projection_changes (${ROW_COLUMNS}, timeline, heads)
     VALUES (@id, @number, @repo, @title, @state, @stage, @stage_detail, @stage_code, @base, @head, @head_sha, @author, @opened_at, @updated_at,
             @automerge_on, @automerge_at, @merged_at, @merge_commit, @timeline, @heads)`,
  );
  const deleteReviews = db.prepare('DELETE FROM proofgate_projection_reviews WHERE change_id = ?');
  const insertReview = db.prepare(
    'INSERT OR REPLACE INTO proofgate_projection_reviews (change_id, review_id, head, started_at, finished_at, verdict) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const setPosition = db.prepare('INSERT OR REPLACE INTO proofgate_projection_positions (namespace, position) VALUES (?, ?)');
  const getPosition = db.prepare<[string], { position: number }>('SELECT position FROM proofgate_projection_positions WHERE namespace = ?');
  const queueDepth = db.prepare<[], { depth: number }>(
    "SELECT COUNT(*) AS depth FROM proofgate_projection_changes WHERE state = 'open' AND automerge_on = 1 AND stage NOT IN ('blocked', 'merged', 'closed')",
  );
  const lastSample = db.prepare<[], { depth: number }>('SELECT depth FROM proofgate_projection_queue ORDER BY seq DESC LIMIT 1');
  const addSample = db.prepare('INSERT INTO proofgate_projection_queue (at, depth) VALUES (?, ?)');
  const trimSamples = db.prepare(
    `DELETE FROM proofgate_projection_queue WHERE seq <= (SELECT seq FROM proofgate_projection_queue ORDER BY seq DESC LIMIT 1 OFFSET ${MAX_QUEUE_SAMPLES})`,
  );

  const branches = async (): Promise<Map<string, string>> => {
    const text = await forge.repo.text(['for-each-ref', '--format=%(objectname) %(refname)', 'refs/heads/']);
    const refs = new Map<string, string>();
    for (const line of text.split('\n')) {
      const match = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) refs\/heads\/(\S+)$/.exec(line.trim());
      if (match !== null) refs.set(match[2] as string, match[1] as string);
    }
    return refs;
  };

  const compute = async (changeId: string, refs: ReadonlyMap<string, string>): Promise<ProjectedChange | null> => {
    const forgeEvents = await forge.store.events.read(changeStream(changeId));
    const record = foldChange(forgeEvents);
    if (record === null) return null;
    const ledger = await sources.ledger.load(changeId);
    const checkHeads = new Set<string>();
    for (const step of ledger.steps)
      if ((step.step === 'checks-started' || step.step === 'checks-finished') && typeof step.head === 'string') checkHeads.add(step.head);
    const checks: ForgeCheck[] = [];
    for (const sha of checkHeads) checks.push(...(await forge.store.checks(sha)));
    const bindings = new Map<string, VerdictBindings>();
    if (sources.secret !== null) {
      const { verdicts } = collectVerdicts(record.comments, { selfLogin: forge.selfLogin, secret: sources.secret, changeId });
      for (const { fields } of verdicts)
        bindings.set(fields.review, { head: fields.head, diff: fields.diff, contract: fields.contract, config: fields.config });
    }
    return projectChange({ repo, record, forgeEvents, branchSha: refs.get(record.headRef) ?? null, ledger, checks, bindings });
  };

  const write = (projected: readonly ProjectedChange[], positions: Readonly<Record<string, number>>): void => {
    db.transaction(() => {
      for (const { row, timeline, heads, reviews } of projected) {
        upsert.run({
          id: row.id,
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
        });
        deleteReviews.run(row.id);
        for (const review of reviews) insertReview.run(row.id, review.reviewId, review.head, review.startedAt, review.finishedAt, review.verdict);
      }
      for (const [namespace, position] of Object.entries(positions)) setPosition.run(namespace, position);
      const depth = queueDepth.get()?.depth ?? 0;
      if (lastSample.get()?.depth !== depth) {
        addSample.run(now().toISOString(), depth);
        trimSamples.run();
      }
    }).immediate();
  };

  /** The change ids named by events after `after` in one namespace, and the last position read. */
  const tail = async (events: EventStore, after: number, idOf: (event: StoredEvent) => readonly string[]): Promise<{ ids: Set<string>; position: number }> => {
    const ids = new Set<string>();
    let position = after;
    for (;;) {
      const page = await events.readAll({ afterPosition: position, limit: TAIL_PAGE });
      for (const event of page) {
        for (const id of idOf(event)) ids.add(id);
        position = event.position;
      }
      if (page.length < TAIL_PAGE) return { ids, position };
    }
  };
  const forgeIds = (event: StoredEvent): readonly string[] => {
    if (event.streamId.startsWith(CHANGE_STREAM_PREFIX)) return [event.streamId.slice(CHANGE_STREAM_PREFIX.length)];
    if (event.type === 'check-completed' && typeof event.data === 'object' && event.data !== null && !Array.isArray(event.data)) {
      const ids = event.data.changeIds;
      return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [];
    }
    return [];
  };
  const ledgerIds = (event: StoredEvent): readonly string[] =>
    event.streamId.startsWith(AUTOMERGE_STREAM_PREFIX) ? [event.streamId.slice(AUTOMERGE_STREAM_PREFIX.length)] : [];

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
    const refs = await branches();
    const projected: ProjectedChange[] = [];
    for (const id of ids) {
      const change = await compute(id, refs);
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
        // Positions first: whatever is appended while the rebuild reads is found by the next refresh.
        const positions = { forge: await forge.lastEventPosition(), automerge: await lastPosition(sources.ledger.events) };
        const registry = await forge.store.events.read(REGISTRY_STREAM);
        const ids = registry.map((event) => (event.data as { changeId?: unknown }).changeId).filter((id): id is string => typeof id === 'string');
        return recompute(ids, positions);
      }),
    refresh: (touched = []) =>
      serial(async () => {
        open();
        const fromForge = await tail(forge.store.events, getPosition.get('forge')?.position ?? 0, forgeIds);
        const fromLedger = await tail(sources.ledger.events, getPosition.get('automerge')?.position ?? 0, ledgerIds);
        const ids = new Set([...touched, ...fromForge.ids, ...fromLedger.ids]);
        if (ids.size === 0) {
          write([], { forge: fromForge.position, automerge: fromLedger.position });
          return 0;
        }
        return recompute(ids, { forge: fromForge.position, automerge: fromLedger.position });
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
        where.push('number < ?');
        args.push(query.cursor);
      }
      const sql = `SELECT ${ROW_COLUMNS} FROM proofgate_projection_changes ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY number DESC LIMIT ?`;
      const rows = db.prepare<(string | number)[], RowRecord>(sql).all(...args, query.limit + 1);
      const changes = rows.slice(0, query.limit).map(rowOf);
      const lastRow = changes[changes.length - 1];
      return { changes, nextCursor: rows.length > query.limit && lastRow !== undefined ? String(lastRow.number) : null };
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
        .prepare<[string], RowRecord & { timeline: string; heads: string }>(
          `SELECT ${ROW_COLUMNS}, timeline, heads FROM proofgate_projection_changes WHERE id = ?`,
        )
        .get(id);
      if (record === undefined) return null;
      return { change: rowOf(record), timeline: parseJson<TimelineItem[]>(record.timeline), heads: parseJson<HeadRecord[]>(record.heads) };
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
    const id = timeline[1] as string;
    const found = /^[1-9][0-9]{0,15}$/.test(id) ? projection.timeline(id) : null;
    return found === null ? { status: 404, body: { error: 'no such change' } } : { status: 200, body: { ...found } };
  }
  if (path === '/api/summary') return { status: 200, body: { ...projection.summary() } };
  return null;
}
