import { readFile } from 'node:fs/promises';
import { ProofgateError } from '../core/index.js';
import { emptyRepoConfig, loadRepoConfigAt, parseRepoConfigYaml, type ReadFileAtRef, type RepoConfig } from '../contracts/repo-config.js';
import type { ReviewConfig, ReviewLaneConfig } from '../contracts/index.js';
import { GitRepository } from '../forge/local/index.js';
import type { LaneSpec } from './adapters/types.js';

export const DEFAULT_LANE_TIMEOUT_SECONDS = 600;
/** Family of the builtin deterministic reviewers: together they count as one family. */
export const BUILTIN_FAMILY = 'proofgate-builtin';

/** The review settings used when the base branch has no `.proofgate.yml` (or no `review:` section). */
export function defaultReviewConfig(): ReviewConfig {
  return {
    mode: 'fresh-context',
    lanes: [
      { id: 'rules', builtin: 'rules' },
      { id: 'tests', builtin: 'tests' },
    ],
  };
}

/** The review settings of a validated repository config: its `review:` section, else the default. */
export function reviewSettingsOf(config: RepoConfig): ReviewConfig {
  return config.review ?? defaultReviewConfig();
}

/**
 * The `review:` settings of a `.proofgate.yml` text. The whole file is
 * validated with the repository schema (`parseRepoConfigYaml`), so a
 * misspelled top-level key (`reveiw:`) is the same CONFIG error `change open`
 * gives, never a silent fall back to the default lanes.
 */
export function parseReviewConfigText(text: string, source: string): ReviewConfig {
  return reviewSettingsOf(parseRepoConfigYaml(text, source));
}

export interface LoadedReviewConfig {
  readonly config: ReviewConfig;
  /** The whole parsed repository config the review settings came from (what a verdict's config digest covers). */
  readonly trusted: RepoConfig;
  /** Where it came from: `--config FILE`, `<base>:.proofgate.yml`, or `default`. */
  readonly source: string;
}

/** Reads files as committed at a ref of the repository at `repoDir` (its object store, never a work tree). */
export async function repositoryReader(repoDir: string): Promise<ReadFileAtRef> {
  const repo = await GitRepository.open(repoDir);
  return (ref, path) => repo.readBlob(ref, path);
}

/**
 * The trusted review settings: `--config FILE` when given, else `.proofgate.yml`
 * as committed on the base (never the head under review; read by the one
 * trusted-config loader, `loadRepoConfigAt`), else the default.
 */
export async function loadReviewConfig(repoDir: string, baseSha: string, configFile?: string): Promise<LoadedReviewConfig> {
  return loadReviewConfigFrom(await repositoryReader(repoDir), baseSha, configFile);
}

/** `loadReviewConfig` through a given reader of the repository. */
export async function loadReviewConfigFrom(read: ReadFileAtRef, baseSha: string, configFile?: string): Promise<LoadedReviewConfig> {
  if (configFile !== undefined) {
    let text: string;
    try {
      text = await readFile(configFile, 'utf8');
    } catch {
      throw new ProofgateError('CONFIG', `cannot read config file ${configFile}`);
    }
    const trusted = parseRepoConfigYaml(text, configFile);
    return { config: reviewSettingsOf(trusted), trusted, source: configFile };
  }
  const loaded = await loadRepoConfigAt(read, baseSha, baseSha.slice(0, 12));
  if (loaded.source === null) return { config: defaultReviewConfig(), trusted: emptyRepoConfig(), source: 'default' };
  return { config: reviewSettingsOf(loaded.config), trusted: loaded.config, source: loaded.source };
}

/** Read a repository file as committed on the base (the acceptance contract). */
export async function readBaseFile(read: ReadFileAtRef, baseSha: string, path: string): Promise<string> {
  const bytes = await read(baseSha, path);
  if (bytes === null) {
    throw new ProofgateError('CONFIG', `review.acceptanceContract: ${path} does not exist on the base ${baseSha.slice(0, 12)}`);
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Resolve a lane's family (configured, else by kind) and timeout. */
export function laneSpec(lane: ReviewLaneConfig): LaneSpec {
  const family =
    lane.family ?? (lane.builtin !== undefined ? BUILTIN_FAMILY : lane.openai !== undefined ? `openai:${lane.openai.model}` : `command:${lane.id}`);
  return { id: lane.id, family, timeoutMs: (lane.timeoutSeconds ?? DEFAULT_LANE_TIMEOUT_SECONDS) * 1000, config: lane };
}
