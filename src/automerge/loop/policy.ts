/**
 * The loop's configuration, taken from the trusted `.proofgate.yml` of the
 * base (never the change): the decision policy, how a change is merged and
 * whether its head branch is deleted after; and the pure gate that checks a
 * decision against what this installation can actually do (a repair needs a
 * repair module, and a fix needs a configured agent-fix command).
 */
import { protectedBranchNames, type RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, Forge, MergeMethod } from '../../forge/port.js';
import { readChangeConfig, type TrustedConfig } from '../../forge/protection.js';
import { DEFAULT_IGNORED_CHECKS, newestChecks, withForgeRequired } from '../checks.js';
import { defaultAutomergePolicy, type AutomergeDecision, type AutomergePolicy } from '../decide.js';
import type { AutomergeLedgerState } from '../ledger.js';

/** The trusted configuration of a change: `.proofgate.yml` at its base sha, once the base passed the protected-branch rule (else `PROTECTED_BRANCH`). */
export function trustedConfig(forge: Forge, snapshot: ChangeSnapshot): Promise<RepoConfig> {
  return readChangeConfig(forge, snapshot);
}

/**
 * Whether "no check reported yet" on a head is a wait (pure). An explicit
 * `automerge.expectChecks` decides; without it, checks are expected when the
 * base's config lists checks, and on any forge that runs its own CI (GitHub),
 * and not on a local forge without configured checks (nothing would run).
 */
export function expectsChecks(config: RepoConfig, forgeKind: Forge['kind']): boolean {
  return config.automerge?.expectChecks ?? (config.checks.length > 0 || forgeKind !== 'local');
}

/**
 * The decision policy under a trusted config (pure). On the local forge the
 * configured checks are the CI: each must report. On GitHub the required
 * checks are the base's branch protection's, which the snapshot carries
 * (`requiredChecks`): given `snapshot`, they are required here (and never
 * ignored); `decideAutomerge` adds them from the snapshot it judges as well.
 */
export function policyFromConfig(config: RepoConfig, forgeKind: Forge['kind'], snapshot?: Pick<ChangeSnapshot, 'requiredChecks'>): AutomergePolicy {
  const automerge = config.automerge;
  const local = forgeKind === 'local';
  const checks = {
    ignored: automerge?.ignoredChecks ?? DEFAULT_IGNORED_CHECKS,
    ...(local ? { required: config.checks.map((check) => check.name) } : {}),
    expectChecks: expectsChecks(config, forgeKind),
  };
  return {
    ...defaultAutomergePolicy,
    checks: withForgeRequired(checks, snapshot?.requiredChecks),
    maxRepairsPerChange: automerge?.maxRepairsPerChange ?? defaultAutomergePolicy.maxRepairsPerChange,
    maxRepairsPerHead: automerge?.maxRepairsPerHead ?? defaultAutomergePolicy.maxRepairsPerHead,
  };
}

export interface Capabilities {
  /** A repair module is wired in. */
  readonly repair: boolean;
  /** The trusted config names an agent-fix command (needed for fix-findings, and for fix-checks unless a rebase can do it). */
  readonly agentFix: boolean;
  /**
   * The change's head does not contain its base's tip: a fix-checks repair
   * without an agent can still rebase (the base may have fixed the checks).
   */
  readonly headBehindBase?: boolean;
  /** The head is a fork's branch: it is reviewed and merged like any other, never repaired by a push. */
  readonly fork?: boolean;
}

/**
 * Check a decision against what can be done (pure). A repair nobody can
 * perform is a block that says why: `no-agent-fix` (fix-checks without an
 * agent-fix command is performed only when the head is behind its base: the
 * rebase alone may fix the checks), `no-repair-worker`; so is a repair that
 * already made no change from the same head (`repair-made-no-change`: running
 * it again would change nothing). A review, repair or merge of a head that a
 * repair already replaced (the forge does not show the pushed head yet) is a
 * wait (`new-head-pending`). A decision it keeps passes with its own code.
 */
export function gateDecision(decision: AutomergeDecision, ledger: AutomergeLedgerState, capabilities: Capabilities): AutomergeDecision {
  if (decision.kind === 'review' || decision.kind === 'repair' || decision.kind === 'merge') {
    // A repair pushed a new head from this one, but the forge still shows the old head (GitHub updates a
    // pull request a moment after a git push): wait for it rather than act on a head that is gone.
    const pushed = ledger.repairs.filter((r) => r.head === decision.head && r.status === 'pushed' && r.newHead !== null && r.newHead !== decision.head).pop();
    if (pushed?.newHead != null) {
      return {
        kind: 'wait',
        code: 'new-head-pending',
        reason: `repair ${pushed.id} pushed ${pushed.newHead.slice(0, 12)} from ${decision.head.slice(0, 12)}; waiting for the forge to show the new head`,
      };
    }
  }
  if (decision.kind !== 'repair') return decision;
  const rebaseCanFix = decision.repair === 'fix-checks' && capabilities.headBehindBase === true;
  if (decision.repair !== 'rebase' && !capabilities.agentFix && !rebaseCanFix) {
    return {
      kind: 'block',
      code: 'no-agent-fix',
      reason: `${decision.reason}; no agent-fix command is configured (automerge.agentFix), so a human must fix it`,
    };
  }
  if (capabilities.fork === true) {
    return {
      kind: 'block',
      code: 'fork-no-repair',
      reason: `${decision.reason}; the head is a fork's branch, which proofgate never pushes to: its author must update it`,
    };
  }
  if (!capabilities.repair) return { kind: 'block', code: 'no-repair-worker', reason: `${decision.reason}; no repair worker is available` };
  const futile = ledger.repairs.find((r) => r.head === decision.head && r.repair === decision.repair && r.status === 'no-change');
  if (futile !== undefined) {
    return { kind: 'block', code: 'repair-made-no-change', reason: `${decision.reason}; repair ${futile.id} (${futile.repair}) from this head made no change` };
  }
  return decision;
}

/**
 * The snapshot as a loop that runs the checks itself sees it (pure): a check
 * of the head whose newest run was cancelled (a stop cut it short) has not
 * reported, so the loop runs the checks again instead of blocking on it.
 */
export function withoutCancelledRuns(snapshot: ChangeSnapshot): ChangeSnapshot {
  const key = (check: ChangeSnapshot['checks'][number]): string => `${check.workflow ?? ''}\u0000${check.name}`;
  const onHead = snapshot.checks.filter((check) => check.headSha === snapshot.head.sha);
  const cancelled = new Set(
    newestChecks(onHead)
      .filter((check) => check.status === 'completed' && check.conclusion === 'cancelled')
      .map(key),
  );
  if (cancelled.size === 0) return snapshot;
  return { ...snapshot, checks: snapshot.checks.filter((check) => check.headSha !== snapshot.head.sha || !cancelled.has(key(check))) };
}

/** How the merge step lands a change, from the trusted config (pure). */
export interface MergeSettings {
  /** `automerge.mergeMethod`, default `squash`. */
  readonly method: MergeMethod;
  /** `automerge.deleteHeadBranch`, default false. */
  readonly deleteHeadBranch: boolean;
}

export function mergeSettings(config: RepoConfig): MergeSettings {
  return { method: config.automerge?.mergeMethod ?? 'squash', deleteHeadBranch: config.automerge?.deleteHeadBranch ?? false };
}

/** Whether the merge step deletes a merged change's head branch, and if not, why (`code` for the step it records). */
export type HeadBranchDeletion =
  { readonly delete: true } | { readonly delete: false; readonly code: 'setting-off' | 'fork' | 'protected' | 'unsupported'; readonly reason: string };

/**
 * The rule for deleting a merged change's head branch (pure): only when the
 * trusted config asks for it (`automerge.deleteHeadBranch`), the forge can
 * delete branches, the head lives in this repository (never a fork's branch)
 * and it is not a protected branch (the trusted branch among them; names
 * compare case-insensitively).
 */
export function headBranchDeletion(
  snapshot: Pick<ChangeSnapshot, 'head' | 'crossRepository'>,
  settings: MergeSettings,
  trusted: TrustedConfig,
  forgeDeletes: boolean,
): HeadBranchDeletion {
  const branch = snapshot.head.ref;
  if (!settings.deleteHeadBranch) return { delete: false, code: 'setting-off', reason: 'automerge.deleteHeadBranch is off' };
  if (snapshot.crossRepository === true) return { delete: false, code: 'fork', reason: `head "${branch}" lives in a fork` };
  if (protectedBranchNames(trusted.branch, trusted.config).some((name) => name.toLowerCase() === branch.toLowerCase())) {
    return { delete: false, code: 'protected', reason: `head "${branch}" is a protected branch` };
  }
  if (!forgeDeletes) return { delete: false, code: 'unsupported', reason: 'this forge does not delete branches yet' };
  return { delete: true };
}
