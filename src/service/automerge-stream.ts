/**
 * The progress of an automerge job, streamed to the client that started or
 * joined it (`proofgate automerge ID` in client mode): the lines direct mode
 * prints on stderr while the loop runs (`reviewing ...`, `merged ...`).
 *
 * - `ProgressHub.publish` receives every progress line of the service's
 *   automerge wiring. A line goes to the journals capturing its change, and
 *   nowhere else.
 * - A journal (`ProgressJournal`) is opened by the write API when a comment
 *   is posted (before it is routed, so the router's own lines are in it) and
 *   kept when the comment started or joined a job; it records that change's
 *   lines until the job ends, then its end. It holds at most
 *   `MAX_JOURNAL_LINES` lines and `MAX_JOURNAL_CHARS` characters of text: past either,
 *   the oldest lines are dropped, and a reader that had not read them gets
 *   one `dropped` line with their count instead. A journal is shared by every
 *   reader of the job (each has only a cursor), so readers add no memory.
 *   Past `maxRecording` journals recording at once (every change), a new one
 *   counts its lines without keeping them: its readers get that count as
 *   `dropped`, and the end.
 * - `streamJournal` answers one reader: NDJSON over chunked transfer, one
 *   line per JSON value, `{"progress":{"seq","changeId","at","text"}}`,
 *   `{"dropped":{"count"}}`, and last `{"end":{...}}`, after which the answer
 *   ends; `{"heartbeat":{}}` every `HEARTBEAT_MS` (readers skip it). A reader that does not take what was written (the socket's buffer
 *   is full) is written nothing more until it drains; meanwhile the journal
 *   may drop lines it had not read. A reader that goes away is forgotten at
 *   once (its wake-up and drain listeners removed).
 *
 * Text is sent as JSON strings, as stored; the client escapes it when it
 * prints it, as direct mode does.
 */
import type { ServerResponse } from 'node:http';
import type { LoopProgress } from '../automerge/loop/index.js';

/** Most lines a journal keeps. */
export const MAX_JOURNAL_LINES = 1000;
/** Most text a journal keeps, in characters (UTF-16 code units). */
export const MAX_JOURNAL_CHARS = 256 * 1024;
/** Streams open at once, by default; one more is refused with 503. */
export const DEFAULT_MAX_STREAMS = 256;
/** How often an idle stream gets a `{"heartbeat":{}}` line (so that nothing between drops a quiet connection). */
export const HEARTBEAT_MS = 15_000;
/** Journals keeping lines at once (all changes), by default; one more counts its lines without keeping them. */
export const DEFAULT_MAX_RECORDING = 256;

/** One line of a journal. */
export interface ProgressEntry {
  readonly seq: number;
  readonly changeId: string;
  readonly at: string;
  readonly text: string;
}

/** What a reader at `cursor` gets next: a line, a count of lines dropped before it could read them, the end, or nothing yet. */
export type JournalItem =
  | { readonly kind: 'progress'; readonly entry: ProgressEntry }
  | { readonly kind: 'dropped'; readonly count: number; readonly cursor: number }
  | { readonly kind: 'end'; readonly end: Readonly<Record<string, unknown>> }
  | null;

/** One followed job's lines (bounded, oldest dropped first) and its end. */
export class ProgressJournal {
  readonly changeId: string;
  #lines: ProgressEntry[] = [];
  #size = 0;
  #nextSeq = 1;
  #end: Readonly<Record<string, unknown>> | null = null;
  readonly #wakers = new Set<() => void>();
  readonly #onClose: (journal: ProgressJournal) => void;
  #closed = false;

  readonly #keep: boolean;

  /** `keep` false: lines are counted, not kept (a reader gets their count as dropped). */
  constructor(changeId: string, onClose: (journal: ProgressJournal) => void = () => undefined, keep = true) {
    this.changeId = changeId;
    this.#onClose = onClose;
    this.#keep = keep;
  }

  /** Record a line (ignored once the journal is closed). */
  add(progress: Pick<LoopProgress, 'at' | 'text'>): void {
    if (this.#closed) return;
    if (!this.#keep) {
      this.#nextSeq += 1;
      return this.#wake();
    }
    this.#lines.push({ seq: this.#nextSeq, changeId: this.changeId, at: progress.at, text: progress.text });
    this.#nextSeq += 1;
    this.#size += progress.text.length;
    while (this.#lines.length > MAX_JOURNAL_LINES || (this.#size > MAX_JOURNAL_CHARS && this.#lines.length > 1)) {
      this.#size -= (this.#lines.shift() as ProgressEntry).text.length;
    }
    this.#wake();
  }

  /** The job ended: no more lines; readers get `end` after the lines they have not read. */
  finish(end: Readonly<Record<string, unknown>>): void {
    this.close();
    this.#end = end;
    this.#wake();
  }

  /** Stop recording (a comment that followed nothing, or the job's end). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onClose(this);
  }

  /** Forget the lines (an ended journal no longer kept); a reader then gets one `dropped` line and the end. */
  release(): void {
    this.#lines = [];
    this.#size = 0;
  }

  /** What a reader that has read every line up to `cursor` gets next. Pure (reads only). */
  next(cursor: number): JournalItem {
    const oldest = this.#lines[0]?.seq ?? this.#nextSeq;
    if (cursor + 1 < oldest) return { kind: 'dropped', count: oldest - cursor - 1, cursor: oldest - 1 };
    const entry = this.#lines[cursor + 1 - oldest];
    if (entry !== undefined) return { kind: 'progress', entry };
    return this.#end === null ? null : { kind: 'end', end: this.#end };
  }

  /** Call `waker` at each new line and at the end; the returned function stops that. */
  watch(waker: () => void): () => void {
    this.#wakers.add(waker);
    return () => this.#wakers.delete(waker);
  }

  /** Readers waiting on this journal now. */
  get watchers(): number {
    return this.#wakers.size;
  }

  #wake(): void {
    for (const waker of [...this.#wakers]) waker();
  }
}

/** What a hub holds now: journals recording, readers streaming (for tests and metrics). */
export interface HubUsage {
  readonly recording: number;
  readonly streams: number;
}

/** The service's progress lines, handed to the journals of their change. */
export class ProgressHub {
  readonly maxStreams: number;
  readonly maxRecording: number;
  readonly #recording = new Map<string, Set<ProgressJournal>>();
  #streams = 0;
  readonly #changed = new Set<() => void>();

  constructor(options: { readonly maxStreams?: number; readonly maxRecording?: number } = {}) {
    this.maxStreams = options.maxStreams ?? DEFAULT_MAX_STREAMS;
    this.maxRecording = options.maxRecording ?? DEFAULT_MAX_RECORDING;
  }

  /** One progress line of the automerge wiring. */
  publish(progress: LoopProgress): void {
    for (const journal of this.#recording.get(progress.changeId) ?? []) journal.add(progress);
  }

  /**
   * A journal recording `changeId`'s lines from now on, until it is closed or
   * finished; past `maxRecording` journals at once, one that only counts them.
   */
  capture(changeId: string): ProgressJournal {
    const keep = this.usage().recording < this.maxRecording;
    const journal = new ProgressJournal(
      changeId,
      (closed) => {
        const set = this.#recording.get(changeId);
        set?.delete(closed);
        if (set?.size === 0) this.#recording.delete(changeId);
        this.#notify();
      },
      keep,
    );
    let set = this.#recording.get(changeId);
    if (set === undefined) this.#recording.set(changeId, (set = new Set()));
    set.add(journal);
    this.#notify();
    return journal;
  }

  usage(): HubUsage {
    let recording = 0;
    for (const set of this.#recording.values()) recording += set.size;
    return { recording, streams: this.#streams };
  }

  /** Resolves once `test(usage())` holds (checked now and at each change). */
  until(test: (usage: HubUsage) => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (!test(this.usage())) return;
        this.#changed.delete(check);
        resolve();
      };
      this.#changed.add(check);
      check();
    });
  }

  /** Take a stream slot; false when `maxStreams` are open. */
  openStream(): boolean {
    if (this.#streams >= this.maxStreams) return false;
    this.#streams += 1;
    this.#notify();
    return true;
  }

  closeStream(): void {
    this.#streams -= 1;
    this.#notify();
  }

  #notify(): void {
    for (const check of [...this.#changed]) check();
  }
}

/** One NDJSON line of a journal item. Pure. */
export function streamLine(item: Exclude<JournalItem, null>): string {
  switch (item.kind) {
    case 'progress':
      return `${JSON.stringify({ progress: item.entry })}\n`;
    case 'dropped':
      return `${JSON.stringify({ dropped: { count: item.count } })}\n`;
    case 'end':
      return `${JSON.stringify({ end: item.end })}\n`;
  }
}

/**
 * Answer one reader from `journal`, after the lines up to `after`: 503 (with
 * Retry-After) when the hub's streams are all taken, else 200 and the lines as
 * they come, then the end. Resolves when the answer ended or the reader left;
 * either way the reader's slot and listeners are given back at once.
 */
export function streamJournal(res: ServerResponse, hub: ProgressHub, journal: ProgressJournal, after: number): Promise<void> {
  // A reader that left while its request was being checked: its 'close' has passed, nothing to open.
  if (res.destroyed) return Promise.resolve();
  if (!hub.openStream()) {
    const text = JSON.stringify({ error: `${hub.maxStreams} progress streams are open; retry later` });
    res.writeHead(503, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
      'retry-after': '1',
      'x-content-type-options': 'nosniff',
    });
    res.end(text);
    return Promise.resolve();
  }
  res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  // The status now, not with the first line: a reader knows at once that it is following.
  res.flushHeaders();
  return new Promise((resolve) => {
    let cursor = after;
    let draining = false;
    let done = false;
    const pump = (): void => {
      if (done || draining) return;
      for (let item = journal.next(cursor); item !== null; item = journal.next(cursor)) {
        const line = streamLine(item);
        if (item.kind === 'end') {
          res.end(line);
          return finish();
        }
        cursor = item.kind === 'progress' ? item.entry.seq : item.cursor;
        if (!res.write(line)) {
          draining = true;
          res.once('drain', onDrain);
          return;
        }
      }
    };
    const onDrain = (): void => {
      draining = false;
      pump();
    };
    const unwatch = journal.watch(pump);
    const heartbeat = setInterval(() => {
      if (!draining && !res.write('{"heartbeat":{}}\n')) {
        draining = true;
        res.once('drain', onDrain);
      }
    }, HEARTBEAT_MS);
    heartbeat.unref();
    const finish = (): void => {
      if (done) return;
      done = true;
      clearInterval(heartbeat);
      unwatch();
      res.off('drain', onDrain);
      res.off('close', finish);
      hub.closeStream();
      resolve();
    };
    res.once('close', finish);
    pump();
  });
}
