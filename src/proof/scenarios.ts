import { ProofgateError } from '../core/index.js';
import {
  DEFAULT_PROOF_CEILING_SECONDS,
  DEFAULT_PROOF_RESERVE_SECONDS,
  formatKeyPath,
  PROOF_SCENARIO_ID,
  protectedBranchNames,
  REPO_CONFIG_PATH,
  type ProofProducerConfig,
  type RepoConfig,
} from '../contracts/repo-config.js';

/**
 * The proof scenarios of the trusted configuration (`proof:` in
 * `.proofgate.yml`, validated by src/contracts/repo-config.ts), resolved for
 * use: every GitHub producer names the branch its workflow runs from, and
 * that branch is a protected one. Pure.
 */

/** Who runs a scenario's plan. */
export type ProofProducer =
  /** A program from the trusted base, run jailed on an export of the exact head. */
  | { readonly kind: 'local'; readonly command: readonly string[] }
  /** A workflow on a protected branch, dispatched with the plan digest; `artifact` is its evidence bundle. */
  | { readonly kind: 'github-workflow'; readonly workflow: string; readonly ref: string; readonly artifact: string };

/** What a scenario's evidence bundle must hold, and how large it may be. */
export interface ProofEvidenceLimits {
  readonly requiredFiles: readonly string[];
  readonly maxBytes: number;
  readonly maxEntries: number;
}

export interface ProofScenario {
  readonly id: string;
  readonly description: string;
  readonly producer: ProofProducer;
  readonly timeoutSeconds: number;
  readonly evidence: ProofEvidenceLimits;
}

export interface ProofSettings {
  readonly scenarios: readonly ProofScenario[];
  /** One ceiling for all of a review's plans, from its first request. */
  readonly ceilingSeconds: number;
  /** The part of the review's budget kept for its final decision. */
  readonly reserveSeconds: number;
}

/** Whether `value` is a scenario id the config could hold (a safe slug: no dots, slashes or upper case). */
export function isScenarioId(value: unknown): value is string {
  return typeof value === 'string' && PROOF_SCENARIO_ID.test(value);
}

/** The settings when the trusted config has no `proof:` section: no scenarios, the default ceiling and reserve. */
export function noProofSettings(): ProofSettings {
  return { scenarios: [], ceilingSeconds: DEFAULT_PROOF_CEILING_SECONDS, reserveSeconds: DEFAULT_PROOF_RESERVE_SECONDS };
}

function resolveProducer(
  producer: ProofProducerConfig,
  trustedBranch: string,
  branches: readonly string[],
  at: readonly PropertyKey[],
  source: string,
): ProofProducer {
  if (producer.kind === 'local') return { kind: 'local', command: [...producer.command] };
  const ref = producer.ref ?? trustedBranch;
  if (!branches.includes(ref)) {
    const field = formatKeyPath([...at, 'producer', 'ref']);
    throw new ProofgateError(
      'CONFIG',
      `${source}: ${field}: "${ref}" is not a protected branch (${branches.join(', ')}); a producer workflow runs from trusted code only`,
      {
        source,
        field,
      },
    );
  }
  return { kind: 'github-workflow', workflow: producer.workflow, ref, artifact: producer.artifact };
}

/** The trusted branch and its validated config: where the protected branches are named. */
export interface TrustedBranchConfig {
  readonly branch: string;
  readonly config: RepoConfig;
}

/**
 * The proof settings of a validated config (the base's, read like `review:`):
 * defaults filled in, and every workflow producer bound to a branch (its
 * `ref`, else the trusted branch) that the TRUSTED branch's config names as
 * protected. A `ref` that is not one is a one-line `CONFIG` error naming the
 * field, e.g. `main:.proofgate.yml: proof.scenarios[1].producer.ref: "dev" is
 * not a protected branch (main); ...`. `source` names the config in the
 * error (default `<trusted branch>:.proofgate.yml`).
 */
export function proofSettingsOf(config: RepoConfig, trusted: TrustedBranchConfig, source = `${trusted.branch}:${REPO_CONFIG_PATH}`): ProofSettings {
  const section = config.proof;
  if (section === undefined) return noProofSettings();
  const branches = protectedBranchNames(trusted.branch, trusted.config);
  const scenarios = section.scenarios.map((scenario, index): ProofScenario => ({
    id: scenario.id,
    description: scenario.description,
    producer: resolveProducer(scenario.producer, trusted.branch, branches, ['proof', 'scenarios', index], source),
    timeoutSeconds: scenario.timeoutSeconds,
    evidence: {
      requiredFiles: [...scenario.evidence.requiredFiles],
      maxBytes: scenario.evidence.maxBytes,
      maxEntries: scenario.evidence.maxEntries,
    },
  }));
  return { scenarios, ceilingSeconds: section.ceilingSeconds, reserveSeconds: section.reserveSeconds };
}

/** The configured scenario with this id, or null (ids compare exactly: they are lowercase slugs). */
export function findScenario(scenarios: readonly ProofScenario[], id: string): ProofScenario | null {
  return scenarios.find((scenario) => scenario.id === id) ?? null;
}
