/**
 * A GitHub App service under test: the GitHub API test server with a
 * registered App and one installation, a real git repository playing
 * GitHub's git side (a bare clone is the remote the service fetches), and
 * `startGitHubService` in this process, reached over HTTP with signed
 * deliveries as GitHub sends them.
 */
import { execFileSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { JobEvent } from '../../src/service/jobs/index.js';
import { startGitHubService, type GitHubService, type GitHubServiceOptions } from '../../src/service/index.js';
import { checkRunCompletedPayload, issueCommentPayload, repositoryPayload, startGitHubServer, type GitHubTestServer } from '../support/github-server/index.js';
import { makeTempRepo, treeFiles, type TempRepo } from '../forge/git-fixture.js';
import { testKeyPair } from '../support/keys.js';

export const APP_ID = 4242;
export const APP_SLUG = 'proofgate-test';
export const BOT = `${APP_SLUG}[bot]`;
export const INSTALLATION_ID = 77;
export const MAINTAINER = 'maint';
export const WEBHOOK_SECRET = 'webhook-secret-for-service-tests';
export const CONFIG = 'review:\n  lanes:\n    - id: rules\n      builtin: rules\n';

/** Longer than any test: a wait moves on only when something wakes it. */
export const NEVER_MS = 3_600_000;

export interface Delivered {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly deliveryId: string;
}

export interface ServiceHarness {
  readonly server: GitHubTestServer;
  readonly repo: TempRepo;
  readonly remote: string;
  readonly root: string;
  readonly events: JobEvent[];
  /** `performance.now()` at each of `events`, same index. */
  readonly eventTimes: number[];
  service: GitHubService;
  /** Send a signed delivery to the service's /webhooks (same id and body again: a redelivery). */
  send(eventName: string, payload: Record<string, unknown>, deliveryId?: string): Promise<Delivered>;
  /** Add a comment to the model and deliver its signed `issue_comment.created`. */
  comment(pr: number, body: string, author?: string): Promise<Delivered & { commentId: number; payload: Record<string, unknown> }>;
  /** Complete a check run in the model and deliver its `check_run.completed`. */
  completeCheck(pr: number, runId: number, conclusion?: string): Promise<Delivered>;
  /** main with the trusted config and a feature branch, as pull request `number` in the model. */
  openPullRequest(branch?: string, options?: { crossRepository?: boolean }): { number: number; base: string; head: string; runId: number };
  /** Start (again) a service on the same store. */
  restart(extra?: Partial<GitHubServiceOptions>): Promise<GitHubService>;
  cleanup(): Promise<void>;
}

function post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const bytes = Buffer.from(body, 'utf8');
    const req = request(url, { method: 'POST', agent: false, headers: { ...headers, 'content-length': String(bytes.length) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) });
      });
    });
    req.on('error', reject);
    req.end(bytes);
  });
}

/** What the harness's repository holds on main: the trusted config (default CONFIG) and more files. */
export interface HarnessRepository {
  readonly config?: string;
  readonly mainFiles?: Readonly<Record<string, string>>;
}

export async function startServiceHarness(extra: Partial<GitHubServiceOptions> = {}, repository: HarnessRepository = {}): Promise<ServiceHarness> {
  const server = await startGitHubServer();
  const { model } = server;
  const keys = testKeyPair();
  server.registerApp({ appId: APP_ID, slug: APP_SLUG, publicKey: keys.publicKey, installationId: INSTALLATION_ID });
  model.setCollaborator(MAINTAINER, 'write');
  const repo = makeTempRepo('proofgate-svc-');
  const root = mkdtempSync(join(tmpdir(), 'proofgate-svc-state-'));
  const remote = join(root, 'remote.git');
  const events: JobEvent[] = [];
  const eventTimes: number[] = [];
  const privateKey = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

  const start = (more: Partial<GitHubServiceOptions> = {}): Promise<GitHubService> =>
    startGitHubService({
      app: { appId: APP_ID, privateKey, privateKeySource: { kind: 'env' }, webhookSecret: WEBHOOK_SECRET, apiUrl: server.baseUrl },
      storage: { kind: 'sqlite', dataDir: join(root, 'data') },
      markerSecret: null,
      host: '127.0.0.1',
      port: 0,
      http: true,
      workers: 2,
      logger: pino({ level: 'silent' }),
      remoteUrl: () => remote,
      retry: { retries: 2, baseDelayMs: 1 },
      throttle: { secondMs: 1, writeIntervalMs: 0, notificationIntervalMs: 0, maxRetries: 2 },
      waits: { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS },
      pollMs: 50,
      // A failed job is retried after e^n ms, not seconds: the tests wait for the retry's event, never for time.
      retryBaseMs: 1,
      retakeMs: 2_000,
      // One process: a lease never needs taking over, and the safety-net resume (due when a lease would run out) stays far off.
      leaseMs: 600_000,
      observe: (event) => {
        events.push(event);
        eventTimes.push(performance.now());
      },
      ...extra,
      ...more,
    });

  const repoPayload = repositoryPayload(model.owner, model.repo);
  const repositoryId = repoPayload.id as number;
  let mainSha: string | null = null;
  const installation = { id: INSTALLATION_ID, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNzc=' };

  const harness: ServiceHarness = {
    server,
    repo,
    remote,
    root,
    events,
    eventTimes,
    service: await start(),
    async send(eventName, payload, deliveryId = randomUUID()) {
      const body = JSON.stringify({ ...payload, repository: repoPayload, installation });
      const signature = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`;
      const url = `${harness.service.url ?? ''}/webhooks`;
      const answer = await post(
        url,
        { 'content-type': 'application/json', 'x-github-event': eventName, 'x-github-delivery': deliveryId, 'x-hub-signature-256': signature },
        body,
      );
      return { ...answer, deliveryId };
    },
    async comment(pr, text, author = MAINTAINER) {
      const created = model.addComment(pr, author, text);
      const payload = issueCommentPayload(server.url, `${model.owner}/${model.repo}`, pr, { ...created, author }, text);
      return { ...(await harness.send('issue_comment', payload)), commentId: created.id, payload };
    },
    async completeCheck(pr, runId, conclusion = 'success') {
      const run = model.checkRuns.find((r) => r.id === runId);
      if (run === undefined) throw new Error(`no check run ${runId}`);
      run.status = 'completed';
      run.conclusion = conclusion;
      run.completedAt = model.now();
      return harness.send('check_run', checkRunCompletedPayload(server.url, repositoryId, run, conclusion, [pr]));
    },
    openPullRequest(branch = 'feature', options = {}) {
      if (mainSha === null) {
        mainSha = repo.commit('main', { 'README.md': '# demo\n', ...repository.mainFiles, '.proofgate.yml': repository.config ?? CONFIG }, 'initial');
        model.setBranch('main', model.commit({ sha: mainSha, files: treeFiles(repo, mainSha) }));
      }
      const base = mainSha;
      const head = repo.commit(branch, { [`${branch}.txt`]: `${branch}\n` }, `add ${branch}`, 'main');
      model.commit({ sha: head, parent: base, files: treeFiles(repo, head) });
      rmSync(remote, { recursive: true, force: true });
      execFileSync('git', ['clone', '-q', '--bare', repo.dir, remote]);
      const pr = model.openPullRequest({ author: 'casey', head: branch, headSha: head, title: `Add ${branch}`, ...options });
      const run = model.addCheckRun({ sha: head, name: 'ci', status: 'in_progress' });
      return { number: pr.number, base, head, runId: run.id };
    },
    async restart(more = {}) {
      harness.service = await start(more);
      return harness.service;
    },
    async cleanup() {
      await harness.service.stop(0);
      await server.close();
      repo.cleanup();
      rmSync(root, { recursive: true, force: true });
    },
  };
  return harness;
}
