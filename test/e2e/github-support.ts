/**
 * The automerge loop against the GitHub API test server, driven by signed
 * webhook deliveries. A real git repository plays GitHub's git side: its
 * commits are the pull request's base and head in the server's model (same
 * shas), and a bare clone of it is the remote the review workspace fetches.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { systemClock } from '../../src/core/index.js';
import { createGitHubForge, memoryDeliveryLedger, parseWebhookDelivery } from '../../src/forge/github/index.js';
import {
  builtinRepair,
  AutomergeRouter,
  ChangeJobs,
  ChangeSignals,
  LedgerStore,
  panelReviewer,
  type AutomergeEnvironment,
  type LoopProgress,
  type RouteResult,
} from '../../src/automerge/loop/index.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import {
  checkRunCompletedPayload,
  fixture,
  issueCommentPayload,
  repositoryPayload,
  signDelivery,
  startGitHubServer,
  type GitHubTestServer,
  type SignedDelivery,
} from '../support/github-server/index.js';
import { makeTempRepo, treeFiles, type TempRepo } from '../forge/git-fixture.js';

export const SELF = 'proofgate-bot';
export const MAINTAINER = 'maint';
const WEBHOOK_SECRET = 'webhook-secret-for-tests';

export const CONFIG = 'review:\n  lanes:\n    - id: rules\n      builtin: rules\n    - id: tests\n      builtin: tests\n';

export interface GitHubLoop {
  readonly server: GitHubTestServer;
  readonly repo: TempRepo;
  readonly env: AutomergeEnvironment;
  readonly router: AutomergeRouter;
  readonly progress: LoopProgress[];
  /** Files of a commit of the real repository, as the model stores them. */
  mirrorCommit(sha: string, parent?: string): string;
  /** Push the real repository's branches to the bare remote. */
  syncRemote(): void;
  /** The bare repository that plays GitHub's git side (the workspace's remote). */
  readonly remote: string;
  /**
   * Play GitHub after a git push: poll the bare remote's `branch`; when it
   * moves away from PR `pr`'s head, put the pushed commit into the model,
   * move the PR head, mark it mergeable, add a green `ci` check run, and
   * deliver a signed `pull_request.synchronize` webhook. Returns the new
   * heads seen so far.
   */
  followPushes(pr: number, branch: string): string[];
  /** Deliver a signed `issue_comment.created` webhook for a new comment by `author`. */
  comment(pr: number, body: string, author?: string): Promise<RouteResult>;
  /**
   * Add a comment to the model and sign (not send) its `issue_comment`
   * delivery; `edit` makes it an `edited` delivery of that comment at a later
   * updated_at (the body is left as it was unless `edit.body` is given).
   */
  commentDelivery(pr: number, body: string, author?: string): { commentId: number; delivery: SignedDelivery; edit(edit?: { body?: string }): SignedDelivery };
  /** Send a signed delivery (as often as a test likes: GitHub redelivers with the same delivery id). */
  send(delivery: SignedDelivery): Promise<RouteResult | null>;
  /** Complete a check run in the model and deliver its signed `check_run.completed` webhook. */
  completeCheck(pr: number, runId: number, conclusion?: string): Promise<void>;
  cleanup(): Promise<void>;
}

function remoteFiles(remote: string, sha: string): Record<string, string> {
  const git = (args: string[]) => execFileSync('git', ['-C', remote, ...args], { encoding: 'utf8' });
  const names = git(['ls-tree', '-r', '--name-only', sha])
    .split('\n')
    .filter((n) => n !== '');
  return Object.fromEntries(names.map((name) => [name, git(['show', `${sha}:${name}`])]));
}

export async function githubLoop(
  options: { onProgress?: (progress: LoopProgress) => void; repair?: boolean; waits?: AutomergeEnvironment['waits'] } = {},
): Promise<GitHubLoop> {
  const server = await startGitHubServer();
  const { model } = server;
  model.setCollaborator(MAINTAINER, 'write');
  const repo = makeTempRepo('proofgate-gh-e2e-');
  const root = mkdtempSync(join(tmpdir(), 'proofgate-gh-e2e-state-'));
  const remote = join(root, 'remote.git');
  const storage = createLocalRunStorage({ directory: join(root, 'store'), namespace: 'automerge', policy: defaultStoragePolicy });
  const forge = createGitHubForge({
    auth: { kind: 'token', token: 'test-token' },
    baseUrl: server.baseUrl,
    owner: model.owner,
    repo: model.repo,
    selfLogin: SELF,
    trustedBranch: model.defaultBranch,
    workspace: { directory: join(root, 'workspaces'), remoteUrl: remote },
    logger: pino({ level: 'silent' }),
    retry: { retries: 2, baseDelayMs: 1 },
    throttle: { secondMs: 1, writeIntervalMs: 0, notificationIntervalMs: 0, maxRetries: 2 },
  });
  const progress: LoopProgress[] = [];
  const env: AutomergeEnvironment = {
    forge,
    store: new LedgerStore(storage.eventStore),
    secret: randomBytes(32),
    reviewer: panelReviewer({ dataDir: join(root, 'reviews') }),
    repair: options.repair === true ? builtinRepair : null,
    signals: new ChangeSignals(),
    identity: { name: 'proofgate', email: 'proofgate@example.test' },
    clock: systemClock,
    waits: options.waits ?? { transientPollMs: 5_000, shepherdPollMs: 5_000 },
    onProgress: (line) => {
      progress.push(line);
      options.onProgress?.(line);
    },
  };
  const jobs = new ChangeJobs(env);
  const router = new AutomergeRouter(jobs);
  const repoPayload = repositoryPayload(model.owner, model.repo);
  const repositoryId = repoPayload.id as number;

  async function send(signed: SignedDelivery): Promise<RouteResult | null> {
    // A fresh delivery ledger per send: these tests exercise the router's own redelivery handling (test/forge/github/webhooks.test.ts covers the ledger).
    const event = await parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: WEBHOOK_SECRET, deliveries: memoryDeliveryLedger() });
    if (event.kind === 'ignored' || event.kind === 'duplicate') throw new Error(`delivery ${event.kind}: ${event.reason}`);
    return router.handleEvent(event);
  }

  function sign(eventName: string, payload: Record<string, unknown>): SignedDelivery {
    return signDelivery(eventName, { ...payload, repository: repoPayload }, WEBHOOK_SECRET);
  }

  function deliver(eventName: string, payload: Record<string, unknown>): Promise<RouteResult | null> {
    return send(sign(eventName, payload));
  }

  function commentDelivery(pr: number, body: string, author = MAINTAINER) {
    const created = model.addComment(pr, author, body);
    const payload = (action: string, text: string) => issueCommentPayload(server.url, `${model.owner}/${model.repo}`, pr, { ...created, author }, text, action);
    return {
      commentId: created.id,
      delivery: sign('issue_comment', payload('created', body)),
      edit(edit: { body?: string } = {}) {
        created.updatedAt = model.now();
        if (edit.body !== undefined) created.body = edit.body;
        return sign('issue_comment', { ...payload('edited', created.body), changes: { body: { from: body } } });
      },
    };
  }

  const watchers: NodeJS.Timeout[] = [];
  return {
    server,
    repo,
    env,
    router,
    progress,
    remote,
    followPushes(pr, branch) {
      const seen: string[] = [];
      let busy = false;
      const timer = setInterval(() => {
        if (busy) return;
        busy = true;
        void (async () => {
          const sha = execFileSync('git', ['-C', remote, 'rev-parse', `refs/heads/${branch}`], { encoding: 'utf8' }).trim();
          if (sha === model.headSha(pr)) return;
          const parent = execFileSync('git', ['-C', remote, 'rev-parse', `${sha}^`], { encoding: 'utf8' }).trim();
          if (!model.hasCommit(parent)) model.commit({ sha: parent, files: remoteFiles(remote, parent) });
          model.commit({ sha, parent, files: remoteFiles(remote, sha) });
          model.pushHead(pr, sha);
          model.setMergeable(pr, 'MERGEABLE');
          model.addCheckRun({ sha, name: 'ci' });
          seen.push(sha);
          const base = fixture('pull_request', 'synchronize.payload.json');
          const pull = {
            ...(base.pull_request as object),
            number: pr,
            head: { ...((base.pull_request as Record<string, unknown>).head as object), sha, ref: branch },
          };
          await deliver('pull_request', { ...base, action: 'synchronize', number: pr, after: sha, pull_request: pull });
        })()
          .catch((error: unknown) => progress.push({ changeId: String(pr), at: new Date().toISOString(), text: `harness: ${String(error)}` }))
          .finally(() => {
            busy = false;
          });
      }, 50);
      watchers.push(timer);
      return seen;
    },
    mirrorCommit(sha, parent) {
      return model.commit({ sha, files: treeFiles(repo, sha), ...(parent === undefined ? {} : { parent }) });
    },
    syncRemote() {
      rmSync(remote, { recursive: true, force: true });
      execFileSync('git', ['clone', '-q', '--bare', repo.dir, remote]);
    },
    async comment(pr, body, author = MAINTAINER) {
      const routed = await send(commentDelivery(pr, body, author).delivery);
      if (routed === null) throw new Error('no route result');
      return routed;
    },
    commentDelivery,
    send,
    async completeCheck(pr, runId, conclusion = 'success') {
      const run = model.checkRuns.find((r) => r.id === runId);
      if (run === undefined) throw new Error(`no check run ${runId}`);
      run.status = 'completed';
      run.conclusion = conclusion;
      run.completedAt = model.now();
      await deliver('check_run', checkRunCompletedPayload(server.url, repositoryId, run, conclusion, [pr]));
    },
    async cleanup() {
      for (const timer of watchers) clearInterval(timer);
      await jobs.close();
      await storage.close();
      await server.close();
      repo.cleanup();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
