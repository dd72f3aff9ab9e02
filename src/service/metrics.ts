/**
 * The service's metrics, served as Prometheus text on `GET /metrics`
 * (prom-client). Each service makes its own `Registry`, never prom-client's
 * global one, so several services in one process (tests, a demo) keep their
 * counts apart; prom-client's default process metrics go on that registry.
 *
 * Names follow Prometheus conventions: the `proofgate_` prefix, base units
 * (seconds), `_total` on counters. Every label value comes from a small
 * fixed set: a GitHub event name proofgate does not know, a task no handler
 * has, a route past the first `MAX_GITHUB_ROUTES` are all `other`; no label
 * ever holds a change id, a sha, a login, a URL or other free text.
 *
 * What feeds it: the HTTP front (each webhook delivery's outcome), the job
 * runner (`JobEvent`s), the job queue (counted at each scrape through
 * `JobQueue.counts`), the automerge loop (`AutomergeEnvironment.observe`:
 * reviews, repairs, merges as the ledger records them), the GitHub
 * clients (`GitHubClientOptions.observe`: each request's route, status and
 * the rate limit left) and the merge queues (`mergeQueue`: their streams in
 * the event store, read on at each scrape from where the last one ended and
 * folded with the queue's own pure fold; every process that runs a queue
 * appends to those streams, so the numbers are the store's, whichever
 * process ran the queue, and the same from every service sharing the store).
 */
import type { Registry } from 'prom-client';
import { lazyModule } from '../core/index.js';
import type { AutomergeObservation } from '../automerge/loop/types.js';
import { initialQueue, parseQueueEvent, reduceQueue, type QueueState } from '../automerge/queue/queue.js';
import { QUEUE_STREAM_PREFIX, queueBaseOf } from '../automerge/queue/store.js';
import type { EventStore } from '../storage/ports.js';
import type { GitHubRequestObservation } from '../forge/github/client.js';
import type { JobCounts, JobEvent, JobQueue, TakenJob } from './jobs/index.js';

/** Where the service answers with its metrics. */
export const METRICS_PATH = '/metrics';

/**
 * GitHub's webhook event names (the `X-GitHub-Event` header), from GitHub's
 * "Webhook events and payloads" reference: the `event` label of a delivery
 * takes one of these, or `other`.
 */
export const GITHUB_EVENT_NAMES: ReadonlySet<string> = new Set([
  'branch_protection_configuration',
  'branch_protection_rule',
  'check_run',
  'check_suite',
  'code_scanning_alert',
  'commit_comment',
  'create',
  'custom_property',
  'custom_property_values',
  'delete',
  'dependabot_alert',
  'deploy_key',
  'deployment',
  'deployment_protection_rule',
  'deployment_review',
  'deployment_status',
  'discussion',
  'discussion_comment',
  'fork',
  'github_app_authorization',
  'gollum',
  'installation',
  'installation_repositories',
  'installation_target',
  'issue_comment',
  'issue_dependencies',
  'issues',
  'label',
  'marketplace_purchase',
  'member',
  'membership',
  'merge_group',
  'meta',
  'milestone',
  'org_block',
  'organization',
  'package',
  'page_build',
  'personal_access_token_request',
  'ping',
  'project',
  'project_card',
  'project_column',
  'projects_v2',
  'projects_v2_item',
  'projects_v2_status_update',
  'public',
  'pull_request',
  'pull_request_review',
  'pull_request_review_comment',
  'pull_request_review_thread',
  'push',
  'registry_package',
  'release',
  'repository',
  'repository_advisory',
  'repository_dispatch',
  'repository_import',
  'repository_ruleset',
  'repository_vulnerability_alert',
  'secret_scanning_alert',
  'secret_scanning_alert_location',
  'secret_scanning_scan',
  'security_advisory',
  'security_and_analysis',
  'sponsorship',
  'star',
  'status',
  'sub_issues',
  'team',
  'team_add',
  'watch',
  'workflow_dispatch',
  'workflow_job',
  'workflow_run',
]);

/**
 * Every way a webhook delivery ends at the HTTP front: the intake's outcomes
 * (`IntakeOutcome`) and the refusals made before the intake is asked
 * (`too-large`, `busy`, `stopping`; `unauthenticated` also when the
 * signature header cannot match; `aborted`: the client went away while its
 * body was read, nothing answered).
 */
export const WEBHOOK_OUTCOMES: ReadonlySet<string> = new Set([
  'accepted',
  'duplicate',
  'ping',
  'unauthenticated',
  'invalid',
  'refused',
  'unavailable',
  'too-large',
  'busy',
  'stopping',
  'aborted',
]);

/** `x-ratelimit-resource` values GitHub documents (`GET /rate_limit`); others are `other`. */
export const GITHUB_RATE_LIMIT_RESOURCES: ReadonlySet<string> = new Set([
  'actions_runner_registration',
  'audit_log',
  'audit_log_streaming',
  'code_scanning_autofix',
  'code_scanning_upload',
  'code_search',
  'core',
  'dependency_sbom',
  'dependency_snapshots',
  'graphql',
  'integration_manifest',
  'scim',
  'search',
  'source_import',
]);

/** Distinct `operation` label values kept; later new routes are `other` (a bound, should a caller ever pass a filled URL). */
export const MAX_GITHUB_ROUTES = 200;

const REVIEW_VERDICTS = ['CONFIRMED', 'REFUTED', 'HOLD', 'failed'] as const;
const REPAIR_KINDS = ['rebase', 'fix-checks', 'fix-findings'] as const;
const REPAIR_OUTCOMES = ['pushed', 'no-change', 'failed'] as const;
const MERGE_OUTCOMES = ['merged', 'head-moved', 'base-moved', 'not-mergeable', 'stopped', 'error'] as const;
const JOB_STATES = ['due', 'scheduled'] as const;

/** Job run times: from a few milliseconds (a comment answered) to many minutes (a loop that reviews and waits for checks). */
export const JOB_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];
/** Review times: builtin reviewers answer in well under a second, model reviewers and live proof in minutes. */
export const REVIEW_DURATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

/** Time a change spends in a merge queue, enqueue to landing or leaving: a candidate's checks take seconds to many minutes, a long line hours. */
export const QUEUE_TIME_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400];
/** Changes per candidate (`automerge.queue.batchSize`, default 4). */
export const QUEUE_BATCH_BUCKETS = [1, 2, 3, 4, 6, 8, 12, 16, 32];
/** Distinct `base` label values kept (protected branches of the trusted config; later ones are `other`). */
export const MAX_QUEUE_BASES = 50;
const QUEUE_LEAVE_OUTCOMES = ['landed', 'removed', 'ejected'] as const;
const CANDIDATE_OUTCOMES = ['passed', 'failed'] as const;
/** Queue events read per page at a scrape. */
const QUEUE_PAGE = 1000;

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
/** A route template's path: literal segments and `{name}` placeholders; a segment of digits only is a filled value. */
const ROUTE_PATH = /^(\/([A-Za-z0-9_.-]+|\{[A-Za-z_]+\}))+$/;

export interface ServiceMetricsOptions {
  /** Count webhook deliveries (the GitHub App service; `serve --repo` has no webhook route). */
  readonly webhooks?: boolean;
  /** The job queue, counted at each scrape (`proofgate_jobs_queued` and its kin), and the tasks its handlers run. */
  readonly queue?: { readonly port: Pick<JobQueue, 'counts'>; readonly tasks: readonly string[] };
  /** Change loops running in this process now, read at each scrape. */
  readonly runningLoops?: () => number;
  /** Count GitHub requests and keep the rate limit left. */
  readonly github?: boolean;
  /** prom-client's default process metrics (CPU, memory, event loop, GC) on this registry; default true. */
  readonly processMetrics?: boolean;
  /** The event store of the automerge namespace: its merge queue streams are read on at each scrape (`proofgate_merge_queue_*`). */
  readonly mergeQueue?: { readonly events: Pick<EventStore, 'readAll'> };
}

export interface ServiceMetrics {
  readonly registry: Registry;
  /** The `content-type` of `render()`'s text. */
  readonly contentType: string;
  /** The exposition text: the job queue is counted and the merge queues read on first (when there are), then every family is written. */
  render(): Promise<string>;
  /** A webhook delivery ended: `event` as the header (or the verified payload) named it, `outcome` as the HTTP front answered. */
  webhookDelivery(event: string | null, outcome: string): void;
  /** A `JobEvent` of this process's runner. */
  jobEvent(event: JobEvent): void;
  /** A review, repair or merge outcome of the automerge loop. */
  automerge(observation: AutomergeObservation): void;
  /** A GitHub request ended (`installationId` null: the App's own JWT requests). */
  githubRequest(observation: GitHubRequestObservation, installationId: number | null): void;
}

/** The `event` label of a delivery. Pure. */
export function eventLabel(name: string | null | undefined): string {
  return typeof name === 'string' && GITHUB_EVENT_NAMES.has(name) ? name : 'other';
}

/** The `outcome` label of a delivery. Pure. */
export function webhookOutcomeLabel(outcome: string): string {
  return WEBHOOK_OUTCOMES.has(outcome) ? outcome : 'other';
}

/** A route fit for the `operation` label (`GET /repos/{owner}/{repo}`), or null when it does not look like a template. Pure. */
export function routeLabel(route: string): string | null {
  if (route.length > 200) return null;
  const space = route.indexOf(' ');
  const method = route.slice(0, space);
  const path = route.slice(space + 1);
  if (space < 0 || !METHODS.has(method) || !ROUTE_PATH.test(path)) return null;
  if (path.split('/').some((segment) => /^\d+$/.test(segment))) return null;
  return route;
}

/** The `status` label of a GitHub answer: its HTTP status, or `none` when no answer came. Pure. */
export function statusLabel(status: number | null): string {
  return status !== null && Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : 'none';
}

// Loaded when a service makes its metrics, not at every command's start: prom-client loads node:http, node:https and
// node:zlib (for its push gateway) as it loads.
const loadPromClient = lazyModule<typeof import('prom-client')>('prom-client');

export function createServiceMetrics(options: ServiceMetricsOptions = {}): ServiceMetrics {
  const { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } = loadPromClient();
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  // Automerge: every service runs the loop.
  const reviews = new Counter({
    name: 'proofgate_reviews_total',
    help: 'Reviews the automerge loop ran, by verdict (CONFIRMED, REFUTED, HOLD; failed: ended without one, a transport-class failure).',
    labelNames: ['verdict'] as const,
    registers,
  });
  const reviewSeconds = new Histogram({
    name: 'proofgate_review_duration_seconds',
    help: 'How long a review took, from preparing the workspace to the verdict (or the failure).',
    buckets: REVIEW_DURATION_BUCKETS,
    registers,
  });
  const repairs = new Counter({
    name: 'proofgate_repairs_total',
    help: 'Repairs the automerge loop ran, by kind (rebase, fix-checks, fix-findings) and outcome (pushed, no-change, failed).',
    labelNames: ['kind', 'outcome'] as const,
    registers,
  });
  const merges = new Counter({
    name: 'proofgate_merges_total',
    help: 'Merges at the reviewed head, by outcome: merged; head-moved, base-moved, not-mergeable (refused, nothing changed); stopped (not tried); error.',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const verdict of REVIEW_VERDICTS) reviews.inc({ verdict }, 0);
  for (const kind of REPAIR_KINDS) for (const outcome of REPAIR_OUTCOMES) repairs.inc({ kind, outcome }, 0);
  for (const outcome of MERGE_OUTCOMES) merges.inc({ outcome }, 0);
  const runningLoops = options.runningLoops;
  if (runningLoops !== undefined) {
    new Gauge({
      name: 'proofgate_change_loops_running',
      help: 'Automerge loops of changes running in this process now.',
      registers,
      collect() {
        this.set(runningLoops());
      },
    });
  }

  const deliveries = options.webhooks
    ? new Counter({
        name: 'proofgate_webhook_deliveries_total',
        help: 'Webhook deliveries answered on POST /webhooks, by event (X-GitHub-Event; other when GitHub does not name it so) and outcome.',
        labelNames: ['event', 'outcome'] as const,
        registers,
      })
    : null;

  const queue = options.queue;
  const knownTasks = new Set(queue?.tasks ?? []);
  const taskLabel = (task: string): string => (knownTasks.has(task) ? task : 'other');
  const queued = queue
    ? new Gauge({
        name: 'proofgate_jobs_queued',
        help: 'Jobs waiting in the queue, by task and state (due: may run now; scheduled: waits for a later time), counted at scrape time.',
        labelNames: ['task', 'state'] as const,
        registers,
      })
    : null;
  const running = queue
    ? new Gauge({
        name: 'proofgate_jobs_running',
        help: 'Jobs held by a worker (of any process sharing the queue), by task, counted at scrape time.',
        labelNames: ['task'] as const,
        registers,
      })
    : null;
  const failed = queue
    ? new Gauge({
        name: 'proofgate_jobs_failed',
        help: 'Jobs kept as failed (their attempts used up; never run again), by task, counted at scrape time.',
        labelNames: ['task'] as const,
        registers,
      })
    : null;
  const jobSeconds = queue
    ? new Histogram({
        name: 'proofgate_job_duration_seconds',
        help: "How long this process's jobs ran, by task and outcome (completed; retry: failed, will run again; failed: failed for the last time).",
        labelNames: ['task', 'outcome'] as const,
        buckets: JOB_DURATION_BUCKETS,
        registers,
      })
    : null;
  const unlocked = queue
    ? new Counter({
        name: 'proofgate_jobs_unlocked_total',
        help: "Jobs of dead workers (no heartbeat past the retake delay) this process's runner released for others to take.",
        registers,
      })
    : null;

  const requests = options.github
    ? new Counter({
        name: 'proofgate_github_requests_total',
        help: 'GitHub API requests, by operation (method and route template) and status (none: no answer came), after retries.',
        labelNames: ['operation', 'status'] as const,
        registers,
      })
    : null;
  const rateLimit = options.github
    ? new Gauge({
        name: 'proofgate_github_rate_limit_remaining',
        help: 'Requests left in the current rate-limit window (x-ratelimit-remaining of the latest answer), by installation (app: the App itself) and resource.',
        labelNames: ['installation', 'resource'] as const,
        registers,
      })
    : null;
  const routes = new Set<string>();

  /** When each job of this process started (the job object is the key: one that never ends is dropped with it). */
  const started = new WeakMap<TakenJob, number>();

  const countQueue = async (): Promise<void> => {
    if (queue === undefined || queued === null || running === null || failed === null) return;
    let counts: JobCounts[];
    try {
      counts = await queue.port.counts();
    } catch {
      // The queue does not answer (/readyz says so): no numbers rather than stale ones.
      queued.reset();
      running.reset();
      failed.reset();
      return;
    }
    const totals = new Map<string, { due: number; scheduled: number; running: number; failed: number }>();
    for (const task of knownTasks) totals.set(task, { due: 0, scheduled: 0, running: 0, failed: 0 });
    for (const row of counts) {
      const label = taskLabel(row.task);
      const total = totals.get(label) ?? { due: 0, scheduled: 0, running: 0, failed: 0 };
      total.due += row.due;
      total.scheduled += row.scheduled;
      total.running += row.running;
      total.failed += row.failed;
      totals.set(label, total);
    }
    queued.reset();
    running.reset();
    failed.reset();
    for (const [task, total] of totals) {
      for (const state of JOB_STATES) queued.set({ task, state }, total[state]);
      running.set({ task }, total.running);
      failed.set({ task }, total.failed);
    }
  };

  const countMergeQueues = mergeQueueMetrics(options.mergeQueue, registers);

  return {
    registry,
    contentType: registry.contentType,
    async render() {
      await countQueue();
      await countMergeQueues();
      return registry.metrics();
    },
    webhookDelivery(event, outcome) {
      deliveries?.inc({ event: eventLabel(event), outcome: webhookOutcomeLabel(outcome) });
    },
    jobEvent(event) {
      if (jobSeconds === null || unlocked === null) return;
      if (event.kind === 'started') started.set(event.job, performance.now());
      else if (event.kind === 'unlocked') unlocked.inc(event.jobs);
      else {
        const start = started.get(event.job);
        started.delete(event.job);
        if (start === undefined) return;
        const outcome = event.kind === 'completed' ? 'completed' : event.final ? 'failed' : 'retry';
        jobSeconds.observe({ task: taskLabel(event.job.task), outcome }, (performance.now() - start) / 1000);
      }
    },
    automerge(observation) {
      switch (observation.kind) {
        case 'review':
          reviews.inc({ verdict: REVIEW_VERDICTS.includes(observation.verdict) ? observation.verdict : 'failed' });
          if (Number.isFinite(observation.seconds) && observation.seconds >= 0) reviewSeconds.observe(observation.seconds);
          return;
        case 'repair':
          if (REPAIR_KINDS.includes(observation.repair) && REPAIR_OUTCOMES.includes(observation.outcome)) {
            repairs.inc({ kind: observation.repair, outcome: observation.outcome });
          }
          return;
        case 'merge':
          merges.inc({ outcome: MERGE_OUTCOMES.includes(observation.outcome) ? observation.outcome : 'error' });
          return;
      }
    },
    githubRequest(observation, installationId) {
      if (requests === null || rateLimit === null) return;
      let operation = routeLabel(observation.route) ?? 'other';
      if (operation !== 'other' && !routes.has(operation)) {
        if (routes.size >= MAX_GITHUB_ROUTES) operation = 'other';
        else routes.add(operation);
      }
      requests.inc({ operation, status: statusLabel(observation.status) });
      const limit = observation.rateLimit;
      if (limit !== null && Number.isSafeInteger(limit.remaining)) {
        const resource = limit.resource === null ? 'unknown' : GITHUB_RATE_LIMIT_RESOURCES.has(limit.resource) ? limit.resource : 'other';
        const installation = installationId === null ? 'app' : Number.isSafeInteger(installationId) && installationId > 0 ? String(installationId) : 'other';
        rateLimit.set({ installation, resource }, limit.remaining);
      }
    },
  };
}

/**
 * The merge queue families, and the reader that brings them up to date at a
 * scrape: the queue streams' events after the last one read, in store order,
 * folded per base (`reduceQueue`). Counters and histograms take each event
 * once, so they count every event in the store (a restarted service reads
 * from the start again and reaches the same totals); the length is the fold's.
 */
function mergeQueueMetrics(source: ServiceMetricsOptions['mergeQueue'], registers: Registry[]): () => Promise<void> {
  if (source === undefined) return async () => undefined;
  const { Counter, Gauge, Histogram } = loadPromClient();
  const length = new Gauge({
    name: 'proofgate_merge_queue_length',
    help: 'Changes waiting in the merge queue of each base (a protected branch), from the queue streams of the store at scrape time.',
    labelNames: ['base'] as const,
    registers,
  });
  const timeInQueue = new Histogram({
    name: 'proofgate_merge_queue_time_in_queue_seconds',
    help: 'Time from a change entering a merge queue to leaving it, by outcome (landed; removed: stopped, new head, conflict and the like; ejected: its checks failed alone).',
    labelNames: ['outcome'] as const,
    buckets: QUEUE_TIME_BUCKETS,
    registers,
  });
  const batchSize = new Histogram({
    name: 'proofgate_merge_queue_candidate_changes',
    help: 'Changes in each merge queue candidate built (its batch).',
    buckets: QUEUE_BATCH_BUCKETS,
    registers,
  });
  const bisections = new Counter({
    name: 'proofgate_merge_queue_bisections_total',
    help: 'Failed merge queue candidates of several changes whose changes were split to find the culprit.',
    registers,
  });
  const candidates = new Counter({
    name: 'proofgate_merge_queue_candidates_total',
    help: "Merge queue candidates whose checks ended, by outcome (passed: checks passed or a passed tree's result reused; failed).",
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of CANDIDATE_OUTCOMES) candidates.inc({ outcome }, 0);
  for (const outcome of QUEUE_LEAVE_OUTCOMES) timeInQueue.zero({ outcome });
  bisections.inc(0);

  const queues = new Map<string, QueueState>();
  const labels = new Set<string>();
  const baseLabel = (base: string): string => {
    if (labels.has(base)) return base;
    if (labels.size >= MAX_QUEUE_BASES) return 'other';
    labels.add(base);
    return base;
  };
  let after = 0;

  const apply = (base: string, type: string, data: unknown): void => {
    const event = parseQueueEvent(type, data);
    if (event === null || event.type === 'queue-lease') return;
    const before = queues.get(base) ?? initialQueue(base);
    const left = (change: string, at: string, outcome: (typeof QUEUE_LEAVE_OUTCOMES)[number]): void => {
      const entry = before.entries.find((waiting) => waiting.change === change);
      const seconds = entry === undefined ? NaN : (Date.parse(at) - Date.parse(entry.at)) / 1000;
      if (Number.isFinite(seconds) && seconds >= 0) timeInQueue.observe({ outcome }, seconds);
    };
    switch (event.type) {
      case 'queue-candidate':
        batchSize.observe(event.data.changes.length);
        break;
      case 'queue-checked':
        candidates.inc({ outcome: event.data.passed ? 'passed' : 'failed' });
        break;
      case 'queue-bisect':
        bisections.inc();
        break;
      case 'queue-landed':
        for (const landed of event.data.changes) left(landed.change, event.data.at, 'landed');
        break;
      case 'queue-removed':
        left(event.data.change, event.data.at, 'removed');
        break;
      case 'queue-ejected':
        left(event.data.change, event.data.at, 'ejected');
        break;
      default:
        break;
    }
    queues.set(base, reduceQueue(before, event));
  };

  const readOn = async (): Promise<void> => {
    try {
      for (;;) {
        const page = await source.events.readAll({ afterPosition: after, limit: QUEUE_PAGE, streamPrefix: QUEUE_STREAM_PREFIX });
        for (const stored of page) {
          apply(queueBaseOf(stored.streamId), stored.type, stored.data);
          after = stored.position;
        }
        if (page.length < QUEUE_PAGE) break;
      }
    } catch {
      // The store does not answer: no queue lengths rather than stale ones (the counters keep what they counted).
      length.reset();
      return;
    }
    length.reset();
    const totals = new Map<string, number>();
    for (const [base, state] of queues) {
      const label = baseLabel(base);
      totals.set(label, (totals.get(label) ?? 0) + state.entries.length);
    }
    for (const [base, total] of totals) length.set({ base }, total);
  };
  // One reader at a time: two scrapes at once must not take the same events twice.
  let reading: Promise<void> = Promise.resolve();
  return () => {
    reading = reading.then(readOn, readOn);
    return reading;
  };
}
