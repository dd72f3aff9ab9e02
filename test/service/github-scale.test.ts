/**
 * Scale-out, for real: three `proofgate serve` worker processes (the built
 * package) on one fresh PostgreSQL database, the GitHub API test server in
 * this process, many pull requests driven by signed deliveries sent to all
 * three, redeliveries among them, and one worker killed with SIGKILL while it
 * holds a job. Every pull request must end merged exactly once, with no
 * comment written twice, and the killed worker's job must be taken over.
 */
import type { ChildProcess } from 'node:child_process';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestProcess } from '../support/processes.js';
import { describePostgres } from '../support/postgres.js';
import { checkRunCompletedPayload, issueCommentPayload, repositoryPayload, startGitHubServer, type GitHubTestServer } from '../support/github-server/index.js';
import { until } from '../support/wait.js';
import { makeTempRepo, type TempRepo } from '../forge/git-fixture.js';
import { testKeyPair } from '../support/keys.js';

const APP_ID = 5151;
const SLUG = 'proofgate-scale';
const BOT = `${SLUG}[bot]`;
const INSTALLATION_ID = 91;
const SECRET = 'webhook-secret-for-the-scale-test';
const MAINTAINER = 'maint';
/** Pull requests driven through the three workers (PROOFGATE_SCALE_PULLS=200 for the full run; the suite keeps to 60). */
const PULLS = Number(process.env.PROOFGATE_SCALE_PULLS ?? 60);
/** Worker processes (the bench runs 1, 2 and 3 without a kill: PROOFGATE_SCALE_WORKERS, PROOFGATE_SCALE_KILL=0). */
const WORKERS = Number(process.env.PROOFGATE_SCALE_WORKERS ?? 3);
const KILL = process.env.PROOFGATE_SCALE_KILL !== '0' && WORKERS > 1;
/** Every this-many-th pull request waits on a check that a later delivery completes. */
const PENDING_EVERY = 5;

interface WorkerLine {
  readonly kind: string;
  readonly pid: number;
  readonly task?: string;
  readonly queue?: string;
  readonly key?: string;
  readonly url?: string;
  readonly jobs?: number;
}

interface Worker {
  readonly child: ChildProcess;
  readonly lines: WorkerLine[];
  url: string;
  killed: boolean;
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

describePostgres(
  `${WORKERS} worker processes on one PostgreSQL${KILL ? ', one killed with SIGKILL' : ''}`,
  (url) => {
    const database = `proofgate_scale_${randomBytes(6).toString('hex')}`;
    // Made when the block runs, not when it is collected: a skipped block gets no URL.
    const databaseUrlOf = (): string => {
      const parsed = new URL(url);
      parsed.pathname = `/${database}`;
      return parsed.toString();
    };
    let server: GitHubTestServer;
    let repo: TempRepo;
    let root: string;
    const workers: Worker[] = [];

    beforeAll(async () => {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${database}`);
      await admin.end();
    });

    // The workers are stopped with the test (test/support/processes.ts); then the rest goes.
    afterAll(async () => {
      await server?.close();
      repo?.cleanup();
      if (root !== undefined) rmSync(root, { recursive: true, force: true });
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
    });

    it(`${PULLS} pull requests, redeliveries included, all merged exactly once${KILL ? "; the killed worker's job is taken over" : ''}`, async () => {
      const workerScript = join(import.meta.dirname, 'fixtures', 'github-worker.mjs');
      expect(existsSync(join(import.meta.dirname, '..', '..', 'dist', 'service', 'index.js')), 'npm run build first').toBe(true);
      server = await startGitHubServer();
      const { model } = server;
      const keys = testKeyPair();
      server.registerApp({ appId: APP_ID, slug: SLUG, publicKey: keys.publicKey, installationId: INSTALLATION_ID });
      model.setCollaborator(MAINTAINER, 'write');
      repo = makeTempRepo('proofgate-scale-');
      root = mkdtempSync(join(tmpdir(), 'proofgate-scale-state-'));

      // Each pull request has a base of its own (all protected), so a merge moves nobody else's base.
      const bases = Array.from({ length: PULLS }, (_, i) => `base-${i + 1}`);
      const config = `protectedBranches: [main, ${bases.join(', ')}]\nreview:\n  lanes:\n    - id: rules\n      builtin: rules\n`;
      const initial = repo.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': config }, 'initial');
      const files = { 'README.md': '# demo\n', '.proofgate.yml': config };
      model.setBranch('main', model.commit({ sha: initial, files }));
      const pulls: { number: number; head: string; runId: number; pending: boolean }[] = [];
      for (let i = 1; i <= PULLS; i++) {
        const head = repo.commit(`feature-${i}`, { [`feature-${i}.txt`]: `feature ${i}\n` }, `feature ${i}`, 'main');
        model.setBranch(`base-${i}`, initial);
        model.commit({ sha: head, parent: initial, files: { ...files, [`feature-${i}.txt`]: `feature ${i}\n` } });
        const pr = model.openPullRequest({ author: 'casey', base: `base-${i}`, head: `feature-${i}`, headSha: head, title: `Feature ${i}` });
        const pending = i % PENDING_EVERY === 0;
        const run = model.addCheckRun({ sha: head, name: 'ci', status: pending ? 'in_progress' : 'completed', ...(pending ? {} : { conclusion: 'success' }) });
        pulls.push({ number: pr.number, head, runId: run.id, pending });
      }
      const remote = join(root, 'remote.git');
      repo.git(['clone', '-q', '--bare', repo.dir, remote]);

      const privateKey = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      const start = (n: number): Promise<Worker> =>
        new Promise((resolve, reject) => {
          const env = {
            ...process.env,
            PROOFGATE_TEST_WORKER: JSON.stringify({
              appId: APP_ID,
              privateKey,
              webhookSecret: SECRET,
              apiUrl: server.baseUrl,
              databaseUrl: databaseUrlOf(),
              workDir: join(root, `worker-${n}`),
              remote,
              retakeMs: 1_500,
              pollMs: 200,
            }),
          };
          const child = startTestProcess(process.execPath, [workerScript], { env, stdio: ['ignore', 'pipe', 'pipe'] });
          const worker: Worker = { child, lines: [], url: '', killed: false };
          let stderr = '';
          child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
          createInterface({ input: child.stdout! }).on('line', (text) => {
            const parsed = JSON.parse(text) as WorkerLine;
            worker.lines.push(parsed);
            if (parsed.kind === 'ready') {
              worker.url = parsed.url ?? '';
              resolve(worker);
            }
          });
          child.once('exit', (code, signal) => {
            if (worker.url === '') reject(new Error(`worker ${n} exited (${code ?? signal}) before it was ready: ${stderr.slice(-2000)}`));
          });
        });
      const began = Date.now();
      // One at a time: the first migrates the schema, the others find it done.
      for (let n = 1; n <= WORKERS; n++) workers.push(await start(n));

      const repoPayload = repositoryPayload(model.owner, model.repo);
      const statuses: number[] = [];
      let turn = 0;
      const send = async (eventName: string, payload: Record<string, unknown>, deliveryId = randomUUID()): Promise<{ body: string; deliveryId: string }> => {
        const body = JSON.stringify({
          ...payload,
          repository: repoPayload,
          installation: { id: INSTALLATION_ID, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uOTE=' },
        });
        await resend(eventName, body, deliveryId);
        return { body, deliveryId };
      };
      const resend = async (eventName: string, body: string, deliveryId: string): Promise<void> => {
        const alive = workers.filter((w) => !w.killed);
        const target = alive[turn++ % alive.length]!;
        const signature = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
        statuses.push(
          await post(
            `${target.url}/webhooks`,
            { 'content-type': 'application/json', 'x-github-event': eventName, 'x-github-delivery': deliveryId, 'x-hub-signature-256': signature },
            body,
          ),
        );
      };
      const redeliveries: { body: string; deliveryId: string }[] = [];
      const sending = Date.now();
      for (const pull of pulls) {
        const created = model.addComment(pull.number, MAINTAINER, '/proofgate automerge');
        const sent = await send('issue_comment', issueCommentPayload(server.url, 'octo-org/demo', pull.number, created, created.body));
        if (pull.number % 4 === 0) redeliveries.push(sent);
      }
      // GitHub redelivers: same id, same body, to any process.
      for (const again of redeliveries) await resend('issue_comment', again.body, again.deliveryId);

      // Kill a worker while it holds a job (once a third of the pull requests merged, so work is under way).
      let held: WorkerLine | null = null;
      if (KILL) {
        // A bound on progress, as loose as the final one: a loaded 2-core machine (a second suite beside this one) is slow.
        await until(() => [...model.pulls.values()].filter((p) => p.merged).length >= PULLS / 3, 'a third of the pull requests did not merge', 240_000);
        const victim = workers[0]!;
        const startedBefore = victim.lines.length;
        await until(() => {
          const started = victim.lines.slice(startedBefore).filter((l) => l.kind === 'started');
          const ended = new Set(
            victim.lines
              .slice(startedBefore)
              .filter((l) => l.kind === 'completed' || l.kind === 'failed')
              .map((l) => l.key),
          );
          return started.some((l) => !ended.has(l.key));
        }, 'the victim took no job');
        held = victim.lines.filter((l) => l.kind === 'started').at(-1)!;
        // The whole process group, as a machine that dies takes its git children with it.
        victim.killed = true;
        process.kill(-victim.child.pid!, 'SIGKILL');
      }

      // The pending checks complete, each with its delivery.
      for (const pull of pulls.filter((p) => p.pending)) {
        const run = model.checkRuns.find((r) => r.id === pull.runId)!;
        run.status = 'completed';
        run.conclusion = 'success';
        run.completedAt = model.now();
        await send('check_run', checkRunCompletedPayload(server.url, repoPayload.id as number, run, 'success', [pull.number]));
      }

      await until(() => [...model.pulls.values()].every((p) => p.merged), 'not every pull request merged', 240_000);
      // Figures for the bench (bench/service-throughput.bench.mjs): printed, never asserted against a clock.
      console.info(`scale figures: ${JSON.stringify({ pulls: PULLS, workers: WORKERS, killed: KILL, ms: Date.now() - sending, startMs: sending - began })}`);

      if (held !== null) {
        // The killed worker's job: a survivor unlocked it, then ran that job's queue.
        const survivors = workers.slice(1).flatMap((w) => w.lines);
        const unlocked = survivors.findIndex((l) => l.kind === 'unlocked' && (l.jobs ?? 0) > 0);
        expect(unlocked, 'no survivor released the dead worker’s jobs').toBeGreaterThanOrEqual(0);
        if (held.task !== 'reconcile') expect(survivors.some((l) => l.kind === 'completed' && l.queue === held.queue)).toBe(true);
      }

      // Answers: every first delivery accepted; every redelivery a duplicate (200); none refused.
      expect(statuses.filter((s) => s === 202).length).toBe(PULLS + pulls.filter((p) => p.pending).length);
      expect(statuses.filter((s) => s === 200).length).toBe(redeliveries.length);

      // Merged exactly once each, at the reviewed head; no comment written twice.
      const merges = server.requests.filter((r) => r.operation === 'pulls/merge');
      expect(merges.filter((r) => r.status === 200)).toHaveLength(PULLS);
      // Not one merge call more: a change whose merge the dead worker sent is found merged, not merged again.
      expect(merges).toHaveLength(PULLS);
      for (const pull of pulls) {
        expect(model.pull(pull.number).merged).toBe(true);
        expect(model.headSha(pull.number)).toBe(pull.head);
        const own = model.commentsOf(pull.number).filter((c) => c.author === BOT);
        const firstLines = own.map((c) => c.body.split('\n')[0]);
        expect(new Set(firstLines).size, `pull request ${pull.number}: ${firstLines.join(' | ')}`).toBe(firstLines.length);
      }
    });
    // The whole test's bound: about 100 s on a quiet machine with 60 pull requests; its waits bound progress on their own.
  },
  { timeout: 600_000 },
);
