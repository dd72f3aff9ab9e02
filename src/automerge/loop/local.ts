/**
 * Automerge on the local forge: the loop's environment wired to a LocalForge.
 * The ledger lives in the same SQLite file as the forge (namespace
 * `automerge`), markers are signed with the data directory's secret, reviews
 * and repairs work in the repository itself, the configured checks run when a
 * head has none (a local forge has no CI; on the base commit too when checks
 * fail on the head, to tell a blocked base), the forge reads the approval
 * records of `/proofgate approve` for its review decision (a base's
 * `requiredApprovals`), and every forge event, of this process at once and of
 * other processes by a short poll of the store, wakes the change it names.
 */
import type { Clock } from '../../core/index.js';
import { systemClock } from '../../core/index.js';
import { checkDataDir, parseOutputUrl, type LocalForge } from '../../forge/local/index.js';
import { runChecks } from '../../forge/local/checks.js';
import type { ForgeCheck, ForgeComment } from '../../forge/port.js';
import { REVIEW_RUNS_NAMESPACE } from '../../review/index.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
import type { BaseChecksRequest } from './base-checks.js';
import { headApprovals, type FactsCache } from './facts.js';
import { ChangeJobs, type ChangeJobsOptions } from './job.js';
import { LedgerStore } from './ledger-store.js';
import { builtinRepair } from './repair-module.js';
import { panelReviewer } from './review-step.js';
import { AutomergeRouter } from './router.js';
import { SECRET_FILE, loadOrCreateSecret } from './secret.js';
import type { AutomergeEnvironment, AutomergeObservation, LoopProgress, RepairModule, Reviewer, WaitSettings } from './types.js';
import { ChangeSignals } from './waits.js';

export const AUTOMERGE_NAMESPACE = 'automerge';

export interface LocalAutomergeOptions {
  readonly forge: LocalForge;
  /** The data directory (the forge's): the store and the secret live here. */
  readonly dataDir: string;
  /** The repair module (default: src/automerge/repair/); null: repairs become blocks. */
  readonly repair?: RepairModule | null;
  readonly reviewer?: Reviewer;
  readonly waits?: Partial<WaitSettings>;
  readonly onProgress?: (progress: LoopProgress) => void;
  readonly clock?: Clock;
  readonly jobs?: ChangeJobsOptions;
  /** Restart a change's job on a forge event when automerge is on and none runs (default false: one-shot). */
  readonly restartOnEvents?: boolean;
  /** How often to look for events of other processes (default 500 ms). */
  readonly eventPollMs?: number;
  /**
   * Called for each comment the store's tail sees, by this process or another
   * (a service routes them; a one-shot command routes only its own, so it
   * leaves this unset and comments only wake their change).
   */
  readonly onComment?: (changeId: string, comment: ForgeComment) => Promise<void>;
  /** Told each review, repair and merge outcome (`AutomergeEnvironment.observe`: a service's metrics). */
  readonly observe?: (observation: AutomergeObservation) => void;
}

export interface LocalAutomerge {
  readonly env: AutomergeEnvironment;
  readonly jobs: ChangeJobs;
  readonly router: AutomergeRouter;
  close(): Promise<void>;
}

/** Output kept per check run on a base commit (the local forge's default for its own runs). */
const BASE_CHECK_OUTPUT_CAP_BYTES = 1024 * 1024;

/**
 * The local forge's runs of the named checks on a change's base commit: the
 * trusted checks of the base (`request.config`) that have no finished run
 * there yet run once, jailed under the trusted branch's policy like any check,
 * and are recorded on that sha (so every change on the same base reuses them).
 */
async function localBaseChecks(
  forge: LocalForge,
  context: { readonly clock: Clock; readonly dataDir: string; readonly progress: ((progress: LoopProgress) => void) | undefined },
  request: BaseChecksRequest,
): Promise<ForgeCheck[]> {
  const { snapshot, names } = request;
  const sha = snapshot.base.sha;
  const finished = (checks: readonly ForgeCheck[], name: string): boolean =>
    checks.some((check) => check.name === name && check.status === 'completed' && check.conclusion !== null && check.conclusion !== 'cancelled');
  const recorded = await forge.store.checks(sha);
  const toRun = request.config.checks.filter((check) => names.includes(check.name) && !finished(recorded, check.name));
  if (toRun.length > 0) {
    context.progress?.({
      changeId: snapshot.id,
      at: context.clock.now().toISOString(),
      text: `running ${toRun.map((check) => check.name).join(', ')} on the base ${snapshot.base.ref} at ${sha.slice(0, 12)}: does the base fail too?`,
    });
    const trusted = await forge.trustedConfig();
    await runChecks(
      { repo: forge.repo, store: forge.store, clock: context.clock, outputCapBytes: BASE_CHECK_OUTPUT_CAP_BYTES, dataDir: context.dataDir },
      {
        changeId: snapshot.id,
        headSha: sha,
        config: { ...request.config, checks: toRun },
        jail: trusted.config,
        ...(request.signal === undefined ? {} : { signal: request.signal }),
      },
    );
  }
  const checks = toRun.length > 0 ? await forge.store.checks(sha) : recorded;
  return checks.filter((check) => names.includes(check.name));
}

async function identityOf(forge: LocalForge): Promise<{ name: string; email: string }> {
  const name = (await forge.repo.configValue('user.name')) ?? 'proofgate';
  const email = (await forge.repo.configValue('user.email')) ?? 'proofgate@localhost';
  return { name, email };
}

export async function openLocalAutomerge(options: LocalAutomergeOptions): Promise<LocalAutomerge> {
  const { forge } = options;
  checkDataDir(options.dataDir, [SECRET_FILE]);
  const storage = createLocalRunStorage({ directory: options.dataDir, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
  const reviewRuns = createLocalRunStorage({ directory: options.dataDir, namespace: REVIEW_RUNS_NAMESPACE, policy: defaultStoragePolicy });
  const clock = options.clock ?? systemClock;
  const signals = new ChangeSignals(clock);
  const env: AutomergeEnvironment = {
    forge,
    store: new LedgerStore(storage.eventStore, clock),
    secret: await loadOrCreateSecret(options.dataDir),
    reviewer: options.reviewer ?? panelReviewer({ dataDir: options.dataDir, storage: reviewRuns }),
    reviewRuns,
    approvals: storage,
    repair: options.repair === undefined ? builtinRepair : options.repair,
    signals,
    identity: await identityOf(forge),
    clock,
    ...(options.waits === undefined ? {} : { waits: options.waits }),
    startChecks: async (changeId, _headSha, signal) => {
      await forge.runChecks(changeId, { signal });
    },
    baseChecks: (request) => localBaseChecks(forge, { clock, dataDir: options.dataDir, progress: options.onProgress }, request),
    checkLog: async (url) => {
      const { namespace, runId, digest } = parseOutputUrl(url);
      const bytes = await forge.store.storage.artifactStore.read({ namespace, runId }, digest);
      return Buffer.from(bytes).toString('utf8');
    },
    ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
    ...(options.observe === undefined ? {} : { observe: options.observe }),
  };
  // The forge's review decision counts the approval records this wiring keeps (live bindings cached per base and head).
  const approvalFacts: FactsCache = new Map();
  forge.useApprovals(async (snapshot, config) => {
    if (approvalFacts.size > 256) approvalFacts.clear();
    return headApprovals(env, snapshot, config, approvalFacts);
  });
  const jobs = new ChangeJobs(env, options.jobs);
  const router = new AutomergeRouter(jobs, { restartOnEvents: options.restartOnEvents ?? false });
  const abort = new AbortController();
  const after = await forge.lastEventPosition();
  const tail = (async () => {
    for await (const { event } of forge.events({ afterPosition: after, pollMs: options.eventPollMs ?? 500, signal: abort.signal })) {
      if (event.kind === 'comment-created' || event.kind === 'comment-edited') {
        if (jobs.active(event.changeId)) signals.notify(event.changeId);
        await options.onComment?.(event.changeId, event.comment).catch(() => undefined);
        continue;
      }
      await router.handleEvent(event).catch(() => undefined);
    }
  })();
  return {
    env,
    jobs,
    router,
    async close() {
      await jobs.close();
      forge.useApprovals(null);
      abort.abort();
      await tail.catch(() => undefined);
      await storage.close();
      await reviewRuns.close();
    },
  };
}
