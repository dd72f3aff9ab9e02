import { execFile } from 'node:child_process';
import { ProofgateError } from '../core/index.js';

/** Environment for proofgate's own git calls: no pager, no prompts, no user diff drivers. */
function gitEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { ...process.env, GIT_PAGER: 'cat', GIT_TERMINAL_PROMPT: '0', GIT_EXTERNAL_DIFF: '', LC_ALL: 'C', ...extra };
}

/** Run git in `repoDir` and return stdout bytes; a failure is a typed GIT error. */
export function git(repoDir: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; allowFail?: boolean } = {}): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      ['-C', repoDir, '-c', 'core.quotepath=false', ...args],
      { encoding: 'buffer', maxBuffer: 512 * 1024 * 1024, env: gitEnv(options.env) },
      (error, stdout, stderr) => {
        if (error && !options.allowFail) {
          const detail = stderr.toString('utf8').trim().split('\n')[0] ?? error.message;
          reject(new ProofgateError('GIT', `git ${args[0] ?? ''} failed: ${detail || error.message}`));
          return;
        }
        resolve(error ? Buffer.alloc(0) : stdout);
      },
    );
  });
}

export async function gitText(repoDir: string, args: readonly string[]): Promise<string> {
  return (await git(repoDir, args)).toString('utf8').trim();
}

/** Resolve a revision to a 40-hex commit id; an unknown ref is a typed GIT error naming it. */
export async function resolveCommit(repoDir: string, ref: string): Promise<string> {
  const out = await git(repoDir, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${ref}^{commit}`], { allowFail: true });
  const sha = out.toString('utf8').trim();
  if (!/^[0-9a-f]{40}$/.test(sha)) throw new ProofgateError('GIT', `not a commit in ${repoDir}: ${ref}`);
  return sha;
}

/**
 * Write the tree of `commit` into `target` as a checkout would, through a
 * private index file: the repository's index, work tree and refs stay untouched.
 */
export async function exportTree(repoDir: string, commit: string, target: string, indexFile: string): Promise<void> {
  const env = { GIT_INDEX_FILE: indexFile };
  await git(repoDir, ['read-tree', commit], { env });
  await git(repoDir, ['--work-tree', target, 'checkout-index', '--all', '--force'], { env });
}
