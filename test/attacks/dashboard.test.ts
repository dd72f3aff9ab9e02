/**
 * Attacks on the observer dashboard:
 *
 * - a change whose title, branch name, command comment and block reason carry
 *   markup (`<img src=x onerror=...>`, `</script>`) shows them as literal
 *   text, and no script of theirs runs (checked in Chromium);
 * - off loopback, the page and its files need a token like the API;
 * - the Host header check covers the page and its files (DNS rebinding);
 * - no path outside the fixed list of files is served: `/assets/../...`,
 *   encoded dots and slashes are 404;
 * - every file goes out with `Content-Security-Policy: default-src 'self'`
 *   and `X-Content-Type-Options: nosniff`; the page has no inline script;
 *   only GET and HEAD are allowed.
 */
import { existsSync } from 'node:fs';
import { rawRequest } from '../support/http.js';
import { chromium } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { createToken } from '../../src/cli/commands/token.js';
import { CHROMIUM, CHROMIUM_ARGS, seedRepository, serveSeed } from '../service/dashboard-support.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/** A request with the path sent exactly as given (no normalization), an explicit Host and an optional token. */
function raw(url: string, path: string, options: { host?: string; token?: string; method?: string } = {}): Promise<Reply> {
  const headers: Record<string, string> = { host: options.host ?? new URL(url).host };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  return rawRequest(url, path, { method: options.method ?? 'GET', headers });
}

const MARKUP_TITLE = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>';
const MARKUP_BRANCH = 'evil/</script><img-src=x-onerror=window.__pwned=3>';
const MARKUP_REASON = '<img src=x onerror="window.__pwned=4"> & </script>';
const MARKUP_COMMENT = '/proofgate review <img src=x onerror="window.__pwned=5">';

describe('dashboard attacks', () => {
  it.skipIf(!existsSync(CHROMIUM) && process.env.CI !== 'true')(
    'shows markup in titles, branch names, comments and reasons as text; none of it runs',
    async () => {
      const seed = await seedRepository([{ kind: 'blocked', branch: MARKUP_BRANCH, title: MARKUP_TITLE, reason: MARKUP_REASON, comment: MARKUP_COMMENT }]);
      cleanups.push(seed.cleanup);
      const service = await serveSeed(seed);
      cleanups.push(() => service.stop(0));
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      cleanups.push(() => browser.close());
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(message.text());
      });
      await page.goto(`${service.url}/`);
      await page.waitForSelector('body[data-ready="true"] [data-change]');
      expect(await page.textContent('[data-change] a.title')).toBe(`#1 ${MARKUP_TITLE}`);
      expect(await page.$$eval('[data-change] .branch', (nodes) => nodes.map((node) => node.textContent))).toEqual([MARKUP_BRANCH, 'main']);
      expect(await page.textContent('[data-change] [data-detail]')).toBe(`Blocked: ${MARKUP_REASON}`);

      await page.click('[data-change] a.title');
      await page.waitForSelector('[data-change-page]');
      expect(await page.textContent('[data-change-page] h1')).toBe(`#1 ${MARKUP_TITLE}`);
      expect(await page.textContent('[data-why]')).toBe(`Blocked: ${MARKUP_REASON}`);
      const texts = await page.$$eval('.timeline > li .text', (nodes) => nodes.map((node) => node.textContent ?? ''));
      expect(texts.some((text) => text.includes(MARKUP_COMMENT))).toBe(true);
      expect(texts.some((text) => text.includes(MARKUP_BRANCH))).toBe(true);

      // Nothing parsed the text as markup, and no handler of it ran.
      expect(await page.evaluate("document.querySelectorAll('main img, main script, main svg').length")).toBe(0);
      expect(await page.evaluate('typeof window.__pwned')).toBe('undefined');
      expect(errors).toEqual([]);
    },
  );

  it('needs a token off loopback for the page and its files', async () => {
    const seed = await seedRepository([{ kind: 'arriving', branch: 'one', title: 'One' }]);
    cleanups.push(seed.cleanup);
    // Bound to every address: not loopback only, so reads need a token.
    const service = await serveSeed(seed, { host: '0.0.0.0' });
    cleanups.push(() => service.stop(0));
    const { token } = await createToken('viewer', { data: seed.data, permission: 'read' });
    const url = service.url.replace('0.0.0.0', '127.0.0.1');
    for (const path of ['/', '/assets/app.js', '/assets/vendor/uPlot.esm.js', '/api/summary']) {
      const anonymous = await raw(url, path);
      expect(anonymous.status, path).toBe(401);
      expect(anonymous.text, path).not.toContain('<script');
      expect((await raw(url, path, { token })).status, path).toBe(200);
      expect((await raw(url, path, { token: `pgt_${'A'.repeat(43)}` })).status, path).toBe(401);
    }
  });

  it('checks the Host header on the page and its files, serves only its own files, with CSP and nosniff', async () => {
    const seed = await seedRepository([{ kind: 'arriving', branch: 'one', title: 'One' }]);
    cleanups.push(seed.cleanup);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));
    const port = new URL(service.url).port;
    for (const path of ['/', '/assets/app.js', '/assets/style.css']) {
      const rebound = await raw(service.url, path, { host: `rebound.example:${port}` });
      expect(rebound.status, path).toBe(421);
      expect(rebound.text, path).not.toContain('<');
    }

    const page = await raw(service.url, '/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toBe("default-src 'self'");
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    // No inline script: every script is a file of this server.
    expect(page.text.match(/<script\b[^>]*>/g)).toEqual(['<script type="module" src="/assets/app.js">']);
    const script = await raw(service.url, '/assets/app.js');
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script.headers['content-security-policy']).toBe("default-src 'self'");
    expect(script.text).not.toContain('innerHTML');

    for (const path of [
      '/assets/../package.json',
      '/assets/../../package.json',
      '/assets/%2e%2e/%2e%2e/package.json',
      '/assets/..%2f..%2fpackage.json',
      '/assets/vendor/../../../../../../etc/passwd',
      '/assets/',
      '/assets/serve.ts',
      '/assets/app.js/',
      '/index.html',
      '/assets//app.js',
    ]) {
      const answer = await raw(service.url, path);
      expect(answer.status, path).toBe(404);
      expect(answer.text, path).not.toContain('"name": "proofgate"');
      expect(answer.text, path).not.toContain('root:');
    }
    expect((await raw(service.url, '/', { method: 'POST' })).status).toBe(405);
    expect((await raw(service.url, '/assets/app.js', { method: 'DELETE' })).status).toBe(405);
    expect((await raw(service.url, '/', { method: 'HEAD' })).status).toBe(200);
  });
});
