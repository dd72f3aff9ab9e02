import type { ReviewFinding, ReviewTestsConfig } from '../../contracts/index.js';
import { readReviewedChange } from '../diff-read.js';
import { matchesAny } from '../glob.js';
import { DEFAULT_MAX_DIFF_BYTES, deterministicLane } from './rules-reviewer.js';
import type { LaneAdapter } from './types.js';

const CODE_EXTENSION = /\.(?:[cm]?[jt]sx?|py|go|rs|java|kt|kts|rb|php|cs|swift|scala|c|cc|cpp|cxx|h|hpp|m|mm|ex|exs|erl|clj|hs|lua|sh)$/;
const TEST_PATH = /(?:^|\/)(?:test|tests|__tests__|spec|specs|testdata)\/|\.(?:test|spec)\.[a-z0-9]+$|_test\.[a-z0-9]+$|(?:^|\/)test_[^/]*\.py$/;

/** Is this a test file (config globs, else the usual conventions)? */
export function isTestPath(path: string, config: ReviewTestsConfig = {}): boolean {
  return config.testPaths ? matchesAny(path, config.testPaths) : TEST_PATH.test(path);
}

/** Is this a source file that needs a test change alongside? */
export function isSourcePath(path: string, config: ReviewTestsConfig = {}): boolean {
  if (isTestPath(path, config)) return false;
  return config.sourcePaths ? matchesAny(path, config.sourcePaths) : CODE_EXTENSION.test(path);
}

/** The tests reviewer's judgment (pure) of the paths a change touches: source changed without any test changed is a finding. */
export function judgePathsForTests(paths: readonly string[], config: ReviewTestsConfig = {}): { findings: ReviewFinding[]; checks: string[] } {
  const sources = paths.filter((path) => isSourcePath(path, config));
  const tests = paths.filter((path) => isTestPath(path, config));
  const checks = [`${paths.length} changed file(s): ${sources.length} source, ${tests.length} test`];
  if (sources.length === 0 || tests.length > 0) return { findings: [], checks };
  const shown = sources.slice(0, 20).join(', ') + (sources.length > 20 ? `, and ${sources.length - 20} more` : '');
  return {
    findings: [{ title: 'source changed without any test changed', evidence: `changed source: ${shown}`, path: sources[0] as string }],
    checks,
  };
}

/** The tests lane: the paths git reports for the change the request binds (`--raw -z`: the new path, or the old one of a deletion). */
export const testsReviewer: LaneAdapter = deterministicLane('builtin tests', async (_diff, context) => {
  const change = await readReviewedChange(context.repoDir, context.request, {
    maxBytes: DEFAULT_MAX_DIFF_BYTES,
    content: false,
    timeoutMs: context.lane.timeoutMs,
  });
  return judgePathsForTests(
    change.files.map((file) => file.newPath ?? file.oldPath ?? ''),
    context.review.tests,
  );
});
