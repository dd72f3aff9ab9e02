import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { digestJson, newId, sha256Digest, systemClock, type Clock, type Sha256Digest } from '../core/index.js';
import type { RepoConfig } from '../contracts/repo-config.js';
import { GitRepository, defaultLocalDataDir } from '../forge/local/index.js';
import type { BoundFile, DiversityMode, ReviewConfig, ReviewRequestV1 } from '../contracts/index.js';
import { defaultAdapters, trustedTreeOf, type AdapterSet, type LaneSpec, type TrustedTree } from './adapters/index.js';
import { laneSpec, loadReviewConfigFrom, readBaseFile, repositoryReader } from './config.js';
import { laneRetryPolicy } from './attempts.js';
import { resolveCommit } from './git.js';
import { runLane, type LaneOutcome } from './lane.js';
import { judgePanel, type PanelDecision, type PanelVerdict } from './panel.js';
import { prepareReviewInputs, readReviewSubject, type ReviewInputs } from './request.js';
import type { LaneToolPort, LaneToolReceipt } from './tools/port.js';

/** What a review's tools are opened with: the review, its exact subject, the trusted tree and its time. */
export interface ReviewToolContext {
  readonly reviewId: string;
  readonly reviewDir: string;
  readonly repoDir: string;
  readonly headSha: string;
  readonly baseSha: string;
  readonly trusted: TrustedTree;
  /** The trusted config (the base's `.proofgate.yml`, parsed): where the proof scenarios are. */
  readonly config: RepoConfig;
  /** When the review started and how long it may take in all (ms): proof spends this budget. */
  readonly startedAtMs: number;
  readonly budgetMs: number;
}

/** Opens a review's tools once the review is prepared (null: no tools for this review). */
export type ReviewToolsFactory = (review: ReviewToolContext) => LaneToolPort | null;

export interface ReviewOptions {
  readonly repoDir: string;
  readonly base: string;
  readonly head: string;
  readonly configFile?: string;
  /** Overrides the configured diversity mode. */
  readonly mode?: DiversityMode;
  /** proofgate data directory; the review lives in `<dataDir>/reviews/<review_id>`. Default `<git dir>/proofgate`. */
  readonly dataDir?: string;
  readonly subjectId?: string;
  readonly author?: Partial<ReviewRequestV1['author']>;
  readonly adapters?: Partial<AdapterSet>;
  readonly env?: NodeJS.ProcessEnv;
  readonly clock?: Clock;
  /** Called after each lane (progress). */
  readonly onLane?: (outcome: LaneOutcome) => void;
  /** The review's tools (live proof); every lane run is offered what the port opens for it. */
  readonly tools?: ReviewToolsFactory;
}

/** A prepared review: trusted settings, bound inputs and the lanes to run. */
export interface PreparedReview {
  readonly reviewId: string;
  readonly repoDir: string;
  readonly dataDir: string;
  readonly configSource: string;
  readonly config: ReviewConfig;
  readonly lanes: LaneSpec[];
  readonly inputs: ReviewInputs;
  /** The commit the config came from, whose tree supplies reviewer programs, and its jail policy. */
  readonly trustedTree: TrustedTree;
  /** The whole trusted config the review section came from. */
  readonly trustedConfig: RepoConfig;
}

export interface ReviewOutcome {
  readonly review_id: string;
  readonly dir: string;
  readonly subject_id: string;
  readonly base_sha: string;
  readonly head_sha: string;
  readonly merge_base_sha: string;
  readonly diff: BoundFile;
  readonly acceptance_contract: BoundFile;
  readonly author: ReviewRequestV1['author'];
  readonly mode: DiversityMode;
  readonly config_source: string;
  /** Digest of the parsed trusted config the review ran under (`configDigest`). */
  readonly config_digest: string | null;
  readonly verdict: PanelVerdict;
  readonly reasons: string[];
  readonly lanes: LaneOutcome[];
  /** A receipt for every plan the review's tools ran: plan digest, bundle digest, how it ended. */
  readonly proofs: readonly LaneToolReceipt[];
}

/** `<git common dir>/proofgate` of the repository: the same state directory the local forge uses. */
export async function defaultDataDir(repoDir: string): Promise<string> {
  return defaultLocalDataDir(await GitRepository.open(repoDir));
}

/**
 * The digest a verdict binds the rules by: the canonical JSON (RFC 8785) of
 * the PARSED trusted config, defaults filled in, so reformatting the YAML or
 * reordering its keys changes nothing, and any changed setting changes it.
 */
export function configDigest(config: RepoConfig): Sha256Digest {
  return digestJson(JSON.parse(JSON.stringify(config)) as unknown);
}

/** What a review of a change is bound to, as it would be now. */
export interface ReviewBindings {
  readonly headSha: string;
  readonly mergeBaseSha: string;
  readonly diff: Sha256Digest;
  readonly contract: Sha256Digest;
  readonly config: Sha256Digest;
  /** The paths the diff touches (not a binding: what the trust rule reads). */
  readonly paths: readonly string[];
}

type SubjectOptions = Pick<ReviewOptions, 'repoDir' | 'base' | 'head' | 'configFile'>;

/** The trusted config from the base (never the head), the contract it names, and the exact bytes under review. */
async function loadSubject(options: SubjectOptions) {
  const repoDir = resolve(options.repoDir);
  const baseSha = await resolveCommit(repoDir, options.base);
  const read = await repositoryReader(repoDir);
  const loaded = await loadReviewConfigFrom(read, baseSha, options.configFile);
  const contractText = loaded.config.acceptanceContract === undefined ? undefined : await readBaseFile(read, baseSha, loaded.config.acceptanceContract);
  return { repoDir, baseSha, loaded, contractText };
}

/**
 * The bindings a review of `base`..`head` would have now, read the way
 * `prepareReview` reads them but without writing anything: the automerge loop
 * compares them with a verdict's before it takes the verdict.
 */
export async function liveReviewBindings(options: SubjectOptions): Promise<ReviewBindings> {
  const { repoDir, baseSha, loaded, contractText } = await loadSubject(options);
  const subject = await readReviewSubject({
    repoDir,
    base: baseSha,
    baseName: options.base,
    head: options.head,
    ...(contractText === undefined ? {} : { contractText }),
  });
  return {
    headSha: subject.headSha,
    mergeBaseSha: subject.mergeBaseSha,
    diff: sha256Digest(subject.diff),
    contract: sha256Digest(subject.contractText),
    config: configDigest(loaded.trusted),
    paths: subject.paths,
  };
}

/** Load the trusted config from the base, write the bound diff and contract, and resolve the lanes. */
export async function prepareReview(options: ReviewOptions): Promise<PreparedReview> {
  const { repoDir, baseSha, loaded, contractText } = await loadSubject(options);
  const dataDir = resolve(options.dataDir ?? (await defaultDataDir(repoDir)));
  const reviewId = newId('review');
  const reviewDir = join(dataDir, 'reviews', reviewId);
  await mkdir(reviewDir, { recursive: true });
  const inputs = await prepareReviewInputs({
    repoDir,
    base: baseSha,
    baseName: options.base,
    head: options.head,
    reviewDir,
    mode: options.mode ?? loaded.config.mode,
    configDigest: configDigest(loaded.trusted),
    ...(contractText === undefined ? {} : { contractText }),
    ...(options.subjectId === undefined ? {} : { subjectId: options.subjectId }),
    ...(options.author === undefined ? {} : { author: options.author }),
  });
  const trustedTree = trustedTreeOf(baseSha, loaded.trusted);
  return {
    reviewId,
    repoDir,
    dataDir,
    configSource: loaded.source,
    config: loaded.config,
    lanes: loaded.config.lanes.map(laneSpec),
    inputs,
    trustedTree,
    trustedConfig: loaded.trusted,
  };
}

/**
 * Run a prepared review's lanes, then remove its copy of the diff whatever
 * happened: the byte-exact diff (which may hold a key the change adds) lives
 * only while the lanes read it; the records keep its digest, never its bytes.
 */
export async function whileReviewDiffExists<T>(prepared: PreparedReview, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } finally {
    await rm(prepared.inputs.diff.path, { force: true });
  }
}

/**
 * Open the review's tools (if any) for a prepared review, run `body` with
 * them, and close them whatever happened: nothing a tool started outlives
 * the review.
 */
export async function withReviewTools<T>(
  prepared: PreparedReview,
  options: Pick<ReviewOptions, 'tools' | 'clock'>,
  body: (tools: LaneToolPort | null, startedAtMs: number) => Promise<T>,
): Promise<T> {
  const startedAtMs = (options.clock ?? systemClock).now().getTime();
  const tools =
    options.tools?.({
      reviewId: prepared.reviewId,
      reviewDir: prepared.inputs.reviewDir,
      repoDir: prepared.repoDir,
      headSha: prepared.inputs.headSha,
      baseSha: prepared.inputs.baseSha,
      trusted: prepared.trustedTree,
      config: prepared.trustedConfig,
      startedAtMs,
      budgetMs: laneRetryPolicy(prepared.config).budgetMs,
    }) ?? null;
  try {
    return await body(tools, startedAtMs);
  } finally {
    tools?.close();
  }
}

/** Join lane outcomes (and the receipts of what the review's tools ran) with the panel and write `review.json` into the review directory. */
export async function concludeReview(prepared: PreparedReview, lanes: LaneOutcome[], proofs: readonly LaneToolReceipt[] = []): Promise<ReviewOutcome> {
  const { inputs } = prepared;
  const decision: PanelDecision = judgePanel(
    { author: inputs.author, diversity_mode: inputs.mode },
    lanes,
    {
      expectedLanes: prepared.lanes.map((lane) => lane.id),
    },
    proofs,
  );
  const outcome: ReviewOutcome = {
    review_id: prepared.reviewId,
    dir: inputs.reviewDir,
    subject_id: inputs.subjectId,
    base_sha: inputs.baseSha,
    head_sha: inputs.headSha,
    merge_base_sha: inputs.mergeBaseSha,
    diff: inputs.diff,
    acceptance_contract: inputs.contract,
    author: inputs.author,
    mode: inputs.mode,
    config_source: prepared.configSource,
    config_digest: inputs.configDigest,
    verdict: decision.verdict,
    reasons: decision.reasons,
    lanes,
    proofs,
  };
  await writeFile(join(inputs.reviewDir, 'review.json'), `${JSON.stringify(outcome, null, 2)}\n`);
  return outcome;
}

/** Review a local change: every configured lane in turn (each re-dispatched after transport failures as `review.transportRetries` and the budget allow), then the panel. */
export async function runReview(options: ReviewOptions): Promise<ReviewOutcome> {
  const prepared = await prepareReview(options);
  return whileReviewDiffExists(prepared, () => runPreparedReview(prepared, options));
}

async function runPreparedReview(prepared: PreparedReview, options: ReviewOptions): Promise<ReviewOutcome> {
  return withReviewTools(prepared, options, (tools, startedAtMs) => runLanesInTurn(prepared, options, tools, startedAtMs));
}

async function runLanesInTurn(prepared: PreparedReview, options: ReviewOptions, tools: LaneToolPort | null, startedAtMs: number): Promise<ReviewOutcome> {
  const adapters = { ...defaultAdapters(), ...options.adapters };
  const policy = laneRetryPolicy(prepared.config);
  const lanes: LaneOutcome[] = [];
  for (const spec of prepared.lanes) {
    const outcome = await runLane({
      inputs: prepared.inputs,
      spec,
      review: prepared.config,
      repoDir: prepared.repoDir,
      dataDir: prepared.dataDir,
      trusted: prepared.trustedTree,
      adapters,
      policy,
      startedAtMs,
      tools,
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
    lanes.push(outcome);
    options.onLane?.(outcome);
  }
  tools?.close();
  return concludeReview(prepared, lanes, tools?.receipts() ?? []);
}
