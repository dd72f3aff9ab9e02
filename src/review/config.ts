import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { ProofgateError } from '../core/index.js';
import { REPO_CONFIG_PATH, emptyRepoConfig, parseRepoConfigYaml, type RepoConfig } from '../contracts/repo-config.js';
import { reviewConfigSchema, type ReviewConfig, type ReviewLaneConfig } from '../contracts/index.js';
import type { LaneSpec } from './adapters/types.js';
import { git } from './git.js';

export const DEFAULT_LANE_TIMEOUT_SECONDS = 600;
/** Family of the builtin deterministic reviewers: together they count as one family. */
export const BUILTIN_FAMILY = 'proofgate-builtin';

/** The review settings used when the base branch has no `.proofgate.yml` (or no `review:` section). */
export function defaultReviewConfig(): ReviewConfig {
  return { mode: 'fresh-context', lanes: [{ id: 'rules', builtin: 'rules' }, { id: 'tests', builtin: 'tests' }] };
}

function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : `.${String(key)}`;
  return out;
}

/** One line per zod issue: `review.lanes[2].timeoutSeconds: expected a positive integer`. */
export function formatConfigIssues(prefix: string, issues: readonly z.core.$ZodIssue[]): string {
  const lines: string[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) lines.push(`${formatPath(prefix, [...issue.path, key])}: unknown key`);
    } else {
      lines.push(`${formatPath(prefix, issue.path)}: ${issue.message.replace(/^Invalid (?:input|option): /, '')}`);
    }
  }
  return lines.join('; ');
}

/** Validate the `review:` section of a parsed `.proofgate.yml` document. */
export function parseReviewSection(document: unknown, source: string): ReviewConfig {
  if (document === null || document === undefined) return defaultReviewConfig();
  if (typeof document !== 'object' || Array.isArray(document)) throw new ProofgateError('CONFIG', `${source}: the top level must be a mapping`);
  const section = (document as Record<string, unknown>).review;
  if (section === undefined || section === null) return defaultReviewConfig();
  const parsed = reviewConfigSchema.safeParse(section);
  if (!parsed.success) throw new ProofgateError('CONFIG', `${source}: ${formatConfigIssues('review', parsed.error.issues)}`);
  return parsed.data;
}

/**
 * The `review:` settings of a `.proofgate.yml` text. The whole file is
 * validated with the repository schema too, so a misspelled top-level key
 * (`reveiw:`) is the same CONFIG error `change open` gives, never a silent
 * fall back to the default lanes.
 */
export function parseReviewConfigText(text: string, source: string): ReviewConfig {
  return parseConfigText(text, source).config;
}

/** The `review:` settings and the whole validated repository config of a `.proofgate.yml` text. */
function parseConfigText(text: string, source: string): { config: ReviewConfig; trusted: RepoConfig } {
  let document: unknown;
  try {
    document = parseYaml(text, { prettyErrors: false });
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new ProofgateError('CONFIG', `${source}: not valid YAML: ${message}`);
  }
  const review = parseReviewSection(document, source);
  return { config: review, trusted: parseRepoConfigYaml(text, source) };
}

export interface LoadedReviewConfig {
  readonly config: ReviewConfig;
  /** The whole parsed repository config the review settings came from (what a verdict's config digest covers). */
  readonly trusted: RepoConfig;
  /** Where it came from: `--config FILE`, `<base>:.proofgate.yml`, or `default`. */
  readonly source: string;
}

/**
 * The trusted review settings: `--config FILE` when given, else `.proofgate.yml`
 * as committed on the base (never the head under review), else the default.
 */
export async function loadReviewConfig(repoDir: string, baseSha: string, configFile?: string): Promise<LoadedReviewConfig> {
  if (configFile !== undefined) {
    let text: string;
    try {
      text = await readFile(configFile, 'utf8');
    } catch {
      throw new ProofgateError('CONFIG', `cannot read config file ${configFile}`);
    }
    return { ...parseConfigText(text, configFile), source: configFile };
  }
  const listed = await git(repoDir, ['ls-tree', '--name-only', baseSha, '--', REPO_CONFIG_PATH]);
  if (listed.toString('utf8').trim() === '') return { config: defaultReviewConfig(), trusted: emptyRepoConfig(), source: 'default' };
  const text = (await git(repoDir, ['cat-file', 'blob', `${baseSha}:${REPO_CONFIG_PATH}`])).toString('utf8');
  const source = `${baseSha.slice(0, 12)}:${REPO_CONFIG_PATH}`;
  return { ...parseConfigText(text, source), source };
}

/** Read a repository file as committed on the base (the acceptance contract). */
export async function readBaseFile(repoDir: string, baseSha: string, path: string): Promise<string> {
  const listed = await git(repoDir, ['ls-tree', '--name-only', baseSha, '--', path]);
  if (listed.toString('utf8').trim() === '') {
    throw new ProofgateError('CONFIG', `review.acceptanceContract: ${path} does not exist on the base ${baseSha.slice(0, 12)}`);
  }
  return (await git(repoDir, ['cat-file', 'blob', `${baseSha}:${path}`])).toString('utf8');
}

/** Resolve a lane's family (configured, else by kind) and timeout. */
export function laneSpec(lane: ReviewLaneConfig): LaneSpec {
  const family = lane.family ?? (lane.builtin !== undefined ? BUILTIN_FAMILY : lane.openai !== undefined ? `openai:${lane.openai.model}` : `command:${lane.id}`);
  return { id: lane.id, family, timeoutMs: (lane.timeoutSeconds ?? DEFAULT_LANE_TIMEOUT_SECONDS) * 1000, config: lane };
}
