/**
 * GET /metrics: Prometheus text read back by a real exposition-format parser
 * (parse-prometheus-text-format), from the GitHub App service after a change
 * was reviewed and merged through signed deliveries, from `serve --repo`
 * after a rebase, a review and a merge (checked against the ledger), from a
 * GitHub client's hook against a plain HTTP server sending rate-limit
 * headers, the queue's `counts()` on both adapters, and the merge queue
 * families after a real queue bisected a failing candidate.
 */
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { afterEach, expect, it } from 'vitest';
import { openLocalAutomerge } from '../../src/automerge/loop/index.js';
import { createGitHubClient } from '../../src/forge/github/client.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { TASK, startLocalService, type LocalService } from '../../src/service/index.js';
import { createPostgresJobQueue, createSqliteJobQueue, type JobEvent, type JobQueue } from '../../src/service/jobs/index.js';
import { GITHUB_EVENT_NAMES, createServiceMetrics } from '../../src/service/metrics.js';
import { CHECK_SCRIPT, MAINTAINER } from '../automerge/loop/local-support.js';
import { makeSeededRepo } from '../forge/git-fixture.js';
import { describePostgres } from '../support/postgres.js';
import { until } from '../support/wait.js';
import { startServiceHarness, type ServiceHarness } from './github-service-support.js';
import { queueScenario } from './queue-support.js';

interface Sample {
  readonly value?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly buckets?: Readonly<Record<string, string>>;
  readonly count?: string;
  readonly sum?: string;
}
interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  readonly metrics: readonly Sample[];
}
const require = createRequire(import.meta.url);
// The parser ships no types: its result is described above.
const parsePrometheusText = require('parse-prometheus-text-format') as (text: string) => Family[];

/** A scrape's families by name, and its text. */
interface Families extends ReadonlyMap<string, Family> {
  readonly text: string;
}

function parseFamilies(text: string): Families {
  return Object.assign(new Map(parsePrometheusText(text).map((family) => [family.name, family])), { text });
}

/** GET /metrics (no secret, no token) and the families it holds. */
async function scrape(url: string): Promise<Families> {
  const response = await fetch(`${url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  return parseFamilies(await response.text());
}

/** Scrape every 100 ms (the service runs in this process: a tighter poll would slow it) until `done` holds; the last scrape. */
async function scrapeUntil(url: string, done: (families: Families) => boolean, what: string): Promise<Families> {
  let last: Families | null = null;
  await until(async () => {
    if (last !== null) await new Promise((resolve) => setTimeout(resolve, 100));
    last = await scrape(url);
    return done(last);
  }, what);
  return last as unknown as Families;
}

/**
 * The `_count` series of a labelled histogram. The parser folds the series of
 * a histogram with labels into one and drops their counts and sums (its open
 * issue yunyu/parse-prometheus-text-format#13), so the same text is parsed
 * again without that family's TYPE line: its `_bucket`, `_sum` and `_count`
 * lines then come back as plain series, labels and all.
 */
function histogramCounts(families: Families, name: string): Sample[] {
  const untyped = families.text
    .split('\n')
    .filter((line) => line !== `# TYPE ${name} histogram`)
    .join('\n');
  return parsePrometheusText(untyped)
    .filter((f) => f.name === `${name}_count`)
    .flatMap((f) => f.metrics);
}

function family(families: Families, name: string, type: Family['type']): Family {
  const found = families.get(name);
  expect(found, `no ${name} family`).toBeDefined();
  expect(found?.type, name).toBe(type);
  return found as Family;
}

const sameLabels = (sample: Sample, labels: Readonly<Record<string, string>>): boolean =>
  JSON.stringify(Object.entries(sample.labels ?? {}).sort()) === JSON.stringify(Object.entries(labels).sort());

/** The value of the sample with exactly these labels (a histogram: its count), or undefined. */
function valueOf(families: Families, name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  const samples = families.get(name)?.type === 'HISTOGRAM' ? histogramCounts(families, name) : families.get(name)?.metrics;
  const sample = samples?.find((s) => sameLabels(s, labels));
  if (sample === undefined) return undefined;
  return Number(sample.count ?? sample.value);
}

/** Every label of every proofgate_ sample, as [name, value]. */
function labelsOf(families: Families): [string, string][] {
  return [...families.values()].filter((f) => f.name.startsWith('proofgate_')).flatMap((f) => f.metrics.flatMap((s) => Object.entries(s.labels ?? {})));
}

let harness: ServiceHarness | null = null;
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  await harness?.cleanup();
  harness = null;
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it('the GitHub App service: deliveries by event and outcome, jobs, a review, a merge and its GitHub requests, read by a Prometheus parser', async () => {
  const h = (harness = await startServiceHarness());
  await until(() => h.events.some((e) => e.kind === 'completed' && e.job.task === 'repository'), 'the start pass did not run');
  const { number, runId } = h.openPullRequest();
  const first = await h.comment(number, '/proofgate automerge');
  expect(first.status).toBe(202);
  await until(async () => h.service.runningLoops() === 0 && (await h.service.queue.list()).some((job) => job.task === 'resume'), 'the change did not park');
  expect((await h.completeCheck(number, runId)).status).toBe(202);
  await until(() => h.server.model.pull(number).merged, 'the pull request was not merged');
  // Two more ends at the front: the first delivery again, and a forged one under an event name GitHub does not have.
  expect((await h.send('issue_comment', first.payload, first.deliveryId)).status).toBe(200);
  const url = h.service.url ?? '';
  const forged = await fetch(`${url}/webhooks`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'pull_request"} 99 # injected',
      'x-github-delivery': 'forged-1',
      'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
    },
    body: '{}',
  });
  expect(forged.status).toBe(401);
  // Quiet: nothing runs and every job left waits for a later time, so the figures below cannot move while they are read.
  await until(
    async () =>
      h.service.runningLoops() === 0 &&
      (await h.service.queue.list()).every((job) => job.failed || (job.lockedBy === null && job.runAt.getTime() > Date.now())),
    'the queue did not settle',
  );

  const families = await scrape(url);
  const events = [...h.events];
  const listed = await h.service.queue.list();

  family(families, 'proofgate_webhook_deliveries_total', 'COUNTER');
  expect(families.get('proofgate_webhook_deliveries_total')?.metrics.map((s) => ({ ...s.labels, value: Number(s.value) }))).toEqual(
    expect.arrayContaining([
      { event: 'issue_comment', outcome: 'accepted', value: 1 },
      { event: 'check_run', outcome: 'accepted', value: 1 },
      { event: 'issue_comment', outcome: 'duplicate', value: 1 },
      { event: 'other', outcome: 'unauthenticated', value: 1 },
    ]),
  );
  expect(families.get('proofgate_webhook_deliveries_total')?.metrics).toHaveLength(4);

  // Queue depth, per task and state, as the queue lists it.
  family(families, 'proofgate_jobs_queued', 'GAUGE');
  for (const task of Object.values(TASK)) {
    const waiting = listed.filter((job) => job.task === task && !job.failed && job.lockedBy === null);
    expect(valueOf(families, 'proofgate_jobs_queued', { task, state: 'due' }), task).toBe(0);
    expect(valueOf(families, 'proofgate_jobs_queued', { task, state: 'scheduled' }), task).toBe(waiting.length);
    expect(valueOf(families, 'proofgate_jobs_running', { task }), task).toBe(0);
    expect(valueOf(families, 'proofgate_jobs_failed', { task }), task).toBe(listed.filter((job) => job.task === task && job.failed).length);
  }
  expect(valueOf(families, 'proofgate_jobs_queued', { task: 'reconcile', state: 'scheduled' })).toBe(1);

  // Job durations: one observation per job end this process saw, by task and outcome.
  const ends = new Map<string, number>();
  for (const e of events) {
    if (e.kind !== 'completed' && e.kind !== 'failed') continue;
    const outcome = e.kind === 'completed' ? 'completed' : e.final ? 'failed' : 'retry';
    const key = JSON.stringify({ task: e.job.task, outcome });
    ends.set(key, (ends.get(key) ?? 0) + 1);
  }
  family(families, 'proofgate_job_duration_seconds', 'HISTOGRAM');
  const jobCounts = histogramCounts(families, 'proofgate_job_duration_seconds');
  expect(new Map(jobCounts.map((s) => [JSON.stringify({ task: s.labels?.task, outcome: s.labels?.outcome }), Number(s.value)]))).toEqual(ends);
  expect(ends.get(JSON.stringify({ task: 'comment', outcome: 'completed' }))).toBeGreaterThanOrEqual(1);
  expect(ends.get(JSON.stringify({ task: 'resume', outcome: 'completed' }))).toBeGreaterThanOrEqual(1);

  // The automerge loop: one review (CONFIRMED), one merge; every label set is there from the start.
  family(families, 'proofgate_reviews_total', 'COUNTER');
  expect(valueOf(families, 'proofgate_reviews_total', { verdict: 'CONFIRMED' })).toBe(1);
  for (const verdict of ['REFUTED', 'HOLD', 'failed']) expect(valueOf(families, 'proofgate_reviews_total', { verdict })).toBe(0);
  const reviewTime = family(families, 'proofgate_review_duration_seconds', 'HISTOGRAM').metrics[0];
  expect(Number(reviewTime?.count)).toBe(1);
  expect(Number(reviewTime?.sum)).toBeGreaterThan(0);
  family(families, 'proofgate_merges_total', 'COUNTER');
  expect(valueOf(families, 'proofgate_merges_total', { outcome: 'merged' })).toBe(1);
  for (const outcome of ['head-moved', 'base-moved', 'not-mergeable', 'stopped', 'error'])
    expect(valueOf(families, 'proofgate_merges_total', { outcome })).toBe(0);
  expect(family(families, 'proofgate_repairs_total', 'COUNTER').metrics.map((s) => Number(s.value))).toEqual(Array(9).fill(0));
  expect(valueOf(families, 'proofgate_change_loops_running')).toBe(0);

  // GitHub requests: by route template and status; together, every request the API server answered (none was retried).
  family(families, 'proofgate_github_requests_total', 'COUNTER');
  const merges = h.server.requests.filter((r) => r.operation === 'pulls/merge');
  expect(valueOf(families, 'proofgate_github_requests_total', { operation: 'PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge', status: '200' })).toBe(
    merges.length,
  );
  expect(valueOf(families, 'proofgate_github_requests_total', { operation: 'POST /app/installations/{installation_id}/access_tokens', status: '201' })).toBe(1);
  expect(valueOf(families, 'proofgate_github_requests_total', { operation: 'GET /app', status: '200' })).toBe(1);
  expect(valueOf(families, 'proofgate_github_requests_total', { operation: 'POST /graphql', status: '200' })).toBeGreaterThanOrEqual(1);
  const requests = families.get('proofgate_github_requests_total')?.metrics ?? [];
  expect(requests.reduce((sum, s) => sum + Number(s.value), 0)).toBe(h.server.requests.length);
  for (const s of requests) expect(s.labels?.operation).toMatch(/^(GET|POST|PUT|PATCH|DELETE) (\/([a-z_]+|\{[a-z_]+\}))+$/);
  // The test server sends no rate-limit headers: the family is there, without samples.
  expect(family(families, 'proofgate_github_rate_limit_remaining', 'GAUGE').metrics).toEqual([]);

  // No label carries a pull request number, the repository, a sha or the forged header.
  for (const [name, value] of labelsOf(families)) {
    expect(value).not.toContain(h.server.model.repo);
    expect(value).not.toContain('injected');
    expect(value).not.toMatch(/[0-9a-f]{40}/);
    if (name !== 'status') expect(value).not.toMatch(/^\d+$/);
  }
  // The event names the label keeps cover every event GitHub's published examples have.
  const examples = require('@octokit/webhooks-examples/api.github.com/index.json') as { name: string }[];
  expect(examples.map((example) => example.name).filter((name) => !GITHUB_EVENT_NAMES.has(name))).toEqual([]);
  // The process itself, on the service's own registry.
  family(families, 'process_cpu_user_seconds_total', 'COUNTER');
  family(families, 'nodejs_heap_size_used_bytes', 'GAUGE');
  expect(h.server.schemaChecks.filter((c) => c.violations.length > 0)).toEqual([]);
});

it('serve --repo: a rebase, the review and the merge through the merge queue, as the store records them; no webhook, job queue or GitHub families', async () => {
  // One builtin lane (rules): the review is real and quick. The merge goes through main's merge queue.
  const config = [
    'maintainers:',
    `  - login: ${MAINTAINER}`,
    '    permission: admin',
    'automerge:',
    '  queue:',
    '    enabled: true',
    'checks:',
    '  - name: test',
    '    run: node check.mjs',
    'review:',
    '  lanes:',
    '    - id: rules',
    '      builtin: rules',
    '',
  ];
  const repo = makeSeededRepo('proofgate-metrics-', { 'README.md': '# metrics\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': config.join('\n') });
  cleanups.push(() => repo.cleanup());
  const data = mkdtempSync(join(tmpdir(), 'proofgate-metrics-data-'));
  cleanups.push(() => rmSync(data, { recursive: true, force: true }));
  repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  // main moves on: the change is behind its base, and `/proofgate rebase` has work to do.
  repo.commit('main', { 'other.txt': 'elsewhere\n' }, 'move main');
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  cleanups.push(() => opened.close());
  expect((await opened.forge.openChange({ head: 'feature', base: 'main', author: 'Casey Contributor' })).id).toBe('1');

  const service: LocalService = await startLocalService({
    repoDir: repo.dir,
    dataDir: data,
    host: '127.0.0.1',
    port: 0,
    http: true,
    logger: pino({ level: 'silent' }),
    pollMs: 50,
    waits: { transientPollMs: 200, shepherdPollMs: 200 },
  });
  cleanups.push(() => service.stop(0));
  const url = service.url ?? '';
  const before = await scrape(url);
  expect(valueOf(before, 'proofgate_merges_total', { outcome: 'merged' })).toBe(0);
  expect((await fetch(`${url}/metrics`, { method: 'POST', body: '' })).status).toBe(405);
  expect((await fetch(`${url}/webhooks`, { method: 'POST', body: '{}' })).status).toBe(404);

  // Posted the way another process does; the service routes it.
  await opened.forge.commentAs('1', '/proofgate rebase\n/proofgate automerge', MAINTAINER);
  const families = await scrapeUntil(
    url,
    (scraped) => valueOf(scraped, 'proofgate_merges_total', { outcome: 'merged' }) === 1 && valueOf(scraped, 'proofgate_change_loops_running') === 0,
    'change 1 was not merged, or its loop did not end',
  );
  await service.stop(0);

  // What the ledger holds, read after the service stopped.
  const automerge = await openLocalAutomerge({ forge: opened.forge, dataDir: data });
  const ledger = await automerge.env.store.load('1').finally(() => automerge.close());
  expect(ledger.state.merged).not.toBeNull();
  const verdicts = ledger.steps.filter((s) => s.step === 'review-verdict').map((s) => s.verdict);
  const failedReviews = ledger.steps.filter((s) => s.step === 'review-failed').length;
  expect(verdicts.length).toBeGreaterThanOrEqual(1);
  for (const verdict of ['CONFIRMED', 'REFUTED', 'HOLD']) {
    expect(valueOf(families, 'proofgate_reviews_total', { verdict }), verdict).toBe(verdicts.filter((v) => v === verdict).length);
  }
  expect(valueOf(families, 'proofgate_reviews_total', { verdict: 'failed' })).toBe(failedReviews);
  expect(valueOf(families, 'proofgate_review_duration_seconds')).toBe(verdicts.length + failedReviews);
  expect(ledger.state.repairs.map((r) => [r.repair, r.status])).toEqual([['rebase', 'pushed']]);
  expect(valueOf(families, 'proofgate_repairs_total', { kind: 'rebase', outcome: 'pushed' })).toBe(1);
  expect(family(families, 'proofgate_repairs_total', 'COUNTER').metrics.reduce((sum, s) => sum + Number(s.value), 0)).toBe(1);
  expect(valueOf(families, 'proofgate_merges_total', { outcome: 'merged' })).toBe(1);
  expect(repo.sha('main')).toBe(ledger.state.merged?.mergeCommit);
  // The queue's families, from its stream in the store: one candidate of one change, passed and landed.
  expect(valueOf(families, 'proofgate_merge_queue_length', { base: 'main' })).toBe(0);
  expect(valueOf(families, 'proofgate_merge_queue_candidates_total', { outcome: 'passed' })).toBe(1);
  expect(valueOf(families, 'proofgate_merge_queue_candidates_total', { outcome: 'failed' })).toBe(0);
  expect(valueOf(families, 'proofgate_merge_queue_candidate_changes')).toBe(1);
  expect(valueOf(families, 'proofgate_merge_queue_time_in_queue_seconds', { outcome: 'landed' })).toBe(1);

  for (const name of ['proofgate_webhook_deliveries_total', 'proofgate_jobs_queued', 'proofgate_job_duration_seconds', 'proofgate_github_requests_total']) {
    expect(families.has(name), name).toBe(false);
  }
  family(families, 'process_resident_memory_bytes', 'GAUGE');
  expect(labelsOf(families).some(([, value]) => value.includes('feature') || /^\d+$/.test(value))).toBe(false);
});

it('a GitHub client hook: route templates (never a filled URL), statuses, no answer, and the rate limit left by installation and resource', async () => {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const found = path === '/repos/octo/demo/pulls/7';
    res.writeHead(found ? 200 : 404, {
      'content-type': 'application/json',
      'x-ratelimit-remaining': found ? '4999' : '4998',
      'x-ratelimit-resource': found ? 'core' : 'a resource "GitHub" has not named',
    });
    res.end(JSON.stringify(found ? { number: 7 } : { message: 'Not Found' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const metrics = createServiceMetrics({ github: true, processMetrics: false });
  const client = (baseUrl: string) =>
    createGitHubClient({
      auth: { kind: 'token', token: 'test-token' },
      baseUrl,
      retry: { retries: 0 },
      observe: (observation) => metrics.githubRequest(observation, 77),
    });

  const github = client(base);
  expect((await github.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: 'octo', repo: 'demo', pull_number: 7 })).status).toBe(200);
  await expect(github.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: 'octo', repo: 'demo', pull_number: 8 })).rejects.toMatchObject({
    status: 404,
  });
  // A caller that fills the URL itself gets no label of its own.
  await expect(github.request('GET /repos/octo/demo/pulls/9')).rejects.toMatchObject({ status: 404 });
  // Nothing listens here: no answer.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const closedPort = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  await expect(client(`http://127.0.0.1:${closedPort}`).request('GET /app')).rejects.toBeDefined();

  const families = parseFamilies(await metrics.render());
  expect(families.get('proofgate_github_requests_total')?.metrics.map((s) => ({ ...s.labels, value: Number(s.value) }))).toEqual([
    { operation: 'GET /repos/{owner}/{repo}/pulls/{pull_number}', status: '200', value: 1 },
    { operation: 'GET /repos/{owner}/{repo}/pulls/{pull_number}', status: '404', value: 1 },
    { operation: 'other', status: '404', value: 1 },
    { operation: 'GET /app', status: 'none', value: 1 },
  ]);
  expect(families.get('proofgate_github_rate_limit_remaining')?.metrics.map((s) => ({ ...s.labels, value: Number(s.value) }))).toEqual([
    { installation: '77', resource: 'core', value: 4999 },
    { installation: '77', resource: 'other', value: 4998 },
  ]);
  // Only proofgate's families: the process metrics were left off.
  expect([...families.keys()].every((name) => name.startsWith('proofgate_'))).toBe(true);
});

/** Jobs in every state: alpha due and alpha scheduled (no handler takes alpha), beta failed for good, gamma running until released. */
async function checkCounts(queue: JobQueue): Promise<void> {
  await queue.add({ task: 'alpha', queue: 'q-a1', key: 'a1', payload: {} });
  await queue.add({ task: 'alpha', queue: 'q-a2', key: 'a2', payload: {}, runAt: new Date(Date.now() + 3_600_000) });
  await queue.add({ task: 'beta', queue: 'q-b', key: 'b1', payload: {}, maxAttempts: 1 });
  await queue.add({ task: 'gamma', queue: 'q-g', key: 'g1', payload: {} });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const events: JobEvent[] = [];
  const runner = await queue.run({
    handlers: {
      beta: () => Promise.reject(new Error('beta fails')),
      gamma: (job) => Promise.race([released, new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve()))]),
    },
    concurrency: 2,
    pollMs: 20,
    observe: (event) => events.push(event),
  });
  try {
    await until(
      () => events.some((e) => e.kind === 'failed' && e.final) && events.some((e) => e.kind === 'started' && e.job.task === 'gamma'),
      'beta did not fail or gamma did not start',
    );
    expect(await queue.counts()).toEqual([
      { task: 'alpha', due: 1, scheduled: 1, running: 0, failed: 0 },
      { task: 'beta', due: 0, scheduled: 0, running: 0, failed: 1 },
      { task: 'gamma', due: 0, scheduled: 0, running: 1, failed: 0 },
    ]);
    release();
    await until(() => events.some((e) => e.kind === 'completed' && e.job.task === 'gamma'), 'gamma did not complete');
    expect((await queue.counts()).map((c) => c.task)).toEqual(['alpha', 'beta']);
  } finally {
    release();
    await runner.stop(0);
  }
}

it('JobQueue.counts on the SQLite queue: due, scheduled, running and failed jobs by task', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-metrics-jobs-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const queue = createSqliteJobQueue({ path: dir });
  cleanups.push(() => queue.close());
  await checkCounts(queue);
});

describePostgres('JobQueue.counts on PostgreSQL', (url) => {
  it('due, scheduled, running and failed jobs by task', async () => {
    const schema = `metrics_test_${process.pid}_${randomBytes(4).toString('hex')}`;
    cleanups.push(async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => client.end());
    });
    const queue = await createPostgresJobQueue({ connectionString: url, schema });
    cleanups.push(() => queue.close());
    await checkCounts(queue);
  });
});

it('the merge queues: length per base, time in queue by outcome, candidate sizes, candidates by outcome and bisections, from the store, read by a Prometheus parser', async () => {
  const scenario = await queueScenario();
  cleanups.push(scenario.cleanup);
  const events = scenario.fixture.automerge.env.store.events;
  const metrics = createServiceMetrics({ processMetrics: false, mergeQueue: { events } });
  const waiting = parseFamilies(await metrics.render());
  family(waiting, 'proofgate_merge_queue_length', 'GAUGE');
  expect(valueOf(waiting, 'proofgate_merge_queue_length', { base: 'main' })).toBe(3);
  family(waiting, 'proofgate_merge_queue_time_in_queue_seconds', 'HISTOGRAM');
  family(waiting, 'proofgate_merge_queue_candidate_changes', 'HISTOGRAM');
  expect(valueOf(waiting, 'proofgate_merge_queue_bisections_total')).toBe(0);
  expect(valueOf(waiting, 'proofgate_merge_queue_candidates_total', { outcome: 'passed' })).toBe(0);

  await scenario.release();
  const ended = parseFamilies(await metrics.render());
  expect(valueOf(ended, 'proofgate_merge_queue_length', { base: 'main' })).toBe(0);
  // One candidate of three failed and was bisected; the first two passed together and landed; the third failed alone and was ejected.
  expect(valueOf(ended, 'proofgate_merge_queue_bisections_total')).toBe(1);
  expect(valueOf(ended, 'proofgate_merge_queue_candidates_total', { outcome: 'passed' })).toBe(1);
  expect(valueOf(ended, 'proofgate_merge_queue_candidates_total', { outcome: 'failed' })).toBe(2);
  const sizes = family(ended, 'proofgate_merge_queue_candidate_changes', 'HISTOGRAM').metrics[0];
  expect(sizes?.count).toBe('3');
  expect(Number(sizes?.sum)).toBe(3 + 2 + 1);
  expect(sizes?.buckets).toMatchObject({ '1': '1', '2': '2', '3': '3', '4': '3' });
  const times = histogramCounts(ended, 'proofgate_merge_queue_time_in_queue_seconds');
  const count = (outcome: string): number => Number(times.find((sample) => sameLabels(sample, { outcome }))?.value);
  expect([count('landed'), count('ejected'), count('removed')]).toEqual([2, 1, 0]);

  // Another service reading the same store (another process, say) from the start counts the same.
  const other = parseFamilies(await createServiceMetrics({ processMetrics: false, mergeQueue: { events } }).render());
  for (const name of ['proofgate_merge_queue_bisections_total', 'proofgate_merge_queue_candidates_total', 'proofgate_merge_queue_length']) {
    expect(other.get(name)?.metrics).toEqual(ended.get(name)?.metrics);
  }
  // A scrape with nothing new counts nothing twice.
  const again = parseFamilies(await metrics.render());
  expect(valueOf(again, 'proofgate_merge_queue_candidates_total', { outcome: 'failed' })).toBe(2);
  expect(labelsOf(again).filter(([name]) => name === 'base')).toEqual([['base', 'main']]);
});
