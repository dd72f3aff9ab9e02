/**
 * `proofgate serve --repo DIR`: the long-running process for one local
 * repository. It opens the local forge and the local automerge wiring
 * (`openLocalAutomerge` with `restartOnEvents`), and adds what a one-shot
 * command does not need:
 *
 * - Comments written by other processes (`proofgate change comment` in
 *   another terminal, an agent using the library) are routed to the
 *   automerge router. The CLI that posted a comment routes it too; the
 *   ledger keys commands by comment id + updated_at and appends at the
 *   revision it read, so whichever process applies a comment first runs its
 *   commands and the other one skips them.
 * - Ref moves. The local forge records a push only when it moved the branch
 *   itself; a `git push`, `git commit` or `git reset` on a change's branch
 *   leaves no forge event. So the service compares `git for-each-ref`
 *   snapshots on a short interval (`refMoves` and `refWakes` are pure): a
 *   moved head is a `change-synchronized` event for its change, a moved base
 *   a `base-pushed` event, and the changes on that base with automerge on
 *   and no job running here are started again.
 * - At start, command comments that no process has applied yet are routed,
 *   and changes whose automerge is on and not merged are started again.
 * - A merge queue that no process runs (the process of the change first in
 *   line was killed after this service's job of it ended as held elsewhere):
 *   the first waiting change's job is started, and it runs the queue.
 * - HTTP (unless turned off): `/healthz`, `/readyz`, ready while the store
 *   answers and the service is not stopping, and `/metrics` (Prometheus
 *   text: reviews, repairs and merges of this process's loops, the loops
 *   running, the merge queues of the store, the process). No webhook route. Every request's Host header
 *   must name the server (DNS rebinding), and the read API: `GET
 *   /api/changes` and `GET /api/changes/:id`, for a bearer token of the
 *   data directory's identities (`proofgate token create`) with at least
 *   read permission (the lower of the token's and the trusted config's), or
 *   without a token when the server listens on loopback only.
 * - The observer dashboard (`GET /`, `/assets/...`, under the same rules)
 *   and its reads (`GET /api/changes?...`, `/api/changes/:id/timeline`,
 *   `/api/summary`) from the dashboard's projection in the store: rebuilt at
 *   start, then kept up every `pollMs` from the events after its stored
 *   positions and the branches that moved (src/service/projection.ts).
 * - `stop(graceMs)`: no new work is taken (no new job starts; joining a job
 *   that runs is still allowed), running jobs get the grace period to end,
 *   then the rest are interrupted (`ChangeJobs.close` aborts them: each ends
 *   as `interrupted` at its next check of the signal, cancels the checks it
 *   started, which are recorded cancelled and run again on the next start,
 *   and releases its lease), and the stores close.
 */
import type { Logger } from 'pino';
import { ProofgateError, errorMessage, type Clock } from '../core/index.js';
import { automergeActive, ledgerKey } from '../automerge/ledger.js';
import { parseCommands } from '../automerge/commands.js';
import { openLocalAutomerge, type ChangeJobsOptions, type JobResult, type LocalAutomerge, type WaitSettings } from '../automerge/loop/index.js';
import { leaseHolderGone } from '../automerge/loop/job.js';
import { unattendedQueueHead } from '../automerge/queue/queue.js';
import { QueueStore } from '../automerge/queue/store.js';
import { ZERO_OID, openLocalForge, type ChangeRecord, type LocalForge } from '../forge/local/index.js';
import type { ForgeComment } from '../forge/port.js';
import { createServiceServer, type Answer, type ApiCaller, type ServiceApi, type ServiceServer } from './http.js';
import { effectivePermission, openIdentityStore, type IdentityStore } from './identities.js';
import type { EventStore } from '../storage/ports.js';
import { createServiceMetrics } from './metrics.js';
import { dashboardFiles } from './dashboard/serve.js';
import { openChangeProjection, projectionAnswer, type ChangeProjection } from './projection.js';
import { identityCeiling, routeOnce, withWriteApi } from './api-write.js';
import { gitBudget, gitBudgetSettingsFrom, gitHttpEndpoint, type GitBudget } from './git-http.js';
import { ProgressHub } from './automerge-stream.js';

export interface LocalServiceOptions {
  /** The git repository to follow. */
  readonly repoDir: string;
  /** The data directory (default: the repository's, `.git/proofgate/`). */
  readonly dataDir?: string;
  readonly host: string;
  /** 0 picks a free port (see `url`). */
  readonly port: number;
  /** False: nothing listens. */
  readonly http: boolean;
  readonly logger: Logger;
  readonly clock?: Clock;
  /** How often to look for other processes' events and for ref moves (default 500 ms). */
  readonly pollMs?: number;
  readonly waits?: Partial<WaitSettings>;
  readonly jobs?: ChangeJobsOptions;
  /** Where the automerge jobs' progress lines go for the clients that follow them (default: a hub of this service's own). */
  readonly progress?: ProgressHub;
  /** The budget of the git endpoint's requests (default: from `PROOFGATE_GIT_MAX_BUFFERED_BYTES` and `PROOFGATE_GIT_MAX_PROCESSES`). */
  readonly gitBudget?: GitBudget;
}

export interface LocalService {
  /** `http://host:port` as bound, or null without HTTP. */
  readonly url: string | null;
  /** Resolves once the service has stopped and its stores are closed. */
  readonly stopped: Promise<void>;
  /**
   * Stop taking work, give running jobs up to `graceMs` to end, interrupt the
   * rest, close everything. A second call while stopping interrupts the
   * running jobs at once. Resolves as `stopped` does.
   */
  stop(graceMs: number): Promise<void>;
}

/** A branch that moved between two snapshots; null: absent on that side. */
export interface RefMove {
  readonly ref: string;
  readonly before: string | null;
  readonly after: string | null;
}

/** What a ref move means for the open changes. */
export type RefWake =
  | { readonly kind: 'head'; readonly changeId: string; readonly ref: string; readonly headSha: string }
  | { readonly kind: 'base'; readonly ref: string; readonly before: string | null; readonly after: string; readonly changeIds: readonly string[] };

/** `git for-each-ref --format='%(objectname) %(refname)'` output as a map ref -> sha. Pure. */
export function parseRefList(text: string): Map<string, string> {
  const refs = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) (refs\/\S+)$/.exec(line.trim());
    if (match !== null) refs.set(match[2] as string, match[1] as string);
  }
  return refs;
}

/** The refs whose sha differs between two snapshots (created, moved or deleted), by ref name. Pure. */
export function refMoves(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): RefMove[] {
  const names = new Set([...before.keys(), ...after.keys()]);
  const moves: RefMove[] = [];
  for (const ref of [...names].sort()) {
    const was = before.get(ref) ?? null;
    const now = after.get(ref) ?? null;
    if (was !== now) moves.push({ ref, before: was, after: now });
  }
  return moves;
}

/**
 * The wakes of some ref moves for the open changes (pure): a moved head of an
 * open change wakes that change; a moved base wakes every open change on it.
 * A deleted branch wakes nothing (the change's next turn finds it gone).
 */
export function refWakes(moves: readonly RefMove[], open: readonly Pick<ChangeRecord, 'changeId' | 'headRef' | 'baseRef'>[]): RefWake[] {
  const wakes: RefWake[] = [];
  for (const move of moves) {
    if (move.after === null || !move.ref.startsWith('refs/heads/')) continue;
    const branch = move.ref.slice('refs/heads/'.length);
    for (const change of open) {
      if (change.headRef === branch) wakes.push({ kind: 'head', changeId: change.changeId, ref: move.ref, headSha: move.after });
    }
    const onBase = open.filter((change) => change.baseRef === branch).map((change) => change.changeId);
    if (onBase.length > 0) wakes.push({ kind: 'base', ref: move.ref, before: move.before, after: move.after, changeIds: onBase });
  }
  return wakes;
}

/**
 * The read API of a local repository's service (answers are plain JSON;
 * untrusted text is only ever a JSON string): `GET /api/changes` (paged:
 * `stage`, `repo`, `limit`, `cursor`), `GET /api/changes/:id/timeline` and
 * `GET /api/summary` read the dashboard's projection (no request replays
 * events); `GET /api/changes/:id` is the change's snapshot now, without its
 * comments and checks.
 */
export function localApi(forge: LocalForge, identities: IdentityStore, projection: ChangeProjection): ServiceApi {
  return {
    async authenticate(token: string): Promise<ApiCaller | null> {
      const identity = await identities.authenticate(token);
      if (identity === null) return null;
      return { login: identity.login, permission: effectivePermission(identity.permission, await forge.permission(identity.login)) };
    },
    async get(path: string, _caller: ApiCaller | null, query: URLSearchParams = new URLSearchParams()): Promise<Answer | null> {
      const projected = projectionAnswer(projection, path, query);
      if (projected !== null) return projected;
      const match = /^\/api\/changes\/([^/]+)$/.exec(path);
      if (match === null) return null;
      const id = match[1] as string;
      if (!/^[1-9][0-9]{0,15}$/.test(id) || (await forge.store.change(id)) === null) return { status: 404, body: { error: 'no such change' } };
      let snapshot;
      try {
        snapshot = await forge.snapshot(id);
      } catch (error) {
        if (error instanceof ProofgateError && error.code === 'NOT_FOUND') return { status: 404, body: { error: error.message } };
        throw error;
      }
      const { comments: _comments, checks: _checks, ...plain } = snapshot;
      return { status: 200, body: { change: plain } };
    },
  };
}

async function branchRefs(forge: LocalForge): Promise<Map<string, string>> {
  return parseRefList(await forge.repo.text(['for-each-ref', '--format=%(objectname) %(refname)', 'refs/heads/']));
}

/** Resolves after `ms`, or at once when the signal aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

/** A promise settled from outside (the end of a shutdown). */
function settled(): Deferred & { reject(error: unknown): void } {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((done, fail) => {
    resolve = done;
    reject = fail;
  });
  return { promise, resolve, reject };
}

function jobOutcome(result: JobResult): Record<string, unknown> {
  return result.kind === 'ran'
    ? { outcome: result.outcome.kind, reason: result.outcome.reason, head: result.outcome.head, mergeCommit: result.outcome.mergeCommit }
    : { outcome: result.kind, holder: result.holder.owner };
}

export async function startLocalService(options: LocalServiceOptions): Promise<LocalService> {
  const { logger } = options;
  const pollMs = options.pollMs ?? 500;
  // Checked before anything opens: a malformed setting is one CONFIG line.
  const budget = options.gitBudget ?? gitBudget(gitBudgetSettingsFrom(process.env));
  const progressHub = options.progress ?? new ProgressHub();
  const opened = await openLocalForge({ repoDir: options.repoDir, ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }) });
  const { forge } = opened;
  let identities: { readonly store: IdentityStore; close(): Promise<void> } | null = null;
  let automerge: LocalAutomerge | null = null;
  let projection: ChangeProjection | null = null;
  let server: ServiceServer | null = null;
  let stopping = false;
  const work = new AbortController();
  // This service's own registry; the loops running are read from the automerge wiring once it is open.
  let running = (): number => 0;
  let queueEvents: Pick<EventStore, 'readAll'> | null = null;
  const metrics = createServiceMetrics({
    runningLoops: () => running(),
    // The merge queues' streams, in the automerge store once it is open.
    mergeQueue: { events: { readAll: async (options) => (queueEvents === null ? [] : queueEvents.readAll(options)) } },
  });
  try {
    identities = openIdentityStore(opened.dataDir, { selfLogin: forge.selfLogin });
    // A commenter's permission is capped by its token here too: the router reads it from the forge.
    forge.limitPermissions(identityCeiling(identities.store));
    // Comments of any process reach the router through the automerge wiring's own tail of the store.
    let routeComment: (changeId: string, comment: ForgeComment) => Promise<void> = async () => undefined;
    automerge = await openLocalAutomerge({
      forge,
      dataDir: opened.dataDir,
      restartOnEvents: true,
      eventPollMs: pollMs,
      onComment: (changeId, comment) => routeComment(changeId, comment),
      onProgress: (progress) => {
        logger.info({ changeId: progress.changeId, text: progress.text }, 'progress');
        progressHub.publish(progress);
      },
      observe: (observation) => metrics.automerge(observation),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.waits === undefined ? {} : { waits: options.waits }),
      jobs: {
        ...options.jobs,
        onJob: (changeId, done) => {
          logger.info({ changeId }, 'job started');
          done.then(
            (result) => logger.info({ changeId, ...jobOutcome(result) }, 'job ended'),
            (error: unknown) => logger.error({ changeId, err: errorMessage(error) }, 'job failed'),
          );
        },
      },
    });
    const am: LocalAutomerge = automerge;
    // One route per comment version here: a comment posted through the API is routed by the API and seen again by the tail.
    const routeCommentOnce = routeOnce(am.router);
    running = () => am.jobs.running().length;
    queueEvents = am.env.store.events;
    // The dashboard's projection: rebuilt now, then kept up by `projectionWatch` as events and branches move.
    projection = openChangeProjection(opened.dataDir, { forge, ledger: am.env.store, secret: am.env.secret });
    const board: ChangeProjection = projection;
    await board.rebuild();
    const movedHeads = new Set<string>();

    /** Start the change's job when automerge is on, it is not merged and no job of it runs here. */
    const restartIfDue = async (changeId: string): Promise<void> => {
      if (am.jobs.active(changeId)) return;
      const { state } = await am.env.store.load(changeId);
      if (automergeActive(state) && state.merged === null) am.jobs.dispatch(changeId);
    };

    const route = async (changeId: string, comment: ForgeComment): Promise<void> => {
      if (stopping) return;
      if (parseCommands(comment.body).length === 0 || comment.author.toLowerCase() === forge.selfLogin.toLowerCase()) return;
      try {
        const routed = await routeCommentOnce(changeId, comment);
        logger.info(
          {
            changeId,
            commentId: comment.id,
            author: comment.author,
            ran: routed.ran.length,
            refused: routed.refused.length,
            skipped: routed.skipped,
            dispatched: routed.dispatch !== null,
          },
          'comment routed',
        );
      } catch (error) {
        logger.warn({ changeId, commentId: comment.id, err: errorMessage(error) }, 'comment not routed');
      }
    };
    routeComment = route;

    const after = await forge.lastEventPosition();
    // The first snapshot of the branches: a move from here on wakes its changes.
    let refs = await branchRefs(forge);
    // Listen before any work starts: a port in use fails the start with nothing begun.
    if (options.http) {
      const reads = localApi(forge, identities.store, board);
      server = await createServiceServer({
        host: options.host,
        port: options.port,
        logger,
        metrics,
        checkHost: true,
        api: withWriteApi(reads, { forge, automerge: am, logger, route: routeCommentOnce, progress: progressHub }),
        dashboard: dashboardFiles(),
        git: gitHttpEndpoint({
          repo: forge.repo,
          authenticate: reads.authenticate,
          trusted: () => forge.trustedConfig(),
          logger,
          budget,
        }),
        ready: async () => {
          if (stopping) return false;
          await forge.store.events.readAll({ afterPosition: after, limit: 1 });
          return true;
        },
      }).catch((error: unknown) => {
        const code = (error as NodeJS.ErrnoException).code;
        const why = code === 'EADDRINUSE' ? 'the address is in use' : code === 'EACCES' ? 'permission denied' : errorMessage(error);
        throw new ProofgateError('IO', `cannot listen on ${options.host}:${options.port}: ${why}`);
      });
      logger.info({ url: server.url }, 'listening');
    }
    // What happened while no service ran: command comments nobody applied, changes left mid-way.
    for (const record of (await forge.store.listChanges()).filter((entry) => entry.state === 'open')) {
      const { state } = await am.env.store.load(record.changeId);
      for (const comment of record.comments) {
        if (!state.processed.has(ledgerKey(comment))) await route(record.changeId, comment);
      }
      await restartIfDue(record.changeId).catch((error: unknown) =>
        logger.warn({ changeId: record.changeId, err: errorMessage(error) }, 'change not restarted'),
      );
    }

    const refWatch = (async () => {
      let tick = 0;
      while (!work.signal.aborted) {
        await pause(pollMs, work.signal);
        if (work.signal.aborted) return;
        try {
          const next = await branchRefs(forge);
          const moves = refMoves(refs, next);
          refs = next;
          for (const move of moves) if (move.ref.startsWith('refs/heads/')) movedHeads.add(move.ref.slice('refs/heads/'.length));
          if (moves.length === 0) continue;
          tick += 1;
          const open = (await forge.store.listChanges()).filter((entry) => entry.state === 'open');
          for (const move of moves) logger.info({ ref: move.ref, before: move.before, after: move.after }, 'ref moved');
          for (const wake of refWakes(moves, open)) {
            const deliveryId = `ref-watch:${process.pid}:${tick}:${wake.ref}`;
            if (wake.kind === 'head') {
              await am.router.handleEvent({ kind: 'change-synchronized', changeId: wake.changeId, headSha: wake.headSha, deliveryId });
            } else {
              await am.router.handleEvent({ kind: 'base-pushed', ref: wake.ref, before: wake.before ?? ZERO_OID, after: wake.after, deliveryId });
              for (const changeId of wake.changeIds) await restartIfDue(changeId);
            }
          }
        } catch (error) {
          if (!work.signal.aborted) logger.warn({ err: errorMessage(error) }, 'ref watch failed');
        }
      }
    })();

    // A change waits in its base's merge queue while some process runs the queue. When none does (the change's
    // own process was killed, and the job here ended because that process held the change then), the first
    // waiting change's job is started here, and it runs the queue. Seen on two polls in a row, so a process
    // about to take the lease is left to it.
    const queues = new QueueStore(am.env.store.events);
    const queueWatch = (async () => {
      let seen = new Set<string>();
      // The bases that have a queue, learnt from the queue streams' new events only (no read of every change per poll).
      const bases = new Set<string>();
      let queuesRead = 0;
      while (!work.signal.aborted) {
        await pause(pollMs, work.signal);
        if (work.signal.aborted) return;
        try {
          const since = await queues.basesSince(queuesRead);
          for (const base of since.bases) bases.add(base);
          queuesRead = since.position;
          const now = new Set<string>();
          for (const base of bases) {
            const head = unattendedQueueHead(await queues.load(base), Date.now(), leaseHolderGone);
            if (head === null || am.jobs.active(head)) continue;
            now.add(head);
            if (!seen.has(head)) continue;
            logger.info({ changeId: head, base }, 'merge queue unattended: its first change runs it');
            await restartIfDue(head);
          }
          seen = now;
        } catch (error) {
          if (!work.signal.aborted) logger.warn({ err: errorMessage(error) }, 'merge queue watch failed');
        }
      }
    })();

    logger.info({ repo: forge.repo.root, dataDir: opened.dataDir, http: server?.url ?? null, pollMs }, 'serving');

    const listening = server;
    const projectionWatch = (async () => {
      while (!work.signal.aborted) {
        await pause(pollMs, work.signal);
        if (work.signal.aborted) return;
        try {
          const branches = [...movedHeads];
          movedHeads.clear();
          await board.refresh(branches.length === 0 ? [] : board.openOnHeads(branches));
        } catch (error) {
          if (!work.signal.aborted) logger.warn({ err: errorMessage(error) }, 'dashboard projection not refreshed');
        }
      }
    })();

    const idents = identities;
    const hurry = deferred();
    const finished = settled();
    let stopping$: Promise<void> | null = null;
    const shutdown = async (graceMs: number): Promise<void> => {
      stopping = true;
      am.jobs.stopTaking();
      logger.info({ graceMs, runningJobs: am.jobs.running().length }, 'stopping: no new work');
      work.abort();
      await refWatch.catch(() => undefined);
      await queueWatch.catch(() => undefined);
      await projectionWatch.catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
      await Promise.race([Promise.allSettled(am.jobs.running()), grace, hurry.promise]);
      clearTimeout(timer);
      const left = am.jobs.running().length;
      if (left > 0) logger.warn({ runningJobs: left }, 'interrupting the jobs still running');
      // ChangeJobs.close aborts the loops; an interrupted loop cancels the checks it started (they run again later).
      await am.close();
      await listening?.close();
      await board.close();
      await idents.close();
      await opened.close();
      logger.info({}, 'stopped');
    };
    return {
      url: listening?.url ?? null,
      stopped: finished.promise,
      stop(graceMs: number): Promise<void> {
        if (stopping$ !== null) {
          hurry.resolve();
          return stopping$;
        }
        stopping$ = shutdown(Math.max(0, graceMs));
        stopping$.then(finished.resolve, finished.reject);
        return stopping$;
      },
    };
  } catch (error) {
    work.abort();
    await server?.close().catch(() => undefined);
    await automerge?.close().catch(() => undefined);
    await projection?.close().catch(() => undefined);
    await identities?.close().catch(() => undefined);
    await opened.close().catch(() => undefined);
    throw error;
  }
}
