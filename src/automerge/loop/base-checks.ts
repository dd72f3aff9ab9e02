/**
 * The checks of a change's base commit, for the "base is blocked" rule of
 * `decideAutomerge`: when checks fail on the head, the loop looks for the same
 * checks on `snapshot.base.sha` and decides on the snapshot with them added.
 * A forge whose snapshot already carries runs on the base sha needs nothing
 * more. An environment that can get them (`baseChecks`; the local forge,
 * which has no CI, runs the trusted checks on the base commit once, and keeps
 * the results per sha) is asked for the ones the snapshot lacks. Without
 * either, the base's result is unknown and the failure is the change's.
 */
import { errorMessage } from '../../core/index.js';
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import { summarizeChecks, type CheckPolicy } from '../checks.js';
import type { AutomergeEnvironment } from './types.js';

export type { BaseChecksRequest } from './types.js';

/**
 * Names of the checks that failed (repairably) on the head and whose result on
 * the base the snapshot does not carry yet (pure). A cancelled or pending run
 * on the base is no result.
 */
export function baseResultsMissing(snapshot: ChangeSnapshot, policy: CheckPolicy): string[] {
  const onHead = summarizeChecks(
    snapshot.checks.filter((check) => check.headSha === snapshot.head.sha),
    policy,
  );
  const failing = onHead.terminalBlockers.filter((blocker) => blocker.repairable);
  if (failing.length === 0) return [];
  const onBase = summarizeChecks(
    snapshot.checks.filter((check) => check.headSha === snapshot.base.sha),
    { ignored: policy.ignored, expectChecks: false },
  );
  const known = new Set([...onBase.passed, ...onBase.terminalBlockers.filter((blocker) => blocker.repairable)].map((entry) => entry.label));
  return [...new Set(failing.filter((blocker) => !known.has(blocker.label)).map((blocker) => blocker.name))];
}

/**
 * The snapshot with the runs on its base commit of the checks that failed on
 * the head (`snapshot` itself when there is nothing to add). Best effort: when
 * they cannot be had, `onProblem` hears why and the snapshot is returned as
 * it was, so the decision treats the base's result as unknown.
 */
export async function withBaseChecks(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  config: RepoConfig,
  policy: CheckPolicy,
  onProblem: (reason: string) => Promise<void>,
  signal?: AbortSignal,
): Promise<ChangeSnapshot> {
  if (env.baseChecks === undefined || snapshot.state !== 'open' || snapshot.base.sha === snapshot.head.sha) return snapshot;
  const names = baseResultsMissing(snapshot, policy);
  if (names.length === 0) return snapshot;
  try {
    const found = await env.baseChecks({ snapshot, config, names, ...(signal === undefined ? {} : { signal }) });
    const onBase = found.filter((check) => check.headSha === snapshot.base.sha);
    return onBase.length === 0 ? snapshot : { ...snapshot, checks: [...snapshot.checks, ...onBase] };
  } catch (error) {
    await onProblem(errorMessage(error));
    return snapshot;
  }
}
