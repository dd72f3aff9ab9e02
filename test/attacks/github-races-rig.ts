/**
 * The race attacks' rig: one GitHub API test server with a registered App,
 * and in front of it one HTTP proxy per proofgate process, so that every
 * request a process makes is seen (in one numbered order across processes)
 * and any one of them can be held, then let through or dropped. A process
 * is either a service in this test process (`startService`, SQLite, sharing
 * one data directory with the others) or a child process (see
 * github-races-workers.ts, PostgreSQL). Deliveries are signed and sent to the
 * webhook endpoint of the process a test names.
 */
import { execFileSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { LedgerStore, type LoadedLedger, type Reviewer, type StepEvent } from '../../src/automerge/loop/index.js';
import { liveReviewBindings } from '../../src/review/index.js';
import { startGitHubService, type GitHubService, type GitHubServiceOptions } from '../../src/service/index.js';
import type { JobEvent } from '../../src/service/jobs/index.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import {
  checkRunCompletedPayload,
  fixture,
  issueCommentPayload,
  repositoryPayload,
  startGitHubServer,
  type GitHubTestServer,
} from '../support/github-server/index.js';
import { until, within } from '../support/wait.js';
import { makeTempRepo, treeFiles, type TempRepo } from '../forge/git-fixture.js';
import { testKeyPair } from '../support/keys.js';

export const APP_ID = 6161;
export const APP_SLUG = 'proofgate-races';
export const BOT = `${APP_SLUG}[bot]`;
export const INSTALLATION_ID = 93;
export const MAINTAINER = 'maint';
export const WEBHOOK_SECRET = 'webhook-secret-for-the-race-attacks';
export const CONFIG = 'review:\n  lanes:\n    - id: rules\n      builtin: rules\n';
/** Longer than any test: a parked change comes back only when something wakes it. */
export const NEVER_MS = 3_600_000;
/** The repository's ledger namespace (`github:<owner>/<name>`, lower case). */
export const LEDGER_NAMESPACE = 'github:octo-org/demo';

/** One request a process sent to GitHub, as its proxy saw it. */
export interface Seen {
  /** Order across every proxy of the rig. */
  readonly seq: number;
  readonly proxy: string;
  readonly method: string;
  readonly path: string;
  readonly body: string;
  status: number | null;
}

/** A request held by its proxy: `hit` resolves when one matches; then let it through or drop it. */
export interface Hold {
  /** The held request, once one came (bounded wait). */
  hit(): Promise<Seen>;
  release(): void;
  /** Never forward it (its process is dead): the connection is closed. */
  drop(): void;
}

interface Armed {
  readonly match: (seen: Seen) => boolean;
  readonly resolveHit: (seen: Seen) => void;
  readonly gate: Promise<boolean>;
  readonly open: (forward: boolean) => void;
  taken: boolean;
}

export interface Proxy {
  readonly name: string;
  readonly url: string;
}

/** Requests that changed something on GitHub (token minting and GraphQL reads left out). */
export function isWrite(seen: Pick<Seen, 'method' | 'path'>): boolean {
  return seen.method !== 'GET' && !seen.path.endsWith('/access_tokens') && seen.path !== '/graphql';
}

/** Whether `seen` adds `label` to pull request `pr`. */
export function addsLabel(seen: Seen, pr: number, label: string): boolean {
  return seen.method === 'POST' && seen.path === `/repos/octo-org/demo/issues/${pr}/labels` && seen.body.includes(label);
}

/** The comment text a request writes (creates or edits), or null. */
export function commentText(seen: Seen): string | null {
  if ((seen.method !== 'POST' && seen.method !== 'PATCH') || !seen.path.includes('/comments')) return null;
  try {
    const body = (JSON.parse(seen.body) as { body?: unknown }).body;
    return typeof body === 'string' ? body : null;
  } catch {
    return null;
  }
}

/** The review comment of a change: the first line of proofgate's review comment. */
export const REVIEW_HEADLINE = '### proofgate review:';
export const STATUS_HEADLINE = '### proofgate automerge:';

export interface RaceService {
  readonly name: string;
  readonly proxy: Proxy;
  readonly service: GitHubService;
  readonly events: JobEvent[];
  /** The webhook endpoint. */
  readonly url: string;
}

export interface PullRequest {
  readonly number: number;
  readonly head: string;
  readonly runId: number;
}

export interface RaceRig {
  readonly server: GitHubTestServer;
  readonly repo: TempRepo;
  readonly remote: string;
  readonly root: string;
  readonly privateKey: string;
  /** Every request every proxy saw, in order. */
  readonly seen: Seen[];
  readonly services: RaceService[];
  /** Reviewer calls so far: the process that reviewed and the head. */
  readonly reviews: { readonly by: string; readonly head: string }[];
  proxy(name: string): Promise<Proxy>;
  /** Hold the first request (from now on) that matches, at whichever proxy sees it. */
  hold(match: (seen: Seen) => boolean): Hold;
  /** Hold every review (in any process) until the returned release is called. */
  holdReviews(): { reviewing(): Promise<string>; release(): void };
  /** A service in this process on the rig's SQLite data directory, behind a proxy of its own. */
  startService(name: string, extra?: Partial<GitHubServiceOptions>): Promise<RaceService>;
  /** main with the trusted config, then a pull request from `branch` with a `ci` check (`pending` or already green). */
  openPullRequest(branch: string, check: 'pending' | 'success'): PullRequest;
  /** Push a new commit onto the pull request's branch (git and the model), without any delivery; its `ci` check is added green. */
  pushHead(pr: number, files: Record<string, string>): string;
  /** POST a signed delivery to an endpoint (same id and body again: a redelivery). */
  send(url: string, eventName: string, payload: Record<string, unknown>, deliveryId?: string): Promise<{ status: number; deliveryId: string }>;
  /** Add a comment to the model and deliver it to `url`. */
  comment(url: string, pr: number, body: string, author?: string): Promise<{ status: number; deliveryId: string; commentId: number }>;
  /** Complete a check run in the model, then deliver its `check_run.completed` to `url`. */
  completeCheck(url: string, pr: number, runId: number): Promise<{ status: number; deliveryId: string }>;
  checkBody(pr: number, runId: number): Record<string, unknown>;
  pullRequestBody(action: string, pr: number): Record<string, unknown>;
  /** proofgate's own comments on a pull request. */
  botComments(pr: number): { id: number; body: string }[];
  /** A change's ledger as the services keep it (SQLite). */
  ledger(pr: number): Promise<LoadedLedger>;
  /** Every in-process service idle: no job running or due, no loop running. */
  quiet(): Promise<void>;
  cleanup(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function post(url: string, headers: Record<string, string>, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const bytes = Buffer.from(body, 'utf8');
    const req = request(url, { method: 'POST', agent: false, headers: { ...headers, 'content-length': String(bytes.length) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(bytes);
  });
}

/** A gated reviewer: CONFIRMED on the exact live bindings, after any hold the rig has armed. */
function gatedReviewer(rig: { reviews: { by: string; head: string }[]; gate: () => Promise<void> }, by: string): Reviewer {
  return async ({ repoDir, base, head }) => {
    rig.reviews.push({ by, head });
    await rig.gate();
    const live = await liveReviewBindings({ repoDir, base, head });
    return {
      verdict: 'CONFIRMED',
      reasons: [],
      findings: [],
      reviewRef: `races-${by}`,
      bindings: { diff: live.diff, contract: live.contract, config: live.config },
      run: null,
    };
  };
}

export async function startRaceRig(): Promise<RaceRig> {
  const server = await startGitHubServer();
  const { model } = server;
  const keys = testKeyPair();
  server.registerApp({ appId: APP_ID, slug: APP_SLUG, publicKey: keys.publicKey, installationId: INSTALLATION_ID });
  model.setCollaborator(MAINTAINER, 'write');
  const repo = makeTempRepo('proofgate-races-');
  const root = mkdtempSync(join(tmpdir(), 'proofgate-races-state-'));
  const remote = join(root, 'remote.git');
  const privateKey = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const seen: Seen[] = [];
  const armed: Armed[] = [];
  const servers: Server[] = [];
  const services: RaceService[] = [];
  const reviews: { by: string; head: string }[] = [];
  let reviewGate: { wait: Promise<void>; hit: (by: string) => void; release: () => void } | null = null;
  let mainSha: string | null = null;
  const repoPayload = repositoryPayload(model.owner, model.repo, model.repositoryId);
  const installation = { id: INSTALLATION_ID, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uOTM=' };
  let ledger: LedgerStore | null = null;

  const publish = (): void => {
    rmSync(remote, { recursive: true, force: true });
    execFileSync('git', ['clone', '-q', '--bare', repo.dir, remote]);
  };

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer, record: Seen): void => {
    const headers = { ...req.headers, host: new URL(server.url).host };
    const upstream = request(`${server.url}${req.url ?? '/'}`, { method: req.method ?? 'GET', headers, agent: false }, (answer) => {
      record.status = answer.statusCode ?? 0;
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    upstream.end(body);
  };

  const rig: RaceRig = {
    server,
    repo,
    remote,
    root,
    privateKey,
    seen,
    services,
    reviews,
    async proxy(name) {
      const proxyServer = createServer((req, res) => {
        void (async () => {
          const body = await readBody(req);
          const record: Seen = {
            seq: seen.length,
            proxy: name,
            method: req.method ?? 'GET',
            path: new URL(req.url ?? '/', 'http://x').pathname,
            body: body.toString('utf8'),
            status: null,
          };
          seen.push(record);
          const hold = armed.find((a) => !a.taken && a.match(record));
          if (hold !== undefined) {
            hold.taken = true;
            hold.resolveHit(record);
            if (!(await hold.gate)) {
              req.socket.destroy();
              return;
            }
          }
          forward(req, res, body, record);
        })().catch(() => res.destroy());
      });
      servers.push(proxyServer);
      await new Promise<void>((resolve) => proxyServer.listen(0, '127.0.0.1', resolve));
      return { name, url: `http://127.0.0.1:${(proxyServer.address() as AddressInfo).port}` };
    },
    hold(match) {
      let resolveHit: (seen: Seen) => void = () => undefined;
      let open: (forward: boolean) => void = () => undefined;
      const hit = new Promise<Seen>((resolve) => (resolveHit = resolve));
      const gate = new Promise<boolean>((resolve) => (open = resolve));
      armed.push({ match, resolveHit, gate, open, taken: false });
      return { hit: () => within(hit, 'no request matched the hold'), release: () => open(true), drop: () => open(false) };
    },
    holdReviews() {
      let release: () => void = () => undefined;
      let hit: (by: string) => void = () => undefined;
      const wait = new Promise<void>((resolve) => (release = resolve));
      const reviewing = new Promise<string>((resolve) => (hit = resolve));
      reviewGate = { wait, hit, release };
      return {
        reviewing: () => within(reviewing, 'no review started'),
        release: () => {
          reviewGate = null;
          release();
        },
      };
    },
    async startService(name, extra = {}) {
      const proxy = await rig.proxy(name);
      const events: JobEvent[] = [];
      const reviewer = gatedReviewer(
        {
          reviews,
          gate: async () => {
            const gate = reviewGate;
            if (gate === null) return;
            gate.hit(name);
            await gate.wait;
          },
        },
        name,
      );
      const options: GitHubServiceOptions = {
        app: { appId: APP_ID, privateKey, privateKeySource: { kind: 'env' }, webhookSecret: WEBHOOK_SECRET, apiUrl: proxy.url },
        storage: { kind: 'sqlite', dataDir: join(root, 'data') },
        markerSecret: null,
        host: '127.0.0.1',
        port: 0,
        http: true,
        workers: 1,
        logger: pino({ level: 'silent' }),
        remoteUrl: () => remote,
        reviewer: () => reviewer,
        retry: { retries: 2, baseDelayMs: 1 },
        throttle: { secondMs: 1, writeIntervalMs: 0, notificationIntervalMs: 0, maxRetries: 2 },
        waits: { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS },
        pollMs: 50,
        retakeMs: 60_000,
        leaseMs: 600_000,
        observe: (event) => events.push(event),
        ...extra,
      };
      const service = await startGitHubService(options);
      const started: RaceService = { name, proxy, service, events, url: `${service.url ?? ''}/webhooks` };
      services.push(started);
      return started;
    },
    openPullRequest(branch, check) {
      if (mainSha === null) {
        mainSha = repo.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': CONFIG }, 'initial');
        model.setBranch('main', model.commit({ sha: mainSha, files: treeFiles(repo, mainSha) }));
      }
      const head = repo.commit(branch, { [`${branch}.txt`]: `${branch}\n` }, `add ${branch}`, 'main');
      model.commit({ sha: head, parent: mainSha, files: treeFiles(repo, head) });
      publish();
      const pr = model.openPullRequest({ author: 'casey', head: branch, headSha: head, title: `Add ${branch}` });
      const run = model.addCheckRun({ sha: head, name: 'ci', status: check === 'pending' ? 'in_progress' : 'completed' });
      return { number: pr.number, head, runId: run.id };
    },
    pushHead(pr, files) {
      const pull = model.pull(pr);
      const before = model.headSha(pr);
      const sha = repo.commit(pull.headRef, files, 'another push');
      model.commit({ sha, parent: before, files: treeFiles(repo, sha) });
      publish();
      model.setBranch(pull.headRef, sha);
      model.addCheckRun({ sha, name: 'ci', status: 'completed' });
      return sha;
    },
    async send(url, eventName, payload, deliveryId = randomUUID()) {
      const body = JSON.stringify({ ...payload, repository: repoPayload, installation });
      const signature = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`;
      const status = await post(
        url,
        { 'content-type': 'application/json', 'x-github-event': eventName, 'x-github-delivery': deliveryId, 'x-hub-signature-256': signature },
        body,
      );
      return { status, deliveryId };
    },
    async comment(url, pr, body, author = MAINTAINER) {
      const created = model.addComment(pr, author, body);
      const sent = await rig.send(url, 'issue_comment', issueCommentPayload(server.url, `${model.owner}/${model.repo}`, pr, { ...created, author }, body));
      return { ...sent, commentId: created.id };
    },
    async completeCheck(url, pr, runId) {
      const run = model.checkRuns.find((r) => r.id === runId);
      if (run === undefined) throw new Error(`no check run ${runId}`);
      run.status = 'completed';
      run.conclusion = 'success';
      run.completedAt = model.now();
      return rig.send(url, 'check_run', rig.checkBody(pr, runId));
    },
    checkBody(pr, runId) {
      const run = model.checkRuns.find((r) => r.id === runId);
      if (run === undefined) throw new Error(`no check run ${runId}`);
      return checkRunCompletedPayload(server.url, model.repositoryId, run, run.conclusion ?? 'success', [pr]);
    },
    pullRequestBody(action, number) {
      const base = fixture('pull_request', 'opened.payload.json');
      const pr = model.pull(number);
      return {
        ...base,
        action,
        number,
        pull_request: {
          ...(base.pull_request as object),
          number,
          merged: pr.merged,
          state: pr.state,
          head: { ...((base.pull_request as { head: object }).head as object), sha: model.headSha(number), ref: pr.headRef },
        },
      };
    },
    botComments(pr) {
      return model.commentsOf(pr).filter((c) => c.author === BOT);
    },
    async ledger(pr) {
      ledger ??= new LedgerStore(
        createLocalRunStorage({ directory: join(root, 'data'), namespace: LEDGER_NAMESPACE, policy: defaultStoragePolicy }).eventStore,
      );
      return ledger.load(String(pr));
    },
    async quiet() {
      await until(async () => {
        if (services.some((s) => s.service.runningLoops() > 0)) return false;
        const jobs = await services[0]!.service.queue.list();
        return jobs.every((job) => job.failed || (job.lockedBy === null && job.runAt.getTime() > Date.now() + 1_000));
      }, 'the services did not go quiet');
    },
    async cleanup() {
      for (const hold of armed) hold.open(false);
      reviewGate?.release();
      for (const s of services) await s.service.stop(0);
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise((resolve) => s.close(resolve));
      }
      await server.close();
      repo.cleanup();
      rmSync(root, { recursive: true, force: true });
    },
  };
  return rig;
}

/** Wait for a job event of `service` (after index `from`) that matches. */
export async function eventOf(service: RaceService, from: number, match: (e: JobEvent) => boolean, what: string): Promise<JobEvent> {
  let found: JobEvent | undefined;
  await until(() => (found = service.events.slice(from).find(match)) !== undefined, what);
  return found as JobEvent;
}

export function endedJob(e: JobEvent, key: string): boolean {
  return (e.kind === 'completed' || e.kind === 'failed') && e.job.key === key;
}

/**
 * Loops of one change never overlapped, as its ledger tells: every
 * `job-started` comes after the `job-finished` of the job before it (a job
 * that lost its lease writes no `job-finished`; the next names `tookOverFrom`).
 */
export function overlappingLoops(steps: readonly StepEvent[]): string[] {
  const problems: string[] = [];
  let running: string | null = null;
  for (const step of steps) {
    if (step.step === 'job-started') {
      if (running !== null && step.tookOverFrom !== running) problems.push(`${String(step.owner)} started while ${running} ran`);
      running = String(step.owner);
    } else if (step.step === 'job-finished' && step.owner === running) running = null;
  }
  return problems;
}
