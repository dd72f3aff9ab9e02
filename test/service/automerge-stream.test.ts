/**
 * The progress stream of a followed automerge job
 * (`GET /api/changes/:id/comments/:commentId/progress`): the journal's bounds,
 * real HTTP streams through the service's server (slow readers, readers that
 * leave, many readers at once), and the whole path through `proofgate serve
 * --repo` with the client's reader and the CLI's renderer, under attack.
 */
import { request, type ClientRequest } from 'node:http';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { revokeToken } from '../../src/cli/commands/token.js';
import { progressLine } from '../../src/cli/commands/automerge.js';
import { followComment, streamItem, type RemoteProgress } from '../../src/cli/remote.js';
import { MAX_JOURNAL_CHARS, MAX_JOURNAL_LINES, ProgressHub, ProgressJournal, type ProgressEntry } from '../../src/service/automerge-stream.js';
import { createServiceServer, type ApiCaller, type ServiceApi } from '../../src/service/http.js';
import { streamJournal } from '../../src/service/automerge-stream.js';
import { call, served, type Cleanups } from './write-support.js';

const cleanups: Cleanups = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const AT = '2026-12-02T00:00:00.000Z';

/** Everything a reader at 0 gets from a journal, until nothing more (or the end). */
function drain(journal: ProgressJournal): { lines: ProgressEntry[]; dropped: number[]; end: boolean } {
  const out = { lines: [] as ProgressEntry[], dropped: [] as number[], end: false };
  let cursor = 0;
  for (let item = journal.next(cursor); item !== null; item = journal.next(cursor)) {
    if (item.kind === 'end') {
      out.end = true;
      break;
    }
    if (item.kind === 'dropped') {
      out.dropped.push(item.count);
      cursor = item.cursor;
    } else {
      out.lines.push(item.entry);
      cursor = item.entry.seq;
    }
  }
  return out;
}

describe('journal (bounds)', () => {
  it('keeps the newest lines within its line and character caps; a reader that missed some gets their count', () => {
    const byLines = new ProgressJournal('1');
    for (let i = 1; i <= MAX_JOURNAL_LINES + 500; i += 1) byLines.add({ at: AT, text: `line ${i}` });
    byLines.finish({ status: 'ended' });
    const read = drain(byLines);
    expect(read.dropped).toEqual([500]);
    expect(read.lines).toHaveLength(MAX_JOURNAL_LINES);
    expect(read.lines[0]).toEqual({ seq: 501, changeId: '1', at: AT, text: 'line 501' });
    expect(read.end).toBe(true);

    const byChars = new ProgressJournal('1');
    const big = 'x'.repeat(10_000);
    for (let i = 0; i < 100; i += 1) byChars.add({ at: AT, text: big });
    const kept = drain(byChars);
    expect(kept.lines.length * big.length).toBeLessThanOrEqual(MAX_JOURNAL_CHARS);
    expect(kept.lines.length + (kept.dropped[0] ?? 0)).toBe(100);
    expect(kept.end).toBe(false);

    // Lines after the end are not recorded; a released journal still tells its count and its end.
    byChars.finish({ status: 'ended' });
    byChars.add({ at: AT, text: 'late' });
    byChars.release();
    expect(drain(byChars)).toEqual({ lines: [], dropped: [100], end: true });
  });

  it('a hub hands a line only to the journals of its change, and forgets a closed journal', () => {
    const hub = new ProgressHub();
    const one = hub.capture('1');
    const two = hub.capture('2');
    hub.publish({ changeId: '1', at: AT, text: 'for one' });
    hub.publish({ changeId: '3', at: AT, text: 'for nobody' });
    expect(drain(one).lines.map((line) => line.text)).toEqual(['for one']);
    expect(drain(two).lines).toEqual([]);
    expect(hub.usage()).toEqual({ recording: 2, streams: 0 });
    one.finish({ status: 'ended' });
    two.close();
    expect(hub.usage()).toEqual({ recording: 0, streams: 0 });
  });

  it('past maxRecording journals, a new one counts its lines without keeping them', () => {
    const hub = new ProgressHub({ maxRecording: 2 });
    const kept = [hub.capture('1'), hub.capture('1')];
    const counted = hub.capture('1');
    for (let i = 0; i < 5; i += 1) hub.publish({ changeId: '1', at: AT, text: `line ${i}` });
    for (const journal of [...kept, counted]) journal.finish({ status: 'ended' });
    expect(drain(kept[0] as ProgressJournal).lines).toHaveLength(5);
    expect(drain(counted)).toEqual({ lines: [], dropped: [5], end: true });
    expect(hub.usage().recording).toBe(0);
  });

  it('the client reads each kind of stream line and skips unknown ones', () => {
    expect(streamItem('{"progress":{"seq":3,"changeId":"1","at":"t","text":"x"}}')).toEqual({
      kind: 'progress',
      seq: 3,
      progress: { changeId: '1', at: 't', text: 'x' },
    });
    expect(streamItem('{"dropped":{"count":4}}')).toEqual({ kind: 'dropped', count: 4 });
    expect(streamItem('{"end":{"status":"ended"}}')).toEqual({ kind: 'end', end: { status: 'ended' } });
    expect(streamItem('{"heartbeat":1}')).toBeNull();
    expect(() => streamItem('not json')).toThrow(/not JSON/);
  });
});

const TOKEN = `pgt_${'R'.repeat(43)}`;

/**
 * The service's HTTP server with an API whose one stream path serves `journal` (token TOKEN: read).
 * `authenticated` (if given) is awaited before each caller is known; `served` is told each stream's end.
 */
async function streamServer(
  hub: ProgressHub,
  journal: ProgressJournal,
  hooks: { authenticated?: () => Promise<void>; served?: () => void } = {},
): Promise<string> {
  const caller: ApiCaller = { login: 'reader', permission: 'read' };
  const api: ServiceApi = {
    async authenticate(token) {
      await hooks.authenticated?.();
      return token === TOKEN ? caller : null;
    },
    get: async () => null,
    async stream(path, _caller, query, res) {
      if (path !== '/api/stream') return null;
      await streamJournal(res, hub, journal, Number(query.get('after') ?? '0'));
      hooks.served?.();
      return 'streamed';
    },
  };
  const server = await createServiceServer({ host: '127.0.0.1', port: 0, logger: pino({ level: 'silent' }), ready: async () => true, checkHost: true, api });
  cleanups.push(() => server.close());
  return server.url;
}

interface OpenStream {
  readonly req: ClientRequest;
  readonly status: Promise<number>;
  /** Resolves with the whole text once the answer ends. */
  readonly text: Promise<string>;
  pause(): void;
  resume(): void;
}

function openStream(url: string, token: string | null = TOKEN, path = '/api/stream'): OpenStream {
  const target = new URL(url);
  let pauseIt = (): void => undefined;
  let resumeIt = (): void => undefined;
  let setStatus!: (status: number) => void;
  const status = new Promise<number>((resolve) => (setStatus = resolve));
  const req = request({
    hostname: target.hostname,
    port: target.port,
    path,
    agent: false,
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
  const text = new Promise<string>((resolve, reject) => {
    req.on('response', (res) => {
      setStatus(res.statusCode ?? 0);
      pauseIt = () => res.pause();
      resumeIt = () => res.resume();
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  text.catch(() => undefined);
  req.end();
  return { req, status, text, pause: () => pauseIt(), resume: () => resumeIt() };
}

function parsed(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('streams over HTTP', () => {
  it('a reader that leaves is forgotten at once: 50 streams opened and dropped leave the hub and the journal as they were', async () => {
    const hub = new ProgressHub();
    const journal = hub.capture('1');
    const url = await streamServer(hub, journal);
    const before = { usage: hub.usage(), watchers: journal.watchers };
    for (let round = 0; round < 50; round += 1) {
      const stream = openStream(url);
      expect(await stream.status).toBe(200);
      await hub.until((usage) => usage.streams === 1);
      expect(journal.watchers).toBe(1);
      stream.req.destroy();
      await hub.until((usage) => usage.streams === 0);
      expect(journal.watchers).toBe(0);
    }
    expect({ usage: hub.usage(), watchers: journal.watchers }).toEqual(before);
  });

  it('200 streams opened at once and dropped at once free everything; the server still streams', async () => {
    const hub = new ProgressHub();
    const journal = hub.capture('1');
    const url = await streamServer(hub, journal);
    const streams = Array.from({ length: 200 }, () => openStream(url));
    expect(new Set(await Promise.all(streams.map((stream) => stream.status)))).toEqual(new Set([200]));
    await hub.until((usage) => usage.streams === 200);
    expect(journal.watchers).toBe(200);
    for (const stream of streams) stream.req.destroy();
    await hub.until((usage) => usage.streams === 0);
    expect(journal.watchers).toBe(0);

    const late = openStream(url);
    expect(await late.status).toBe(200);
    journal.add({ at: AT, text: 'after them' });
    journal.finish({ status: 'ended' });
    expect(parsed(await late.text)).toEqual([{ progress: { seq: 1, changeId: '1', at: AT, text: 'after them' } }, { end: { status: 'ended' } }]);
    expect(hub.usage()).toEqual({ recording: 0, streams: 0 });
  });

  it('200 readers that leave while their token is being checked open nothing', async () => {
    const hub = new ProgressHub();
    const journal = hub.capture('1');
    let arrived = 0;
    let allArrived!: () => void;
    const arrivedAll = new Promise<void>((resolve) => (allArrived = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let ended = 0;
    let allEnded!: () => void;
    const endedAll = new Promise<void>((resolve) => (allEnded = resolve));
    const url = await streamServer(hub, journal, {
      authenticated: async () => {
        arrived += 1;
        if (arrived === 200) allArrived();
        await gate;
      },
      served: () => {
        ended += 1;
        if (ended === 200) allEnded();
      },
    });
    const streams = Array.from({ length: 200 }, () => openStream(url));
    await arrivedAll;
    const closed = streams.map((stream) => new Promise((resolve) => stream.req.once('close', resolve)));
    for (const stream of streams) stream.req.destroy();
    await Promise.all(closed);
    // A round trip on another connection: the server has taken the closes in by its answer. Then every request goes on to the stream.
    expect((await call(url, '/healthz')).status).toBe(200);
    release();
    await endedAll;
    expect(hub.usage().streams).toBe(0);
    expect(journal.watchers).toBe(0);
  });

  it('past maxStreams a reader gets 503 with Retry-After; no token or a bogus one is 401', async () => {
    const hub = new ProgressHub({ maxStreams: 2 });
    const journal = hub.capture('1');
    const url = await streamServer(hub, journal);
    const open = [openStream(url), openStream(url)];
    await hub.until((usage) => usage.streams === 2);
    const refused = await call(url, '/api/stream', { token: TOKEN });
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect((await call(url, '/api/stream', { token: `pgt_${'B'.repeat(43)}` })).status).toBe(401);
    journal.finish({ status: 'ended' });
    for (const stream of open) expect(parsed(await stream.text)).toEqual([{ end: { status: 'ended' } }]);
    expect(hub.usage().streams).toBe(0);
  });

  it('a slow reader makes the journal drop its oldest lines, not the server grow: it gets a dropped line, then the rest in order', async () => {
    const hub = new ProgressHub();
    const journal = hub.capture('1');
    const url = await streamServer(hub, journal);
    const stream = openStream(url);
    expect(await stream.status).toBe(200);
    stream.pause();
    await hub.until((usage) => usage.streams === 1);
    const total = 3000;
    const text = 'y'.repeat(1000);
    for (let i = 1; i <= total; i += 1) journal.add({ at: AT, text: `${i} ${text}` });
    journal.finish({ status: 'ended' });
    stream.resume();
    const items = parsed(await stream.text);
    const lines = items.filter((item) => 'progress' in item).map((item) => item.progress as ProgressEntry);
    const dropped = items.filter((item) => 'dropped' in item).map((item) => (item.dropped as { count: number }).count);
    expect(dropped.length).toBeGreaterThan(0);
    expect(lines.length + dropped.reduce((sum, count) => sum + count, 0)).toBe(total);
    const seqs = lines.map((line) => line.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(seqs[seqs.length - 1]).toBe(total);
    expect(items[items.length - 1]).toEqual({ end: { status: 'ended' } });
    // What stayed on the server: at most the journal's cap.
    expect(drain(journal).lines.length * (text.length + 5)).toBeLessThanOrEqual(MAX_JOURNAL_CHARS + text.length + 5);
  });
});

describe('through proofgate serve --repo', () => {
  /** Post `/proofgate automerge` (and `extra` lines) as alice; the comment id of the job it follows. */
  async function startAutomerge(url: string, token: string, extra = ''): Promise<string> {
    const posted = await call(url, '/api/changes/1/comments', { token, json: { body: `/proofgate automerge${extra}` } });
    expect(posted.status, posted.text).toBe(201);
    expect(posted.json.following).toBe(true);
    return (posted.json.comment as { id: string }).id;
  }

  it('streams the job of the comment to every reader (read is enough), escaped by the client as direct mode escapes it', async () => {
    const hub = new ProgressHub();
    const hostile = 'feature \x1b]0;owned\x07\x1b[2J\u202e\u009b31m';
    const setup = await served(cleanups, { openChange: true, broken: true, title: hostile, service: { progress: hub } });
    const url = setup.service.url;
    // A command line with terminal escapes: the router reports it (an unknown command), so it is in the job's lines.
    const commentId = await startAutomerge(url, setup.tokens.alice, `\n/proofgate ${hostile}`);
    const target = (token: string) => ({ url, token });
    const seen: RemoteProgress[] = [];
    const followed = await followComment(target(setup.tokens.carol), '1', commentId, (progress) => seen.push(progress));
    expect(followed).toMatchObject({ kind: 'ran', outcome: { outcome: 'blocked' } });
    const texts = seen.map((line) => line.text);
    expect(texts[0]).toBe('alice: automerge');
    expect(texts.some((text) => text.startsWith('reviewing '))).toBe(true);
    expect(texts[texts.length - 1]).toMatch(/^block: failed checks/);
    // Only change 1's lines, each once.
    expect(new Set(seen.map((line) => line.changeId))).toEqual(new Set(['1']));
    // The hostile text reaches the client exactly, and is printed escaped: no ESC, CSI, BEL or bidi override on the terminal.
    expect(texts).toContain(`alice: unknown /proofgate ${hostile}`);
    const printed = seen.map((line) => progressLine(line)).join('\n');
    expect(printed).toContain('\\x1b]0;owned\\x07\\x1b[2J\\u202e\\x9b31m');
    const raw = [...printed].filter((char) => char !== '\n' && (/\p{Cc}/u.test(char) || char === '\u202e'));
    expect(raw).toEqual([]);

    // A second reader after the end (bob, triage) gets the same lines and the same end.
    const again: RemoteProgress[] = [];
    expect(await followComment(target(setup.tokens.bob), '1', commentId, (progress) => again.push(progress))).toEqual(followed);
    expect(again).toEqual(seen);
    // A reader resuming after line 2 gets the rest only.
    const rest: RemoteProgress[] = [];
    const resumed = await call(url, `/api/changes/1/comments/${commentId}/progress?after=2`, { token: setup.tokens.carol });
    for (const line of resumed.text.split('\n').filter((text) => text !== '')) {
      const item = streamItem(line);
      if (item?.kind === 'progress') rest.push(item.progress);
    }
    expect(rest).toEqual(seen.slice(2));
    expect(hub.usage()).toEqual({ recording: 0, streams: 0 });
  });

  it('a second client that joins the running job gets its lines from its own comment on, and the same end', async () => {
    const hub = new ProgressHub();
    const setup = await served(cleanups, { openChange: true, broken: true, service: { progress: hub } });
    const url = setup.service.url;
    const first = await startAutomerge(url, setup.tokens.alice);
    const firstLines: string[] = [];
    let joined: Promise<{ id: string; lines: string[]; end: unknown }> | null = null;
    const firstEnd = await followComment({ url, token: setup.tokens.alice }, '1', first, (progress) => {
      firstLines.push(progress.text);
      // While the job runs (its first line just came), a second client asks for the same automerge.
      joined ??= (async () => {
        const id = await startAutomerge(url, setup.tokens.alice);
        const lines: string[] = [];
        const end = await followComment({ url, token: setup.tokens.carol }, '1', id, (line) => lines.push(line.text));
        return { id, lines, end };
      })();
    });
    const second = await (joined as unknown as Promise<{ id: string; lines: string[]; end: unknown }>);
    expect(second.id).not.toBe(first);
    expect(second.end).toEqual(firstEnd);
    // The first reader saw the second command too. The second reader's lines start when its comment was made, which
    // on a loaded machine can be a few lines before the running job reads the command: from there on both got the
    // same lines, the command among them.
    expect(firstLines.lastIndexOf('alice: automerge')).toBeGreaterThan(0);
    expect(second.lines).toContain('alice: automerge');
    expect(second.lines.length).toBeLessThan(firstLines.length);
    expect(second.lines).toEqual(firstLines.slice(firstLines.length - second.lines.length));
    expect(second.lines[second.lines.length - 1]).toMatch(/^block: failed checks/);
    expect(hub.usage()).toEqual({ recording: 0, streams: 0 });
  });

  it('refuses a revoked or unknown token, a comment of another change, an unknown comment and a bad cursor', async () => {
    const hub = new ProgressHub();
    const setup = await served(cleanups, { openChange: true, broken: true, service: { progress: hub } });
    const url = setup.service.url;
    const commentId = await startAutomerge(url, setup.tokens.alice);
    const path = `/api/changes/1/comments/${commentId}/progress`;
    // Let the job end first (a reader with a live token).
    expect(await followComment({ url, token: setup.tokens.carol }, '1', commentId)).toMatchObject({ kind: 'ran' });

    const unknown = await call(url, path, { token: `pgt_${'Q'.repeat(43)}` });
    expect(unknown.status).toBe(401);
    expect(unknown.text).not.toContain('progress');
    await revokeToken('carol', { data: setup.data });
    const revoked = await call(url, path, { token: setup.tokens.carol });
    expect(revoked.status).toBe(401);
    expect(revoked.text).not.toContain(setup.tokens.carol);
    await expect(followComment({ url, token: setup.tokens.carol }, '1', commentId)).rejects.toMatchObject({ code: 'FORGE_AUTH' });
    // Another change's path, an unknown comment, a bad cursor: nothing of the job.
    for (const [other, status] of [
      [`/api/changes/2/comments/${commentId}/progress`, 404],
      [`/api/changes/1/comments/cmt_${'0'.repeat(32)}/progress`, 404],
      [`${path}?after=-1`, 400],
      [`${path}?after=x`, 400],
    ] as const) {
      const answer = await call(url, other, { token: setup.tokens.bob });
      expect(answer.status, other).toBe(status);
      expect(answer.text, other).not.toContain('automerge');
    }
    expect(hub.usage()).toEqual({ recording: 0, streams: 0 });
  });
});
