/**
 * The GitHub App service's dashboard and read API: signed deliveries drive
 * the service against the GitHub API test server until one pull request
 * merges and another is blocked; the board, a timeline and the summary are
 * then read over HTTP, under the same access rules as `serve --repo`.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CHANGES_NAMESPACE, changeFactsOf, githubChangeId, recordChangeFacts, type ChangeFactsRecord } from '../../src/service/github/changes.js';
import { changeIdOf } from '../../src/service/projection.js';
import { composeMarkedBody, type ReviewVerdictFields } from '../../src/automerge/markers.js';
import type { ChangeSnapshot, ForgeComment } from '../../src/forge/port.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { loadPg } from '../../src/storage/postgres/index.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { BOT, INSTALLATION_ID, WEBHOOK_SECRET, startServiceHarness, type ServiceHarness } from './github-service-support.js';
import { repositoryPayload, issueCommentPayload, pullRequestPayload } from '../support/github-server/index.js';
import { describePostgres } from '../support/postgres.js';
import { until } from '../support/wait.js';
import { runCliAsync } from '../cli/helpers.js';

let harness: ServiceHarness | null = null;
/** Closed before the harness (a second service, a store opened by the test). */
const closers: (() => Promise<void>)[] = [];
/** Run after the harness is cleaned up (a database dropped, a directory removed). */
const finals: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await harness?.cleanup();
  harness = null;
  for (const final of finals.splice(0).reverse()) await final();
});

interface Got {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Record<string, unknown>;
  readonly text: string;
}

/** A GET with exactly these headers (fetch would set its own Host). */
function rawGet(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

function rawPost(url: string, headers: Record<string, string>, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Got> {
  const response = await fetch(url, { headers });
  const text = await response.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // a dashboard file
  }
  return { status: response.status, headers: response.headers, body, text };
}

interface Row {
  id: string;
  repo: string;
  number: number;
  title: string;
  stage: string;
  stageDetail: string | null;
  head: string;
  author: string;
  state: string;
  mergeCommit: string | null;
}
interface Item {
  kind: string;
  at: string;
  text: string;
  actor?: string;
  bindings?: { head: string; diff: string; contract: string; config: string } | null;
  commit?: string;
}

const changesOf = async (url: string, query = '', headers: Record<string, string> = {}): Promise<Row[]> =>
  ((await get(`${url}/api/changes${query}`, headers)).body.changes as Row[] | undefined) ?? [];

/** The model's repository as the service names it. */
const repoName = (h: ServiceHarness): string => `${h.server.model.owner}/${h.server.model.repo}`;

/** Drive one pull request to a merge and one to a block (a fork that needs a rebase); returns their numbers. */
async function mergedAndBlocked(h: ServiceHarness): Promise<{ merged: number; blocked: number; head: string }> {
  await until(() => h.events.some((e) => e.kind === 'completed' && e.job.task === 'repository'), 'the start pass did not run');
  const one = h.openPullRequest('feature');
  await h.comment(one.number, '/proofgate automerge');
  await until(async () => h.service.runningLoops() === 0 && (await h.service.queue.list()).some((job) => job.task === 'resume'), 'the change did not park');
  await h.completeCheck(one.number, one.runId);
  await until(() => h.server.model.pull(one.number).merged, 'the pull request was not merged');
  const two = h.openPullRequest('forked', { crossRepository: true });
  h.server.model.setMergeable(two.number, 'MERGEABLE', 'BEHIND');
  await h.completeCheck(two.number, two.runId);
  await h.comment(two.number, '/proofgate automerge');
  await until(() => h.server.model.commentsOf(two.number).some((c) => c.author === BOT && c.body.includes('fork-no-repair')), 'the fork was not blocked');
  return { merged: one.number, blocked: two.number, head: one.head };
}

describe('change facts and ids (pure)', () => {
  const SECRET = 'marker-secret-of-the-test';
  const HEAD = 'c'.repeat(40);
  const fields: ReviewVerdictFields = {
    kind: 'review-verdict',
    change: '7',
    head: HEAD,
    verdict: 'CONFIRMED',
    findings: 0,
    review: 'rev-1',
    at: '2026-01-01T00:00:00.000Z',
    diff: `sha256:${'d'.repeat(64)}`,
    contract: `sha256:${'e'.repeat(64)}`,
    config: `sha256:${'f'.repeat(64)}`,
    run: null,
  };
  const comment = (id: string, author: string, body: string): ForgeComment => ({
    id,
    author,
    authorType: author === BOT ? 'Bot' : 'User',
    body,
    createdAt: fields.at,
    updatedAt: fields.at,
  });
  const snapshot = (comments: ForgeComment[], title = 'A title'): ChangeSnapshot =>
    ({
      id: '7',
      number: 7,
      title,
      state: 'open',
      draft: false,
      base: { ref: 'main', sha: 'a'.repeat(40) },
      head: { ref: 'feature', sha: HEAD },
      author: { login: 'casey' },
      checks: [],
      comments,
      mergeCommitSha: null,
    }) as unknown as ChangeSnapshot;

  it("keeps the bindings of proofgate's own signed verdict markers only: a copy in someone else's comment, or one signed with another secret, counts for nothing", () => {
    const signed = composeMarkedBody('verdict', [fields], SECRET);
    const facts = changeFactsOf('Acme/Widgets', snapshot([comment('1', BOT, signed)]), { selfLogin: BOT, secret: SECRET });
    expect(facts.verdicts).toEqual([{ review: 'rev-1', head: HEAD, diff: fields.diff, contract: fields.contract, config: fields.config }]);
    const copied = changeFactsOf('Acme/Widgets', snapshot([comment('2', 'mallory', signed)]), { selfLogin: BOT, secret: SECRET });
    expect(copied.verdicts).toEqual([]);
    const forged = composeMarkedBody('verdict', [{ ...fields, review: 'rev-2' }], 'another secret of sixteen bytes');
    expect(changeFactsOf('Acme/Widgets', snapshot([comment('3', BOT, forged)]), { selfLogin: BOT, secret: SECRET }).verdicts).toEqual([]);
  });

  it('cuts a long title (never inside a surrogate pair) and keeps markup as it is', () => {
    const long = `${'x'.repeat(998)}😀tail`;
    const facts = changeFactsOf('Acme/Widgets', snapshot([], long), { selfLogin: BOT, secret: SECRET });
    expect(facts.title.length).toBeLessThanOrEqual(1000);
    expect(facts.title.endsWith('…')).toBe(true);
    expect(facts.title).not.toContain('\uD83D…');
    expect(changeFactsOf('a/b', snapshot([], '<b>x</b>'), { selfLogin: BOT, secret: SECRET }).title).toBe('<b>x</b>');
  });

  it.each([
    ['12', '12'],
    [encodeURIComponent(githubChangeId('Acme/Widgets', 12)), 'acme/widgets#12'],
    ['%31', null],
    ['acme%2fwidgets%2312', null],
    ['%E0%A4%A', null],
    [encodeURIComponent('a\u0000b'), null],
    ['x'.repeat(201), null],
    ['', null],
  ])('the path segment %s names %s', (segment, id) => {
    expect(changeIdOf(segment)).toBe(id);
  });
});

describe('the GitHub service serves the dashboard and the read API', () => {
  it('lists a merged and a blocked pull request with their stage and repository; a timeline in order with the bindings; the summary counts them', async () => {
    const h = (harness = await startServiceHarness());
    const url = h.service.url as string;
    const { merged, blocked, head } = await mergedAndBlocked(h);
    const repo = repoName(h);
    const mergedId = `${repo.toLowerCase()}#${merged}`;
    const blockedId = `${repo.toLowerCase()}#${blocked}`;
    await until(async () => {
      const rows = await changesOf(url);
      return rows.some((r) => r.id === mergedId && r.stage === 'merged') && rows.some((r) => r.id === blockedId && r.stage === 'blocked');
    }, 'the board did not show the merge and the block');
    const page = await get(`${url}/api/changes`);
    expect(page.status).toBe(200);
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.body.repos).toEqual([repo]);
    const rows = page.body.changes as Row[];
    expect(rows.map((r) => r.id)).toEqual([blockedId, mergedId]);
    const mergedRow = rows.find((r) => r.id === mergedId) as Row;
    expect(mergedRow).toMatchObject({ repo, number: merged, title: 'Add feature', state: 'merged', head: 'feature', author: 'casey' });
    expect(mergedRow.mergeCommit).toBe(h.server.model.pull(merged).mergeCommitSha);
    expect(rows.find((r) => r.id === blockedId)?.stageDetail).toContain("a fork's branch, which proofgate never pushes to");

    // One change by its id, percent-encoded as the dashboard sends it.
    const one = await get(`${url}/api/changes/${encodeURIComponent(mergedId)}`);
    expect(one.status).toBe(200);
    expect((one.body.change as Row).id).toBe(mergedId);

    const timeline = await get(`${url}/api/changes/${encodeURIComponent(mergedId)}/timeline`);
    expect(timeline.status).toBe(200);
    const items = timeline.body.timeline as Item[];
    const index = (kind: string): number => items.findIndex((item) => item.kind === kind);
    // Opened when proofgate first heard of it (the command), then the command, the review, the verdict, the merge.
    expect(items[0]).toMatchObject({ kind: 'opened', text: 'opened feature onto main', actor: 'casey' });
    expect(items.find((item) => item.kind === 'command')).toMatchObject({ text: '/proofgate automerge', actor: 'maint' });
    expect(index('command')).toBeLessThan(index('review'));
    expect(index('review')).toBeLessThan(index('verdict'));
    expect(index('verdict')).toBeLessThan(index('merged'));
    const verdict = items[index('verdict')] as Item;
    expect(verdict.text).toContain('CONFIRMED');
    expect(verdict.bindings).toMatchObject({ head, diff: expect.stringMatching(/^sha256:/), contract: expect.stringMatching(/^sha256:/) });
    expect(items[index('merged')]?.commit).toBe(h.server.model.pull(merged).mergeCommitSha);
    const times = items.map((item) => Date.parse(item.at));
    expect([...times].sort((a, b) => a - b)).toEqual(times);

    const summary = await get(`${url}/api/summary`);
    expect(summary.status).toBe(200);
    expect((summary.body.stages as Record<string, number>).merged).toBe(1);
    expect((summary.body.stages as Record<string, number>).blocked).toBe(1);
    expect((summary.body.mergeLeadTime as { count: number[] }).count).toEqual([1]);
    expect((summary.body.reviewDuration as { at: number[] }).at.length).toBeGreaterThanOrEqual(1);

    // The dashboard's page, as `serve --repo` answers it.
    const page0 = await get(`${url}/`);
    expect(page0.status).toBe(200);
    expect(page0.headers.get('content-security-policy')).toBe("default-src 'self'");
    expect(page0.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page0.text).toContain('<script type="module" src="/assets/app.js"></script>');
    expect((await get(`${url}/assets/board.js`)).status).toBe(200);
    expect((await get(`${url}/assets/../index.html`)).status).toBe(404);

    // The job metrics and the health routes are where they were.
    expect((await get(`${url}/healthz`)).status).toBe(200);
    expect((await get(`${url}/metrics`)).status).toBe(200);
  });
});

describe('access rules', () => {
  it('off loopback a read needs a token of the store (`proofgate token create --data`): none is 401, a read token reads, a revoked one is 401; a write is a typed refusal', async () => {
    const h = (harness = await startServiceHarness({ host: '0.0.0.0' }));
    const port = new URL(h.service.url as string).port;
    const url = `http://127.0.0.1:${port}`;
    // The token is made as an operator makes it: `proofgate token create --data DIR`, the service's data directory.
    const data = join(h.root, 'data');
    const created = await runCliAsync(['token', 'create', 'watcher', '--data', data, '--json']);
    expect(created.status).toBe(0);
    const { token } = JSON.parse(created.stdout) as { token: string };

    for (const path of ['/api/changes', '/api/summary', '/']) {
      const bare = await get(`${url}${path}`);
      expect(bare.status).toBe(401);
      expect(bare.headers.get('www-authenticate')).toContain('Bearer');
    }
    const auth = { authorization: `Bearer ${token}` };
    expect((await get(`${url}/api/changes`, auth)).status).toBe(200);
    expect((await get(`${url}/`, auth)).status).toBe(200);
    expect((await get(`${url}/api/changes`, { authorization: `Bearer pgt_${'A'.repeat(43)}` })).status).toBe(401);

    // Writes stay with a local repository's service: a typed refusal, with a token or without, nothing read.
    for (const headers of [auth, {}]) {
      const write = await fetch(`${url}/api/changes`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ head: 'feature', title: 'sneaky' }),
      });
      expect(write.status).toBe(405);
      expect(await write.json()).toEqual({ error: expect.stringContaining('read-only') as unknown, code: 'READ_ONLY' });
    }

    expect((await runCliAsync(['token', 'revoke', 'watcher', '--data', data])).status).toBe(0);
    expect((await get(`${url}/api/changes`, auth)).status).toBe(401);
    // Deliveries are not under the read rule: a signed ping is answered.
    const ping = await h.send('ping', { zen: 'Keep it logically awesome.', hook_id: 1, hook: {} });
    expect(ping.status).toBe(200);
  });

  it("a foreign Host header is 421 and another site's page is 403 on the reads; a signed delivery under a proxy's Host is taken", async () => {
    const h = (harness = await startServiceHarness());
    const url = h.service.url as string;
    const port = new URL(url).port;
    for (const path of ['/', '/api/changes', '/api/summary', '/assets/app.js']) {
      expect(await rawGet(`${url}${path}`, { host: `evil.example:${port}` })).toBe(421);
      expect(await rawGet(`${url}${path}`, { host: `127.0.0.1.evil.example:${port}` })).toBe(421);
      expect((await get(`${url}${path}`, { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' })).status).toBe(403);
    }
    expect(await rawGet(`${url}/api/changes`, { host: `localhost:${port}` })).toBe(200);
    // GitHub's deliveries arrive through a proxy under the public name: they are signed, and not under the Host check.
    const body = JSON.stringify({ zen: 'Design for failure.', hook_id: 2, hook: {}, installation: { id: INSTALLATION_ID } });
    const ping = await rawPost(
      `${url}/webhooks`,
      {
        host: 'proofgate.example.org',
        'content-type': 'application/json',
        'x-github-event': 'ping',
        'x-github-delivery': randomUUID(),
        'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`,
      },
      body,
    );
    expect(ping).toBe(200);
  });
});

describe('deliveries about a recorded change', () => {
  it('a push and a close by hand reach the board at once, though no job looks at the change', async () => {
    const h = (harness = await startServiceHarness());
    const url = h.service.url as string;
    const { number } = h.openPullRequest('feature');
    await h.comment(number, '/proofgate status');
    const id = `${repoName(h).toLowerCase()}#${number}`;
    await until(async () => (await changesOf(url)).some((r) => r.id === id && r.state === 'open'), 'the change did not reach the board');
    // The model moves as GitHub would (a snapshot a job takes meanwhile says the same as the delivery).
    const before = h.server.model.headSha(number);
    const pushed = h.server.model.pushHead(number);
    const closed = pullRequestPayload(h.server.model, number, 'closed');
    const pull = closed.pull_request as Record<string, Record<string, unknown>>;
    expect((await h.send('pull_request', { ...closed, action: 'synchronize', pull_request: { ...pull, head: { ...pull.head, sha: pushed } } })).status).toBe(
      202,
    );
    await until(
      async () => (await changesOf(url)).some((r) => r.id === id && (r as Row & { headSha: string }).headSha === pushed),
      'the push did not reach the board',
    );
    const items = (await get(`${url}/api/changes/${encodeURIComponent(id)}/timeline`)).body.timeline as Item[];
    expect(items.filter((item) => item.kind === 'push').map((item) => item.text)).toEqual([`pushed ${pushed.slice(0, 12)} over ${before.slice(0, 12)}`]);
    h.server.model.closePullRequest(number);
    expect((await h.send('pull_request', pullRequestPayload(h.server.model, number, 'closed'))).status).toBe(202);
    await until(
      async () => (await changesOf(url)).some((r) => r.id === id && r.stage === 'closed' && r.state === 'closed'),
      'the close did not reach the board',
    );
    // A delivery about a change never recorded records nothing.
    const other = h.openPullRequest('other');
    h.server.model.closePullRequest(other.number);
    expect((await h.send('pull_request', pullRequestPayload(h.server.model, other.number, 'closed'))).status).toBe(202);
    await until(
      () =>
        h.events.some((e) => e.kind === 'completed' && e.job.task === 'resume' && (e.job.payload as { changeId?: string }).changeId === String(other.number)),
      'the close was not worked',
    );
    expect((await changesOf(url)).map((r) => r.id)).toEqual([id]);
  });
});

describe('attacks on the board', () => {
  it('a title of HTML, markdown and a right-to-left override and a branch name of markup are stored and served as text, as written', async () => {
    const h = (harness = await startServiceHarness());
    const url = h.service.url as string;
    const branch = "fix/<img>&amp;'x'";
    const { number } = h.openPullRequest(branch);
    const title = '<img src=x onerror="alert(1)"> **bold** [link](javascript:alert(2)) \u202Eevil';
    h.server.model.pull(number).title = title;
    await h.comment(number, '/proofgate status');
    const id = `${repoName(h).toLowerCase()}#${number}`;
    await until(async () => (await changesOf(url)).some((r) => r.id === id), 'the change did not reach the board');
    const answer = await get(`${url}/api/changes`);
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const row = (answer.body.changes as Row[]).find((r) => r.id === id) as Row;
    expect(row.title).toBe(title);
    expect(row.head).toBe(branch);
    // JSON strings only: the raw answer holds the markup escaped nowhere else than inside a string.
    expect(answer.text).toContain(JSON.stringify(title).slice(1, -1));
    const items = (await get(`${url}/api/changes/${encodeURIComponent(id)}/timeline`)).body.timeline as Item[];
    expect(items.find((item) => item.kind === 'opened')).toMatchObject({ kind: 'opened', text: `opened ${branch} onto main` });
  });

  it('a delivery for a repository the App is not installed on puts nothing on the board', async () => {
    const h = (harness = await startServiceHarness());
    const url = h.service.url as string;
    const { number } = h.openPullRequest('feature');
    const model = h.server.model;
    const created = model.addComment(number, 'maint', '/proofgate automerge');
    const stranger = { ...repositoryPayload('stranger', 'elsewhere'), full_name: 'stranger/elsewhere' };
    const payload = { ...issueCommentPayload(h.server.url, 'stranger/elsewhere', number, { ...created, author: 'maint' }, '/proofgate automerge') };
    const body = JSON.stringify({ ...payload, repository: stranger, installation: { id: INSTALLATION_ID } });
    const sent = await fetch(`${url}/webhooks`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issue_comment',
        'x-github-delivery': randomUUID(),
        'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`,
      },
      body,
    });
    expect(sent.status).toBe(202);
    await until(() => h.events.some((e) => e.kind === 'failed' && e.job.task === 'comment'), 'the stranger job did not fail');
    // A later change of the real repository reaches the board; the stranger's never does.
    await h.comment(number, '/proofgate status');
    await until(async () => (await changesOf(url)).length > 0, 'nothing reached the board');
    const answer = await get(`${url}/api/changes`);
    expect(answer.body.repos).toEqual([repoName(h)]);
    expect((answer.body.changes as Row[]).map((r) => r.repo)).toEqual([repoName(h)]);
    expect((await get(`${url}/api/changes/${encodeURIComponent(`stranger/elsewhere#${number}`)}/timeline`)).status).toBe(404);
  });

  it('pull request 1 of two repositories is two changes, each under its repository; filters with SQL in them match nothing; pages end', async () => {
    const h = (harness = await startServiceHarness());
    const url = h.service.url as string;
    const { number } = h.openPullRequest('feature');
    await h.comment(number, '/proofgate status');
    const id = `${repoName(h).toLowerCase()}#${number}`;
    await until(async () => (await changesOf(url)).some((r) => r.id === id), 'the change did not reach the board');
    // Another repository's pull request of the same number, recorded as a job of another process would record it.
    const storage = createLocalRunStorage({ directory: join(h.root, 'data'), namespace: CHANGES_NAMESPACE, policy: defaultStoragePolicy });
    closers.push(() => storage.close());
    const other: ChangeFactsRecord = {
      repository: 'Other-Org/Widgets',
      number,
      title: 'the other one',
      author: 'dana',
      base: 'main',
      head: 'feature',
      headSha: 'b'.repeat(40),
      state: 'open',
      mergeCommit: null,
      checks: [],
      verdicts: [],
    };
    await recordChangeFacts(storage.eventStore, other);
    // The same facts again are not a second record.
    expect(await recordChangeFacts(storage.eventStore, other)).toBe(false);
    const otherId = `other-org/widgets#${number}`;
    await until(async () => (await changesOf(url)).length === 2, 'the second repository did not reach the board');
    const all = await get(`${url}/api/changes`);
    expect((all.body.changes as Row[]).map((r) => [r.id, r.number, r.repo])).toEqual([
      [otherId, number, 'Other-Org/Widgets'],
      [id, number, repoName(h)],
    ]);
    expect(all.body.repos).toEqual(['Other-Org/Widgets', repoName(h)].sort());
    expect((await changesOf(url, `?repo=${encodeURIComponent('Other-Org/Widgets')}`)).map((r) => r.title)).toEqual(['the other one']);
    expect((await changesOf(url, `?repo=${encodeURIComponent(repoName(h))}`)).map((r) => r.id)).toEqual([id]);
    expect(((await get(`${url}/api/changes/${encodeURIComponent(otherId)}/timeline`)).body.change as Row).title).toBe('the other one');

    // SQL in query values is a value: no rows, or a typed 400.
    for (const repo of ["' OR 1=1 --", '%', '"); DROP TABLE proofgate_projection_changes; --']) {
      const answer = await get(`${url}/api/changes?repo=${encodeURIComponent(repo)}`);
      expect(answer.status).toBe(200);
      expect(answer.body.changes).toEqual([]);
    }
    for (const query of ["stage=merged' OR '1'='1", 'limit=1;DROP', 'cursor=1 OR 1=1', 'limit=0', 'limit=1001', 'stage=merged&stage=blocked']) {
      const answer = await get(`${url}/api/changes?${query}`);
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('INVALID_INPUT');
    }
    expect((await changesOf(url)).length).toBe(2);

    // Paging: one row a page, then the end; a cursor past the end is an empty last page.
    const first = await get(`${url}/api/changes?limit=1`);
    expect((first.body.changes as Row[]).map((r) => r.id)).toEqual([otherId]);
    const second = await get(`${url}/api/changes?limit=1&cursor=${String(first.body.nextCursor)}`);
    expect((second.body.changes as Row[]).map((r) => r.id)).toEqual([id]);
    expect(second.body.nextCursor).toBeNull();
    const beyond = await get(`${url}/api/changes?limit=5&cursor=1`);
    expect(beyond.status).toBe(200);
    expect(beyond.body).toMatchObject({ changes: [], nextCursor: null });
    // Ids that name nothing: 404, never an error.
    for (const bad of [
      '%E0%A4%A',
      encodeURIComponent('x'.repeat(300)),
      encodeURIComponent("' OR 1=1 --"),
      encodeURIComponent(`${id}\u0000`),
      encodeURIComponent(id).toLowerCase(),
    ]) {
      expect((await get(`${url}/api/changes/${bad}/timeline`)).status).toBe(404);
      expect((await get(`${url}/api/changes/${bad}`)).status).toBe(404);
    }
  });
});

describe('several processes on one store', () => {
  it('a second service on the same data directory shows the changes the first one handled, and the first shows what the second handles', async () => {
    const h = (harness = await startServiceHarness());
    const first = h.service;
    const one = h.openPullRequest('feature');
    await h.comment(one.number, '/proofgate status');
    const oneId = `${repoName(h).toLowerCase()}#${one.number}`;
    await until(async () => (await changesOf(first.url as string)).some((r) => r.id === oneId), 'the first service did not show its change');
    const second = await h.restart();
    closers.push(() => first.stop(0));
    expect((await changesOf(second.url as string)).map((r) => r.id)).toEqual([oneId]);
    // Deliveries now go to the second service; the first follows the store.
    const two = h.openPullRequest('other');
    await h.comment(two.number, '/proofgate status');
    const twoId = `${repoName(h).toLowerCase()}#${two.number}`;
    await until(async () => (await changesOf(first.url as string)).some((r) => r.id === twoId), 'the first service did not show the change the second handled');
  });
});

/** A database of its own for one test (dropped after the harness, with its work folder), and an admin connection to the server. */
async function scratchDatabase(databaseUrl: string): Promise<{ url: string; work: string; database: string; admin: import('pg').Client }> {
  const pg = loadPg();
  const database = `proofgate_board_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const parsed = new URL(databaseUrl);
  parsed.pathname = `/${database}`;
  finals.push(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });
  const work = mkdtempSync(join(tmpdir(), 'proofgate-board-pg-'));
  finals.push(async () => rmSync(work, { recursive: true, force: true }));
  return { url: parsed.toString(), work, database, admin };
}

describePostgres('the GitHub service on PostgreSQL', (databaseUrl) => {
  it('two services on one database each show the change the other handled', async () => {
    const { url, work } = await scratchDatabase(databaseUrl);
    const storageOf = () => ({ kind: 'postgres' as const, url, workDir: join(work, randomUUID()) });
    harness = await startServiceHarness({ storage: storageOf() });
    const first = harness.service;
    const one = harness.openPullRequest('feature');
    await harness.comment(one.number, '/proofgate status');
    const oneId = `${repoName(harness).toLowerCase()}#${one.number}`;
    await until(async () => (await changesOf(first.url as string)).some((r) => r.id === oneId), 'the first service did not show its change');
    const second = await harness.restart({ storage: storageOf() });
    closers.push(() => first.stop(0));
    expect((await changesOf(second.url as string)).map((r) => r.id)).toEqual([oneId]);
    const two = harness.openPullRequest('other');
    await harness.comment(two.number, '/proofgate status');
    const twoId = `${repoName(harness).toLowerCase()}#${two.number}`;
    await until(async () => (await changesOf(first.url as string)).some((r) => r.id === twoId), 'the first service did not show the change the second handled');
    // Tokens come from the database's identities, made and revoked by `proofgate token ... --database-url`.
    const created = await runCliAsync(['token', 'create', 'watcher', '--database-url', url, '--json']);
    expect(created.status, created.stderr).toBe(0);
    const { token } = JSON.parse(created.stdout) as { token: string };
    // A token given is always checked, on loopback too.
    expect((await get(`${second.url as string}/api/summary`, { authorization: `Bearer ${token}` })).status).toBe(200);
    const mixed = await runCliAsync(['token', 'list', '--database-url', url, '--data', work]);
    expect(mixed.status).toBe(2);
    const revoked = await runCliAsync(['token', 'revoke', 'watcher', '--database-url', url]);
    expect(revoked.status, revoked.stderr).toBe(0);
    expect((await get(`${first.url as string}/api/summary`, { authorization: `Bearer ${token}` })).status).toBe(401);
  });

  it('connections the database server ends (a restart, pg_terminate_backend) do not end the service; it answers again', async () => {
    const { url, work, database, admin } = await scratchDatabase(databaseUrl);
    harness = await startServiceHarness({ storage: { kind: 'postgres', url, workDir: join(work, randomUUID()) } });
    const service = harness.service;
    const one = harness.openPullRequest('feature');
    await harness.comment(one.number, '/proofgate status');
    const oneId = `${repoName(harness).toLowerCase()}#${one.number}`;
    await until(async () => (await changesOf(service.url as string)).some((r) => r.id === oneId), 'the service did not show its change');
    // Every connection of the service to its database, idle ones included, ended by the server.
    const ended = await admin.query('SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = $1', [database]);
    expect(ended.rows.length).toBeGreaterThan(0);
    // The service goes on: a new change is recorded and shown, through new connections.
    const two = harness.openPullRequest('other');
    await harness.comment(two.number, '/proofgate status');
    const twoId = `${repoName(harness).toLowerCase()}#${two.number}`;
    await until(async () => (await changesOf(service.url as string)).some((r) => r.id === twoId), 'the service did not show the new change');
    expect((await get(`${service.url as string}/readyz`)).status).toBe(200);
  });
});
