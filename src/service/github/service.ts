/**
 * `proofgate serve` as a GitHub App. The pieces, in the order work flows:
 *
 * 1. HTTP `POST /webhooks` -> the intake (intake.ts): signature over the
 *    exact bytes, the delivery recorded and claimed (group commit), 202.
 * 2. The intake's sink turns each accepted delivery into jobs (work.ts,
 *    pure) and adds them to the job queue (jobs/: SQLite or PostgreSQL).
 *    Adding is not awaited by the answer; a job lost to a crash between the
 *    two is found by the next reconciliation pass.
 * 3. Workers take jobs, one per pull request at a time anywhere, and run
 *    them against the repository's context: its forge (the installation's
 *    token), its ledger (a store namespace per repository), the automerge
 *    router and `ChangeJobs` in park mode: a change that must wait ends its
 *    job, and a `resume` job is queued for when the wait is due (an event
 *    about the change makes it due at once).
 * 4. A reconciliation pass at start and every `reconcileMs` lists the
 *    installations' open pull requests: missed deliveries delay work but
 *    never lose it.
 * 5. The observer dashboard and the read API (`GET /`, `/api/...`): every
 *    snapshot a job takes is recorded as the change's facts (changes.ts),
 *    and a projection in memory of those facts and the repositories'
 *    ledgers, rebuilt at start and kept up from the store, answers the
 *    reads (a token of the store's identities off loopback; writes refused).
 *
 * Pull requests from forks are reviewed and merged like any other, but never
 * repaired by a push (the App cannot push to a fork, and a fork's branch is
 * its author's).
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ProofgateError, errorMessage, systemClock, type Clock, type JsonValue } from '../../core/index.js';
import { commandMention, parseCommands } from '../../automerge/commands.js';
import { automergeActive } from '../../automerge/ledger.js';
import {
  AutomergeRouter,
  ChangeJobs,
  ChangeSignals,
  DEFAULT_LEASE_MS,
  LedgerStore,
  builtinRepair,
  defaultProofProducers,
  loadOrCreateSecret,
  panelReviewer,
  type AutomergeEnvironment,
  type CommentOptions,
  type JobResult,
  type Reviewer,
  type WaitSettings,
} from '../../automerge/loop/index.js';
import { createGitHubForge } from '../../forge/github/forge.js';
import type { GitHubRetryOptions, GitHubThrottleOptions } from '../../forge/github/client.js';
import type { GitHubForgeEvent } from '../../forge/github/webhook-events.js';
import type { Forge, ForgeComment } from '../../forge/port.js';
import { githubWorkflowProducer } from '../../proof/producers/github-workflow.js';
import type { ProofProducers } from '../../proof/index.js';
import { REVIEW_RUNS_NAMESPACE, type ReviewToolContext } from '../../review/index.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import type { RunStorage } from '../../storage/policy-types.js';
import { createPostgresRunStorage, loadPg } from '../../storage/postgres/index.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
import { createServiceServer, type ServiceServer } from '../http.js';
import { dashboardFiles } from '../dashboard/serve.js';
import { IDENTITIES_NAMESPACE, identityStore } from '../identities.js';
import { openFeedProjection, type ChangeProjection } from '../projection.js';
import { CHANGES_NAMESPACE, changeFactsOf, githubFeed, githubReadApi, recordDeliveredFacts, recordingForge } from './changes.js';
import { createWebhookIntake, logText, type AcceptedDelivery } from '../intake.js';
import { createPostgresJobQueue, createSqliteJobQueue, type JobEvent, type JobQueue, type JobRunner, type TakenJob } from '../jobs/index.js';
import { createServiceMetrics } from '../metrics.js';
import type { GitHubAppSettings } from '../settings.js';
import { GitHubAppClient, type AppIdentity } from './app.js';
import { loadOrCreatePostgresSecret } from './secret.js';
import {
  TASK,
  checkRepository,
  isChangeNumber,
  jobsForDelivery,
  reconcileJob,
  repositoryJob,
  resumeJob,
  sweepJob,
  type PullAddress,
  type SweepSince,
} from './work.js';

/**
 * The command that starts a change's loop from nothing: it waits for a loop
 * slot (only when no loop of the change runs here). The others never wait:
 * a stop or a status must not queue behind a wait on the command lane.
 */
const LOOP_STARTERS: ReadonlySet<string> = new Set(['automerge']);

/** The store namespace of the webhook intake (delivery records and claims). */
export const INTAKE_NAMESPACE = 'github-intake';

export type GitHubServiceStorage =
  | { readonly kind: 'sqlite'; readonly dataDir: string }
  /** `workDir`: this machine's directory for clones and review scratch (never shared state). */
  | { readonly kind: 'postgres'; readonly url: string; readonly workDir: string };

export interface GitHubServiceOptions {
  readonly app: GitHubAppSettings;
  readonly storage: GitHubServiceStorage;
  /** `PROOFGATE_MARKER_SECRET`, or null: the secret kept in the database (PostgreSQL) or the data directory (SQLite). */
  readonly markerSecret: Uint8Array | null;
  readonly host: string;
  readonly port: number;
  readonly http: boolean;
  /** Jobs run at once in this process (default 1). */
  readonly workers?: number;
  readonly logger: Logger;
  readonly clock?: Clock;
  /** Time between reconciliation passes (default 600000 ms). */
  readonly reconcileMs?: number;
  /** A dead worker's jobs are taken by others after this long without its heartbeat (default 60000 ms). */
  readonly retakeMs?: number;
  /** How often workers look for due jobs when nothing woke them (default 1000 ms). */
  readonly pollMs?: number;
  /** The unit of a failed job's backoff: its n-th failure waits e^min(n,10) times this (default 1000 ms). */
  readonly retryBaseMs?: number;
  /** A change's lease (default 60000 ms). */
  readonly leaseMs?: number;
  readonly waits?: Partial<WaitSettings>;
  /** The git remote of a repository (default: the App's host, https). Tests point it at a local bare repository. */
  readonly remoteUrl?: (owner: string, repo: string) => string;
  /** The reviewer of a repository (default: the review panel, its runs kept in the repository's store). */
  readonly reviewer?: (repository: string, scratch: string) => Reviewer;
  /** Octokit retry and throttle settings (tests shorten them). */
  readonly retry?: GitHubRetryOptions;
  readonly throttle?: GitHubThrottleOptions;
  /** Every job event of this process's workers (tests, metrics). */
  readonly observe?: (event: JobEvent) => void;
  /** How often a proof scenario's workflow run is looked at while it runs (default 10000 ms). */
  readonly proofPollMs?: number;
  /** How often the dashboard's projection reads the store's new events (default 500 ms). */
  readonly dashboardPollMs?: number;
}

export interface GitHubService {
  /** `http://host:port` as bound, or null without HTTP. */
  readonly url: string | null;
  readonly app: AppIdentity;
  readonly queue: JobQueue;
  readonly runner: JobRunner;
  readonly stopped: Promise<void>;
  /** Change loops running in this process now (queue jobs and loops that commands started). */
  runningLoops(): number;
  /** Stop taking work, give running jobs `graceMs`, release the rest, close. */
  stop(graceMs: number): Promise<void>;
}

function addressOf(payload: JsonValue): PullAddress {
  const p = payload as { installationId?: unknown; repository?: unknown; changeId?: unknown } | null;
  if (p === null || typeof p !== 'object' || typeof p.installationId !== 'number' || typeof p.repository !== 'string' || typeof p.changeId !== 'string') {
    throw new ProofgateError('INVALID_INPUT', 'a job payload does not name an installation, a repository and a change');
  }
  checkRepository(p.repository);
  if (!isChangeNumber(p.changeId)) throw new ProofgateError('INVALID_INPUT', 'a job names a change that is not a pull request number');
  return { installationId: p.installationId, repository: p.repository, changeId: p.changeId };
}

/** What one repository's jobs run against (made once per process and repository). */
interface RepositoryContext {
  readonly forge: Forge;
  readonly env: AutomergeEnvironment;
  readonly jobs: ChangeJobs;
  readonly router: AutomergeRouter;
  /** The jobs started in this process per change, not yet followed up by `settle`. */
  readonly started: Map<string, Promise<JobResult>[]>;
}

export async function startGitHubService(options: GitHubServiceOptions): Promise<GitHubService> {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  const reconcileMs = options.reconcileMs ?? 600_000;
  // This service's own registry (GET /metrics): the queue and the contexts are read at each scrape, once they exist.
  const metrics = createServiceMetrics({
    webhooks: true,
    github: true,
    queue: { port: { counts: () => queue.counts() }, tasks: Object.values(TASK) },
    runningLoops: () => made.reduce((sum, context) => sum + context.jobs.running().length, 0),
  });
  const client = new GitHubAppClient({
    settings: options.app,
    logger,
    observe: (observation, installationId) => metrics.githubRequest(observation, installationId),
    ...(options.retry === undefined ? {} : { retry: options.retry }),
    ...(options.throttle === undefined ? {} : { throttle: options.throttle }),
  });
  const app = await client.identity();
  const workDir = options.storage.kind === 'sqlite' ? options.storage.dataDir : options.storage.workDir;
  await mkdir(workDir, { recursive: true });

  // Storage: one namespace per repository plus the intake's, one database (a shared pool on PostgreSQL).
  const pool = options.storage.kind === 'postgres' ? new (loadPg().Pool)({ connectionString: options.storage.url, max: 8 }) : null;
  // An idle connection the server ends (a restart, a failover, pg_terminate_backend) is an 'error' on the pool: logged,
  // and the pool connects again for the next query. Without a listener it would end the process.
  pool?.on('error', (error) => logger.warn({ err: errorMessage(error) }, 'database connection lost'));
  const opened = new Map<string, Promise<RunStorage>>();
  const openStorage = (namespace: string): Promise<RunStorage> => {
    let storage = opened.get(namespace);
    if (storage === undefined) {
      storage =
        pool === null
          ? Promise.resolve(createLocalRunStorage({ directory: workDir, namespace, policy: defaultStoragePolicy }))
          : createPostgresRunStorage({ pool, namespace, policy: defaultStoragePolicy });
      opened.set(namespace, storage);
    }
    return storage;
  };
  // The queue's own failures (a poll, a heartbeat, a write after a job): logged, the runners go on.
  const onError = (error: unknown): void => logger.error({ err: errorMessage(error) }, 'job queue');
  const queue =
    options.storage.kind === 'sqlite'
      ? createSqliteJobQueue({ path: workDir, onError })
      : await createPostgresJobQueue({ connectionString: options.storage.url, onError });
  const secret = options.markerSecret ?? (pool === null ? await loadOrCreateSecret(workDir) : await loadOrCreatePostgresSecret(pool));
  const intakeStorage = await openStorage(INTAKE_NAMESPACE);
  // The dashboard: the change facts the jobs record, the repositories' ledgers, the identities' tokens (`proofgate token create`).
  const changesStorage = await openStorage(CHANGES_NAMESPACE);
  const identities = identityStore((await openStorage(IDENTITIES_NAMESPACE)).eventStore, { selfLogin: app.botLogin });
  const projection: ChangeProjection = openFeedProjection(
    githubFeed({
      facts: changesStorage.eventStore,
      ledgerOf: async (repository) => {
        const storage = await openStorage(`github:${repository}`);
        return { events: storage.eventStore, ledger: new LedgerStore(storage.eventStore, clock) };
      },
    }),
    { dataDir: null, now: () => clock.now() },
  );
  await projection.rebuild();
  const board = new AbortController();
  const dashboardPollMs = options.dashboardPollMs ?? 500;
  const boardWatch = (async () => {
    while (!board.signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          board.signal.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, dashboardPollMs);
        board.signal.addEventListener('abort', done);
      });
      if (board.signal.aborted) return;
      try {
        await projection.refresh();
      } catch (error) {
        if (!board.signal.aborted) logger.warn({ err: errorMessage(error) }, 'dashboard projection not refreshed');
      }
    }
  })();

  const contexts = new Map<string, Promise<RepositoryContext>>();
  /** The contexts made so far, once made (for counting what runs). */
  const made: RepositoryContext[] = [];
  /** Loops started by commands, running beside the command lane, followed up until they end. */
  const background = new Set<Promise<void>>();
  const loopLimit = options.workers ?? 1;
  // One context per installation and repository: a reinstalled App (a new installation id) gets a context with its own token.
  const contextOf = (installationId: number, repository: string): Promise<RepositoryContext> => {
    const key = `${installationId}:${repository.toLowerCase()}`;
    let context = contexts.get(key);
    if (context === undefined) {
      context = makeContext(installationId, repository);
      contexts.set(key, context);
      context.catch(() => contexts.delete(key));
    }
    return context;
  };

  async function makeContext(installationId: number, repository: string): Promise<RepositoryContext> {
    const { owner, name } = checkRepository(repository);
    const storage = await openStorage(`github:${repository.toLowerCase()}`);
    const reviewRuns = await openStorage(`github:${repository.toLowerCase()}:${REVIEW_RUNS_NAMESPACE}`);
    const scratch = join(workDir, 'github', owner.toLowerCase(), name.toLowerCase());
    const octokit = client.installation(installationId);
    // Every snapshot a job takes is also what the dashboard shows of the change (recorded when it says something new).
    const forge = recordingForge(
      createGitHubForge({
        octokit,
        owner,
        repo: name,
        selfLogin: app.botLogin,
        logger,
        workspace: { directory: join(scratch, 'workspaces'), ...(options.remoteUrl === undefined ? {} : { remoteUrl: options.remoteUrl(owner, name) }) },
      }),
      changesStorage.eventStore,
      repository,
      (snapshot) => changeFactsOf(repository, snapshot, { selfLogin: app.botLogin, secret }),
      (snapshot, error) => logger.warn({ repository, change: snapshot.id, err: errorMessage(error) }, 'change facts not recorded'),
    );
    // Proof scenarios run here jailed (local) or as a workflow dispatched on a protected branch of the repository.
    const proofProducers = (review: ReviewToolContext): ProofProducers => ({
      ...defaultProofProducers(review),
      'github-workflow': githubWorkflowProducer({
        octokit,
        owner,
        repo: name,
        clock,
        ...(options.proofPollMs === undefined ? {} : { pollIntervalMs: options.proofPollMs }),
      }),
    });
    const reviewer = options.reviewer?.(repository, scratch) ?? panelReviewer({ dataDir: join(scratch, 'reviews'), storage: reviewRuns, proofProducers });
    const env: AutomergeEnvironment = {
      forge,
      store: new LedgerStore(storage.eventStore, clock),
      secret,
      reviewer,
      repair: builtinRepair,
      signals: new ChangeSignals(clock),
      identity: { name: app.botLogin, email: `${app.id}+${app.botLogin}@users.noreply.github.com` },
      clock,
      ...(options.waits === undefined ? {} : { waits: options.waits }),
      onProgress: (line) => logger.info({ repository, change: line.changeId }, logText(line.text)),
      reviewRuns,
      approvals: storage,
      proofProducers: ['local', 'github-workflow'],
      observe: (observation) => metrics.automerge(observation),
    };
    const started = new Map<string, Promise<JobResult>[]>();
    const jobs = new ChangeJobs(env, {
      park: true,
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
      onJob: (changeId, done) => started.set(changeId, [...(started.get(changeId) ?? []), done]),
    });
    const router = new AutomergeRouter(jobs, { restartOnEvents: true });
    const context: RepositoryContext = { forge, env, jobs, router, started };
    made.push(context);
    return context;
  }

  /** Wait for the jobs the work started for the change, then queue what comes after them. */
  async function settle(context: RepositoryContext, address: PullAddress): Promise<void> {
    for (;;) {
      const pending = context.started.get(address.changeId) ?? [];
      context.started.delete(address.changeId);
      if (pending.length === 0) return;
      for (const result of await Promise.all(pending)) {
        if (result.kind === 'held-elsewhere') {
          // Another process holds the lease (it may be dying): try again when it runs out.
          await queue.add(resumeJob(address, new Date(Math.max(Date.parse(result.holder.until), clock.now().getTime()))));
        } else if (result.kind === 'ran' && result.outcome.kind === 'parked' && result.outcome.wakeAt !== undefined) {
          await queue.add(resumeJob(address, new Date(result.outcome.wakeAt)));
        }
      }
    }
  }

  /**
   * A `resume` on the change's own queue, due when a loop's lease would run
   * out: if this process dies while the loop a command started runs, the
   * change is taken up again elsewhere.
   */
  function safetyNet(address: PullAddress): Promise<void> {
    return queue.add(resumeJob(address, new Date(clock.now().getTime() + (options.leaseMs ?? DEFAULT_LEASE_MS))));
  }

  /** Run the change's job when automerge is on and none runs here, then queue what follows it. */
  async function runIfActive(context: RepositoryContext, address: PullAddress): Promise<void> {
    const loaded = await context.env.store.load(address.changeId);
    if (!automergeActive(loaded.state) || loaded.state.merged !== null) return;
    if (context.jobs.active(address.changeId)) {
      // Its loop runs here (a command started it): wake it, and keep the safety net this resume was (they share a key).
      context.env.signals.notify(address.changeId);
      await safetyNet(address);
      return;
    }
    context.jobs.dispatch(address.changeId);
    await settle(context, address);
  }

  async function resume(job: TakenJob): Promise<void> {
    const address = addressOf(job.payload);
    await runIfActive(await contextOf(address.installationId, address.repository), address);
  }

  async function comment(job: TakenJob): Promise<void> {
    const address = addressOf(job.payload);
    const record = (job.payload as { record?: { streamId?: unknown; eventId?: unknown } }).record;
    if (typeof record?.streamId !== 'string' || typeof record.eventId !== 'string')
      throw new ProofgateError('INVALID_INPUT', 'a comment job does not name its record');
    const events = await intakeStorage.eventStore.read(record.streamId);
    const stored = events.find((event) => event.id === record.eventId);
    if (stored === undefined) throw new ProofgateError('NOT_FOUND', `delivery record ${record.eventId} is not in the store`);
    const result = (stored.data as { result?: GitHubForgeEvent }).result;
    if (result === undefined || (result.kind !== 'comment-created' && result.kind !== 'comment-edited')) return;
    const context = await contextOf(address.installationId, address.repository);
    const starts = parseCommands(result.comment.body, commandMention(app.botLogin)).some((command) => LOOP_STARTERS.has(command.kind));
    if (starts && !context.jobs.active(address.changeId)) await loopSlot(job.signal);
    const routed = await context.router.handleComment(result.changeId, result.comment, routeOptions(job));
    await afterCommands(context, address, routed.skipped !== null);
  }

  /**
   * How the command lane routes: one job of a change's comments at a time
   * anywhere (its queue), so a route that neither finished nor failed was
   * killed and the next delivery finishes it (`serial`); and only while this
   * worker holds the job, so a worker paused past the retake delay stops
   * where it woke instead of repeating what the job's new holder did.
   */
  function routeOptions(job: TakenJob): CommentOptions {
    return {
      serial: true,
      fence: async () => {
        if (!(await job.held()))
          throw new ProofgateError('LEASE_LOST', `job ${job.id} (${job.key}) was taken from this worker: it stops here`, { job: job.id });
      },
    };
  }

  /**
   * Loops started by commands run beside the command lanes, so they are
   * counted apart: a command that may start one waits (holding its worker)
   * until fewer than `workers` of them run in this process. A flood of
   * automerge comments cannot start more loops at once than the process has
   * workers.
   */
  async function loopSlot(signal: AbortSignal): Promise<void> {
    if (background.size >= loopLimit) logger.info({ running: background.size, workers: loopLimit }, 'command waits for a loop slot');
    while (background.size >= loopLimit) {
      if (signal.aborted) throw new ProofgateError('ABORTED', 'the service is stopping: the command waits for its next run');
      const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await Promise.race([...background, aborted]);
    }
  }

  /**
   * After a comment is routed on the command lane: a loop the commands
   * started runs on beside the lane (the next comment, a stop, is routed
   * while it runs), and its end is followed up in the background. A comment
   * whose commands were applied before (`applied`: a retried job, a lost
   * delivery found by a sweep) may have been cut short before its loop
   * started: a change whose automerge is on and that runs nowhere here then
   * gets a `resume` on its own queue.
   */
  async function afterCommands(context: RepositoryContext, address: PullAddress, applied: boolean): Promise<void> {
    if ((context.started.get(address.changeId)?.length ?? 0) > 0) {
      await safetyNet(address);
      const followed: Promise<void> = settle(context, address)
        .catch((error: unknown) => logger.error({ repository: address.repository, change: address.changeId, err: errorMessage(error) }, 'change job failed'))
        .finally(() => background.delete(followed));
      background.add(followed);
      return;
    }
    if (!applied) return;
    const loaded = await context.env.store.load(address.changeId);
    if (automergeActive(loaded.state) && loaded.state.merged === null && !context.jobs.active(address.changeId)) await queue.add(resumeJob(address));
  }

  async function sweep(job: TakenJob): Promise<void> {
    const address = addressOf(job.payload);
    const context = await contextOf(address.installationId, address.repository);
    const snapshot = await context.forge.snapshot(address.changeId);
    if (snapshot.state !== 'open') return;
    // proofgate's own comments are skipped by the router.
    const commands = snapshot.comments.filter((c: ForgeComment) => parseCommands(c.body, commandMention(app.botLogin)).length > 0);
    let applied = false;
    for (const c of commands) if ((await context.router.handleComment(address.changeId, c, routeOptions(job))).skipped !== null) applied = true;
    await afterCommands(context, address, applied);
  }

  async function repositoryPass(job: TakenJob): Promise<void> {
    const p = job.payload as { installationId?: unknown; repository?: unknown; sweep?: SweepSince };
    if (typeof p.installationId !== 'number' || typeof p.repository !== 'string')
      throw new ProofgateError('INVALID_INPUT', 'a repository job does not name its repository');
    const { owner, name } = checkRepository(p.repository);
    const pulls = await client.openPulls(p.installationId, owner, name, null);
    const since = p.sweep === null || p.sweep === undefined ? undefined : p.sweep.since;
    for (const pull of pulls) {
      const address: PullAddress = { installationId: p.installationId, repository: p.repository, changeId: String(pull.number) };
      if (pull.labels.some((label) => label.startsWith('proofgate:'))) await queue.add(resumeJob(address));
      if (since !== undefined && (since === null || pull.updatedAt >= since)) await queue.add(sweepJob(address));
    }
  }

  async function reconcile(job: TakenJob): Promise<void> {
    const startedAt = clock.now().toISOString();
    const since = (job.payload as { since?: unknown }).since;
    for (const installationId of await client.installationIds()) {
      for (const repo of await client.repositories(installationId)) {
        await queue.add(repositoryJob(installationId, repo.repository, { since: typeof since === 'string' ? since : null }));
      }
    }
    await queue.add(reconcileJob(startedAt, new Date(clock.now().getTime() + reconcileMs)));
  }

  const sink = (accepted: AcceptedDelivery): void => {
    // A change closed, pushed or reopened: its facts say so at once, whether or not a job looks at it.
    if (accepted.result.kind !== 'ignored') {
      void recordDeliveredFacts(changesStorage.eventStore, accepted.result).catch((error: unknown) =>
        logger.warn({ deliveryId: accepted.deliveryId, err: errorMessage(error) }, 'change facts not recorded'),
      );
    }
    for (const spec of jobsForDelivery(accepted)) {
      void queue.add(spec).catch((error: unknown) => {
        logger.error({ deliveryId: accepted.deliveryId, err: errorMessage(error) }, 'job not queued; the next reconciliation pass finds the work');
      });
    }
  };

  const runner = await queue.run({
    handlers: { [TASK.comment]: comment, [TASK.resume]: resume, [TASK.sweep]: sweep, [TASK.repository]: repositoryPass, [TASK.reconcile]: reconcile },
    concurrency: options.workers ?? 1,
    ...(options.retakeMs === undefined ? {} : { retakeMs: options.retakeMs }),
    ...(options.pollMs === undefined ? {} : { pollMs: options.pollMs }),
    ...(options.retryBaseMs === undefined ? {} : { retryBaseMs: options.retryBaseMs }),
    observe: (event) => {
      metrics.jobEvent(event);
      options.observe?.(event);
      if (event.kind === 'failed')
        logger.warn({ task: event.job.task, queue: event.job.queue, attempt: event.job.attempt, final: event.final, err: event.error }, 'job failed');
      if (event.kind === 'unlocked') logger.warn({ workers: event.workerIds, jobs: event.jobs }, 'jobs of dead workers released');
    },
  });
  await queue.add(reconcileJob(null));

  const intake = createWebhookIntake({ events: intakeStorage.eventStore, secret: options.app.webhookSecret, sink, logger });
  let stopping: Promise<void> | null = null;
  const ready = async (): Promise<boolean> => {
    if (stopping !== null) return false;
    await queue.ping();
    await intakeStorage.eventStore.revision('service/ready');
    return true;
  };
  const server: ServiceServer | null = options.http
    ? await createServiceServer({
        host: options.host,
        port: options.port,
        intake,
        ready,
        logger,
        metrics,
        // The Host and other-site checks guard the reads; deliveries are signed, and come through a proxy under the public name.
        checkHost: 'reads',
        api: githubReadApi(identities, projection),
        dashboard: dashboardFiles(),
      })
    : null;
  logger.info({ url: server?.url ?? null, app: app.slug, storage: options.storage.kind }, 'listening');

  let resolveStopped: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));
  const stop = (graceMs: number): Promise<void> => {
    if (stopping !== null) {
      // A second stop: interrupt the running jobs now (each stops at its next safe point).
      for (const context of contexts.values()) void context.then((c) => c.jobs.close()).catch(() => undefined);
      return stopping;
    }
    stopping = (async () => {
      try {
        await server?.close();
        const deadline = Date.now() + graceMs;
        await runner.stop(graceMs);
        // Loops started by commands get what is left of the grace period, then are interrupted with the rest.
        const left = deadline - Date.now();
        if (background.size > 0 && left > 0) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([Promise.allSettled([...background]), new Promise((resolve) => (timer = setTimeout(resolve, left)))]);
          clearTimeout(timer);
        }
        for (const context of contexts.values()) await (await context.catch(() => null))?.jobs.close();
        board.abort();
        await boardWatch;
        await projection.close();
        await queue.close();
        for (const storage of opened.values()) await (await storage.catch(() => null))?.close();
        await pool?.end();
      } catch (error) {
        logger.error({ err: errorMessage(error) }, 'error while stopping');
      } finally {
        logger.info('stopped');
        resolveStopped();
      }
    })();
    return stopping;
  };
  const runningLoops = (): number => made.reduce((sum, context) => sum + context.jobs.running().length, 0);
  return { url: server?.url ?? null, app, queue, runner, stopped, runningLoops, stop };
}
