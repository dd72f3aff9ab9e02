/**
 * What the tests of GitHub's merge queue share: a base whose ruleset requires
 * the queue with one pull request on it, a loop's outcome, and proofgate's
 * status comment on that pull request; and for proofgate's own queue on
 * GitHub (the staging queue): a test acting as CI on the staging branches,
 * a loop whose staging queue polls fast, a base with several pull requests,
 * and the queue's stream.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { expect } from 'vitest';
import type { QueueEvent } from '../../../src/automerge/queue/queue.js';
import { queueStoreOf } from '../../../src/automerge/queue/step.js';
import { readQueueEvents } from '../../../src/automerge/queue/store.js';
import { createGitHubForge } from '../../../src/forge/github/index.js';
import type { Forge } from '../../../src/forge/port.js';
import type { JobResult, LoopOutcome } from '../../../src/automerge/loop/index.js';
import { within } from '../../support/wait.js';
import { startHarness, type Harness } from './harness.js';
import type { MergeQueuePort } from '../../../src/forge/port.js';
import { CONFIG, SELF, type GitHubLoop } from '../../e2e/github-support.js';
import { repositoryPayload, signDelivery, type ModelDelivery, type RepositoryModel } from '../../support/github-server/index.js';
import { memoryDeliveryLedger, parseWebhookDelivery } from '../../../src/forge/github/index.js';

/**
 * main with the trusted config and a MERGE_QUEUE ruleset, and PR #1 from
 * `feature` (by `author`, `title`) with a pending `ci` check. An author named
 * gets read permission on the repository.
 */
export function openQueuedBase(l: GitHubLoop, options: { readonly author?: string; readonly title?: string } = {}): { head: string; runId: number } {
  const base = l.repo.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': CONFIG }, 'initial');
  const head = l.repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  l.syncRemote();
  const { model } = l.server;
  model.setBranch('main', l.mirrorCommit(base));
  l.mirrorCommit(head, base);
  model.addRuleset('main', { name: 'merge queue', mergeQueue: true });
  if (options.author !== undefined) model.setCollaborator(options.author, 'read');
  const pr = model.openPullRequest({ author: options.author ?? 'casey', head: 'feature', headSha: head, title: options.title ?? 'Add feature' });
  expect(pr.number).toBe(1);
  return { head, runId: model.addCheckRun({ sha: head, name: 'ci', status: 'in_progress' }).id };
}

/** The outcome of a loop a command started (its job ran here). */
export async function outcomeOf(done: Promise<JobResult> | undefined): Promise<LoopOutcome> {
  if (done === undefined) throw new Error('no job was dispatched');
  const result = await within(done, 'the loop did not end');
  if (result.kind !== 'ran') throw new Error('job held elsewhere');
  return result.outcome;
}

/** proofgate's automerge comments on PR #1, joined. */
export const statusComment = (l: GitHubLoop): string =>
  l.server.model
    .commentsOf(1)
    .filter((c) => c.author === SELF && c.body.includes('automerge'))
    .map((c) => c.body)
    .join('\n');

/** A check run a test's CI posted on a staging commit. */
export interface CiRun {
  readonly branch: string;
  readonly sha: string;
  readonly name: string;
  readonly conclusion: string;
}

/**
 * A test acting as the repository's CI, which runs on pushes to the staging
 * branches (`proofgate-staging/...`): each time one moves, `verdict(sha)`
 * says which check runs to post on the new commit (none: CI does not answer
 * for it). Every posted run is listed in `runs`, every branch that moved
 * (any branch) in `pushes`; `stop()` stops it.
 */
export function stagingCi(
  model: RepositoryModel,
  verdict: (sha: string, branch: string) => readonly { readonly name: string; readonly conclusion: string }[],
): { readonly runs: CiRun[]; readonly pushes: { branch: string; sha: string }[]; stop(): void } {
  const runs: CiRun[] = [];
  const pushes: { branch: string; sha: string }[] = [];
  model.afterBranchSet = (branch, sha) => {
    pushes.push({ branch, sha });
    if (!branch.startsWith('proofgate-staging/')) return;
    for (const { name, conclusion } of verdict(sha, branch)) {
      model.addCheckRun({ sha, name, conclusion, detailsUrl: `https://ci.example.test/${name}/${sha.slice(0, 12)}` });
      runs.push({ branch, sha, name, conclusion });
    }
  };
  return {
    runs,
    pushes,
    stop() {
      model.afterBranchSet = null;
    },
  };
}

/** Whether a file exists at a commit of the model. */
export const hasFile = (model: RepositoryModel, sha: string, path: string): boolean => model.file(sha, path) !== null;

/** The trusted config with proofgate's own queue turned on (GitHub: opt-in). */
export const STAGING_CONFIG = `${CONFIG}automerge:\n  queue:\n    enabled: true\n`;

/**
 * Give a loop's environment a GitHub forge whose staging queue polls the
 * candidate's checks every few milliseconds (the loop's own forge polls at
 * the default); the rest is the loop's forge as it was made. Returns the
 * directory of its workspaces, for the caller to remove.
 */
export function withFastStaging(l: GitHubLoop): string {
  const workspaces = mkdtempSync(join(tmpdir(), 'proofgate-gh-staging-'));
  const { model } = l.server;
  const forge = createGitHubForge({
    auth: { kind: 'token', token: 'test-token' },
    baseUrl: l.server.baseUrl,
    owner: model.owner,
    repo: model.repo,
    selfLogin: SELF,
    trustedBranch: model.defaultBranch,
    workspace: { directory: workspaces, remoteUrl: l.remote },
    logger: pino({ level: 'silent' }),
    retry: { retries: 2, baseDelayMs: 1 },
    throttle: { secondMs: 1, writeIntervalMs: 0, notificationIntervalMs: 0, maxRetries: 2 },
    staging: { pollMs: 5 },
  });
  (l.env as { forge: Forge }).forge = forge;
  return workspaces;
}

/**
 * main with `config` and a branch protection rule requiring `ci`, and one
 * pull request per entry (in order, #1, #2, ...), each from its own branch
 * off main changing `files`, with a green `ci` on its head. Real commits
 * (the review workspace fetches them), mirrored into the model.
 */
export function openStagingBase(
  l: GitHubLoop,
  prs: readonly { readonly files: Record<string, string>; readonly title?: string }[],
  config = STAGING_CONFIG,
): { base: string; heads: string[] } {
  const base = l.repo.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': config }, 'initial');
  const heads = prs.map((pr, index) => l.repo.commit(`feature-${index + 1}`, pr.files, `change ${index + 1}`, 'main'));
  l.syncRemote();
  const { model } = l.server;
  model.setBranch('main', l.mirrorCommit(base));
  model.protectBranch('main', { requiredChecks: ['ci'] });
  prs.forEach((pr, index) => {
    const head = heads[index] as string;
    l.mirrorCommit(head, base);
    const opened = model.openPullRequest({ author: 'casey', head: `feature-${index + 1}`, headSha: head, title: pr.title ?? `Change ${index + 1}` });
    expect(opened.number).toBe(index + 1);
    model.addCheckRun({ sha: head, name: 'ci' });
  });
  return { base, heads };
}

/** proofgate's automerge comments on pull request `number`, joined. */
export const commentsOn = (l: GitHubLoop, number: number): string =>
  l.server.model
    .commentsOf(number)
    .filter((c) => c.author === SELF && c.body.includes('automerge'))
    .map((c) => c.body)
    .join('\n');

/** Pause the base's queue (as a maintainer would) until `resume` is called: changes gather into one batch. */
export async function pausedQueue(l: GitHubLoop, base = 'main'): Promise<{ resume(): Promise<void> }> {
  const queues = queueStoreOf(l.env);
  await queues.append(base, [{ type: 'queue-paused', data: { by: 'maint', at: queues.now() } }]);
  return {
    async resume() {
      await queues.append(base, [{ type: 'queue-resumed', data: { by: 'maint', at: queues.now() } }]);
    },
  };
}

/** The waiting changes of the base's queue, in order. */
export async function queuedChanges(l: GitHubLoop, base = 'main'): Promise<string[]> {
  return (await queueStoreOf(l.env).load(base)).entries.map((entry) => entry.change);
}

/** Every event of the base's queue stream. */
export function queueEvents(l: GitHubLoop, base = 'main'): Promise<QueueEvent[]> {
  return readQueueEvents(l.env.store.events, base);
}

/** The error `work` rejects with; fails the test when it resolves. */
export async function caught(work: Promise<unknown>): Promise<unknown> {
  try {
    await work;
  } catch (error) {
    return error;
  }
  throw new Error('expected a refusal');
}

/** A harness whose base `main` requires `ci` (branch protection), its staging queue polling every 2 ms and timing out after `timeoutMs`. */
export async function stagingPort(timeoutMs: number): Promise<{ h: Harness; port: MergeQueuePort }> {
  const h = await startHarness({ forge: { staging: { pollMs: 2, timeoutMs } } });
  h.server.model.protectBranch('main', { requiredChecks: ['ci'] });
  const port = h.forge.mergeQueue;
  if (port === undefined) {
    await h.close();
    throw new Error('the GitHub forge has no merge queue port');
  }
  return { h, port };
}

/** Sends deliveries GitHub made (or would make), signed, through the loop's router; a fresh delivery ledger each, as a redelivery under a new id. */
export async function deliver(l: GitHubLoop, deliveries: readonly ModelDelivery[]): Promise<void> {
  const secret = 'merge-queue-test-secret';
  const repository = repositoryPayload(l.server.model.owner, l.server.model.repo);
  for (const { eventName, payload } of deliveries) {
    const signed = signDelivery(eventName, { ...payload, repository }, secret);
    const event = await parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret, deliveries: memoryDeliveryLedger() });
    if (event.kind === 'ignored' || event.kind === 'duplicate') throw new Error(`${eventName}: ${event.reason}`);
    await l.router.handleEvent(event);
  }
}
