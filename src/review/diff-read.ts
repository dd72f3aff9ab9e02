import { ProofgateError, redactSecrets, sha256Digest } from '../core/index.js';
import type { ReviewRequestV1 } from '../contracts/index.js';
import { runGit, type GitOptions } from '../host/index.js';
import { REVIEW_GIT_CONFIG } from './git.js';
import {
  addedLinesOfPatch,
  changedFilesOf,
  GITLINK_MODE,
  linesOfText,
  parseNumstatZ,
  parseRawZ,
  SYMLINK_MODE,
  type AddedLine,
  type ChangedFile,
} from './diff-files.js';

/**
 * The options of the review's diff (`git diff <merge-base> <head>`), the one
 * list both `readReviewSubject` (request.ts) and the lanes use. A lane that
 * reads facts about the change from git first makes that diff again and
 * compares it with the bound digest, so its facts are about the bytes the
 * review binds.
 */
export const REVIEW_DIFF_OPTIONS: readonly string[] = [
  '--no-color',
  '--no-ext-diff',
  '--no-textconv',
  '--binary',
  '--full-index',
  '--no-renames',
  '--src-prefix=a/',
  '--dst-prefix=b/',
];

/**
 * The file facts come from the same diff as the review's: no rename detection
 * (a rename is a deletion and an addition, as in the bound diff), no external
 * diff or textconv, full object ids.
 */
const FACT_OPTIONS = ['--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', '--no-abbrev', '-z'] as const;

const MAX_OUTPUT = 512 * 1024 * 1024;

/** Bytes of one object (a binary file's or a symlink's new side): `bytes` is null when it is larger than the scan limit and was not read. */
export interface BlobBytes {
  readonly size: number;
  readonly bytes: Buffer | null;
}

/** A changed file and the lines it adds. */
export interface ReviewedFile extends ChangedFile {
  /**
   * The added lines: every line of an added file (or of the new side of a type
   * change), the `+` lines of git's patch between the two blobs otherwise.
   * Empty for a deletion, a binary file, a gitlink and a change that adds no
   * line (mode only); null when the new bytes are larger than the limit and
   * were not read.
   */
  readonly added: readonly AddedLine[] | null;
}

/** The change a review binds, as facts about files. */
export interface ReviewedChange {
  readonly mergeBaseSha: string;
  readonly headSha: string;
  readonly files: readonly ReviewedFile[];
  /** The new bytes of binary files and symlinks, by object id (each up to the limit). */
  readonly blobs: ReadonlyMap<string, BlobBytes>;
}

export interface ReadChangeOptions {
  /** Largest object read whole (binary files, symlink targets, the new side of text files). */
  readonly maxBytes: number;
  /** Read added lines and head bytes (the rules lane); without it only the file list (the tests lane). */
  readonly content: boolean;
  /** Time for every git call together (a git still running then is stopped: a `GIT` error). */
  readonly timeoutMs?: number;
}

type Git = (args: readonly string[], options?: Pick<GitOptions, 'input' | 'config'>) => Promise<Buffer>;

function gitRunner(repoDir: string, timeoutMs: number | undefined): Git {
  const until = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  return async (args, options = {}) => {
    const left = until === undefined ? {} : { timeoutMs: Math.max(1, until - Date.now()) };
    return (await runGit(repoDir, args, { maxBuffer: MAX_OUTPUT, ...left, ...options })).stdout;
  };
}

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** The size of each object (`git cat-file --batch-check`, one process); an id that is not a blob is an error. */
async function objectSizes(git: Git, oids: readonly string[]): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  const wanted = [...new Set(oids)];
  if (wanted.length === 0) return sizes;
  if (wanted.some((oid) => !OID.test(oid))) throw new ProofgateError('INVALID_INPUT', 'not an object id');
  const lines = (await git(['cat-file', '--batch-check'], { input: `${wanted.join('\n')}\n` })).toString('utf8').split('\n');
  wanted.forEach((oid, i) => {
    const answer = /^([0-9a-f]+) blob (\d+)$/.exec(lines[i] ?? '');
    if (answer === null || answer[1] !== oid) throw new ProofgateError('GIT', `object ${oid} is not a blob in the repository`);
    sizes.set(oid, Number(answer[2]));
  });
  return sizes;
}

/** The bytes of objects whose sizes are known (`git cat-file --batch`, one process), cut by those sizes, never by separators. */
async function objectBytes(git: Git, oids: readonly string[], sizes: ReadonlyMap<string, number>): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const wanted = [...new Set(oids)];
  if (wanted.length === 0) return out;
  const batch = await git(['cat-file', '--batch'], { input: `${wanted.join('\n')}\n` });
  let at = 0;
  for (const oid of wanted) {
    const size = sizes.get(oid) as number;
    const eol = batch.indexOf(10, at);
    const header = eol === -1 ? '' : batch.subarray(at, eol).toString('utf8');
    if (header !== `${oid} blob ${size}` || batch[eol + 1 + size] !== 10) throw new ProofgateError('GIT', `git cat-file --batch did not return ${oid}`);
    out.set(oid, Buffer.from(batch.subarray(eol + 1, eol + 1 + size)));
    at = eol + 2 + size;
  }
  return out;
}

function shown(path: string | null): string {
  return JSON.stringify(redactSecrets(path ?? ''));
}

/** A file whose new side is read for the rules: still there, and not a gitlink (its id names a commit of another repository). */
function hasNewBytes(file: ChangedFile): file is ChangedFile & { newPath: string; newBlob: string } {
  return file.newPath !== null && file.newBlob !== null && file.newMode !== GITLINK_MODE;
}

/** Is its whole new side added: an added file, or a new type at the same path (git shows a deletion and an addition)? */
function wholeNewSide(file: ChangedFile): boolean {
  return file.status === 'A' || file.status === 'T' || file.oldBlob === null || file.oldMode === GITLINK_MODE;
}

/** Scanned as bytes (binary files), or read whole: symlink targets and the new side of added text files. */
function readWhole(file: ChangedFile): boolean {
  return file.binary || file.newMode === SYMLINK_MODE || (wholeNewSide(file) && file.linesAdded !== 0);
}

async function addedLinesOf(
  git: Git,
  file: ChangedFile,
  sizes: ReadonlyMap<string, number>,
  bytes: ReadonlyMap<string, Buffer>,
  maxBytes: number,
): Promise<readonly AddedLine[] | null> {
  if (!hasNewBytes(file) || file.binary || file.linesAdded === 0) return [];
  if ((sizes.get(file.newBlob) as number) > maxBytes) return null;
  let added: AddedLine[];
  if (wholeNewSide(file)) {
    added = linesOfText((bytes.get(file.newBlob) as Buffer).toString('utf8'));
  } else {
    // `--text`: git counted lines for this file (numstat), so its patch must show them, whatever the bytes look like.
    const patch = await git(['diff', '--no-color', '--no-ext-diff', '--no-textconv', '--text', '--full-index', file.oldBlob as string, file.newBlob]);
    added = addedLinesOfPatch(patch.toString('utf8'));
  }
  if (added.length !== file.linesAdded) {
    throw new ProofgateError('GIT', `git counts ${String(file.linesAdded)} added lines in ${shown(file.newPath)} but its patch has ${added.length}`);
  }
  return added;
}

/**
 * The change a review request binds, as facts from git: the merge base of
 * the request's base and head, the review's diff made again and compared with
 * the bound digest (`MUTABLE_INPUT` when they differ: these facts would be
 * about other bytes), then `git diff --raw -z` and `--numstat -z` for every
 * file, and with `content` the added lines of each text file and the new bytes
 * of binary files and symlinks (by object id, never by path). Every git call
 * goes through the one git runner.
 */
export async function readReviewedChange(
  repoDir: string,
  request: Pick<ReviewRequestV1, 'base_sha' | 'head_sha' | 'diff'>,
  options: ReadChangeOptions,
): Promise<ReviewedChange> {
  const git = gitRunner(repoDir, options.timeoutMs);
  const headSha = request.head_sha;
  const mergeBaseSha = (await git(['merge-base', request.base_sha, headSha])).toString('utf8').trim();
  if (!OID.test(mergeBaseSha)) throw new ProofgateError('GIT', `no merge base of ${request.base_sha} and ${headSha}`);
  const diff = await git(['diff', ...REVIEW_DIFF_OPTIONS, mergeBaseSha, headSha], { config: REVIEW_GIT_CONFIG });
  const digest = sha256Digest(diff);
  if (digest !== request.diff.sha256) {
    throw new ProofgateError('MUTABLE_INPUT', `the diff of ${mergeBaseSha}..${headSha} is ${digest} now, not the bound ${request.diff.sha256}`);
  }
  const raw = parseRawZ(await git(['diff', '--raw', ...FACT_OPTIONS, mergeBaseSha, headSha]));
  const numstat = parseNumstatZ(await git(['diff', '--numstat', ...FACT_OPTIONS, mergeBaseSha, headSha]));
  const changed = changedFilesOf(raw, numstat);
  if (!options.content) return { mergeBaseSha, headSha, files: changed.map((file) => ({ ...file, added: [] })), blobs: new Map() };

  const read = changed.filter(hasNewBytes);
  const sizes = await objectSizes(
    git,
    read.map((file) => file.newBlob),
  );
  const fits = (file: { newBlob: string }) => (sizes.get(file.newBlob) as number) <= options.maxBytes;
  const bytes = await objectBytes(
    git,
    read.filter((file) => readWhole(file) && fits(file)).map((file) => file.newBlob),
    sizes,
  );
  const files: ReviewedFile[] = [];
  for (const file of changed) files.push({ ...file, added: await addedLinesOf(git, file, sizes, bytes, options.maxBytes) });
  const blobs = new Map<string, BlobBytes>();
  for (const file of read) {
    if (file.binary || file.newMode === SYMLINK_MODE)
      blobs.set(file.newBlob, { size: sizes.get(file.newBlob) as number, bytes: bytes.get(file.newBlob) ?? null });
  }
  return { mergeBaseSha, headSha, files, blobs };
}
