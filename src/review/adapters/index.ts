import type { LaneAdapter, LaneSpec } from './types.js';
import { commandReviewer } from './command-reviewer.js';
import { openaiReviewer } from './openai-reviewer.js';
import { proofReviewer } from './proof-reviewer.js';
import { rulesReviewer } from './rules-reviewer.js';
import { testsReviewer } from './tests-reviewer.js';

/** The adapter for each kind of lane; tests and embedders may replace any of them. */
export interface AdapterSet {
  readonly rules: LaneAdapter;
  readonly tests: LaneAdapter;
  readonly proof: LaneAdapter;
  readonly command: LaneAdapter;
  readonly openai: LaneAdapter;
}

export function defaultAdapters(): AdapterSet {
  return { rules: rulesReviewer, tests: testsReviewer, proof: proofReviewer, command: commandReviewer(), openai: openaiReviewer() };
}

export function adapterFor(spec: LaneSpec, adapters: AdapterSet): LaneAdapter {
  if (spec.config.builtin !== undefined) return adapters[spec.config.builtin];
  if (spec.config.command !== undefined) return adapters.command;
  return adapters.openai;
}

export * from './types.js';
export { commandReviewer, DEFAULT_OUTPUT_LIMIT } from './command-reviewer.js';
export { openaiReviewer, parseVerdictBlock, VERDICT_FENCE } from './openai-reviewer.js';
export { rulesReviewer, readHeadBlobs, DEFAULT_MAX_DIFF_BYTES, type HeadBlob, type HeadBlobs, type Judgment } from './rules-reviewer.js';
export { testsReviewer, isSourcePath, isTestPath } from './tests-reviewer.js';
export { proofReviewer, EXPECTATIONS_FILE } from './proof-reviewer.js';
export { runContained, type ProcessOutcome } from './process.js';
