/**
 * The attacker's side of the GitHub App service harness: signed deliveries
 * with any payload (any repository, installation, comment author or check),
 * pull requests with chosen files, a log buffer, and the questions asked
 * after an attack: which writes reached GitHub, which jobs ended.
 */
import { execFileSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { request } from 'node:http';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import type { JobEvent } from '../../src/service/jobs/index.js';
import { checkRunCompletedPayload, fixture, repositoryPayload as githubRepositoryPayload } from '../support/github-server/index.js';
import { treeFiles } from '../forge/git-fixture.js';
import { until } from '../support/wait.js';
import { INSTALLATION_ID, WEBHOOK_SECRET, type ServiceHarness } from '../service/github-service-support.js';

export interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly deliveryId: string;
}

/** POST exact bytes to the service's /webhooks, signed with the webhook secret. */
export function sendSigned(h: ServiceHarness, eventName: string, body: string, deliveryId: string = randomUUID()): Promise<Answer> {
  const signature = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`;
  const bytes = Buffer.from(body, 'utf8');
  return new Promise((resolve, reject) => {
    const req = request(
      `${h.service.url ?? ''}/webhooks`,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'x-github-event': eventName,
          'x-github-delivery': deliveryId,
          'x-hub-signature-256': signature,
          'content-length': String(bytes.length),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>), deliveryId });
        });
      },
    );
    req.on('error', reject);
    req.end(bytes);
  });
}

/** The repository object of a payload, as the harness sends it (the model's repository), with overrides. */
export function repositoryPayload(h: ServiceHarness, owner?: string, name?: string): Record<string, unknown> {
  return githubRepositoryPayload(owner ?? h.server.model.owner, name ?? h.server.model.repo, h.server.model.repositoryId);
}

export interface CommentShape {
  readonly pr: number | string | null;
  readonly body: string;
  readonly author: string;
  readonly authorType?: string;
  readonly commentId?: number;
  readonly createdAt?: string;
  readonly updatedAt?: string;
  readonly action?: 'created' | 'edited';
  readonly owner?: string;
  readonly repo?: string;
  /** Whatever the `installation` member is (default: the harness's installation). */
  readonly installation?: unknown;
}

/** A whole `issue_comment` body, shaped as GitHub sends it, with every attacker-chosen field in place. */
export function commentBody(h: ServiceHarness, shape: CommentShape): string {
  const base = fixture('issue_comment', 'created.payload.json');
  const at = shape.updatedAt ?? h.server.model.latest();
  const payload = {
    ...base,
    action: shape.action ?? 'created',
    issue: { ...(base.issue as object), number: shape.pr, pull_request: { url: `${h.server.url}/pulls/${String(shape.pr)}` } },
    comment: {
      ...(base.comment as object),
      id: shape.commentId ?? 990_000 + Math.floor(Math.random() * 9_000),
      body: shape.body,
      user: { login: shape.author, id: 7, type: shape.authorType ?? 'User' },
      created_at: shape.createdAt ?? at,
      updated_at: at,
    },
    repository: repositoryPayload(h, shape.owner, shape.repo),
    installation: shape.installation === undefined ? { id: INSTALLATION_ID } : shape.installation,
  };
  return JSON.stringify(payload);
}

/** A `check_run.completed` body for any head sha and any pull requests, claiming any conclusion. */
export function checkRunBody(h: ServiceHarness, options: { runId: number; name: string; headSha: string; prs: number[]; conclusion: string }): string {
  const at = h.server.model.latest();
  const run = { id: options.runId, name: options.name, headSha: options.headSha, startedAt: at, completedAt: at };
  return JSON.stringify({
    ...checkRunCompletedPayload(h.server.url, h.server.model.repositoryId, run, options.conclusion, options.prs),
    repository: repositoryPayload(h),
    installation: { id: INSTALLATION_ID },
  });
}

/** A `pull_request` body (opened, synchronize, closed) for a pull request of the model. */
export function pullRequestBody(h: ServiceHarness, action: string, number: number): string {
  const base = fixture('pull_request', 'opened.payload.json');
  const pr = h.server.model.pull(number);
  return JSON.stringify({
    ...base,
    action,
    number,
    pull_request: {
      ...(base.pull_request as object),
      number,
      merged: pr.merged,
      state: pr.state,
      head: { ...((base.pull_request as { head: object }).head as object), sha: h.server.model.headSha(number), ref: pr.headRef },
    },
    repository: repositoryPayload(h),
    installation: { id: INSTALLATION_ID },
  });
}

/** Mirror a commit of the harness's git repository into the model, and publish the repository as the remote again. */
export function mirror(h: ServiceHarness, sha: string, parent: string): void {
  h.server.model.commit({ sha, parent, files: treeFiles(h.repo, sha) });
  rmSync(h.remote, { recursive: true, force: true });
  execFileSync('git', ['clone', '-q', '--bare', h.repo.dir, h.remote]);
}

/**
 * A pull request whose head adds `files` on `branch` (from main), with a
 * pending `ci` check. `h.openPullRequest()` must have run once (it makes main).
 */
export function openPullWith(h: ServiceHarness, branch: string, files: Record<string, string>): { number: number; head: string; base: string; runId: number } {
  const base = h.server.model.branches.get('main') ?? '';
  const head = h.repo.commit(branch, files, `change ${branch}`, 'main');
  mirror(h, head, base);
  const pr = h.server.model.openPullRequest({ author: 'casey', head: branch, headSha: head, title: `Change ${branch}` });
  const run = h.server.model.addCheckRun({ sha: head, name: 'ci', status: 'in_progress' });
  return { number: pr.number, head, base, runId: run.id };
}

/** Push a new commit onto a pull request's branch (git and the model), without any delivery. */
export function pushHead(h: ServiceHarness, number: number, files: Record<string, string>): string {
  const pr = h.server.model.pull(number);
  const before = h.server.model.headSha(number);
  const sha = h.repo.commit(pr.headRef, files, 'another push');
  mirror(h, sha, before);
  h.server.model.setBranch(pr.headRef, sha);
  return sha;
}

/** Requests that changed something on GitHub (token minting and GraphQL reads left out). */
export function writes(h: ServiceHarness): { method: string; path: string; operation: string; status: number }[] {
  return h.server.requests.filter((r) => r.method !== 'GET' && r.operation !== 'apps/create-installation-access-token' && !r.operation.startsWith('graphql'));
}

/** Wait for a job event after index `from` that matches. */
export async function jobEvent(h: ServiceHarness, from: number, match: (e: JobEvent) => boolean, what: string): Promise<JobEvent> {
  let found: JobEvent | undefined;
  await until(() => (found = h.events.slice(from).find(match)) !== undefined, what);
  return found as JobEvent;
}

/** The job a delivery became ended (completed, or failed once). */
export function ended(e: JobEvent): e is Extract<JobEvent, { kind: 'completed' | 'failed' }> {
  return e.kind === 'completed' || e.kind === 'failed';
}

/** Wait until every job queued so far that is due now has ended and no job runs. */
export async function quiet(h: ServiceHarness): Promise<void> {
  await until(async () => {
    const jobs = await h.service.queue.list();
    const idle = jobs.every((job) => job.lockedBy === null && (job.failed || job.runAt.getTime() > Date.now() + 1_000 || job.attempts > 0));
    // Loops a command started run beside the command lane, outside the queue.
    return idle && h.service.runningLoops() === 0;
  }, 'the service did not go quiet');
}

/** A pino logger whose JSON lines are kept in memory. */
export function bufferLogger(level: pino.Level = 'trace'): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  let partial = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      partial += chunk.toString('utf8');
      const parts = partial.split('\n');
      partial = parts.pop() ?? '';
      lines.push(...parts.filter((l) => l !== ''));
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}
