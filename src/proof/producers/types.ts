import type { Sha256Digest } from '../../core/index.js';
import type { ProofScenario } from '../scenarios.js';

/**
 * A producer runs one admitted plan of one scenario on the exact head and
 * hands back the evidence bundle's bytes, untouched: the caller (the proof
 * session) verifies them against the scenario, plan digest and head before
 * anything is believed. A producer never decides that a plan passed.
 */
export interface ProducerJob {
  readonly scenario: ProofScenario;
  /** The plan as checked by `checkPlan` (plain JSON data, never shell). */
  readonly plan: unknown;
  readonly planDigest: Sha256Digest;
  /** The exact head under review (40 hex digits). */
  readonly headSha: string;
  /** The trusted commit the review's config was read from: the scenario's program comes from its tree. */
  readonly trustedSha: string;
  /** An id unique to this plan of this review (correlates a dispatched workflow run with the plan). */
  readonly correlationId: string;
  /** When the plan's time runs out (ms since the epoch): the producer stops and answers `incomplete`. */
  readonly deadlineMs: number;
  /** Aborted when the review ends or its owner is lost: the producer stops and answers `incomplete`. */
  readonly signal: AbortSignal;
  /** A sign of life, as often as the producer likes (the transports pass it on as progress). */
  readonly onProgress?: (message: string) => void;
}

/** What a producer hands back. Only `bundle` can become verified evidence, and only after verification. */
export type ProducerAnswer =
  /** The evidence bundle's bytes, as produced (unverified). */
  | { readonly kind: 'bundle'; readonly bytes: Buffer }
  /** The work did not finish (deadline, abort, the program failed before writing evidence). */
  | { readonly kind: 'incomplete'; readonly message: string }
  /** The work's result cannot be checked (a lost dispatch, another run, a pin that moved, no artifact). */
  | { readonly kind: 'unverifiable'; readonly message: string }
  /** The producer's output could not even be packed (a link, a special file, an unsafe name, over the limits): rejected evidence, `reason` typed like a bundle's. */
  | { readonly kind: 'malformed'; readonly reason: string; readonly message: string };

/** Runs plans for the scenarios whose producer is of its kind. */
export interface ProofProducerRunner {
  run(job: ProducerJob): Promise<ProducerAnswer>;
}

/** The runners a review may use, by producer kind; a kind without one is not available (a coverage gap). */
export interface ProofProducers {
  readonly local?: ProofProducerRunner;
  readonly 'github-workflow'?: ProofProducerRunner;
}
