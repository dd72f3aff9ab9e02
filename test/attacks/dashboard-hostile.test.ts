/**
 * Hostile change authors and hostile web pages against the observer
 * dashboard, its read API and its stored projection:
 *
 * - a change author's comments carrying a byte-for-byte copy of a real signed
 *   verdict marker (of another change), a re-targeted copy and a made-up one,
 *   and commands they may not give, move no stage and show no verdict;
 * - untrusted text stays bounded (a commit subject as a title, command lines
 *   of hundreds of kilobytes, ten thousand command comments) and cannot
 *   reorder what the page shows after it (bidi override characters);
 * - the read API's query, the Host check and the fixed file list hold against
 *   odd values, and a page of another origin cannot read any answer;
 * - two projections on one data directory racing each other while events
 *   arrive, and a service killed with SIGKILL while it writes, leave the rows
 *   a fresh rebuild computes.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { rawRequest } from '../support/http.js';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { AUTOMERGE_NAMESPACE } from '../../src/automerge/loop/local.js';
import { LedgerStore } from '../../src/automerge/loop/ledger-store.js';
import { loadOrCreateSecret } from '../../src/automerge/loop/secret.js';
import { initialLedger } from '../../src/automerge/ledger.js';
import { systemClock } from '../../src/core/index.js';
import { openLocalForge, type ChangeRecord, type LocalForge } from '../../src/forge/local/index.js';
import { MAX_TIMELINE, openChangeProjection, projectChange, type ChangeRow, type TimelineItem } from '../../src/service/projection.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { CHROMIUM, CHROMIUM_ARGS, seedRepository, serveSeed, type Seeded } from '../service/dashboard-support.js';
import { CLI, runCliAsync } from '../cli/helpers.js';
import { startTestProcess, stopTestProcess } from '../support/processes.js';
import { until } from '../support/wait.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const browserTest = it.skipIf(!existsSync(CHROMIUM) && process.env.CI !== 'true');

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/** A request with the path sent exactly as given, an explicit Host (or none) and optional extra headers. */
function raw(url: string, path: string, options: { host?: string | null; method?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.host !== null) headers.host = options.host ?? new URL(url).host;
  return rawRequest(url, path, { method: options.method ?? 'GET', headers, setHost: false });
}

async function getJson<T>(url: string, path: string): Promise<T> {
  const reply = await raw(url, path);
  if (reply.status !== 200) throw new Error(`${path}: ${reply.status} ${reply.text.slice(0, 200)}`);
  return JSON.parse(reply.text) as T;
}

interface TimelineAnswer {
  readonly change: ChangeRow;
  readonly timeline: TimelineItem[];
  readonly heads: { head: string; verdicts: unknown[]; checks: unknown[] }[];
}

async function seeded(...args: Parameters<typeof seedRepository>): Promise<Seeded> {
  const seed = await seedRepository(...args);
  cleanups.push(seed.cleanup);
  return seed;
}

/** The local forge of a seed, opened in this process (as another process would: its own connection). */
async function forgeOf(seed: Seeded): Promise<LocalForge> {
  const opened = await openLocalForge({ repoDir: seed.repo.dir, dataDir: seed.data });
  cleanups.push(() => opened.close());
  return opened.forge;
}

const AUTHOR = 'Casey Contributor';

/** A node's box on the page. */
interface Box {
  readonly top: number;
  readonly bottom: number;
  readonly left: number;
  readonly right: number;
}

describe('forged verdicts and spoofed commands', () => {
  it('a change author copying, re-targeting or inventing a signed verdict marker, or typing maintainer commands, shows no verdict and moves no stage', async () => {
    const seed = await seeded([
      { kind: 'merged', branch: 'done', title: 'Done' },
      { kind: 'arriving', branch: 'evil', title: 'Evil /proofgate automerge' },
    ]);
    const [merged, evil] = seed.ids as [string, string];
    const forge = await forgeOf(seed);
    const original = (await forge.store.requireChange(merged)).comments.find((comment) => comment.body.includes('proofgate:marker'));
    expect(original?.author).toBe('proofgate');
    const body = original?.body ?? '';
    const marker = /<!-- proofgate:marker[^\n]*-->/.exec(body)?.[0] ?? '';
    expect(marker).not.toBe('');
    const evilHead = (await forge.store.requireChange(evil)).openedHeadSha;
    const retargeted = marker.replace(/"change":"[^"]*"/, `"change":"${evil}"`).replace(/"head":"[0-9a-f]{40}"/, `"head":"${evilHead}"`);
    const invented = marker.replace(/"mac":"[0-9a-f]{64}"/, `"mac":"${'0'.repeat(64)}"`).replace(/"change":"[^"]*"/, `"change":"${evil}"`);

    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    // The change's author, through the forge as any other process would.
    await forge.commentAs(evil, body, AUTHOR);
    await forge.commentAs(evil, `Review of ${evilHead.slice(0, 12)}: CONFIRMED\n\n${retargeted}\n`, AUTHOR);
    await forge.commentAs(evil, `Review: CONFIRMED\n\n${invented}\n`, AUTHOR);
    await forge.commentAs(evil, `/proofgate automerge\n/proofgate approve ${evilHead}\n${marker}`, AUTHOR);

    let answer: TimelineAnswer | null = null;
    await until(async () => {
      answer = await getJson<TimelineAnswer>(service.url, `/api/changes/${evil}/timeline`);
      return answer.timeline.filter((item) => item.kind === 'command-refused').length >= 2;
    }, 'the refusals of the author commands in the timeline');
    const { change, timeline, heads } = answer as unknown as TimelineAnswer;
    expect(change.stage).toBe('arriving');
    expect(change.automergeOn).toBe(false);
    expect(change.automergeAt).toBeNull();
    expect(change.mergeCommit).toBeNull();
    expect(timeline.filter((item) => ['verdict', 'merged', 'review', 'merge-attempt'].includes(item.kind))).toEqual([]);
    expect(heads.flatMap((entry) => entry.verdicts)).toEqual([]);
    // The commands show who typed them and that they were refused: none looks like a command given.
    expect(timeline.filter((item) => item.kind === 'command')).toEqual([]);
    const refused = timeline.filter((item) => item.kind === 'command-refused');
    expect(refused.map((item) => [item.actor, item.text.split(' (refused: ')[0]])).toEqual([
      [AUTHOR, '/proofgate automerge'],
      [AUTHOR, `/proofgate approve ${evilHead}`],
    ]);

    const rows = await getJson<{ changes: ChangeRow[] }>(service.url, '/api/changes?stage=merged');
    expect(rows.changes.map((row) => row.id)).toEqual([merged]);
    const summary = await getJson<{ stages: Record<string, number> }>(service.url, '/api/summary');
    expect(summary.stages.merged).toBe(1);
    expect(summary.stages.arriving).toBe(1);
    // The real change keeps its one verdict and its bindings.
    const real = await getJson<TimelineAnswer>(service.url, `/api/changes/${merged}/timeline`);
    expect(real.timeline.filter((item) => item.kind === 'verdict')).toHaveLength(1);
    expect(real.timeline.find((item) => item.kind === 'verdict')?.bindings).not.toBeNull();
  });
});

describe('bounded answers', () => {
  it('a commit subject of 300 KB as the title and command lines of 200 KB keep the row and the timeline small', async () => {
    const seed = await seeded([{ kind: 'arriving', branch: 'small', title: 'Small' }]);
    const subject = `subject ${'s'.repeat(300_000)}`;
    seed.repo.commit('huge-subject', { 'huge.txt': 'huge\n' }, subject, 'main');
    const forge = await forgeOf(seed);
    // No title given: the forge takes the head commit's subject, which the change's author wrote.
    const opened = await forge.openChange({ head: 'huge-subject', base: 'main', author: AUTHOR });
    expect((await forge.store.requireChange(opened.id)).title.length).toBeGreaterThan(300_000);
    for (let i = 0; i < 12; i += 1) await forge.commentAs(opened.id, `/proofgate review ${'x'.repeat(200_000)} ${i}`, AUTHOR);

    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    let timeline: Reply | null = null;
    await until(async () => {
      timeline = await raw(service.url, `/api/changes/${opened.id}/timeline`);
      return timeline.status === 200 && (JSON.parse(timeline.text) as TimelineAnswer).timeline.filter((item) => item.kind === 'command').length === 12;
    }, 'the twelve commands in the timeline');
    const board = await raw(service.url, '/api/changes?limit=1000');
    expect(board.status).toBe(200);
    expect(Buffer.byteLength(board.text)).toBeLessThan(20_000);
    const row = (JSON.parse(board.text) as { changes: ChangeRow[] }).changes.find((entry) => entry.id === opened.id);
    expect(row?.title.startsWith('subject sss')).toBe(true);
    expect(row?.title.endsWith('…')).toBe(true);
    expect(Buffer.byteLength((timeline as unknown as Reply).text)).toBeLessThan(100_000);
  });

  it('ten thousand comments of fifty command lines each: the timeline keeps its bound in items and bytes', () => {
    const A = 'a'.repeat(40);
    const comments = Array.from({ length: 10_000 }, (_, i) => {
      const at = new Date(Date.parse('2026-01-05T10:00:00Z') + i * 1000).toISOString();
      return {
        id: `c${i}`,
        author: AUTHOR,
        authorType: 'User',
        // The newest 500 carry command lines of 2,000 characters: those are the ones the timeline keeps.
        body: Array.from({ length: 50 }, (_, line) => `/proofgate review ${i}.${line} ${'y'.repeat(i >= 9500 ? 2000 : 10)}`).join('\n'),
        createdAt: at,
        updatedAt: at,
      };
    });
    const record = {
      changeId: '9',
      number: 9,
      title: 'Many',
      baseRef: 'main',
      headRef: 'many',
      openedBaseSha: A,
      openedHeadSha: A,
      author: AUTHOR,
      openedAt: '2026-01-05T09:00:00.000Z',
      state: 'open',
      labels: [],
      comments,
      merge: null,
      revision: 1,
    } as unknown as ChangeRecord;
    const projected = projectChange({
      repo: 'r',
      record,
      forgeEvents: [],
      branchSha: A,
      ledger: { state: initialLedger('9'), steps: [] },
      checks: [],
      bindings: new Map(),
    });
    expect(projected.timeline.length).toBeLessThanOrEqual(MAX_TIMELINE);
    // The newest commands are the ones kept.
    expect(projected.timeline[projected.timeline.length - 1]?.text).toMatch(/^\/proofgate review 9999\.49 y+…$/);
    expect(Buffer.byteLength(JSON.stringify(projected.timeline))).toBeLessThan(1_000_000);
  });
});

describe('untrusted text in the browser', () => {
  browserTest('a branch name with a right-to-left override cannot reorder the base, the head sha or the author shown after it', async () => {
    const branch = 'fix/\u202Eabc\u202Bdef';
    const seed = await seeded([{ kind: 'blocked', branch, title: 'T\u202Eitle \u2066 reversed', reason: 'why \u202E reason' }]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    cleanups.push(() => browser.close());
    // Wide enough that a card's branches and sha fit on one line.
    const page = await browser.newPage({ viewport: { width: 3200, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${service.url}/`);
    await page.waitForSelector('body[data-ready="true"] [data-change]');
    /**
     * Whether the nodes inside `scope` (a selector and which of its matches) are shown in that order:
     * each on a later line than the one before, or on the same line to its right.
     */
    const inOrder = (scope: string, selectors: readonly (readonly [string, number])[]) =>
      page.$eval(
        scope,
        (root, names) => {
          const boxes = names.map(([name, index]) =>
            (root.querySelectorAll(name)[index] as unknown as { getBoundingClientRect(): Box }).getBoundingClientRect(),
          );
          return boxes.slice(1).map((box, i) => {
            const before = boxes[i] as Box;
            return box.top >= before.bottom - 1 || (Math.abs(box.top - before.top) < 2 && box.left >= before.right - 1);
          });
        },
        selectors as [string, number][],
      );
    // The card: head → base · sha, left to right as in the markup.
    const card = await inOrder('[data-change] .meta', [
      ['.branch', 0],
      ['.branch', 1],
      ['code', 0],
    ]);
    expect(card).toEqual([true, true]);
    expect(await page.textContent('[data-change] .meta')).toContain(branch);

    await page.click('[data-change] a.title');
    await page.waitForSelector('[data-change-page]');
    const meta = await inOrder('[data-change-page] .meta', [
      ['.badge', 0],
      ['.branch', 0],
      ['.branch', 1],
      ['code', 0],
    ]);
    expect(meta).toEqual([true, true, true]);
    expect(errors).toEqual([]);
  });

  browserTest('a link with a malformed escape in the change id shows "no such change" instead of a dead page', async () => {
    const seed = await seeded([{ kind: 'arriving', branch: 'one', title: 'One' }]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    cleanups.push(() => browser.close());
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${service.url}/#/change/%E0%A4%A`);
    await page.waitForSelector('text=No such change');
    expect(errors).toEqual([]);
    // The page still works: back to the board.
    await page.click('text=Back to the board');
    await page.waitForSelector('body[data-ready="true"] [data-change]');
  });

  browserTest('a page of another origin cannot read the API or the dashboard (fetch, no-cors, script, iframe)', async () => {
    const seed = await seeded([{ kind: 'arriving', branch: 'secret-branch', title: 'Secret title' }]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const target = service.url;
    const hostile = `<!doctype html><html><body><script>
      window.results = {};
      const api = ${JSON.stringify(target)};
      (async () => {
        for (const path of ['/api/changes?limit=10', '/api/changes', '/api/changes/1/timeline', '/api/summary', '/']) {
          try { const r = await fetch(api + path); window.results[path] = 'read:' + (await r.text()); }
          catch (e) { window.results[path] = 'failed'; }
        }
        try { const r = await fetch(api + '/api/changes?limit=10', { mode: 'no-cors' }); window.results.opaque = r.type + ':' + (await r.text()); }
        catch (e) { window.results.opaque = 'failed'; }
        try { const r = await fetch(api + '/api/changes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"head":"x"}' }); window.results.post = 'read:' + r.status; }
        catch (e) { window.results.post = 'failed'; }
        const frame = document.createElement('iframe');
        frame.src = api + '/';
        frame.onload = () => { try { window.results.frame = 'read:' + frame.contentDocument.body.textContent; } catch (e) { window.results.frame = 'failed'; } window.results.done = true; };
        document.body.append(frame);
      })();
    </script><script src="${target}/api/changes?limit=10"></script></body></html>`;
    const other: Server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(hostile);
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => other.close(() => resolve())));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    cleanups.push(() => browser.close());
    const page = await browser.newPage();
    // Another port of the same host name: another origin, the same site.
    await page.goto(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
    await page.waitForFunction('window.results && window.results.done === true');
    const results = (await page.evaluate('window.results')) as Record<string, unknown>;
    for (const path of ['/api/changes?limit=10', '/api/changes', '/api/changes/1/timeline', '/api/summary', '/']) expect(results[path], path).toBe('failed');
    expect(results.opaque).toBe('opaque:');
    expect(results.post).toBe('failed');
    expect(results.frame).toBe('failed');
    expect(JSON.stringify(results)).not.toContain('Secret title');
    expect(JSON.stringify(results)).not.toContain('secret-branch');
  });
});

describe('the read API and the files over HTTP', () => {
  it('odd query values are one typed 400 or an empty page, never SQL and never a 500', async () => {
    const seed = await seeded([
      { kind: 'arriving', branch: 'one', title: 'One' },
      { kind: 'blocked', branch: 'two', title: 'Two' },
    ]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const bad = [
      "stage=merged'%20OR%20'1'='1",
      'stage=%25',
      'stage=MERGED',
      'stage=merged&stage=blocked',
      'limit=-1',
      'limit=0',
      'limit=1001',
      'limit=1e3',
      'limit=1.5',
      'limit=0x10',
      'limit=%201',
      'limit=99999999999999999999',
      'limit=1&limit=2',
      'cursor=0',
      'cursor=-1',
      'cursor=1%20OR%201=1',
      'cursor=9007199254740993',
      'cursor=abc',
      'cursor=1&cursor=2',
      `repo=${'r'.repeat(201)}`,
      'repo=a&repo=b',
    ];
    for (const query of bad) {
      const reply = await raw(service.url, `/api/changes?${query}`);
      expect(reply.status, query).toBe(400);
      expect(reply.headers['content-type'], query).toBe('application/json; charset=utf-8');
      expect(JSON.parse(reply.text).code, query).toBe('INVALID_INPUT');
    }
    for (const query of ['repo=%25', 'repo=_', "repo='%20OR%201=1%20--", 'repo=%00']) {
      const reply = await raw(service.url, `/api/changes?${query}`);
      expect(reply.status, query).toBe(200);
      expect(JSON.parse(reply.text).changes, query).toEqual([]);
    }
    const all = (await getJson<{ changes: ChangeRow[]; repos: string[] }>(service.url, '/api/changes?limit=1000')).changes.map((row) => row.id);
    expect(all).toHaveLength(2);
    // An unknown parameter, an array-style name or a far cursor selects nothing more and nothing less.
    for (const query of ['stage[]=merged', 'x=1', 'cursor=9999999', 'limit=%31%30']) {
      const reply = await getJson<{ changes: ChangeRow[] }>(service.url, `/api/changes?${query}`);
      expect(reply.changes.map((row) => row.id).sort(), query).toEqual([...all].sort());
    }
    for (const path of [
      '/api/changes/0/timeline',
      '/api/changes/01/timeline',
      '/api/changes/%31/timeline',
      '/api/changes/__proto__/timeline',
      '/api/changes/1/timeline/',
    ]) {
      expect((await raw(service.url, path)).status, path).toBe(404);
    }
  });

  it('the Host check refuses every name but the bound address and localhost with the bound port', async () => {
    const seed = await seeded([{ kind: 'arriving', branch: 'one', title: 'One' }]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const port = Number(new URL(service.url).port);
    const refused = [
      `localhost.:${port}`,
      `127.0.0.1.:${port}`,
      `127.0.0.1:${port + 1}`,
      `127.0.0.1:0${port}`,
      `[::1]:${port}`,
      `[::ffff:127.0.0.1]:${port}`,
      `user@127.0.0.1:${port}`,
      `127.0.0.1`,
      `localhost`,
      `127.1:${port}`,
      `2130706433:${port}`,
      `0x7f.0.0.1:${port}`,
      `127.0.0.2:${port}`,
      `evil.example:${port}`,
      `127.0.0.1:${port}.evil.example`,
      `127.0.0.1:${port}, evil.example`,
    ];
    for (const path of ['/', '/assets/app.js', '/api/summary', '/api/changes?limit=1', '/healthz', '/metrics']) {
      for (const host of refused) {
        const reply = await raw(service.url, path, { host });
        expect(reply.status, `${path} ${host}`).toBe(421);
        expect(reply.headers['access-control-allow-origin']).toBeUndefined();
      }
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`])
        expect((await raw(service.url, path, { host })).status, `${path} ${host}`).toBe(200);
      expect((await raw(service.url, path, { host: null })).status, `${path} without Host`).not.toBe(200);
    }
  });

  it('only the fixed files are served, whatever the path encodes, and only GET and HEAD', async () => {
    const seed = await seeded([{ kind: 'arriving', branch: 'one', title: 'One' }]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    for (const path of [
      '/assets\\app.js',
      '/assets/..\\..\\package.json',
      '/assets/app.js%00',
      '/assets/app.js%00.png',
      '/assets/%252e%252e/%252e%252e/package.json',
      '/assets/.%2e/.%2e/package.json',
      '/%61ssets/app.js',
      '/assets/APP.JS',
      '/assets/__proto__',
      '/assets/constructor',
      '/assets/hasOwnProperty',
      '/__proto__',
      `/assets/${'a'.repeat(8000)}`,
      '/assets/vendor/',
      '/assets/vendor/uPlot.iife.js',
      '/assets/vendor/../../../package.json',
      '/./assets/app.js',
    ]) {
      const reply = await raw(service.url, path);
      expect([404, 431], path).toContain(reply.status);
      expect(reply.text, path).not.toContain('"name": "proofgate"');
      expect(reply.text, path).not.toContain('export ');
    }
    for (const method of ['OPTIONS', 'PUT', 'DELETE', 'PATCH', 'TRACE']) {
      for (const path of ['/', '/assets/app.js', '/api/changes', '/api/summary']) {
        const reply = await raw(service.url, path, { method, headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' } });
        expect(reply.status, `${method} ${path}`).toBe(405);
        expect(reply.headers['access-control-allow-origin'], `${method} ${path}`).toBeUndefined();
        expect(reply.headers['access-control-allow-methods'], `${method} ${path}`).toBeUndefined();
      }
    }
    const head = await raw(service.url, '/assets/app.js', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it("a request another site's page makes (fetch, script, image, frame; another port too) is refused before any work; a followed link is not", async () => {
    const seed = await seeded([{ kind: 'arriving', branch: 'one', title: 'One' }]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const from = (site: string, mode: string, dest: string): Record<string, string> => ({
      'sec-fetch-site': site,
      'sec-fetch-mode': mode,
      'sec-fetch-dest': dest,
    });
    const refused: [string, Record<string, string>][] = [
      ['/api/changes', from('cross-site', 'no-cors', 'empty')],
      ['/api/changes?limit=1', from('cross-site', 'cors', 'empty')],
      ['/api/summary', from('same-site', 'cors', 'empty')],
      [`/api/changes/${seed.ids[0]}/timeline`, from('same-site', 'no-cors', 'script')],
      ['/assets/app.js', from('cross-site', 'no-cors', 'script')],
      ['/assets/style.css', from('same-site', 'no-cors', 'style')],
      ['/assets/favicon.svg', from('cross-site', 'no-cors', 'image')],
      ['/', from('cross-site', 'navigate', 'iframe')],
      ['/', from('same-site', 'navigate', 'frame')],
      ['/', from('cross-site', 'navigate', 'object')],
      ['/metrics', from('cross-site', 'no-cors', 'empty')],
    ];
    for (const [path, headers] of refused) {
      const reply = await raw(service.url, path, { headers });
      expect(reply.status, `${path} ${JSON.stringify(headers)}`).toBe(403);
      expect(reply.text, path).not.toContain('One');
    }
    const allowed: [string, Record<string, string>][] = [
      ['/', from('cross-site', 'navigate', 'document')],
      ['/', from('none', 'navigate', 'document')],
      ['/api/changes?limit=1', from('same-origin', 'cors', 'empty')],
      ['/assets/app.js', from('same-origin', 'cors', 'script')],
      ['/api/summary', {}],
    ];
    for (const [path, headers] of allowed) expect((await raw(service.url, path, { headers })).status, `${path} ${JSON.stringify(headers)}`).toBe(200);
  });

  it('every answer, files and JSON alike, has its own type, nosniff, and no CORS header', async () => {
    const seed = await seeded([{ kind: 'waiting', branch: 'one', title: 'One' }]);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const json = [
      '/api/changes',
      '/api/changes?limit=1',
      '/api/changes?limit=x',
      `/api/changes/${seed.ids[0]}`,
      `/api/changes/${seed.ids[0]}/timeline`,
      '/api/changes/999/timeline',
      '/api/summary',
      '/api/nope',
      '/healthz',
      '/readyz',
      '/nope',
      '/assets/nope.js',
    ];
    for (const path of json) {
      const reply = await raw(service.url, path, { headers: { origin: 'http://evil.example' } });
      expect(reply.headers['content-type'], path).toBe('application/json; charset=utf-8');
      expect(reply.headers['x-content-type-options'], path).toBe('nosniff');
      expect(reply.headers['access-control-allow-origin'], path).toBeUndefined();
      expect(reply.headers['access-control-allow-credentials'], path).toBeUndefined();
    }
    for (const path of ['/', '/assets/app.js', '/assets/style.css', '/assets/vendor/uPlot.esm.js']) {
      const reply = await raw(service.url, path, { headers: { origin: 'http://evil.example' } });
      expect(reply.headers['x-content-type-options'], path).toBe('nosniff');
      expect(reply.headers['content-security-policy'], path).toBe("default-src 'self'");
      expect(reply.headers['access-control-allow-origin'], path).toBeUndefined();
    }
  });
});

/** `proofgate serve --repo` (the built CLI) on a seed, in a process group of its own; resolves once it listens. */
async function serveProcess(seed: Seeded): Promise<{ child: ChildProcess; url: string; lines: () => Record<string, unknown>[] }> {
  const child = startTestProcess(process.execPath, [CLI, 'serve', '--repo', seed.repo.dir, '--data', seed.data, '--port', '0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let pending = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const complete = pending.split('\n');
    pending = complete.pop() ?? '';
    for (const line of complete) {
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        lines.push({ msg: line });
      }
    }
  });
  await until(() => lines.some((line) => line.msg === 'listening') || child.exitCode !== null, 'serve --repo listens');
  const url = lines.find((line) => line.msg === 'listening')?.url;
  if (typeof url !== 'string') throw new Error(`serve --repo did not start: ${JSON.stringify(lines).slice(0, 500)}`);
  return { child, url, lines: () => lines };
}

/** The automerge ledger of a seed, written from this process as another process would. */
function ledgerOf(seed: Seeded): LedgerStore {
  const storage = createLocalRunStorage({ directory: seed.data, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
  cleanups.push(() => storage.close());
  return new LedgerStore(storage.eventStore, systemClock);
}

describe('the stored projection under races and crashes', () => {
  it('two serve processes on one data directory, refreshing while events arrive: no lost row, no failed refresh, no crash', async () => {
    const seed = await seeded(Array.from({ length: 4 }, (_, i) => ({ kind: 'arriving' as const, branch: `race-${i}`, title: `Race ${i}` })));
    const forge = await forgeOf(seed);
    const ledger = ledgerOf(seed);
    const heads = new Map<string, string>();
    for (const id of seed.ids) heads.set(id, (await forge.store.requireChange(id)).openedHeadSha);
    const first = await serveProcess(seed);
    const second = await serveProcess(seed);
    const ROUNDS = 12;
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const id of seed.ids) {
        await ledger.step(id, 'decision', { kind: 'wait', code: 'checks-pending', reason: `round ${round} of ${id}`, head: heads.get(id) ?? '' });
      }
      await forge.commentAs(seed.ids[round % seed.ids.length] as string, `note ${round}`, AUTHOR);
      // Go on as soon as one of the two has seen the round's first change: the next appends meet refreshes under way.
      const url = round % 2 === 0 ? first.url : second.url;
      await until(
        async () =>
          (await getJson<{ change: ChangeRow }>(url, `/api/changes/${seed.ids[0]}/timeline`)).change.stageDetail === `round ${round} of ${seed.ids[0]}`,
        `round ${round} seen`,
      );
    }
    for (const id of seed.ids) {
      await until(async () => {
        const answer = await getJson<TimelineAnswer>(first.url, `/api/changes/${id}/timeline`);
        return answer.change.stageDetail === `round ${ROUNDS - 1} of ${id}`;
      }, `the last round of change ${id}`);
      const answer = await getJson<TimelineAnswer>(second.url, `/api/changes/${id}/timeline`);
      expect(answer.change.stage).toBe('waiting');
      expect(answer.timeline.filter((item) => item.kind === 'decision').map((item) => item.text)).toEqual(
        Array.from({ length: ROUNDS }, (_, round) => `wait: round ${round} of ${id}`),
      );
    }
    expect(first.child.exitCode).toBeNull();
    expect(second.child.exitCode).toBeNull();
    for (const served of [first, second]) expect(served.lines().filter((line) => line.msg === 'dashboard projection not refreshed')).toEqual([]);
  });

  it('a service killed with SIGKILL while events stream in: the stored positions and rows agree with a full rebuild afterwards', async () => {
    const seed = await seeded(Array.from({ length: 3 }, (_, i) => ({ kind: 'arriving' as const, branch: `crash-${i}`, title: `Crash ${i}` })));
    const forge = await forgeOf(seed);
    const ledger = ledgerOf(seed);
    for (let cycle = 0; cycle < 2; cycle += 1) {
      const served = await serveProcess(seed);
      for (let i = 0; i < 60; i += 1) {
        const id = seed.ids[i % seed.ids.length] as string;
        await ledger.step(id, 'decision', { kind: i % 2 === 0 ? 'wait' : 'block', code: 'x', reason: `cycle ${cycle} step ${i}` });
        if (i % 20 === 0) await forge.commentAs(id, `/proofgate status ${cycle}.${i}`, AUTHOR);
      }
      // Killed while it follows those events (SIGKILL to its group: no handler runs).
      await stopTestProcess(served.child);
      expect(served.child.signalCode).toBe('SIGKILL');
    }
    const projection = openChangeProjection(seed.data, { forge, ledger, secret: await loadOrCreateSecret(seed.data) });
    cleanups.push(() => projection.close());
    // From the positions the killed process stored (no rebuild): what it wrote plus what it had not read yet.
    await projection.refresh();
    const rows = seed.ids.map((id) => projection.timeline(id));
    await projection.rebuild();
    expect(seed.ids.map((id) => projection.timeline(id))).toEqual(rows);
    expect(rows.map((row) => row?.change.stageDetail)).toEqual(seed.ids.map((_, k) => `cycle 1 step ${57 + k}`));
  });
});

describe('demo --serve', () => {
  it('has no way to listen off loopback: --host is not an option of demo', async () => {
    const result = await runCliAsync(['demo', '--serve', '--host', '0.0.0.0']);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("unknown option '--host'");
  });
});
