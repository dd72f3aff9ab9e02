/**
 * Publishing commits to a GitHub repository: a real git push from a local
 * clone, as a compare-and-swap on the remote:
 *
 *   git push --porcelain --force-with-lease=refs/heads/<branch>:<expectedOldSha> <remote> <newSha>:refs/heads/<branch>
 *
 * The lease makes the remote move the branch only while it still points at
 * `expectedOldSha` (an empty expectation: only while it does not exist); a
 * rejected lease is `HEAD_MOVED` and nothing changed. The force is what lets
 * a rebased (non-fast-forward) head replace the old one; the lease is what
 * keeps it from ever overwriting a push someone else made. The REST ref
 * update (`pushBranch` in push.ts) cannot do this: it carries no objects.
 * A branch already at `newSha` counts as done (a retried push changes
 * nothing). The remote URL may hold a credential: no error repeats it.
 */
import { execFile } from 'node:child_process';
import { ProofgateError } from '../../core/errors.js';
import { gitEnvironment, safeGitArgs } from '../../host/index.js';
import type { PushRequest } from '../port.js';
import { checkedPushBranch } from './push.js';
import { redactSecrets } from './redact.js';

export interface LeasePushRequest extends PushRequest {
  /** A local git repository that holds `newSha`. */
  readonly dir: string;
  /** The git remote (a URL, possibly with credentials, or a path). */
  readonly remoteUrl: string;
  /** Time limit of the push (default 120000 ms). */
  readonly timeoutMs?: number;
}

interface GitRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

function git(dir: string, args: readonly string[], timeoutMs: number): Promise<GitRun> {
  return new Promise((resolve) => {
    execFile(
      'git',
      [...safeGitArgs(), '-C', dir, ...args],
      { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, env: gitEnvironment(), windowsHide: true },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, stdout, stderr, timedOut: error !== null && (error as { killed?: boolean }).killed === true });
      },
    );
  });
}

/** Remove URLs (they may carry a token) and known credential shapes from git's words. */
function scrub(text: string): string {
  return redactSecrets(text.replace(/[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<remote>'));
}

/** One porcelain status line of the pushed ref: its flag and summary, or null. */
function refStatus(stdout: string, ref: string): { flag: string; summary: string } | null {
  for (const line of stdout.split('\n')) {
    const [flag = '', refs = '', summary = ''] = line.split('\t');
    if (refs.endsWith(`:${ref}`)) return { flag: flag.trim(), summary: summary.trim() };
  }
  return null;
}

export async function pushWithLease(request: LeasePushRequest): Promise<void> {
  const branch = checkedPushBranch(request);
  const ref = `refs/heads/${branch}`;
  if (request.remoteUrl.trim() === '' || request.remoteUrl.startsWith('-')) throw new ProofgateError('INVALID_INPUT', 'push needs a git remote URL');
  const lease = `--force-with-lease=${ref}:${request.expectedOldSha ?? ''}`;
  const run = await git(request.dir, ['push', '--porcelain', '--no-verify', lease, request.remoteUrl, `${request.newSha}:${ref}`], request.timeoutMs ?? 120_000);
  const status = refStatus(run.stdout, ref);
  if (run.code === 0 && status !== null && status.flag !== '!') return;
  if (status?.flag === '!') {
    if (/stale info|fetch first|non-fast-forward/.test(status.summary)) {
      // The lease failed: maybe a retry of a push that landed, else someone else moved the branch.
      const now = await git(request.dir, ['ls-remote', request.remoteUrl, ref], 30_000);
      const current = now.code === 0 ? (now.stdout.split('\t')[0]?.trim() ?? '') : '';
      if (current === request.newSha) return;
      throw new ProofgateError('HEAD_MOVED', `branch ${branch} is no longer at ${request.expectedOldSha ?? '(absent)'}; nothing was pushed`, {
        branch,
        expectedOldSha: request.expectedOldSha,
        actualSha: current === '' ? null : current,
      });
    }
    throw new ProofgateError('FORGE_API', `git push of ${branch} was rejected: ${scrub(status.summary)}`, { branch });
  }
  const why = run.timedOut ? 'timed out' : (run.stderr.split('\n').find((line) => line.trim() !== '') ?? `exit code ${String(run.code)}`);
  throw new ProofgateError('FORGE_API', `git push of ${branch} failed: ${scrub(why.trim())}`, { branch });
}
