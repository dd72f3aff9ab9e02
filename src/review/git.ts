import { ProofgateError } from '../core/index.js';
import { commitOf, runGit } from '../host/index.js';

/** Review's git calls: no pager, no user diff drivers, paths printed as they are. */
const REVIEW_GIT_ENV = { GIT_PAGER: 'cat', GIT_EXTERNAL_DIFF: '' } as const;
/** Settings every review git call runs with; the review's diff is made with them, so they are part of its bytes. */
export const REVIEW_GIT_CONFIG: readonly (readonly [string, string])[] = [['core.quotepath', 'false']];
const MAX_BUFFER = 512 * 1024 * 1024;

/** Run git in `repoDir` and return stdout bytes; a failure is a typed GIT error (or empty output with `allowFail`). */
export async function git(
  repoDir: string,
  args: readonly string[],
  options: { env?: Readonly<Record<string, string>>; allowFail?: boolean } = {},
): Promise<Buffer> {
  const run = runGit(repoDir, args, { env: { ...REVIEW_GIT_ENV, ...options.env }, config: REVIEW_GIT_CONFIG, maxBuffer: MAX_BUFFER });
  if (options.allowFail === true)
    return run.then(
      (result) => result.stdout,
      () => Buffer.alloc(0),
    );
  return (await run).stdout;
}

export async function gitText(repoDir: string, args: readonly string[]): Promise<string> {
  return (await git(repoDir, args)).toString('utf8').trim();
}

/** Resolve a revision to a 40-hex commit id (through the repository's object reader); an unknown ref is a typed GIT error naming it. */
export async function resolveCommit(repoDir: string, ref: string): Promise<string> {
  const sha = (await commitOf(repoDir, ref).catch(() => null)) ?? '';
  if (!/^[0-9a-f]{40}$/.test(sha)) throw new ProofgateError('GIT', `not a commit in ${repoDir}: ${ref}`);
  return sha;
}
