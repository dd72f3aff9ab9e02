/**
 * What the loop reads for `decideAutomerge` besides the snapshot and the
 * markers (`ReviewFacts`): the bindings a review of the current head would
 * have now (merge base, diff, contract and trusted-config digests, read the
 * way a review reads them), the stored accepted-result record of each verdict
 * on that head resolved against them, the trusted paths the change touches,
 * and the maintainers' approvals of exactly this head. The router's
 * `/proofgate approve` records an approval here too, and the local forge
 * reads them (`headApprovals`) for its review decision.
 */
import { errorMessage } from '../../core/index.js';
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import { liveReviewBindings, resolveReviewRecord, type ReviewBindings } from '../../review/index.js';
import type { RecordStanding, ReviewFacts } from '../decide.js';
import { commandMention, parseCommands } from '../commands.js';
import type { TrustedVerdict } from '../markers.js';
import { trustedPathsTouched } from '../trusted-paths.js';
import { recordApproval, resolveChangeApproval, type ApprovalSubject, type Approver } from './approval.js';
import type { AutomergeEnvironment } from './types.js';

/** The live bindings of a change's head and the trusted paths it touches (or why they cannot be read). */
export type ChangeFacts =
  { readonly ok: true; readonly live: ReviewBindings; readonly touched: readonly string[] } | { readonly ok: false; readonly problem: string };

/** Live bindings by `<base sha>|<head sha>`: they depend on nothing else (the config is read at the base sha). */
export type FactsCache = Map<string, ChangeFacts>;

/** Pairs of shas a cache keeps (oldest dropped first): a change has few live heads at a time. */
const MAX_CACHED_FACTS = 16;

/** Read (or take from `cache`) the live bindings of the change and the trusted paths it touches under `config`. */
export async function readChangeFacts(env: AutomergeEnvironment, snapshot: ChangeSnapshot, config: RepoConfig, cache?: FactsCache): Promise<ChangeFacts> {
  const key = `${snapshot.base.sha}|${snapshot.head.sha}`;
  const cached = cache?.get(key);
  if (cached !== undefined) return cached;
  let facts: ChangeFacts;
  try {
    const repoDir = await env.forge.workspace.prepare(snapshot);
    const live = await liveReviewBindings({ repoDir, base: snapshot.base.sha, head: snapshot.head.sha });
    facts = { ok: true, live, touched: trustedPathsTouched(live.paths, config) };
  } catch (error) {
    facts = { ok: false, problem: errorMessage(error) };
  }
  cache?.set(key, facts);
  if (cache !== undefined && cache.size > MAX_CACHED_FACTS) cache.delete(cache.keys().next().value as string);
  return facts;
}

function approvalSubject(snapshot: ChangeSnapshot, live: ReviewBindings, touched: readonly string[], approver: string): ApprovalSubject {
  return { changeId: snapshot.id, head: snapshot.head.sha, diff: live.diff, paths: touched, approver };
}

/** Who may have approved: the authors of the change's `/proofgate approve` comments (not proofgate, not bots), once each. */
function approvalCandidates(env: AutomergeEnvironment, snapshot: ChangeSnapshot): string[] {
  const logins: string[] = [];
  for (const comment of snapshot.comments) {
    if (comment.authorType === 'Bot' || comment.author.toLowerCase() === env.forge.selfLogin.toLowerCase()) continue;
    if (!parseCommands(comment.body, commandMention(env.forge.selfLogin)).some((command) => command.kind === 'approve')) continue;
    if (!logins.some((login) => login.toLowerCase() === comment.author.toLowerCase())) logins.push(comment.author);
  }
  return logins;
}

/** The approvals whose stored records bind exactly the change as it is live now (its head, diff and trusted paths). */
async function approvalsOf(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  live: ReviewBindings,
  touched: readonly string[],
): Promise<{ readonly by: string }[]> {
  const approvals = env.approvals;
  if (approvals === undefined) return [];
  const found: { by: string }[] = [];
  for (const login of approvalCandidates(env, snapshot)) {
    const approval = await resolveChangeApproval(approvals, approvalSubject(snapshot, live, touched, login));
    if (approval !== null) found.push(approval);
  }
  return found;
}

/**
 * The approvals of exactly the change's current head (the local forge's
 * `ApprovalReader`, which counts them against `requiredApprovals`); none
 * when the change cannot be read.
 */
export async function headApprovals(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  config: RepoConfig,
  cache?: FactsCache,
): Promise<{ readonly login: string }[]> {
  const facts = await readChangeFacts(env, snapshot, config, cache);
  if (!facts.ok) return [];
  return (await approvalsOf(env, snapshot, facts.live, facts.touched)).map((approval) => ({ login: approval.by }));
}

async function recordStanding(env: AutomergeEnvironment, run: string, live: ReviewBindings): Promise<RecordStanding> {
  if (env.reviewRuns === undefined) return { kind: 'wait', reason: `no review run store is configured here to read run ${run}` };
  try {
    const resolution = await resolveReviewRecord(env.reviewRuns, run, live);
    return resolution.kind === 'accepted' ? { kind: 'accepted' } : { kind: 'wait', reason: resolution.reason };
  } catch (error) {
    return { kind: 'wait', reason: errorMessage(error) };
  }
}

/** Everything `decideAutomerge` needs to take or refuse the verdicts of the current head. */
export async function reviewFacts(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  config: RepoConfig,
  verdicts: readonly TrustedVerdict[],
  cache?: FactsCache,
): Promise<ReviewFacts> {
  const facts = await readChangeFacts(env, snapshot, config, cache);
  if (!facts.ok) return { live: { problem: facts.problem }, records: {}, touchesTrusted: [], approval: null };
  const records: Record<string, RecordStanding> = {};
  for (const verdict of verdicts) {
    const { change, head, run, review } = verdict.fields;
    if (change !== snapshot.id || head !== snapshot.head.sha || run === null) continue;
    records[review] = await recordStanding(env, run, facts.live);
  }
  const approval = facts.touched.length === 0 ? null : ((await approvalsOf(env, snapshot, facts.live, facts.touched))[0] ?? null);
  return { live: facts.live, records, touchesTrusted: facts.touched, approval };
}

export type ApproveOutcome =
  | { readonly kind: 'approved'; readonly head: string; readonly paths: readonly string[]; readonly required: number; readonly already: boolean }
  | { readonly kind: 'refused'; readonly reason: string };

/**
 * `/proofgate approve [sha]` from a maintainer (the router authorized it):
 * record an approval of the change's CURRENT head (the named sha must be it),
 * its diff and the trusted paths it touches under the base's `config`. There
 * is something to approve when the change touches what proofgate trusts or
 * the base's config asks for `requiredApprovals` (the author's own approval
 * is recorded, but never counts toward those).
 */
export async function approveChange(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  config: RepoConfig,
  approver: Approver,
  sha: string | null,
): Promise<ApproveOutcome> {
  const head = snapshot.head.sha;
  if (snapshot.state !== 'open') return { kind: 'refused', reason: `the change is ${snapshot.state}` };
  if (sha !== null && sha !== head) return { kind: 'refused', reason: `the approval names ${sha}, but the change's head is ${head}` };
  if (env.approvals === undefined) return { kind: 'refused', reason: 'no approval store is configured here' };
  const facts = await readChangeFacts(env, snapshot, config);
  if (!facts.ok) return { kind: 'refused', reason: `the change cannot be read: ${facts.problem}` };
  const required = config.requiredApprovals ?? 0;
  if (facts.touched.length === 0 && required === 0) {
    return { kind: 'refused', reason: 'the change touches nothing proofgate trusts and its base requires no approvals: there is nothing to approve' };
  }
  const written = await recordApproval(env.approvals, approvalSubject(snapshot, facts.live, facts.touched, approver.login), approver, env.store.now());
  if (written.kind === 'refused') return { kind: 'refused', reason: written.reason };
  return { kind: 'approved', head, paths: facts.touched, required, already: written.kind === 'already' };
}
