import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ProofgateError, randomHex, sha256Digest, systemClock, type Clock, type Sha256Digest } from '../core/index.js';
import { REVIEW_REQUEST_SCHEMA, reviewRequestSchema, type BoundFile, type DiversityMode, type ReviewRequestV1 } from '../contracts/index.js';
import { REVIEW_DIFF_OPTIONS } from './diff-read.js';
import { git, gitText, resolveCommit } from './git.js';

/** Everything the lanes of one review share: the exact bytes under review. */
export interface ReviewInputs {
  readonly reviewDir: string;
  readonly subjectId: string;
  readonly baseSha: string;
  readonly headSha: string;
  /** Base and head as the caller named them (a ref name or a commit id): a lane must not move what they name. */
  readonly refNames: readonly string[];
  /** The merge base the diff starts from (`git diff base...head`). */
  readonly mergeBaseSha: string;
  readonly diff: BoundFile;
  readonly contract: BoundFile;
  readonly author: ReviewRequestV1['author'];
  readonly mode: DiversityMode;
  /** Digest of the parsed trusted config the review runs under (null: the caller named none). */
  readonly configDigest: Sha256Digest | null;
}

export interface PrepareInputsOptions {
  readonly repoDir: string;
  readonly base: string;
  readonly head: string;
  /** How the caller named the base when `base` is already resolved (for messages and the repository fingerprint). */
  readonly baseName?: string;
  readonly reviewDir: string;
  readonly subjectId?: string;
  readonly mode: DiversityMode;
  /** The acceptance contract text; when absent a default contract is generated. */
  readonly contractText?: string;
  readonly author?: Partial<ReviewRequestV1['author']>;
  /** Digest of the parsed trusted config (`configDigest`), bound with the diff and the contract. */
  readonly configDigest?: Sha256Digest;
}

async function writeFrozen(path: string, bytes: Buffer | string): Promise<BoundFile> {
  await writeFile(path, bytes, { flag: 'wx' });
  await chmod(path, 0o444);
  return { path, sha256: sha256Digest(typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes) };
}

/**
 * The contract used when the repository configures none: what must hold for
 * the change to pass. It names the merge base, never the base tip, so a base
 * that moves on with unrelated commits leaves the contract (and its digest) as
 * it was.
 */
export function defaultAcceptanceContract(mergeBaseSha: string, headSha: string, subjects: readonly string[]): string {
  const lines = [
    '# Acceptance contract',
    '',
    `Change: ${mergeBaseSha}..${headSha} (the diff from the merge base to the head).`,
    '',
    'The change is acceptable only if all of the following hold:',
    '1. It does what its commit messages say, and nothing unrelated.',
    '2. It keeps existing behaviour working; changed behaviour comes with changed or new tests.',
    '3. It adds no secret (private key, access key, token) and no merge-conflict marker.',
    '4. It touches no path the repository forbids and stays within a reviewable size.',
    '5. Every claim a reviewer makes is backed by evidence that names the file and line.',
    '',
    'Commits:',
    ...(subjects.length === 0 ? ['(none)'] : subjects.map((subject) => `- ${subject}`)),
    '',
  ];
  return lines.join('\n');
}

/** The exact bytes a review of base..head judges, read before anything is written. */
export interface ReviewSubject {
  readonly baseSha: string;
  readonly headSha: string;
  /** Where the head left the base: the diff and the default contract start here, not at the (moving) base tip. */
  readonly mergeBaseSha: string;
  readonly diff: Buffer;
  readonly contractText: string;
  /** Every path the diff touches (old and new names; renames are not detected), as git spells it. */
  readonly paths: readonly string[];
}

export type ReadSubjectOptions = Pick<PrepareInputsOptions, 'repoDir' | 'base' | 'head' | 'baseName' | 'contractText'>;

/**
 * Resolve base and head and read the diff (`git diff <merge-base> <head>`, the
 * same bytes as `git diff base...head`), the paths it touches and the
 * acceptance contract (the given text, else the default one).
 */
export async function readReviewSubject(options: ReadSubjectOptions): Promise<ReviewSubject> {
  const repoDir = resolve(options.repoDir);
  const baseSha = await resolveCommit(repoDir, options.base);
  const headSha = await resolveCommit(repoDir, options.head);
  const mergeBaseSha = await gitText(repoDir, ['merge-base', baseSha, headSha]).catch(() => {
    throw new ProofgateError('GIT', `${options.base} and ${options.head} have no common ancestor`);
  });
  if (mergeBaseSha === headSha) {
    throw new ProofgateError('INVALID_INPUT', `nothing to review: ${options.head} has no commits that ${options.baseName ?? options.base} lacks`);
  }
  const diff = await git(repoDir, ['diff', ...REVIEW_DIFF_OPTIONS, mergeBaseSha, headSha]);
  const names = await git(repoDir, ['diff', '--name-only', '-z', '--no-renames', '--no-ext-diff', mergeBaseSha, headSha]);
  const paths = names
    .toString('utf8')
    .split('\0')
    .filter((path) => path !== '');
  let contractText = options.contractText;
  if (contractText === undefined) {
    const log = await gitText(repoDir, ['log', '--format=%s', `${mergeBaseSha}..${headSha}`]);
    contractText = defaultAcceptanceContract(mergeBaseSha, headSha, log === '' ? [] : log.split('\n'));
  }
  return { baseSha, headSha, mergeBaseSha, diff, contractText, paths };
}

/**
 * Read the review subject (`readReviewSubject`), write the diff and the
 * acceptance contract into the review directory read-only, and bind both by
 * the digests of their bytes.
 */
export async function prepareReviewInputs(options: PrepareInputsOptions): Promise<ReviewInputs> {
  const repoDir = resolve(options.repoDir);
  const subject = await readReviewSubject({ ...options, repoDir });
  await mkdir(options.reviewDir, { recursive: true });
  const diff = await writeFrozen(join(options.reviewDir, 'change.diff'), subject.diff);
  const contract = await writeFrozen(join(options.reviewDir, 'acceptance-contract.md'), subject.contractText);
  const authorEmail = await gitText(repoDir, ['log', '-1', '--format=%ae', subject.headSha]);
  return {
    reviewDir: options.reviewDir,
    subjectId: options.subjectId ?? `local:${subject.headSha}`,
    baseSha: subject.baseSha,
    headSha: subject.headSha,
    refNames: [options.baseName ?? options.base, options.head],
    mergeBaseSha: subject.mergeBaseSha,
    diff,
    contract,
    author: {
      context_id: options.author?.context_id ?? `git-author:${authorEmail}`,
      family: options.author?.family ?? 'human',
    },
    mode: options.mode,
    configDigest: options.configDigest ?? null,
  };
}

/**
 * Where one attempt of a lane keeps its request, result and evidence:
 * `lanes/<id>` for the first, `lanes/<id>/attempt-<n>` for a re-dispatch.
 */
export function laneAttemptDir(reviewDir: string, laneId: string, attempt = 1): string {
  const laneDir = join(reviewDir, 'lanes', laneId);
  return attempt === 1 ? laneDir : join(laneDir, `attempt-${attempt}`);
}

/** A lane's own request for one attempt: a fresh 128-bit nonce and the attempt's own evidence directory. */
export async function createLaneRequest(
  inputs: ReviewInputs,
  laneId: string,
  timeoutMs: number,
  clock: Clock = systemClock,
  attempt = 1,
): Promise<ReviewRequestV1> {
  const evidenceDir = join(laneAttemptDir(inputs.reviewDir, laneId, attempt), 'evidence');
  await mkdir(evidenceDir, { recursive: true });
  return reviewRequestSchema.parse({
    schema: REVIEW_REQUEST_SCHEMA,
    subject_id: inputs.subjectId,
    head_sha: inputs.headSha,
    base_sha: inputs.baseSha,
    acceptance_contract: inputs.contract,
    diff: inputs.diff,
    author: inputs.author,
    diversity_mode: inputs.mode,
    nonce: randomHex(16),
    evidence_dir: evidenceDir,
    read_only: true,
    deadline: new Date(clock.now().getTime() + timeoutMs).toISOString(),
  });
}

async function checkBound(what: string, file: BoundFile): Promise<string | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file.path);
  } catch {
    return `${what} ${file.path} cannot be read`;
  }
  const actual = sha256Digest(bytes);
  return actual === file.sha256 ? undefined : `${what} ${file.path} changed: expected ${file.sha256}, found ${actual}`;
}

/** Re-read the diff and the contract; bytes that differ from the bound digests refuse the run (MUTABLE_INPUT). */
export async function verifyRequestInputs(request: ReviewRequestV1): Promise<void> {
  const problems = [await checkBound('diff', request.diff), await checkBound('acceptance contract', request.acceptance_contract)];
  const found = problems.filter((problem): problem is string => problem !== undefined);
  if (found.length > 0) throw new ProofgateError('MUTABLE_INPUT', found.join('; '), { problems: found });
}

/** A reviewer whose context is the author's does not review (SELF_REVIEW). */
export function assertNotSelfReview(request: ReviewRequestV1, reviewerContextId: string): void {
  if (reviewerContextId === request.author.context_id) {
    throw new ProofgateError('SELF_REVIEW', `reviewer context ${reviewerContextId} is the author's context`);
  }
}

/** Both checks that must pass immediately before a lane is dispatched. */
export async function checkBeforeDispatch(request: ReviewRequestV1, reviewerContextId: string): Promise<void> {
  assertNotSelfReview(request, reviewerContextId);
  await verifyRequestInputs(request);
}
