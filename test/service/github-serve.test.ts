import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Reviewer } from '../../src/automerge/loop/index.js';
import { liveReviewBindings } from '../../src/review/index.js';
import { BOT, INSTALLATION_ID, WEBHOOK_SECRET, startServiceHarness, type ServiceHarness } from './github-service-support.js';
import { CLI, runCliAsync } from '../cli/helpers.js';
import { startGitHubServer } from '../support/github-server/index.js';
import { startTestProcess } from '../support/processes.js';
import { until, within } from '../support/wait.js';
import { testKeyPair } from '../support/keys.js';

let harness: ServiceHarness | null = null;
afterEach(async () => {
  await harness?.cleanup();
  harness = null;
});

const botComments = (h: ServiceHarness, pr: number) => h.server.model.commentsOf(pr).filter((c) => c.author === BOT);

describe('proofgate serve as a GitHub App (SQLite queue, the API test server, signed deliveries over HTTP)', () => {
  it('an automerge comment is answered 202, queued, reviewed, parked while the check runs, and merged at the reviewed head when the check_run delivery arrives', async () => {
    const h = (harness = await startServiceHarness());
    expect(h.service.app).toEqual({ id: 4242, slug: 'proofgate-test', botLogin: BOT });
    // The pass at start has looked at the repository (no pull request yet): what follows is this change's own work.
    await until(() => h.events.some((e) => e.kind === 'completed' && e.job.task === 'repository'), 'the start pass did not run');
    const { number, head, runId } = h.openPullRequest();
    const before = h.server.requests.length;
    const sent = await h.comment(number, '/proofgate automerge');
    expect(sent.status).toBe(202);

    // The job ends while the check is pending (waits are an hour: only parking can end it), leaving a resume job for later.
    await until(() => h.events.some((e) => e.kind === 'completed' && e.job.task === 'comment'), 'the comment job did not end while the check was pending');
    // The loop the command started runs beside the command lane; when it parks, a resume job waits.
    await until(async () => h.service.runningLoops() === 0 && (await h.service.queue.list()).some((job) => job.task === 'resume'), 'the change did not park');
    const waiting = (await h.service.queue.list()).filter((job) => job.task === 'resume');
    expect(waiting).toHaveLength(1);
    expect(waiting[0]?.runAt.getTime()).toBeGreaterThan(Date.now() + 300_000);
    expect(h.server.model.pull(number).merged).toBe(false);

    // The check_run delivery makes the parked change due at once.
    const green = performance.now();
    expect((await h.completeCheck(number, runId)).status).toBe(202);
    const answered = performance.now() - green;
    await until(() => h.server.requests.some((r) => r.operation === 'pulls/merge'), 'no merge call after the check completed');
    const latency = performance.now() - green;
    await until(() => h.server.model.pull(number).merged, 'the pull request was not merged after its check completed');
    await until(() => h.events.filter((e) => e.kind === 'completed' && e.job.task === 'resume').length >= 1, 'the resume job did not end');
    const used = h.server.requests.slice(before);
    // Figures for the bench (bench/github-service.bench.mjs): printed, never asserted against a clock.
    console.info(
      `service figures: ${JSON.stringify({ greenToMergeMs: Math.round(latency), deliveryAnswerMs: Math.round(answered), requestsPerMerge: used.length, operations: used.map((r) => r.operation) })}`,
    );
    const merges = h.server.requests.filter((r) => r.operation === 'pulls/merge');
    expect(merges.map((r) => r.status)).toEqual([200]);
    expect(h.server.model.pull(number).mergeCommitSha).not.toBeNull();
    // Merged at the reviewed head: the merge request named it.
    expect(h.server.model.headSha(number)).toBe(head);
    const tokens = h.server.requests.filter((r) => r.operation === 'apps/create-installation-access-token');
    expect(tokens.length).toBe(1);
    expect(h.server.schemaChecks.filter((c) => c.violations.length > 0)).toEqual([]);
    void INSTALLATION_ID;
  });

  it('a redelivery (same delivery id) is 200 and does nothing; the same comment under a new delivery id runs nothing twice', async () => {
    const h = (harness = await startServiceHarness());
    const { number } = h.openPullRequest();
    const first = await h.comment(number, '/proofgate status');
    expect(first.status).toBe(202);
    await until(() => botComments(h, number).length >= 1, 'no answer to /proofgate status');
    const again = await h.send('issue_comment', first.payload, first.deliveryId);
    expect(again.status).toBe(200);
    // The same comment (same id and updated_at) delivered under another id: accepted, but the ledger runs nothing again.
    const other = await h.send('issue_comment', { ...first.payload, zen: 'a different body' });
    expect(other.status).toBe(202);
    await until(() => h.events.filter((e) => e.kind === 'completed' && e.job.task === 'comment').length >= 2, 'the second delivery was not worked');
    expect(botComments(h, number)).toHaveLength(1);
  });
});

describe('from a delivery to its job', () => {
  it('every check_run delivery is answered 202 and its resume job starts; figures for the bench', async () => {
    const h = (harness = await startServiceHarness({ workers: 1 }));
    await until(() => h.events.some((e) => e.kind === 'completed' && e.job.task === 'repository'), 'the start pass did not run');
    const { number, runId } = h.openPullRequest();
    const latencies: number[] = [];
    for (let i = 0; i < 40; i++) {
      const from = h.events.length;
      const sent = performance.now();
      expect((await h.completeCheck(number, runId)).status).toBe(202);
      await until(() => h.events.slice(from).some((e) => e.kind === 'started' && e.job.task === 'resume'), `delivery ${i} did not start a job`);
      const index = h.events.findIndex((e, at) => at >= from && e.kind === 'started' && e.job.task === 'resume');
      latencies.push(h.eventTimes[index]! - sent);
      await until(() => h.events.slice(index).some((e) => e.kind === 'completed' && e.job.task === 'resume'), `job ${i} did not end`);
    }
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 10) / 10;
    console.info(`delivery figures: ${JSON.stringify({ deliveries: latencies.length, p50Ms: at(0.5), p99Ms: at(0.99) })}`);
  });
});

describe('loops started by commands count against --workers', () => {
  it('with one worker, a second automerge comment waits until the first loop ends: never two reviews at once', async () => {
    let inside = 0;
    let entered = 0;
    let most = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held: Reviewer = async ({ repoDir, base, head }) => {
      inside += 1;
      entered += 1;
      most = Math.max(most, inside);
      await gate;
      inside -= 1;
      const live = await liveReviewBindings({ repoDir, base, head });
      return {
        verdict: 'CONFIRMED',
        reasons: [],
        findings: [],
        reviewRef: 'held',
        bindings: { diff: live.diff, contract: live.contract, config: live.config },
        run: null,
      };
    };
    const logs: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(line) });
    const h = (harness = await startServiceHarness({ workers: 1, reviewer: () => held, logger }));
    try {
      const first = h.openPullRequest('one');
      const second = h.openPullRequest('two');
      await h.comment(first.number, '/proofgate automerge');
      await until(() => inside === 1, 'the first review did not start');
      const later = await h.comment(second.number, '/proofgate automerge');
      expect(later.status).toBe(202);
      // A command (this one, or the start pass's sweep) now waits for a loop slot: no second loop starts while the first is held.
      await until(() => logs.some((line) => line.includes('command waits for a loop slot')), 'no command waited for a loop slot');
      expect(inside).toBe(1);
      release();
      await until(() => entered === 2 && inside === 0 && h.service.runningLoops() === 0, 'the second review did not run after the first loop ended');
      expect(most).toBe(1);
    } finally {
      release();
    }
  });
});

describe("a fork's pull request", () => {
  it('is reviewed like any other, but a rebase it needs is a block: nothing is pushed anywhere', async () => {
    const h = (harness = await startServiceHarness());
    const { number, runId, head } = h.openPullRequest('forked', { crossRepository: true });
    h.server.model.setMergeable(number, 'MERGEABLE', 'BEHIND');
    await h.completeCheck(number, runId);
    await h.comment(number, '/proofgate automerge');
    await until(
      async () => h.service.runningLoops() === 0 && botComments(h, number).some((c) => c.body.includes('fork-no-repair')),
      'the fork was not blocked',
    );
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(h.server.model.headSha(number)).toBe(head);
    expect(h.server.requests.filter((r) => r.operation === 'git/update-ref' || r.operation === 'pulls/update-branch')).toEqual([]);
  });
});

describe('commands addressed to the App by its name', () => {
  it('@<slug> status is answered like /proofgate status; @<another app> is not a command', async () => {
    const h = (harness = await startServiceHarness());
    const { number } = h.openPullRequest();
    await h.comment(number, '@other-app status');
    const asked = await h.comment(number, '@proofgate-test status');
    await until(() => h.events.some((e) => e.kind === 'completed' && e.job.key === `comment:${asked.deliveryId}`), 'the comment job did not end');
    const replies = botComments(h, number);
    expect(replies).toHaveLength(1);
    expect(replies[0]?.body).toContain('proofgate status (asked by maint)');
  });
});

describe('proofgate serve (the command) as a GitHub App', () => {
  it('a key GitHub does not take: one FORGE_AUTH line, exit 1, nothing listens', async () => {
    const server = await startGitHubServer();
    try {
      const registered = testKeyPair();
      const other = testKeyPair(1);
      server.registerApp({ appId: 31, slug: 'proofgate-cli', publicKey: registered.publicKey, installationId: 1 });
      const data = mkdtempSync(join(tmpdir(), 'proofgate-svc-cli-'));
      try {
        const result = await runCliAsync(['serve', '--port', '0', '--data', data], {
          env: {
            PROOFGATE_GITHUB_APP_ID: '31',
            PROOFGATE_GITHUB_PRIVATE_KEY: other.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
            PROOFGATE_GITHUB_WEBHOOK_SECRET: 'a webhook secret',
            PROOFGATE_GITHUB_API_URL: server.baseUrl,
          },
        });
        expect(result.status).toBe(1);
        const lines = result.stderr.trim().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^proofgate: GitHub App lookup failed with HTTP 401.*\[FORGE_AUTH\]$/);
      } finally {
        rmSync(data, { recursive: true, force: true });
      }
    } finally {
      await server.close();
    }
  });

  it('starts, logs where it listens, is ready, answers a signed ping, and exits 0 on SIGTERM', async () => {
    const server = await startGitHubServer();
    const data = mkdtempSync(join(tmpdir(), 'proofgate-svc-cli-'));
    try {
      const keys = testKeyPair();
      server.registerApp({ appId: 32, slug: 'proofgate-cli', publicKey: keys.publicKey, installationId: 1 });
      const child = startTestProcess(process.execPath, [CLI, 'serve', '--port', '0', '--data', data, '--workers', '2'], {
        env: {
          ...process.env,
          PROOFGATE_GITHUB_APP_ID: '32',
          PROOFGATE_GITHUB_PRIVATE_KEY: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
          PROOFGATE_GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET,
          PROOFGATE_GITHUB_API_URL: server.baseUrl,
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      // 'close', not 'exit': stderr is read to its end before the exit code counts.
      const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
      await until(() => stderr.includes('"msg":"listening"'), `serve did not log "listening":\n${stderr}`);
      const listening = stderr
        .split('\n')
        .filter((line) => line.includes('"msg":"listening"'))
        .map((line) => JSON.parse(line) as { url: string; app: string; storage: string })[0]!;
      expect(listening).toMatchObject({ app: 'proofgate-cli', storage: 'sqlite' });
      const ready = await fetch(`${listening.url}/readyz`);
      expect(ready.status).toBe(200);
      const body = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1, hook: {}, installation: { id: 1 } });
      const ping = await fetch(`${listening.url}/webhooks`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'ping',
          'x-github-delivery': 'ping-1',
          'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`,
        },
        body,
      });
      expect(ping.status).toBe(200);
      child.kill('SIGTERM');
      expect(await within(exited, `serve did not end after SIGTERM:\n${stderr}`)).toBe(0);
      expect(stderr).toContain('"msg":"stopped"');
    } finally {
      await server.close();
      rmSync(data, { recursive: true, force: true });
    }
  });
});
