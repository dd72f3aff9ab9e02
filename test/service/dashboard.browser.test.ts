/**
 * The observer dashboard in headless Chromium (Debian's `chromium`, driven by
 * playwright-core): the board of a seeded repository, a change's timeline,
 * the charts, a blocked change's reason, phone width, updates without a
 * reload, a real merge queue (queued changes on the board with their place
 * in line, a hostile title shown as text, the queue's events reaching the
 * change page without a reload), the GitHub App service's board with a
 * merged pull request, and no console error anywhere. Screenshots go to test-artifacts/.
 *
 * Without /usr/bin/chromium the tests skip with one line; under CI=true they
 * fail instead.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AUTOMERGE_NAMESPACE } from '../../src/automerge/loop/local.js';
import { LedgerStore } from '../../src/automerge/loop/ledger-store.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { CHROMIUM, CHROMIUM_ARGS, seedRepository, serveSeed, type Seeded } from './dashboard-support.js';
import { HOSTILE_TITLE, queueScenario, type QueueScenario } from './queue-support.js';
import { startServiceHarness, type ServiceHarness } from './github-service-support.js';
import { WAIT_BOUND_MS, until } from '../support/wait.js';

/** What the chart test reads of a canvas (the test's types have no DOM). */
interface CanvasLike {
  readonly width: number;
  readonly height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { readonly data: ArrayLike<number> } } | null;
}

const ARTIFACTS = join(process.cwd(), 'test-artifacts');
const available = existsSync(CHROMIUM);

if (!available && process.env.CI === 'true') {
  describe('dashboard in a browser', () => {
    it('needs chromium under CI', () => {
      throw new Error(`${CHROMIUM} is missing: under CI=true the browser tests do not skip`);
    });
  });
} else if (!available) {
  describe('dashboard in a browser', () => {
    it.skip(`skipped: no chromium at ${CHROMIUM} (apt-get install chromium)`, () => undefined);
  });
} else {
  describe('dashboard in a browser', () => {
    let browser: Browser;
    let seed: Seeded;
    let service: Awaited<ReturnType<typeof serveSeed>>;
    const contexts: BrowserContext[] = [];
    let problems: string[] = [];

    beforeAll(async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      seed = await seedRepository([
        { kind: 'merged', branch: 'fast-path', title: 'Speed up the fast path' },
        { kind: 'blocked', branch: 'parser-fix', title: 'Fix the parser', reason: 'REFUTED: the parser still breaks on empty input' },
        { kind: 'waiting', branch: 'docs', title: 'Document the API', reason: 'checks pending: test' },
        { kind: 'reviewing', branch: 'cache', title: 'Add a cache' },
        { kind: 'arriving', branch: 'typo', title: 'Fix a typo' },
      ]);
      service = await serveSeed(seed);
      browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });

    afterAll(async () => {
      await browser?.close();
      await service?.stop(0);
      seed?.cleanup();
    });

    afterEach(async () => {
      for (const context of contexts.splice(0)) await context.close();
      const seen = problems;
      problems = [];
      expect(seen).toEqual([]);
    });

    async function open(path: string, viewport = { width: 1280, height: 900 }): Promise<Page> {
      const context = await browser.newContext({ viewport });
      contexts.push(context);
      const page = await context.newPage();
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console: ${message.text()}`);
      });
      page.on('pageerror', (error) => problems.push(`page: ${error.message}`));
      page.on('requestfailed', (request) => problems.push(`request failed: ${request.url()}`));
      await page.goto(`${service.url}${path}`);
      await page.waitForSelector('body[data-ready="true"]');
      return page;
    }

    it('shows the seeded changes on the board by stage, and filters by repository', async () => {
      const page = await open('/');
      const columns = await page.$$eval('[data-stage]', (nodes) =>
        nodes.map((node) => [node.getAttribute('data-stage'), [...node.querySelectorAll('[data-change] .title')].map((title) => title.textContent)]),
      );
      expect(columns).toEqual([
        ['arriving', ['#5 Fix a typo']],
        ['reviewing', ['#4 Add a cache']],
        ['proving', []],
        ['repairing', []],
        ['waiting', ['#3 Document the API']],
        ['blocked', ['#2 Fix the parser']],
        ['merged', ['#1 Speed up the fast path']],
        ['closed', []],
      ]);
      // A blocked change says why, on the board already.
      expect(await page.textContent('[data-stage="blocked"] [data-detail]')).toBe('Blocked: REFUTED: the parser still breaks on empty input');
      expect(await page.textContent('[data-stage="waiting"] [data-detail]')).toBe('Waiting on: checks pending: test');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-board.png'), fullPage: true });

      const repo = await page.$eval('#repo-filter option:nth-child(2)', (option) => option.getAttribute('value'));
      expect(repo).toBeTruthy();
      await page.selectOption('#repo-filter', repo as string);
      await page.waitForFunction("location.hash.startsWith('#/?repo=')");
      await page.waitForSelector('body[data-ready="true"]');
      expect(await page.$$eval('[data-change]', (nodes) => nodes.length)).toBe(5);
    });

    it("shows a change's timeline in order, with each verdict's bindings and why it is blocked", async () => {
      const page = await open('/');
      await page.click('[data-stage="blocked"] [data-change] a.title');
      await page.waitForSelector('[data-change-page]');
      const events = await page.$$eval('.timeline > li', (nodes) =>
        nodes.map((node) => [node.getAttribute('data-kind'), node.querySelector('time')?.getAttribute('datetime')]),
      );
      expect(events.map(([kind]) => kind)).toEqual(['opened', 'command', 'review', 'verdict', 'decision']);
      const times = events.map(([, at]) => Date.parse(at as string));
      expect([...times].sort((a, b) => a - b)).toEqual(times);
      expect(await page.textContent('[data-why]')).toBe('Blocked: REFUTED: the parser still breaks on empty input');
      const head = seed.repo.sha('parser-fix');
      const bound = await page.$$eval('.timeline .kind-verdict .bindings dd', (nodes) => nodes.map((node) => node.textContent));
      expect(bound[0]).toBe(head);
      expect(bound.slice(1).every((text) => /^sha256:[0-9a-f]{64}$/.test(text ?? ''))).toBe(true);
      expect(await page.textContent(`[data-head="${head}"] .verdict`)).toBe('REFUTED');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-change.png'), fullPage: true });

      // The merged change shows its merge commit.
      await page.goto(`${service.url}/#/change/${seed.ids[0]}`);
      await page.waitForSelector('[data-merge-commit]');
      expect(await page.textContent('[data-merge-commit]')).toBe(seed.repo.sha('main'));
    });

    it('draws the charts', async () => {
      const page = await open('/#/charts');
      await page.waitForFunction("document.querySelectorAll('[data-chart] canvas').length === 3");
      const painted = await page.$$eval('[data-chart] canvas', (canvases) =>
        (canvases as unknown as CanvasLike[]).map((canvas) => {
          const context = canvas.getContext('2d');
          if (context === null || canvas.width === 0 || canvas.height === 0) return 0;
          const { data } = context.getImageData(0, 0, canvas.width, canvas.height);
          let inked = 0;
          for (let i = 3; i < data.length; i += 4) if ((data[i] as number) > 0) inked += 1;
          return inked;
        }),
      );
      expect(painted).toHaveLength(3);
      for (const inked of painted) expect(inked).toBeGreaterThan(100);
      expect(await page.$$eval('[data-chart] .u-title', (nodes) => nodes.map((node) => node.textContent))).toEqual([
        'From /proofgate automerge to merge (by day)',
        'Review duration',
        'Merge queue depth',
      ]);
      expect(await page.textContent('[data-stage-counts]')).toBe(
        'arriving 1 · reviewing 1 · proving 0 · repairing 0 · waiting 1 · merged 1 · blocked 1 · closed 0',
      );
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-charts.png'), fullPage: true });
    });

    it('works at phone width', async () => {
      const page = await open('/', { width: 390, height: 844 });
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      // The columns stack: each is as wide as the page allows.
      const widths = await page.$$eval('[data-stage]', (nodes) => nodes.map((node) => node.getBoundingClientRect().width));
      for (const width of widths) expect(width).toBeGreaterThan(300);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-phone.png'), fullPage: true });
      await page.goto(`${service.url}/#/change/${seed.ids[1]}`);
      await page.waitForSelector('[data-change-page]');
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-phone-change.png'), fullPage: true });
    });

    it('moves a change on the board without a reload when its ledger moves', async () => {
      const page = await open('/');
      await page.evaluate('window.sameDocument = true');
      const storage = createLocalRunStorage({ directory: seed.data, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
      try {
        await new LedgerStore(storage.eventStore).step(seed.ids[4] as string, 'decision', {
          kind: 'wait',
          code: 'checks-pending',
          reason: 'checks pending: lint',
          head: seed.repo.sha('typo'),
        });
      } finally {
        await storage.close();
      }
      await page.waitForSelector('[data-stage="waiting"] [data-change="5"]', { timeout: WAIT_BOUND_MS });
      expect(await page.evaluate('window.sameDocument')).toBe(true);
      expect(await page.$$eval('[data-stage="arriving"] [data-change]', (nodes) => nodes.length)).toBe(0);
    });
  });

  describe('the merge queue in a browser', () => {
    let browser: Browser;
    let scenario: QueueScenario;
    let service: Awaited<ReturnType<typeof serveSeed>>;
    const problems: string[] = [];

    beforeAll(async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      scenario = await queueScenario();
      service = await serveSeed({ repo: scenario.fixture.repo, data: scenario.fixture.dataDir });
      browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });

    afterAll(async () => {
      await browser?.close();
      await service?.stop(0);
      await scenario?.cleanup();
    });

    it('shows queued changes waiting on their place in line, a hostile title as text, and the queue events arriving on the change page without a reload', async () => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      try {
        const page = await context.newPage();
        page.on('console', (message) => {
          if (message.type() === 'error') problems.push(`console: ${message.text()}`);
        });
        page.on('pageerror', (error) => problems.push(`page: ${error.message}`));
        await page.goto(`${service.url}/`);
        await page.waitForSelector('body[data-ready="true"]');
        const [a, hostile, b] = scenario.ids;
        const waiting = await page.$$eval('[data-stage="waiting"] [data-change]', (nodes) =>
          nodes.map((node) => [node.getAttribute('data-change'), node.querySelector('[data-detail]')?.textContent]),
        );
        expect(waiting.sort()).toEqual(
          [a, hostile, b].map((id, index) => [id, `Waiting on: merge queue (position ${index + 1} of 3, base main); the queue is paused`]).sort(),
        );
        // The hostile title is text: no element came of it, no script ran, the characters are all there.
        expect(await page.textContent(`[data-change="${hostile}"] a.title`)).toBe(`#${hostile} ${HOSTILE_TITLE}`);
        expect(await page.$$eval('[data-change] img, [data-change] b', (nodes) => nodes.length)).toBe(0);
        expect(await page.evaluate('window.pwned')).toBeUndefined();
        await page.screenshot({ path: join(ARTIFACTS, 'dashboard-queue-board.png'), fullPage: true });

        await page.click(`[data-change="${hostile}"] a.title`);
        await page.waitForSelector('[data-queue="waiting"]');
        expect(await page.textContent('[data-queue-position]')).toBe('2 of 3');
        expect(await page.$$eval('[data-queue-event]', (nodes) => nodes.map((node) => node.getAttribute('data-queue-event')))).toEqual(['enqueued']);
        expect(await page.textContent('h1')).toBe(`#${hostile} ${HOSTILE_TITLE}`);
        expect(await page.$$eval('article img, article h1 b', (nodes) => nodes.length)).toBe(0);

        // The queue goes on; the page follows without a reload.
        await page.evaluate('window.sameDocument = true');
        await scenario.release();
        await page.waitForSelector('[data-queue="landed"]', { timeout: WAIT_BOUND_MS });
        await page.waitForSelector('[data-queue-event="landed"]');
        expect(await page.$$eval('[data-queue-event]', (nodes) => nodes.map((node) => node.getAttribute('data-queue-event')))).toEqual([
          'enqueued',
          'candidate',
          'checks',
          'bisect',
          'candidate',
          'checks',
          'landed',
        ]);
        expect(await page.evaluate('window.sameDocument')).toBe(true);
        expect(await page.evaluate('window.pwned')).toBeUndefined();
        await page.screenshot({ path: join(ARTIFACTS, 'dashboard-queue-change.png'), fullPage: true });
        expect(problems).toEqual([]);
      } finally {
        await context.close();
      }
    });
  });

  describe("the GitHub App service's board in a browser", () => {
    let browser: Browser;
    let harness: ServiceHarness;

    beforeAll(async () => {
      mkdirSync(ARTIFACTS, { recursive: true });
      harness = await startServiceHarness();
      browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });

    afterAll(async () => {
      await browser?.close();
      await harness?.cleanup();
    });

    it('shows a merged pull request under its repository, and its page the merge commit', async () => {
      const h = harness;
      const url = h.service.url as string;
      const { number, runId } = h.openPullRequest('feature');
      await h.comment(number, '/proofgate automerge');
      await until(async () => h.service.runningLoops() === 0 && (await h.service.queue.list()).some((job) => job.task === 'resume'), 'the change did not park');
      await h.completeCheck(number, runId);
      await until(() => h.server.model.pull(number).merged, 'the pull request was not merged');
      const repo = `${h.server.model.owner}/${h.server.model.repo}`;
      const id = `${repo.toLowerCase()}#${number}`;
      const problems: string[] = [];
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      try {
        const page = await context.newPage();
        page.on('console', (message) => {
          if (message.type() === 'error') problems.push(`console: ${message.text()}`);
        });
        page.on('pageerror', (error) => problems.push(`page: ${error.message}`));
        await page.goto(`${url}/`);
        await page.waitForSelector(`[data-stage="merged"] [data-change="${id}"]`, { timeout: WAIT_BOUND_MS });
        expect(await page.textContent(`[data-change="${id}"] a.title`)).toBe(`#${number} Add feature`);
        expect(await page.textContent(`[data-change="${id}"] .meta.muted`)).toContain(repo);
        expect(await page.$$eval('#repo-filter option', (nodes) => nodes.map((node) => node.getAttribute('value')))).toEqual(['', repo]);
        await page.screenshot({ path: join(ARTIFACTS, 'dashboard-github-board.png'), fullPage: true });
        await page.click(`[data-change="${id}"] a.title`);
        await page.waitForSelector('[data-merge-commit]');
        expect(await page.textContent('[data-merge-commit]')).toBe(h.server.model.pull(number).mergeCommitSha);
        expect(await page.$$eval('.timeline > li', (nodes) => nodes.map((node) => node.getAttribute('data-kind')))).toEqual(
          expect.arrayContaining(['opened', 'command', 'review', 'verdict', 'merged']),
        );
        await page.screenshot({ path: join(ARTIFACTS, 'dashboard-github-change.png'), fullPage: true });
        expect(problems).toEqual([]);
      } finally {
        await context.close();
      }
    });
  });
}
