/**
 * The check summarizer: which checks on a head are still running (wait), which
 * completed without going green (block or repair), which passed and which are
 * ignored. Pending is never failure: text names a check as failed only when
 * its newest run completed with a failing conclusion.
 */
import type { CheckConclusion, ForgeCheck } from '../forge/port.js';

export interface CheckPolicy {
  /** Check or workflow names (case-insensitive, exact) that never gate a merge. */
  readonly ignored: readonly string[];
  /** Check names that must report on the head; a missing one counts as pending. */
  readonly required?: readonly string[];
  /**
   * Whether the head should get checks at all (default true). When true, a head
   * with no gating check yet is pending; set false for a repository without CI.
   */
  readonly expectChecks?: boolean;
}

/**
 * The check policy with the forge's own required checks added (pure; GitHub:
 * the base's branch protection, `ChangeSnapshot.requiredChecks`). Each joins
 * `required`, so one that has not reported on the head is pending, and is
 * taken out of `ignored`: the forge merges nothing without it, so ignoring it
 * would only end in refused merges. Names compare case-insensitively; with
 * none to add, `policy` itself is returned.
 */
export function withForgeRequired(policy: CheckPolicy, forgeRequired: readonly string[] | undefined): CheckPolicy {
  if (forgeRequired === undefined || forgeRequired.length === 0) return policy;
  const forced = new Set(forgeRequired.map((name) => name.toLowerCase()));
  const required = [...(policy.required ?? [])];
  const known = new Set(required.map((name) => name.toLowerCase()));
  for (const name of forgeRequired) {
    if (known.has(name.toLowerCase())) continue;
    known.add(name.toLowerCase());
    required.push(name);
  }
  return { ...policy, ignored: policy.ignored.filter((name) => !forced.has(name.toLowerCase())), required };
}

/** Non-gating automation that reports as checks on many repositories. */
export const DEFAULT_IGNORED_CHECKS: readonly string[] = ['Labeler', 'Stale', 'auto-response', 'proofgate dispatch'];

export interface CheckEntry {
  /** `workflow / name`, or `name` when the workflow is unknown. */
  readonly label: string;
  readonly name: string;
  readonly workflow: string | null;
  readonly status: ForgeCheck['status'];
  readonly conclusion: CheckConclusion | null;
  readonly url: string | null;
}

export interface TerminalBlocker extends CheckEntry {
  readonly conclusion: CheckConclusion;
  /**
   * True for failing conclusions a code change can fix (failure, error,
   * timed_out, action_required, startup_failure); false for cancelled and stale
   * (and any conclusion a forge adds later), which need a re-run, not a repair.
   */
  readonly repairable: boolean;
}

export interface CheckSummary {
  readonly pending: readonly CheckEntry[];
  readonly terminalBlockers: readonly TerminalBlocker[];
  readonly passed: readonly CheckEntry[];
  readonly ignored: readonly CheckEntry[];
  /** Required names with no check reported yet (they also make `hasPending` true). */
  readonly missingRequired: readonly string[];
  /** No gating check has reported on the head yet: treated as pending. */
  readonly noChecksYet: boolean;
  /** Something is still running or has not reported. */
  readonly hasPending: boolean;
  /** One line for status comments and logs. */
  readonly text: string;
}

const PASSING: ReadonlySet<CheckConclusion> = new Set(['success', 'neutral', 'skipped']);
const REPAIRABLE: ReadonlySet<CheckConclusion> = new Set(['failure', 'error', 'timed_out', 'action_required', 'startup_failure']);

function labelOf(check: ForgeCheck): string {
  return check.workflow === null ? check.name : `${check.workflow} / ${check.name}`;
}

function timeOf(iso: string | null): number {
  if (iso === null) return Number.POSITIVE_INFINITY;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? Number.POSITIVE_INFINITY : t;
}

/**
 * Newest run per (workflow, name). A run's time is its start (its completion when
 * it has no start); a run with neither has not started yet and counts as newest.
 * Ties go to the later entry in the input.
 */
export function newestChecks(checks: readonly ForgeCheck[]): ForgeCheck[] {
  const newest = new Map<string, ForgeCheck>();
  for (const check of checks) {
    const key = `${check.workflow === null ? '-' : `w:${check.workflow}`}\u0000${check.name}`;
    const current = newest.get(key);
    if (current === undefined || timeOf(check.startedAt ?? check.completedAt) >= timeOf(current.startedAt ?? current.completedAt)) {
      newest.set(key, check);
    }
  }
  return [...newest.values()];
}

function entryOf(check: ForgeCheck): CheckEntry {
  return {
    label: labelOf(check),
    name: check.name,
    workflow: check.workflow,
    status: check.status,
    conclusion: check.conclusion,
    url: check.url,
  };
}

function list(entries: readonly CheckEntry[], withState: boolean): string {
  return entries.map((e) => (withState ? `${e.label} (${e.conclusion ?? e.status})` : e.label)).join(', ');
}

function render(summary: Omit<CheckSummary, 'text'>): string {
  const parts: string[] = [];
  const failed = summary.terminalBlockers.filter((b) => b.repairable);
  const rerun = summary.terminalBlockers.filter((b) => !b.repairable);
  if (failed.length > 0) parts.push(`failed checks: ${list(failed, true)}`);
  if (rerun.length > 0) parts.push(`not green, needs a re-run: ${list(rerun, true)}`);
  if (summary.pending.length > 0) parts.push(`pending: ${list(summary.pending, true)}`);
  if (summary.missingRequired.length > 0) parts.push(`required, not reported yet: ${summary.missingRequired.join(', ')}`);
  if (summary.noChecksYet) parts.push('no checks reported yet');
  parts.push(`passed: ${summary.passed.length}`);
  if (summary.ignored.length > 0) parts.push(`ignored: ${list(summary.ignored, false)}`);
  return parts.join('; ');
}

/** Summarize the checks of ONE head (filter by head sha before calling). */
export function summarizeChecks(checks: readonly ForgeCheck[], policy: CheckPolicy): CheckSummary {
  const ignoredNames = new Set(policy.ignored.map((name) => name.toLowerCase()));
  const isIgnored = (check: ForgeCheck): boolean =>
    ignoredNames.has(check.name.toLowerCase()) || (check.workflow !== null && ignoredNames.has(check.workflow.toLowerCase()));
  const pending: CheckEntry[] = [];
  const terminalBlockers: TerminalBlocker[] = [];
  const passed: CheckEntry[] = [];
  const ignored: CheckEntry[] = [];
  const reported = new Set<string>();
  for (const check of newestChecks(checks)) {
    const entry = entryOf(check);
    if (isIgnored(check)) {
      ignored.push(entry);
      continue;
    }
    reported.add(check.name.toLowerCase());
    reported.add(entry.label.toLowerCase());
    const conclusion = check.conclusion;
    // Anything not completed, or completed without a conclusion, is still pending.
    if (check.status !== 'completed' || conclusion === null) pending.push(entry);
    else if (PASSING.has(conclusion)) passed.push(entry);
    else terminalBlockers.push({ ...entry, conclusion, repairable: REPAIRABLE.has(conclusion) });
  }
  const missingRequired = (policy.required ?? []).filter((name) => !ignoredNames.has(name.toLowerCase()) && !reported.has(name.toLowerCase()));
  const noChecksYet = reported.size === 0 && policy.expectChecks !== false;
  const base = {
    pending,
    terminalBlockers,
    passed,
    ignored,
    missingRequired,
    noChecksYet,
    hasPending: pending.length > 0 || missingRequired.length > 0 || noChecksYet,
  };
  return { ...base, text: render(base) };
}

/** A head's repairable failures split by how the same checks ended on the base commit. */
export interface BaseComparison {
  /** Failures whose check's newest run on the base also failed (repairably): the base is blocked, not the change. */
  readonly onBase: readonly TerminalBlocker[];
  /** Failures the base has no failing result for (passed, pending, cancelled, not run or unknown): the change's own. */
  readonly own: readonly TerminalBlocker[];
}

/**
 * Compare a head's repairable failures with the checks of its base commit
 * (pure; `baseChecks` are the runs on the base sha, whatever the forge
 * reported). A check counts as failing on the base only when its newest run
 * there (same workflow and name) completed with a repairable failing
 * conclusion; no result for it on the base leaves the failure the change's own.
 */
export function compareWithBase(failures: readonly TerminalBlocker[], baseChecks: readonly ForgeCheck[], policy: CheckPolicy): BaseComparison {
  const base = summarizeChecks(baseChecks, { ignored: policy.ignored, expectChecks: false });
  const failingOnBase = new Set(base.terminalBlockers.filter((b) => b.repairable).map((b) => b.label));
  return {
    onBase: failures.filter((f) => failingOnBase.has(f.label)),
    own: failures.filter((f) => !failingOnBase.has(f.label)),
  };
}
