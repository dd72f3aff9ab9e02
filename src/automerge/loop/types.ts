/**
 * What the automerge loop runs on: the forge (whose change workspace gives
 * reviews and repairs their git content and publishes a repair), the ledger
 * store, the server secret, and the repair module (called through the
 * interface below; src/automerge/repair/ holds it).
 */
import type { Clock } from '../../core/index.js';
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, Forge, ForgeCheck } from '../../forge/port.js';
import type { ProofAdmission, ProofProducer } from '../../proof/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import type { RepairConfig, RepairContext, RepairFinding, RepairKind, RepairOutcome } from '../repair/index.js';
import type { MarkerSecret, Verdict, VerdictBindings } from '../markers.js';
import type { LedgerStore } from './ledger-store.js';
import type { ChangeSignals, WaitSettings } from './waits.js';

export type { WaitSettings } from './waits.js';

/** Committer identity for repair commits. */
export type RepairIdentity = RepairContext['identity'];

/** The repair module as the loop calls it (src/automerge/repair/ provides `runRepair` + `repairConfigFrom`). */
export interface RepairModule {
  runRepair(context: RepairContext): Promise<RepairOutcome>;
  repairConfigFrom(trusted: RepoConfig): RepairConfig;
}

/** What a review produced, as the loop needs it. */
export interface ReviewResult {
  readonly verdict: Verdict;
  readonly reasons: readonly string[];
  readonly findings: readonly RepairFinding[];
  /** The review's own id (its directory name or run id). */
  readonly reviewRef: string;
  /** What the review was judged on (its diff, contract and trusted-config digests): the verdict marker signs them. */
  readonly bindings: VerdictBindings;
  /** The review run whose accepted-result record holds the verdict (in `reviewRuns`), or null when none is kept. */
  readonly run: string | null;
}

/** Runs the review panel on exactly `head` of `repoDir` against `base`. */
export type Reviewer = (request: {
  readonly repoDir: string;
  readonly snapshot: ChangeSnapshot;
  readonly base: string;
  readonly head: string;
  readonly signal?: AbortSignal;
  /** A proof-focused review: the admitted `@proofgate proof` decision whose tools the lanes are offered. */
  readonly proof?: ProofAdmission;
}) => Promise<ReviewResult>;

/** One progress line of the loop (for a terminal or a log). */
export interface LoopProgress {
  readonly changeId: string;
  readonly at: string;
  readonly text: string;
}

/**
 * An outcome the loop has just recorded in the ledger, as `AutomergeEnvironment.observe`
 * receives it (metrics). Every value is from a small fixed set: never a change
 * id, a sha, a login or free text.
 *
 * - `review`: a review ended with a verdict, or `failed` (a transport-class
 *   end: no verdict); `seconds`: from preparing the review's workspace to the
 *   verdict (monotonic clock).
 * - `repair`: a repair of `repair` kind ended `pushed`, `no-change` or `failed`.
 * - `merge`: a merge at the reviewed head: `merged`; refused by the forge with
 *   nothing changed (`head-moved`, `base-moved`, `not-mergeable`); not tried
 *   because automerge was stopped (or the change merged) since the decision
 *   (`stopped`); or failed with another error (`error`, the loop ends with it).
 */
export type AutomergeObservation =
  | { readonly kind: 'review'; readonly verdict: Verdict | 'failed'; readonly seconds: number }
  | { readonly kind: 'repair'; readonly repair: RepairKind; readonly outcome: RepairOutcome['kind'] }
  | { readonly kind: 'merge'; readonly outcome: 'merged' | 'head-moved' | 'base-moved' | 'not-mergeable' | 'stopped' | 'error' };

/** What `AutomergeEnvironment.baseChecks` is asked for. */
export interface BaseChecksRequest {
  /** The change: its base sha is the commit asked about, its id names the runs. */
  readonly snapshot: ChangeSnapshot;
  /** The trusted config of the base (the checks to run come from it). */
  readonly config: RepoConfig;
  /** Names of the checks that failed on the head and have no result on the base in the snapshot. */
  readonly names: readonly string[];
  readonly signal?: AbortSignal;
}

export interface AutomergeEnvironment {
  readonly forge: Forge;
  readonly store: LedgerStore;
  readonly secret: MarkerSecret;
  readonly reviewer: Reviewer;
  /** null: no repair module; repairs become blocks. */
  readonly repair: RepairModule | null;
  readonly signals: ChangeSignals;
  readonly identity: RepairIdentity;
  readonly clock: Clock;
  /** Overrides of the trusted config's wait settings (tests, benchmarks). */
  readonly waits?: Partial<WaitSettings>;
  /**
   * Start the configured checks of a head that has none yet (the local forge
   * has no CI of its own). Resolves when they finished; an aborted `signal`
   * cancels them (the loop aborts the checks it started when it stops).
   */
  readonly startChecks?: (changeId: string, headSha: string, signal: AbortSignal) => Promise<void>;
  /** Reads a check's output for a repair (the local forge keeps it as an artifact). */
  readonly checkLog?: (url: string) => Promise<string | null>;
  /**
   * Runs on a change's base commit of checks that failed on its head, for the
   * "base is blocked" rule (src/automerge/loop/base-checks.ts; the local forge
   * runs the trusted checks there once per sha). Absent: the base's result is
   * what the snapshot carries, else unknown.
   */
  readonly baseChecks?: (request: BaseChecksRequest) => Promise<readonly ForgeCheck[]>;
  readonly onProgress?: (progress: LoopProgress) => void;
  /** Status comment family (default `automerge`). */
  readonly intent?: string;
  /**
   * The run store the reviewer keeps its review runs in: a verdict that names
   * a run is taken only while that run's accepted-result record resolves
   * against the live bindings here (absent: such a verdict is never taken).
   */
  readonly reviewRuns?: RunStorage;
  /** The run store maintainers' approvals of trust changes are recorded in (absent: none can be given). */
  readonly approvals?: RunStorage;
  /** The kinds of proof producer this host runs (default: `local`): a scenario of another kind is not offered. */
  readonly proofProducers?: readonly ProofProducer['kind'][];
  /**
   * Told each review, repair and merge outcome right after the ledger records
   * it (a service's metrics). Called inside the loop's step: it must be
   * quick and must not throw.
   */
  readonly observe?: (observation: AutomergeObservation) => void;
}
