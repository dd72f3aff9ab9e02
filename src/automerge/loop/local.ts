/**
 * Automerge on the local forge: the loop's environment wired to a LocalForge.
 * The ledger lives in the same SQLite file as the forge (namespace
 * `automerge`), markers are signed with the data directory's secret, reviews
 * and repairs work in the repository itself, the configured checks run when a
 * head has none (a local forge has no CI), and every forge event, of this
 * process at once and of other processes by a short poll of the store, wakes
 * the change it names.
 */
import type { Clock } from '../../core/index.js';
import { systemClock } from '../../core/index.js';
import { checkDataDir, parseOutputUrl, type LocalForge } from '../../forge/local/index.js';
import { REVIEW_RUNS_NAMESPACE } from '../../review/index.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
import { ChangeJobs, type ChangeJobsOptions } from './job.js';
import { LedgerStore } from './ledger-store.js';
import { builtinRepair } from './repair-module.js';
import { panelReviewer } from './review-step.js';
import { AutomergeRouter } from './router.js';
import { SECRET_FILE, loadOrCreateSecret } from './secret.js';
import type { AutomergeEnvironment, LoopProgress, RepairModule, Reviewer, WaitSettings } from './types.js';
import { ChangeSignals } from './waits.js';
import { repositoryWorkspace } from './workspace.js';

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
}

export interface LocalAutomerge {
  readonly env: AutomergeEnvironment;
  readonly jobs: ChangeJobs;
  readonly router: AutomergeRouter;
  close(): Promise<void>;
}

async function lastPosition(forge: LocalForge): Promise<number> {
  let position = 0;
  for (;;) {
    const batch = await forge.store.events.readAll({ afterPosition: position, limit: 1000 });
    const last = batch[batch.length - 1];
    if (last === undefined) return position;
    position = last.position;
  }
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
  const signals = new ChangeSignals();
  const env: AutomergeEnvironment = {
    forge,
    store: new LedgerStore(storage.eventStore, clock),
    secret: await loadOrCreateSecret(options.dataDir),
    workspace: repositoryWorkspace(forge.repo.root),
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
    checkLog: async (url) => {
      const { namespace, runId, digest } = parseOutputUrl(url);
      const bytes = await forge.store.storage.artifactStore.read({ namespace, runId }, digest);
      return Buffer.from(bytes).toString('utf8');
    },
    ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
  };
  const jobs = new ChangeJobs(env, options.jobs);
  const router = new AutomergeRouter(jobs, { restartOnEvents: options.restartOnEvents ?? false });
  const abort = new AbortController();
  const after = await lastPosition(forge);
  const tail = (async () => {
    for await (const { event } of forge.events({ afterPosition: after, pollMs: options.eventPollMs ?? 500, signal: abort.signal })) {
      if (event.kind === 'comment-created' || event.kind === 'comment-edited') {
        // Comments are routed by whoever received them; here they only wake the change.
        if (jobs.active(event.changeId)) signals.notify(event.changeId);
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
      abort.abort();
      await tail.catch(() => undefined);
      await storage.close();
      await reviewRuns.close();
    },
  };
}
