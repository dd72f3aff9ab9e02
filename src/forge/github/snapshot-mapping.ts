/**
 * Pure mapping from GitHub's GraphQL answer to the forge port's snapshot.
 * GraphQL spells enums in upper case and bot logins without the `[bot]`
 * suffix that REST and webhooks use; everything here is normalised to the
 * REST spelling so logins compare equal whichever API they came from.
 */
import type {
  AuthorType,
  ChangeSnapshot,
  ChangeState,
  CheckConclusion,
  ForgeQueueState,
  CheckStatus,
  ForgeCheck,
  ForgeComment,
  Mergeable,
  MergeStateStatus,
  RepoPermission,
  ReviewDecision,
} from '../port.js';
import { ProofgateError } from '../../core/errors.js';
import { MAX_BASE_RULES } from './snapshot-query.js';
import type {
  GqlActor,
  GqlBaseRef,
  GqlBranchProtectionRule,
  GqlCheckContext,
  GqlCheckRun,
  GqlComment,
  GqlPullRequest,
  GqlStatusContext,
} from './snapshot-query.js';

const CHECK_STATUSES: readonly CheckStatus[] = ['queued', 'in_progress', 'completed', 'waiting', 'requested', 'pending'];
const CONCLUSIONS: readonly CheckConclusion[] = [
  'success',
  'failure',
  'neutral',
  'cancelled',
  'skipped',
  'timed_out',
  'action_required',
  'startup_failure',
  'stale',
  'error',
];
const MERGE_STATES: readonly MergeStateStatus[] = ['CLEAN', 'BEHIND', 'BLOCKED', 'DIRTY', 'HAS_HOOKS', 'UNKNOWN', 'UNSTABLE'];

/** Login in REST spelling: GraphQL gives bots without the `[bot]` suffix. */
export function actorLogin(actor: GqlActor | null): string {
  if (actor === null) return 'ghost';
  if (actor.__typename === 'Bot' && !actor.login.endsWith('[bot]')) return `${actor.login}[bot]`;
  return actor.login;
}

export function actorType(typename: string | null | undefined): AuthorType {
  if (typename === 'Bot' || typename === 'Organization') return typename;
  return 'User';
}

export function checkStatus(value: string): CheckStatus {
  const lower = value.toLowerCase() as CheckStatus;
  return CHECK_STATUSES.includes(lower) ? lower : 'pending';
}

export function checkConclusion(value: string | null): CheckConclusion | null {
  if (value === null) return null;
  const lower = value.toLowerCase() as CheckConclusion;
  // An unknown conclusion must never read as success: keep it as a failure-class value.
  return CONCLUSIONS.includes(lower) ? lower : 'error';
}

export function mapCheckRun(run: GqlCheckRun, headSha: string): ForgeCheck {
  const status = checkStatus(run.status);
  return {
    kind: 'check_run',
    name: run.name,
    workflow: run.checkSuite?.workflowRun?.workflow.name ?? run.checkSuite?.app?.name ?? null,
    status,
    conclusion: status === 'completed' ? checkConclusion(run.conclusion) : null,
    startedAt: run.startedAt,
    completedAt: run.completedAt,
    url: run.detailsUrl,
    headSha,
  };
}

/** Commit status states: EXPECTED and PENDING wait; SUCCESS, FAILURE and ERROR are terminal. */
export function mapStatusContext(status: GqlStatusContext, headSha: string): ForgeCheck {
  const state = status.state.toUpperCase();
  const terminal: Record<string, CheckConclusion> = { SUCCESS: 'success', FAILURE: 'failure', ERROR: 'error' };
  const conclusion = terminal[state] ?? null;
  return {
    kind: 'status',
    name: status.context,
    workflow: null,
    status: conclusion === null ? 'pending' : 'completed',
    conclusion,
    startedAt: status.createdAt,
    completedAt: conclusion === null ? null : status.createdAt,
    url: status.targetUrl,
    headSha,
  };
}

export function mapCheckContext(context: GqlCheckContext, headSha: string): ForgeCheck {
  return context.__typename === 'CheckRun' ? mapCheckRun(context, headSha) : mapStatusContext(context, headSha);
}

export function mapComment(comment: GqlComment): ForgeComment | null {
  if (comment.databaseId === null) return null;
  return {
    id: String(comment.databaseId),
    author: actorLogin(comment.author),
    authorType: actorType(comment.author?.__typename),
    body: comment.body,
    createdAt: comment.createdAt,
    updatedAt: comment.updatedAt,
  };
}

export function changeState(pr: Pick<GqlPullRequest, 'state' | 'merged'>): ChangeState {
  if (pr.merged || pr.state === 'MERGED') return 'merged';
  return pr.state === 'OPEN' ? 'open' : 'closed';
}

export function mergeable(value: string): Mergeable {
  return value === 'MERGEABLE' || value === 'CONFLICTING' ? value : 'UNKNOWN';
}

/** GraphQL also knows DRAFT, which blocks a merge; the draft flag carries the reason. */
export function mergeStateStatus(value: string): MergeStateStatus {
  if (value === 'DRAFT') return 'BLOCKED';
  return MERGE_STATES.includes(value as MergeStateStatus) ? (value as MergeStateStatus) : 'UNKNOWN';
}

const REVIEW_DECISIONS: readonly ReviewDecision[] = ['APPROVED', 'CHANGES_REQUESTED', 'REVIEW_REQUIRED'];

/**
 * GraphQL's review decision: null (or absent) when the base requires no
 * approving review; a value this version does not know is read as
 * REVIEW_REQUIRED (a wait), never as no requirement.
 */
export function reviewDecision(value: string | null | undefined): ReviewDecision | null {
  if (value === null || value === undefined) return null;
  return REVIEW_DECISIONS.includes(value as ReviewDecision) ? (value as ReviewDecision) : 'REVIEW_REQUIRED';
}

/**
 * The check names the base requires (pure): those of its branch protection
 * rule, when the rule requires status checks (none without a rule, or when
 * proofgate may not read it), and those of every required-status-checks rule
 * of the rulesets active on the base. Each name once (names compare
 * case-insensitively, as the check summary compares them; the first spelling
 * is kept). A required check bound to one App is matched by its name only.
 * A base with more ruleset rules than one page holds is FORGE_API: a
 * required check proofgate did not read must not count as absent.
 */
export function requiredChecks(rule: GqlBranchProtectionRule | null | undefined, rules?: GqlBaseRef['rules']): string[] {
  if (rules?.pageInfo.hasNextPage === true) {
    throw new ProofgateError('FORGE_API', `the base branch has more than ${MAX_BASE_RULES} ruleset rules; proofgate reads one page of them`);
  }
  const names: (string | null)[] = [];
  if (rule !== null && rule !== undefined && rule.requiresStatusChecks) {
    names.push(...(rule.requiredStatusCheckContexts ?? []), ...(rule.requiredStatusChecks ?? []).map((check) => check.context));
  }
  for (const node of rules?.nodes ?? []) {
    if (node === null || node.type !== 'REQUIRED_STATUS_CHECKS') continue;
    names.push(...(node.parameters?.requiredStatusChecks ?? []).map((check) => check.context));
  }
  const seen = new Set<string>();
  const out: string[] = [];
  for (const name of names) {
    if (typeof name !== 'string' || name.trim() === '' || seen.has(name.toLowerCase())) continue;
    seen.add(name.toLowerCase());
    out.push(name);
  }
  return out;
}

/**
 * The pull request and GitHub's merge queue (pure): whether the base requires
 * it (a ruleset rule of type MERGE_QUEUE among the base ref's rules), the
 * pull request's entry, and the latest removal (the head it had then and
 * GitHub's reason). Null when the base has no merge queue and the pull
 * request was never in one.
 */
export function forgeQueueState(pr: Pick<GqlPullRequest, 'baseRef' | 'mergeQueueEntry' | 'timelineItems'>): ForgeQueueState | null {
  const required = (pr.baseRef?.rules?.nodes ?? []).some((node) => node?.type === 'MERGE_QUEUE');
  const queued = pr.mergeQueueEntry ?? null;
  const removed = (pr.timelineItems?.nodes ?? []).filter((node) => node?.__typename === 'RemovedFromMergeQueueEvent').pop() ?? null;
  if (!required && queued === null && removed === null) return null;
  return {
    required,
    entry: queued === null ? null : { position: queued.position, state: queued.state, enqueuedAt: queued.enqueuedAt, group: null },
    lastRemoval:
      removed === null || typeof removed.createdAt !== 'string'
        ? null
        : { headSha: removed.beforeCommit?.oid ?? null, reason: removed.reason ?? 'no reason given', at: removed.createdAt },
  };
}

export interface SnapshotParts {
  readonly pr: GqlPullRequest;
  readonly checkHeadSha: string;
  readonly contexts: readonly GqlCheckContext[];
  readonly comments: readonly GqlComment[];
}

export function buildSnapshot(parts: SnapshotParts): ChangeSnapshot {
  const { pr } = parts;
  const comments = parts.comments.map(mapComment).filter((c): c is ForgeComment => c !== null);
  const state = changeState(pr);
  return {
    id: String(pr.number),
    number: pr.number,
    title: pr.title,
    state,
    draft: pr.isDraft,
    base: { ref: pr.baseRefName, sha: pr.baseRefOid },
    head: { ref: pr.headRefName, sha: pr.headRefOid },
    author: { login: actorLogin(pr.author) },
    mergeable: mergeable(pr.mergeable),
    mergeStateStatus: mergeStateStatus(pr.mergeStateStatus),
    reviewDecision: reviewDecision(pr.reviewDecision),
    labels: (pr.labels?.nodes ?? []).flatMap((label) => (label === null ? [] : [label.name])),
    checks: parts.contexts.map((context) => mapCheckContext(context, parts.checkHeadSha)),
    comments,
    mergeCommitSha: state === 'merged' ? (pr.mergeCommit?.oid ?? null) : null,
    url: pr.url,
    requiredChecks: requiredChecks(pr.baseRef?.branchProtectionRule, pr.baseRef?.rules),
    // Unknown reads as a fork: a branch proofgate cannot place is never deleted.
    crossRepository: pr.isCrossRepository !== false,
    // Unknown reads as locked: a proof command is admitted only on a change known to be unlocked.
    locked: pr.locked !== false,
    ...optional('forgeQueue', forgeQueueState(pr)),
  };
}

function optional<K extends string, V>(key: K, value: V | null): { [P in K]?: V } {
  return (value === null ? {} : { [key]: value }) as { [P in K]?: V };
}

/** REST permission answer to the port's scale: role_name knows maintain and triage, permission does not. */
export function repoPermission(roleName: string | undefined, permission: string | undefined): RepoPermission {
  const known: readonly RepoPermission[] = ['admin', 'maintain', 'write', 'triage', 'read', 'none'];
  if (roleName !== undefined && known.includes(roleName as RepoPermission)) return roleName as RepoPermission;
  if (permission !== undefined && known.includes(permission as RepoPermission)) return permission as RepoPermission;
  return 'none';
}
