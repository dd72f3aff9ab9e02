import { Option, type Command } from 'commander';
import { ProofgateError, parseJson } from '../../core/index.js';
import { reviewRequestSchema } from '../../contracts/index.js';
import { REVIEW_RUNS_NAMESPACE, runReviewOnRuntime, validateLaneResult, type LaneOutcome, type ReviewOutcome } from '../../review/index.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
import { repositoryStateDir, resolveDataDir } from '../data-dir.js';
import { emit, readInput, setExitStatus, usageError } from '../io.js';
import { untrustedText } from '../untrusted-text.js';

/** Exit codes of `proofgate review`. */
export const REVIEW_EXIT = { CONFIRMED: 0, REFUTED: 3, HOLD: 5 } as const;

/** Ends the command with a given exit status once its output is written. */
function exitWith(code: number): void {
  setExitStatus(code);
}

/** A lane's lines. What a lane reports (reasons, paths, findings) quotes the change: every field is shown escaped. */
function laneLine(lane: LaneOutcome): string[] {
  const result = lane.result;
  const head = `  lane ${untrustedText(lane.lane_id)} [${untrustedText(lane.family)}]`;
  const lines: string[] = [];
  if (!lane.validation.valid) lines.push(`${head}: INVALID (${lane.validation.code}: ${untrustedText(lane.validation.reason)})`);
  else if (result && 'failure' in result) lines.push(`${head}: transport failure: ${untrustedText(result.failure.reason)}`);
  else if (result) lines.push(`${head}: ${result.disposition}`);
  if (result?.evidence_path) lines.push(`    evidence: ${untrustedText(result.evidence_path)}`);
  for (const finding of result?.findings ?? []) {
    const where = finding.path === undefined ? '' : ` (${untrustedText(finding.path)}${finding.line === undefined ? '' : `:${finding.line}`})`;
    lines.push(`    - ${untrustedText(finding.title)}${where}: ${untrustedText(finding.evidence)}`);
  }
  return lines;
}

function renderReview(outcome: ReviewOutcome, runId: string): string {
  const lines = [
    `review ${outcome.review_id}: ${outcome.verdict} (${outcome.mode})`,
    `run ${runId} (proofgate runs show ${runId} --namespace ${REVIEW_RUNS_NAMESPACE})`,
    `head ${outcome.head_sha}  base ${outcome.base_sha}`,
    `diff ${outcome.diff.sha256}  contract ${outcome.acceptance_contract.sha256}  config ${untrustedText(outcome.config_source)}`,
    ...outcome.lanes.flatMap(laneLine),
    'reasons:',
    ...outcome.reasons.map((reason) => `  - ${untrustedText(reason)}`),
    `files: ${untrustedText(outcome.dir)}`,
  ];
  return lines.join('\n');
}

interface ReviewFlags {
  repo: string;
  base: string;
  head: string;
  config?: string;
  mode?: 'fresh-context' | 'multi-model';
  data?: string;
  subject?: string;
  authorContext?: string;
  authorFamily?: string;
  json?: boolean;
}

async function reviewAction(flags: ReviewFlags): Promise<void> {
  const stateDir = await repositoryStateDir(flags.repo);
  if (stateDir === null) throw new ProofgateError('GIT', `not a git repository: ${flags.repo}`);
  const dataDir = resolveDataDir(flags.data, stateDir);
  const progress = process.stderr.isTTY && !flags.json;
  const storage = createLocalRunStorage({ directory: dataDir, namespace: REVIEW_RUNS_NAMESPACE, policy: defaultStoragePolicy });
  const result = await runReviewOnRuntime({
    storage,
    repoDir: flags.repo,
    base: flags.base,
    head: flags.head,
    dataDir,
    ...(flags.config === undefined ? {} : { configFile: flags.config }),
    ...(flags.mode === undefined ? {} : { mode: flags.mode }),
    ...(flags.subject === undefined ? {} : { subjectId: flags.subject }),
    author: {
      ...(flags.authorContext === undefined ? {} : { context_id: flags.authorContext }),
      ...(flags.authorFamily === undefined ? {} : { family: flags.authorFamily }),
    },
    onLane: (lane) => {
      if (progress) process.stderr.write(`lane ${untrustedText(lane.lane_id)} done\n`);
    },
  }).finally(() => storage.close());
  const { outcome, runId } = result;
  await emit(Boolean(flags.json), { ...outcome, run_id: runId, accepted_result: { position: result.position, record_digest: result.record.digest } }, () =>
    renderReview(outcome, runId),
  );
  exitWith(REVIEW_EXIT[outcome.verdict]);
}

async function validateAction(resultFile: string, flags: { request: string; json?: boolean }): Promise<void> {
  const raw = parseJson((await readInput(resultFile)).toString('utf8'), resultFile);
  const requestValue = parseJson((await readInput(flags.request)).toString('utf8'), flags.request);
  const request = reviewRequestSchema.safeParse(requestValue);
  if (!request.success) {
    const issue = request.error.issues[0];
    throw new ProofgateError(
      'INVALID_INPUT',
      `${flags.request} is not a review-request.v1: ${issue?.path.join('.') || 'request'}: ${issue?.message ?? 'invalid'}`,
    );
  }
  const validation = await validateLaneResult(raw, request.data);
  await emit(Boolean(flags.json), validation, () => (validation.valid ? 'valid' : `invalid: ${validation.code}: ${untrustedText(validation.reason)}`));
  exitWith(validation.valid ? 0 : 1);
}

export function registerReviewCommands(program: Command): void {
  const review = program
    .command('review')
    .description('review the change between --base and --head with the configured reviewer lanes; exit 0 CONFIRMED, 3 REFUTED, 5 HOLD')
    .option('--repo <dir>', 'git repository', '.')
    .option('--base <ref>', 'base the change is reviewed against', 'main')
    .option('--head <ref>', 'head of the change', 'HEAD')
    .option('--config <file>', 'review settings file (default: .proofgate.yml on the base)')
    .addOption(new Option('--mode <mode>', 'diversity mode (default: from the config)').choices(['fresh-context', 'multi-model']))
    .option('--data <dir>', 'data directory (default: $PROOFGATE_DATA_DIR, else <git dir>/proofgate); files go to <dir>/reviews/<id>')
    .option('--subject <id>', 'subject id bound into every request (default local:<head sha>)')
    .option('--author-context <id>', "author's context id (default git-author:<email of the head commit>)")
    .option('--author-family <family>', "author's family (default human)")
    .option('--json', 'print the review outcome as JSON')
    .action(async (flags: ReviewFlags) => reviewAction(flags));

  review
    .command('validate-result')
    .description('check a review-lane-result.v1 against its review-request.v1; prints valid or the typed reason (exit 0 / 1)')
    .argument('<result>', 'lane result JSON file, or - for standard input')
    .requiredOption('--request <file>', 'the review-request.v1 JSON the result answers')
    .option('--json', 'print {"valid":...,"code","reason"} as JSON')
    .action(async (result: string, _flags: unknown, command: Command) => {
      // `--json` may be taken by the parent `review` command; read the merged options.
      const flags = command.optsWithGlobals<{ request: string; json?: boolean }>();
      if (result === '-' && flags.request === '-') throw usageError('result and request cannot both be standard input');
      await validateAction(result, flags);
    });
  review.exitOverride();
}
