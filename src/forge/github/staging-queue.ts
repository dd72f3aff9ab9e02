/**
 * proofgate's own merge queue on GitHub, the way bors runs one, for a base
 * whose rulesets do not require GitHub's merge queue (and whose trusted
 * config opts in: `automerge.queue.enabled: true`):
 *
 * - build: the staging branch `proofgate-staging/<base>` is force-set to the
 *   base tip (`git/get-ref`, `git/update-ref` with force, or `git/create-ref`),
 *   and each queued change's reviewed head is merged into it in queue order
 *   with the merges API (`repos/merge`, by sha: a fork's head is merged the
 *   same way and the fork is never pushed to). GitHub's CI runs on pushes to
 *   the staging branches, like bors's `staging` branch;
 * - check: the base's required checks (branch protection and rulesets, read
 *   by the snapshot) must pass on exactly the staging tip proofgate built;
 *   they are read by commit id (never through the branch, which anyone with
 *   push access could move) and polled until they end or a timeout;
 * - land: each change is merged on its own with `pulls/merge` (squash)
 *   pinned to its reviewed head, each only while the base tip is still the
 *   one the previous step left (read right before). A merge commit whose
 *   parent is not that tip (the base moved in the window between the read
 *   and the merge), or a base tree after the last landing that is not the
 *   checked tree: the landed tree was not the tested one. Landing stops
 *   there, the new tip is pushed to the staging branch so GitHub's checks
 *   test it, and the answer says so.
 *
 * No head is ever rewritten; the only refs written are the staging branch
 * and, by the merge API, the base.
 */
import { createHash } from 'node:crypto';
import type { Octokit } from '@octokit/core';
import type { Logger } from 'pino';
import { ProofgateError, isProofgateError } from '../../core/errors.js';
import { REPO_CONFIG_PATH } from '../../contracts/repo-config.js';
import type {
  CandidateBuild,
  CandidateCheckResult,
  CandidateCommit,
  CandidateLanding,
  ChangeSnapshot,
  Forge,
  ForgeCheck,
  LandedChange,
  MergeCandidate,
  MergeQueuePort,
  QueueCandidateEntry,
} from '../port.js';
import { requireProtectedChange } from '../protection.js';
import { forgeError, httpFailure } from './errors.js';
import { checkedPushBranch } from './push.js';
import { mapCheckContext } from './snapshot-mapping.js';
import { CHECK_CONTEXT_FIELDS, type GqlCheckContext } from './snapshot-query.js';

/** Where the candidates of `base` are built: one branch per base. */
export const STAGING_PREFIX = 'proofgate-staging/';

/** How often a candidate's checks are read while they run, when not told otherwise. */
export const DEFAULT_STAGING_POLL_MS = 15_000;
/** How long a candidate's checks may run before the candidate fails as `timed out`. */
export const DEFAULT_STAGING_TIMEOUT_MS = 2 * 60 * 60 * 1000;

export interface StagingQueueOptions {
  readonly octokit: Octokit;
  readonly owner: string;
  readonly repo: string;
  readonly logger: Logger;
  /** The forge this queue belongs to (asked when first needed): snapshots (state, head, required checks), the trusted config, files, merges. */
  readonly forge: () => Forge;
}

/** The staging queue's settings (a GitHub forge option). */
export interface StagingSettings {
  /** Between two reads of a running candidate's checks (default 15 s). */
  readonly pollMs?: number;
  /** A candidate whose required checks have not all ended by then fails with `timed out` (default 2 h). */
  readonly timeoutMs?: number;
}

/** The characters a base may have for its staging branch: no shell, URL or git revision syntax. */
const SAFE_BRANCH = /^[A-Za-z0-9._/-]+$/;

/**
 * The staging branch of `base` (pure), or `INVALID_INPUT` for a name that
 * is not a plain branch name: only letters, digits, `.`, `_`, `-` and `/`,
 * no empty, `.`-led or `.lock` part, no `..`, no leading `-` and no
 * `refs/` prefix, so the staging ref can never name another ref, a
 * revision expression or a path outside `proofgate-staging/`.
 */
export function stagingBranch(base: string): string {
  const refuse = (): never => {
    throw new ProofgateError('INVALID_INPUT', `base ${JSON.stringify(base)} is not a plain branch name: no staging branch is made for it`, { base });
  };
  if (!SAFE_BRANCH.test(base) || base.startsWith('-') || base.startsWith('refs/') || base.length > 200) refuse();
  if (base.split('/').some((part) => part.endsWith('.lock') || part.endsWith('.'))) refuse();
  try {
    checkedPushBranch({ branch: base, newSha: '0'.repeat(40), expectedOldSha: null });
  } catch {
    refuse();
  }
  return `${STAGING_PREFIX}${base}`;
}

/** The git blob id of `bytes` (what `git hash-object` prints): the trusted config's key, as the local forge keys it. */
export function gitBlobId(bytes: Uint8Array): string {
  return createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
}

/** Query of one commit's checks by its id (never through a branch, which may have moved). */
export const COMMIT_CHECKS_QUERY = `query ProofgateCommitChecks($owner: String!, $repo: String!, $oid: GitObjectID!) {
  repository(owner: $owner, name: $repo) {
    object(oid: $oid) {
      __typename
      ... on Commit {
        oid
        statusCheckRollup {
          contexts(first: 100) {
            nodes {
${CHECK_CONTEXT_FIELDS}
            }
          }
        }
      }
    }
  }
}`;

interface CommitChecksResponse {
  readonly repository: {
    readonly object: {
      readonly __typename: string;
      readonly oid?: string;
      readonly statusCheckRollup?: { readonly contexts: { readonly nodes: readonly (GqlCheckContext | null)[] } } | null;
    } | null;
  } | null;
}

const PASSING: ReadonlySet<string> = new Set(['success', 'neutral', 'skipped']);

/** One required check on a commit (pure): passed when a run or status of that name passed, failed when none passed and one ended otherwise. */
export function requiredCheckState(name: string, checks: readonly ForgeCheck[]): { state: 'passed' | 'pending' } | { state: 'failed'; check: ForgeCheck } {
  const named = checks.filter((check) => check.name.toLowerCase() === name.toLowerCase());
  if (named.some((check) => check.status === 'completed' && PASSING.has(check.conclusion ?? ''))) return { state: 'passed' };
  const failed = named.find((check) => check.status === 'completed');
  return failed === undefined ? { state: 'pending' } : { state: 'failed', check: failed };
}

/**
 * What a candidate's required checks say (pure): the first failing one, or
 * passed when all passed, else the names still pending. Checks of other
 * names count for nothing, and so do checks on any other commit.
 */
export function judgeCandidateChecks(
  required: readonly string[],
  tip: string,
  checks: readonly ForgeCheck[],
): { kind: 'passed' } | { kind: 'failed'; check: ForgeCheck } | { kind: 'pending'; names: string[] } {
  const onTip = checks.filter((check) => check.headSha === tip);
  const pending: string[] = [];
  for (const name of required) {
    const state = requiredCheckState(name, onTip);
    if (state.state === 'failed') return { kind: 'failed', check: state.check };
    if (state.state === 'pending') pending.push(name);
  }
  return pending.length === 0 ? { kind: 'passed' } : { kind: 'pending', names: pending };
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(new ProofgateError('ABORTED', 'the candidate checks wait was cancelled'));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new ProofgateError('ABORTED', 'the candidate checks wait was cancelled'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The port as the GitHub forge offers it. */
export function githubStagingQueue(options: StagingQueueOptions & StagingSettings): MergeQueuePort {
  const { octokit, owner, repo, logger } = options;
  const forge = (): Forge => options.forge();
  const pollMs = options.pollMs ?? DEFAULT_STAGING_POLL_MS;
  const timeoutMs = options.timeoutMs ?? DEFAULT_STAGING_TIMEOUT_MS;

  async function branchTip(branch: string): Promise<string | null> {
    try {
      const { data } = await octokit.request('GET /repos/{owner}/{repo}/git/ref/{ref}', { owner, repo, ref: `heads/${branch}` });
      return data.object.sha.toLowerCase();
    } catch (error) {
      if (httpFailure(error)?.status === 404) return null;
      throw forgeError('read branch', error);
    }
  }

  async function requireBranchTip(branch: string): Promise<string> {
    const sha = await branchTip(branch);
    if (sha === null) throw new ProofgateError('NOT_FOUND', `branch ${branch} does not exist`, { branch });
    return sha;
  }

  /** Force the staging branch to `sha` (created when missing). */
  async function resetStaging(branch: string, sha: string): Promise<void> {
    try {
      await octokit.request('PATCH /repos/{owner}/{repo}/git/refs/{ref}', { owner, repo, ref: `heads/${branch}`, sha, force: true });
      return;
    } catch (error) {
      const failure = httpFailure(error);
      if (failure?.status !== 422 || !/reference does not exist/i.test(failure.githubMessage)) throw forgeError('reset staging branch', error);
    }
    try {
      await octokit.request('POST /repos/{owner}/{repo}/git/refs', { owner, repo, ref: `refs/heads/${branch}`, sha });
    } catch (error) {
      throw forgeError('create staging branch', error);
    }
  }

  async function commitOf(sha: string): Promise<{ tree: string; parents: string[] }> {
    try {
      const { data } = await octokit.request('GET /repos/{owner}/{repo}/git/commits/{commit_sha}', { owner, repo, commit_sha: sha });
      return { tree: data.tree.sha.toLowerCase(), parents: data.parents.map((parent) => parent.sha.toLowerCase()) };
    } catch (error) {
      throw forgeError('read commit', error);
    }
  }

  /** The paths a pull request changes (its files, every page). */
  async function pullPaths(number: number): Promise<string[]> {
    const paths: string[] = [];
    for (let page = 1; page <= 30; page += 1) {
      let data: readonly { filename: string; previous_filename?: string }[];
      try {
        ({ data } = await octokit.request('GET /repos/{owner}/{repo}/pulls/{pull_number}/files', { owner, repo, pull_number: number, per_page: 100, page }));
      } catch (error) {
        throw forgeError('list pull request files', error);
      }
      for (const file of data) {
        paths.push(file.filename);
        if (file.previous_filename !== undefined) paths.push(file.previous_filename);
      }
      if (data.length < 100) return paths;
    }
    throw new ProofgateError('FORGE_API', `pull request #${number} changes more files than GitHub lists (3000)`, { number });
  }

  async function configKey(baseSha: string): Promise<string> {
    const bytes = await forge().readFile(baseSha, REPO_CONFIG_PATH);
    return bytes === null ? 'none' : gitBlobId(bytes);
  }

  /** Why `snapshot` cannot go into a candidate of `baseRef` at `entry.headSha`, or null. */
  async function refusalOf(snapshot: ChangeSnapshot, baseRef: string, entry: QueueCandidateEntry): Promise<CandidateBuild | null> {
    const refused = (code: Extract<CandidateBuild, { kind: 'refused' }>['code'], reason: string): CandidateBuild => ({
      kind: 'refused',
      changeId: entry.changeId,
      code,
      reason,
    });
    if (snapshot.state === 'merged') {
      return {
        kind: 'refused',
        changeId: entry.changeId,
        code: 'MERGED',
        reason: `pull request #${entry.changeId} is merged`,
        ...(snapshot.mergeCommitSha === null ? {} : { merged: { mergeCommit: snapshot.mergeCommitSha, head: snapshot.head.sha } }),
      };
    }
    if (snapshot.state !== 'open') return refused('NOT_OPEN', `pull request #${entry.changeId} is ${snapshot.state}`);
    if (snapshot.base.ref !== baseRef) return refused('NOT_OPEN', `pull request #${entry.changeId} now targets ${JSON.stringify(snapshot.base.ref)}`);
    try {
      await requireProtectedChange(forge(), snapshot);
    } catch (error) {
      if (isProofgateError(error, 'PROTECTED_BRANCH')) return refused('PROTECTED_BRANCH', error.message);
      throw error;
    }
    if (snapshot.head.sha !== entry.headSha) {
      return refused('HEAD_MOVED', `head moved to ${snapshot.head.sha.slice(0, 12)} from the queued ${entry.headSha.slice(0, 12)}`);
    }
    return null;
  }

  /** Merge `head` into the staging branch: the merge commit, or why not. */
  async function mergeIntoStaging(
    branch: string,
    head: string,
    message: string,
  ): Promise<{ kind: 'merged'; sha: string; tree: string; parents: string[] } | { kind: 'conflict'; message: string } | { kind: 'nothing' }> {
    try {
      const answer = await octokit.request('POST /repos/{owner}/{repo}/merges', {
        owner,
        repo,
        base: branch,
        head,
        commit_message: message,
        request: { retries: 0 },
      });
      if ((answer.status as number) === 204) return { kind: 'nothing' };
      const data = answer.data as { sha: string; commit: { tree: { sha: string } }; parents: readonly { sha: string }[] };
      return { kind: 'merged', sha: data.sha.toLowerCase(), tree: data.commit.tree.sha.toLowerCase(), parents: data.parents.map((p) => p.sha.toLowerCase()) };
    } catch (error) {
      const failure = httpFailure(error);
      if (failure?.status === 409) return { kind: 'conflict', message: failure.githubMessage };
      throw forgeError('merge into the staging branch', error);
    }
  }

  /** Attempts at building one candidate while someone else moves the staging branch under it. */
  const BUILD_ATTEMPTS = 3;

  async function buildCandidate(baseRef: string, entries: readonly QueueCandidateEntry[]): Promise<CandidateBuild> {
    const branch = stagingBranch(baseRef);
    // Every entry is read before the staging branch moves: a refusal builds nothing.
    const numbers: number[] = [];
    for (const entry of entries) {
      const snapshot = await forge().snapshot(entry.changeId);
      const refusal = await refusalOf(snapshot, baseRef, entry);
      if (refusal !== null) return refusal;
      numbers.push(snapshot.number);
    }
    for (let attempt = 1; attempt <= BUILD_ATTEMPTS; attempt += 1) {
      const baseSha = await requireBranchTip(baseRef);
      await resetStaging(branch, baseSha);
      let tip = baseSha;
      let tipTree = (await commitOf(baseSha)).tree;
      const commits: CandidateCommit[] = [];
      let moved = false;
      for (const [index, entry] of entries.entries()) {
        const refused = (code: 'CONFLICT' | 'EMPTY', reason: string): CandidateBuild => ({ kind: 'refused', changeId: entry.changeId, code, reason });
        const message = `proofgate staging: ${entry.title}\n\nMerge queue candidate on ${baseRef}: the reviewed head ${entry.headSha}.`;
        const merged = await mergeIntoStaging(branch, entry.headSha, message);
        if (merged.kind === 'conflict') {
          return refused('CONFLICT', `its patch does not apply to the candidate base ${tip.slice(0, 12)} (${merged.message || 'merge conflict'})`);
        }
        if (merged.kind === 'nothing') return refused('EMPTY', `its head is already contained in the candidate base ${tip.slice(0, 12)}`);
        if (merged.parents[0] !== tip) {
          // Someone else pushed to the staging branch while the candidate was built: built again from the base.
          logger.warn({ branch, expected: tip, parent: merged.parents[0] }, 'the staging branch moved while a candidate was built');
          moved = true;
          break;
        }
        if (merged.tree === tipTree) return refused('EMPTY', `its patch changes nothing on the candidate base ${tip.slice(0, 12)}`);
        commits.push({
          changeId: entry.changeId,
          headSha: entry.headSha,
          commit: merged.sha,
          tree: merged.tree,
          paths: await pullPaths(numbers[index] as number),
        });
        tip = merged.sha;
        tipTree = merged.tree;
      }
      if (moved) continue;
      logger.info({ branch, base: baseSha, tip, changes: commits.map((c) => c.changeId) }, 'merge queue candidate built on the staging branch');
      return { kind: 'built', candidate: { baseRef, baseSha, commits, tip, tree: tipTree, configKey: await configKey(baseSha) } };
    }
    throw new ProofgateError('FORGE_API', `the staging branch ${branch} kept moving while a candidate was built (someone else pushes to it)`, { branch });
  }

  async function tipChecks(tip: string): Promise<ForgeCheck[]> {
    let response: CommitChecksResponse;
    try {
      response = await octokit.graphql<CommitChecksResponse>(COMMIT_CHECKS_QUERY, { owner, repo, oid: tip });
    } catch (error) {
      throw forgeError('candidate checks query', error);
    }
    const commit = response.repository?.object ?? null;
    if (commit === null || commit.oid?.toLowerCase() !== tip) return [];
    return (commit.statusCheckRollup?.contexts.nodes ?? []).flatMap((node) => (node === null ? [] : [mapCheckContext(node, tip)]));
  }

  async function checkCandidate(
    candidate: MergeCandidate,
    options: { readonly passedTrees: readonly string[]; readonly signal?: AbortSignal; readonly onProgress?: (text: string) => void },
  ): Promise<CandidateCheckResult> {
    const key = `${candidate.configKey}|${candidate.tree}`;
    if (options.passedTrees.includes(key)) return { passed: true, reused: true, key, failure: null };
    const first = candidate.commits[0];
    if (first === undefined) throw new ProofgateError('INVALID_INPUT', 'a candidate needs at least one change');
    // The base's required checks, as every snapshot reads them (branch protection and rulesets).
    const required = [...((await forge().snapshot(first.changeId)).requiredChecks ?? [])];
    if (required.length === 0) return { passed: true, reused: false, key, failure: null };
    options.onProgress?.(`waiting for ${required.join(', ')} on candidate ${candidate.tip.slice(0, 12)} (${stagingBranch(candidate.baseRef)})`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (options.signal?.aborted === true) throw new ProofgateError('ABORTED', `the checks of candidate ${candidate.tip.slice(0, 12)} were cancelled`);
      const judged = judgeCandidateChecks(required, candidate.tip, await tipChecks(candidate.tip));
      if (judged.kind === 'passed') return { passed: true, reused: false, key, failure: null };
      if (judged.kind === 'failed') {
        return { passed: false, reused: false, key, failure: { check: judged.check.name, conclusion: judged.check.conclusion, log: judged.check.url } };
      }
      if (Date.now() >= deadline) {
        return { passed: false, reused: false, key, failure: { check: judged.names[0] ?? null, conclusion: 'timed out', log: null } };
      }
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())), options.signal);
    }
  }

  /** Merge one change pinned to its reviewed head (squash); `HEAD_MOVED` when GitHub says the head moved. */
  async function mergePull(commit: CandidateCommit, title: string): Promise<string> {
    const result = await forge().merge(commit.changeId, {
      expectedHeadSha: commit.headSha,
      title,
      message: `Merged by the proofgate merge queue at the reviewed head ${commit.headSha}.`,
      method: 'squash',
    });
    return result.sha.toLowerCase();
  }

  async function landCandidate(candidate: MergeCandidate): Promise<CandidateLanding> {
    const landed: LandedChange[] = [];
    let expected = candidate.baseSha;
    const stop = (code: 'BASE_MOVED' | 'HEAD_MOVED' | 'NOT_MERGEABLE', reason: string, details: Record<string, string>): CandidateLanding => {
      if (landed.length === 0) throw new ProofgateError(code, reason, details);
      return { landed, untested: null, stopped: { code, reason, ...(details.changeId === undefined ? {} : { changeId: details.changeId }) } };
    };
    for (const commit of candidate.commits) {
      // Read right before the merge: the base must still be what the tests (or the previous landing) left.
      const now = await requireBranchTip(candidate.baseRef);
      if (now !== expected) {
        return stop('BASE_MOVED', `${candidate.baseRef} moved to ${now.slice(0, 12)} from ${expected.slice(0, 12)}; the candidate is built again`, {
          expectedBase: expected,
        });
      }
      const snapshot = await forge().snapshot(commit.changeId);
      let mergeCommit: string;
      try {
        mergeCommit = await mergePull(commit, `${snapshot.title} (#${snapshot.number})`);
      } catch (error) {
        if (isProofgateError(error, 'HEAD_MOVED')) return stop('HEAD_MOVED', error.message, { changeId: commit.changeId });
        // GitHub refuses the merge for a reason of its own (a required review or check of the head, behind a strict base, ...).
        if (isProofgateError(error, 'NOT_MERGEABLE')) return stop('NOT_MERGEABLE', error.message, { changeId: commit.changeId });
        throw error;
      }
      landed.push({ changeId: commit.changeId, headSha: commit.headSha, mergeCommit });
      const merged = await commitOf(mergeCommit);
      if (merged.parents[0] !== expected) {
        const reason = `${candidate.baseRef} moved to ${(merged.parents[0] ?? '(none)').slice(0, 12)} in the window between its read and the merge of #${commit.changeId}`;
        const rest = candidate.commits.length - landed.length;
        const stopped = rest === 0 ? null : { code: 'BASE_MOVED' as const, reason: `${reason}: the ${rest} change(s) after it are built again on the new tip` };
        return { landed, untested: await untested(candidate, mergeCommit, merged.tree, commit.tree, reason), stopped };
      }
      expected = mergeCommit;
    }
    // The base after the last landing must hold exactly the checked tree.
    const finalTree = (await commitOf(expected)).tree;
    if (finalTree !== candidate.tree) {
      const reason = `the base's tree after landing is ${finalTree.slice(0, 12)}, not the checked ${candidate.tree.slice(0, 12)}`;
      return { landed, untested: await untested(candidate, expected, finalTree, candidate.tree, reason), stopped: null };
    }
    return { landed, untested: null, stopped: null };
  }

  /** An untested landing: the new base tip goes to the staging branch, so GitHub's checks test what landed. */
  async function untested(candidate: MergeCandidate, tip: string, tree: string, testedTree: string, reason: string): Promise<CandidateLanding['untested']> {
    const branch = stagingBranch(candidate.baseRef);
    let staged: { ref: string; sha: string } | null = null;
    try {
      await resetStaging(branch, tip);
      staged = { ref: branch, sha: tip };
    } catch (error) {
      logger.warn(
        { branch, tip, error: error instanceof Error ? error.message : String(error) },
        'the untested base tip could not be pushed to the staging branch',
      );
    }
    logger.warn({ base: candidate.baseRef, tip, tree, testedTree, reason }, 'merge queue: the landed tree was not the tested one');
    return { tip, tree, testedTree, reason, staged };
  }

  return { buildCandidate, checkCandidate, landCandidate };
}
