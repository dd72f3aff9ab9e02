/**
 * The local forge's side of the merge queue: candidates are commits in the
 * repository (the base tip plus one squash commit per queued change, each
 * the 3-way merge of its reviewed head onto the candidate so far, as
 * `git merge-tree --write-tree` computes it against their merge base), the
 * checks of the base's trusted config run jailed on exactly the candidate's
 * tip, and landing is one `git update-ref <base> <tip> <base sha>`. No ref
 * other than the base ever moves, no head is rewritten, and every squash
 * commit carries the trailers a landed merge is found again by after a
 * crash (merge.ts).
 */
import { ProofgateError, type Clock } from '../../core/index.js';
import { protectedBranchRefusal } from '../../contracts/repo-config.js';
import type { CandidateBuild, CandidateCheckResult, CandidateCommit, CandidateLanding, MergeCandidate, MergeQueuePort, QueueCandidateEntry } from '../port.js';
import type { TrustedConfig } from '../protection.js';
import { runChecks } from './checks.js';
import { squashMessage } from './merge.js';
import { branchStream, changeStream, foldChange } from './records.js';
import type { GitRepository } from './repository.js';
import { readLiveChange } from './snapshot.js';
import type { LocalForgeStore } from './store.js';
import { CONFIG_PATH, loadTrustedConfig } from './trusted-config.js';

export interface CandidateContext {
  readonly repo: GitRepository;
  readonly store: LocalForgeStore;
  readonly clock: Clock;
  readonly selfLogin: string;
  readonly outputCapBytes: number;
  readonly dataDir?: string;
  readonly trusted: () => Promise<TrustedConfig>;
}

const PASSING: ReadonlySet<string> = new Set(['success', 'neutral', 'skipped']);

/**
 * Test seam: with `PROOFGATE_TEST_CRASH_AT=queue-base-moved` (or the
 * direct merge's `merge-base-updated`: the same boundary) the process
 * SIGKILLs itself right after the base moved to a candidate and before its
 * merges are recorded. Unset, nothing.
 */
function crashAfterQueueLand(): void {
  const point = process.env.PROOFGATE_TEST_CRASH_AT;
  if (point === 'queue-base-moved' || point === 'merge-base-updated') process.kill(process.pid, 'SIGKILL');
}

/** Untrusted text on one line: every control character (and line or paragraph separator) becomes a space. */
function oneLine(text: string): string {
  return [...text]
    .map((char) => {
      const code = char.codePointAt(0) ?? 0;
      return code < 0x20 || code === 0x7f || code === 0x2028 || code === 0x2029 ? ' ' : char;
    })
    .join('')
    .replace(/ {2,}/g, ' ')
    .trim();
}

/** The blob id of the trusted config at `rev` (a commit or tree), or `none`. */
async function configKey(repo: GitRepository, rev: string): Promise<string> {
  const result = await repo.git(['rev-parse', '--verify', '--quiet', `${rev}:${CONFIG_PATH}`], { okExitCodes: [1, 128] });
  return result.exitCode === 0 ? result.stdout.toString('utf8').trim() : 'none';
}

async function changedPaths(repo: GitRepository, from: string, to: string): Promise<string[]> {
  const out = await repo.git(['diff-tree', '-r', '--no-renames', '--name-only', '-z', from, to]);
  return out.stdout
    .toString('utf8')
    .split('\0')
    .filter((path) => path !== '');
}

export async function buildCandidate(context: CandidateContext, baseRef: string, entries: readonly QueueCandidateEntry[]): Promise<CandidateBuild> {
  const { repo, store } = context;
  const trusted = await context.trusted();
  const baseSha = await repo.requireBranch(baseRef);
  const committer = { name: context.selfLogin, email: `${context.selfLogin}@proofgate.invalid` };
  let tip = baseSha;
  let tipTree = await repo.treeOf(baseSha);
  const commits: CandidateCommit[] = [];
  for (const entry of entries) {
    const refused = (code: Extract<CandidateBuild, { kind: 'refused' }>['code'], reason: string): CandidateBuild => ({
      kind: 'refused',
      changeId: entry.changeId,
      code,
      reason,
    });
    // Read light: the store's record and the head ref (a full `readLiveChange` only when the patch is already on the base).
    const record = await store.requireChange(entry.changeId);
    const landed = (r: typeof record): CandidateBuild | null =>
      r.state === 'merged' && r.merge !== null
        ? {
            kind: 'refused',
            changeId: entry.changeId,
            code: 'MERGED',
            reason: `change ${entry.changeId} is merged`,
            merged: { mergeCommit: r.merge.mergeCommitSha, head: r.merge.reviewedHeadSha },
          }
        : null;
    const already = landed(record);
    if (already !== null) return already;
    if (record.state !== 'open') return refused('NOT_OPEN', `change ${entry.changeId} is ${record.state}`);
    if (record.baseRef !== baseRef) return refused('NOT_OPEN', `change ${entry.changeId} now targets ${JSON.stringify(record.baseRef)}`);
    const refusal = protectedBranchRefusal({ trustedBranch: trusted.branch, trustedConfig: trusted.config, base: record.baseRef, head: record.headRef });
    if (refusal !== null) return refused('PROTECTED_BRANCH', refusal);
    const headSha = await repo.branchSha(record.headRef);
    if (headSha !== entry.headSha) {
      return refused('HEAD_MOVED', `head moved to ${headSha === null ? '(deleted)' : headSha.slice(0, 12)} from the queued ${entry.headSha.slice(0, 12)}`);
    }
    const merged = await repo.mergeTree(tip, entry.headSha);
    if (!merged.clean) {
      const paths = merged.conflictedPaths.slice(0, 5).map((path) => JSON.stringify(path));
      return refused('CONFLICT', `its patch does not apply to the candidate base ${tip.slice(0, 12)} (conflicts: ${paths.join(', ') || 'unknown'})`);
    }
    if (merged.tree === tipTree) {
      // Nothing to apply: a landing a crash left unrecorded reads as merged once reconciled from the base's trailers.
      const reconciled = landed((await readLiveChange(repo, store, entry.changeId, trusted)).record);
      if (reconciled !== null) return reconciled;
      return refused('EMPTY', `its patch changes nothing on the candidate base ${tip.slice(0, 12)}`);
    }
    // The title is untrusted text: one line, so it can never add a trailer line of its own.
    const title = oneLine(record.title);
    const message = squashMessage(
      `${title} (#${record.number})`,
      `Merged by the proofgate merge queue at the reviewed head ${entry.headSha}.`,
      entry.changeId,
      entry.headSha,
      tip,
    );
    const author = await repo.commitAuthor(entry.headSha);
    const commit = await repo.commitTree(merged.tree, [tip], message, author, committer);
    commits.push({ changeId: entry.changeId, headSha: entry.headSha, commit, tree: merged.tree, paths: await changedPaths(repo, tip, commit) });
    tip = commit;
    tipTree = merged.tree;
  }
  return { kind: 'built', candidate: { baseRef, baseSha, commits, tip, tree: tipTree, configKey: await configKey(repo, baseSha) } };
}

/** The newest run per check name (runs come oldest first). */
function newestByName<T extends { readonly name: string }>(checks: readonly T[]): Map<string, T> {
  const byName = new Map<string, T>();
  for (const check of checks) byName.set(check.name, check);
  return byName;
}

export async function checkCandidate(
  context: CandidateContext,
  candidate: MergeCandidate,
  options: { readonly passedTrees: readonly string[]; readonly signal?: AbortSignal; readonly onProgress?: (text: string) => void },
): Promise<CandidateCheckResult> {
  const { repo, store } = context;
  const key = `${candidate.configKey}|${candidate.tree}`;
  if (options.passedTrees.includes(key)) return { passed: true, reused: true, key, failure: null };
  // The checks come from the candidate's base (protected, trusted), never from the changes in it.
  const config = await loadTrustedConfig(repo, candidate.baseRef, candidate.baseSha);
  const names = config.checks.map((check) => check.name);
  if (names.length === 0) return { passed: true, reused: false, key, failure: null };
  // A head whose own tree is the candidate's, checked under the same config file, answers for it.
  if ((await configKey(repo, candidate.tree)) === candidate.configKey) {
    for (const commit of candidate.commits) {
      if ((await repo.treeOf(commit.headSha)) !== candidate.tree) continue;
      const runs = newestByName(await store.checks(commit.headSha));
      if (names.every((name) => PASSING.has(runs.get(name)?.conclusion ?? ''))) return { passed: true, reused: true, key, failure: null };
    }
  }
  const trusted = await context.trusted();
  options.onProgress?.(
    `running ${names.join(', ')} on candidate ${candidate.tip.slice(0, 12)} (${candidate.commits.length} change(s) on ${candidate.baseSha.slice(0, 12)})`,
  );
  const first = candidate.commits[0];
  if (first === undefined) throw new ProofgateError('INVALID_INPUT', 'a candidate needs at least one change');
  const results = await runChecks(
    {
      repo,
      store,
      clock: context.clock,
      outputCapBytes: context.outputCapBytes,
      ...(context.dataDir === undefined ? {} : { dataDir: context.dataDir }),
    },
    { changeId: first.changeId, headSha: candidate.tip, config, jail: trusted.config, ...(options.signal === undefined ? {} : { signal: options.signal }) },
  );
  if (options.signal?.aborted === true || results.length < names.length) {
    throw new ProofgateError('ABORTED', `the checks of candidate ${candidate.tip.slice(0, 12)} were cancelled`);
  }
  const failed = results.find((result) => !PASSING.has(result.conclusion));
  if (failed === undefined) return { passed: true, reused: false, key, failure: null };
  return { passed: false, reused: false, key, failure: { check: failed.name, conclusion: failed.conclusion, log: failed.outputUrl } };
}

export async function landCandidate(context: CandidateContext, candidate: MergeCandidate): Promise<CandidateLanding> {
  const { repo, store } = context;
  for (const commit of candidate.commits) {
    const record = await store.requireChange(commit.changeId);
    const headNow = await repo.branchSha(record.headRef);
    if (record.state !== 'open' || headNow !== commit.headSha) {
      throw new ProofgateError('HEAD_MOVED', `change ${commit.changeId}: head is ${headNow ?? '(deleted)'}, not the queued ${commit.headSha}`, {
        changeId: commit.changeId,
      });
    }
  }
  const ref = `refs/heads/${candidate.baseRef}`;
  // Work trees on the base follow it in the same guarded step (GitRepository.moveBranch), before the records.
  if (!(await repo.moveBranch(candidate.baseRef, candidate.tip, candidate.baseSha, `proofgate: merge queue (${candidate.commits.length} change(s))`)).swapped) {
    throw new ProofgateError('BASE_MOVED', `${candidate.baseRef} moved from ${candidate.baseSha.slice(0, 12)}; the candidate is built again`, {
      expectedBase: candidate.baseSha,
    });
  }
  crashAfterQueueLand();
  const at = context.clock.now().toISOString();
  let before = candidate.baseSha;
  for (const commit of candidate.commits) {
    const baseBefore = before;
    await store.appendWith(changeStream(commit.changeId), (events) => {
      const current = foldChange(events);
      if (current === null || current.state !== 'open') return [];
      return [{ type: 'change-merged', data: { mergeCommitSha: commit.commit, reviewedHeadSha: commit.headSha, baseBefore, at } }];
    });
    before = commit.commit;
  }
  await store.append(branchStream(candidate.baseRef), [{ type: 'branch-pushed', data: { ref, before: candidate.baseSha, after: candidate.tip, at } }]);
  // One compare-and-swap to the checked tip: what landed is exactly what was tested.
  const landed = candidate.commits.map((commit) => ({ changeId: commit.changeId, headSha: commit.headSha, mergeCommit: commit.commit }));
  return { landed, untested: null, stopped: null };
}

/** The port as the local forge offers it. */
export function localMergeQueue(context: CandidateContext): MergeQueuePort {
  return {
    buildCandidate: (baseRef, entries) => buildCandidate(context, baseRef, entries),
    checkCandidate: (candidate, options) => checkCandidate(context, candidate, options),
    landCandidate: (candidate) => landCandidate(context, candidate),
  };
}
