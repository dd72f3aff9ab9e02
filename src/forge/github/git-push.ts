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
 * nothing).
 *
 * Credentials never reach git's command line (which every user of the
 * machine can read) nor an error: a token, or the `user:password` of an
 * https remote URL, is taken out of the URL and handed to git in its
 * environment as an `Authorization` header for that remote only
 * (`http.<origin>/.extraHeader`); the host git runner redacts it.
 */
import { ProofgateError, errorMessage, isProofgateError } from '../../core/index.js';
import { gitRedactor, remoteProtocol, runGit, type GitOptions, type GitResult } from '../../host/git.js';
import type { PushRequest } from '../port.js';
import { checkedPushBranch } from './push.js';

export interface LeasePushRequest extends PushRequest {
  /** A local git repository that holds `newSha`. */
  readonly dir: string;
  /** The git remote: a URL (credentials in it are moved out of git's command line) or a path. */
  readonly remoteUrl: string;
  /** A GitHub token for an https remote (sent as `x-access-token`), instead of credentials in the URL. */
  readonly token?: string;
  /** Time limit of the push (default 120000 ms). */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

/** How git reaches a remote: the URL it is given, and the credentials kept out of it. */
export interface RemoteAccess {
  /** The remote without credentials (what goes on git's command line). */
  readonly url: string;
  /** git options carrying the credentials in the environment, with their values redacted, and the one protocol the remote needs. */
  readonly options: Pick<GitOptions, 'secretConfig' | 'redact' | 'transport'>;
}

/**
 * Split a remote into a credential-free URL and the git options that carry
 * its credentials: `token` (GitHub's `x-access-token`), else the URL's own
 * `user:password`, as an `Authorization: Basic` header for that origin only.
 * A path or a non-http URL is used as it is. git may open only the
 * remote's own protocol (`remoteProtocol`): a repository config that
 * rewrites the URL (`url.<base>.insteadOf`) or names a promisor remote on
 * another transport reaches nothing.
 */
export function remoteAccess(remoteUrl: string, token?: string): RemoteAccess {
  if (remoteUrl.trim() === '' || remoteUrl.startsWith('-')) throw new ProofgateError('INVALID_INPUT', 'a git remote URL or path is required');
  const transport = [remoteProtocol(remoteUrl)];
  if (!/^https?:\/\//i.test(remoteUrl)) return { url: remoteUrl, options: { redact: token === undefined ? [] : [token], transport } };
  let parsed: URL;
  try {
    parsed = new URL(remoteUrl);
  } catch {
    throw new ProofgateError('INVALID_INPUT', 'the git remote is not a valid URL');
  }
  const user = decodeURIComponent(parsed.username);
  const password = decodeURIComponent(parsed.password);
  parsed.username = '';
  parsed.password = '';
  const url = parsed.toString();
  const pair = token !== undefined && token !== '' ? `x-access-token:${token}` : user !== '' || password !== '' ? `${user}:${password}` : null;
  if (pair === null) return { url, options: { transport } };
  const header = `Authorization: Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
  return {
    url,
    options: {
      transport,
      secretConfig: [[`http.${parsed.origin}/.extraHeader`, header]],
      // A user name is a secret only when it is the token itself (`https://TOKEN@host`).
      redact: [token ?? '', password === '' ? user : password].filter((value) => value !== ''),
    },
  };
}

/** One porcelain status line of the pushed ref: its flag and summary, or null. */
function refStatus(stdout: string, ref: string): { flag: string; summary: string } | null {
  for (const line of stdout.split('\n')) {
    const [flag = '', refs = '', summary = ''] = line.split('\t');
    if (refs.endsWith(`:${ref}`)) return { flag: flag.trim(), summary: summary.trim() };
  }
  return null;
}

/** The sha of `ref` on the remote, or null when it does not exist or cannot be read. */
async function remoteSha(dir: string, remote: RemoteAccess, ref: string, signal: AbortSignal | undefined): Promise<string | null> {
  try {
    const listing = await runGit(dir, ['ls-remote', remote.url, ref], { ...remote.options, timeoutMs: 30_000, ...(signal === undefined ? {} : { signal }) });
    const sha = listing.stdout.toString('utf8').split('\t')[0]?.trim() ?? '';
    return sha === '' ? null : sha;
  } catch {
    return null;
  }
}

export async function pushWithLease(request: LeasePushRequest): Promise<void> {
  const branch = checkedPushBranch(request);
  const ref = `refs/heads/${branch}`;
  const remote = remoteAccess(request.remoteUrl, request.token);
  const redact = gitRedactor(remote.options.redact);
  const lease = `--force-with-lease=${ref}:${request.expectedOldSha ?? ''}`;
  let push: GitResult;
  try {
    push = await runGit(request.dir, ['push', '--porcelain', '--no-verify', lease, remote.url, `${request.newSha}:${ref}`], {
      ...remote.options,
      okExitCodes: [1],
      timeoutMs: request.timeoutMs ?? 120_000,
      ...(request.signal === undefined ? {} : { signal: request.signal }),
    });
  } catch (error) {
    if (isProofgateError(error, 'ABORTED')) throw error;
    throw new ProofgateError('FORGE_API', `git push of ${branch} failed: ${redact(errorMessage(error))}`, { branch });
  }
  const status = refStatus(push.stdout.toString('utf8'), ref);
  if (push.exitCode === 0 && status !== null && status.flag !== '!') return;
  if (status?.flag === '!') {
    if (/stale info|fetch first|non-fast-forward/.test(status.summary)) {
      // The lease failed: maybe a retry of a push that landed, else someone else moved the branch.
      const current = await remoteSha(request.dir, remote, ref, request.signal);
      if (current === request.newSha) return;
      throw new ProofgateError('HEAD_MOVED', `branch ${branch} is no longer at ${request.expectedOldSha ?? '(absent)'}; nothing was pushed`, {
        branch,
        expectedOldSha: request.expectedOldSha,
        actualSha: current,
      });
    }
    throw new ProofgateError('FORGE_API', `git push of ${branch} was rejected: ${redact(status.summary)}`, { branch });
  }
  const why = push.stderr.split('\n').find((line) => line.trim() !== '') ?? `exit code ${push.exitCode}`;
  throw new ProofgateError('FORGE_API', `git push of ${branch} failed: ${why.trim()}`, { branch });
}
