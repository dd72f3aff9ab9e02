/**
 * The repair step: hand the change to the repair module with the failing
 * checks' logs and the latest review findings for this head, and record what
 * it did. A pushed repair moves the head, so the next decision is a review of
 * the new head (a push invalidates every older verdict).
 */
import { ProofgateError, errorMessage, isProofgateError, newId } from '../../core/index.js';
import { gitText, isAncestor } from '../../host/git.js';
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, PushRequest } from '../../forge/port.js';
import { requireOwnHeadPush } from '../../forge/protection.js';
import { summarizeChecks, type CheckPolicy } from '../checks.js';
import type { RepairKind } from '../ledger.js';
import type { StepEvent } from './ledger-store.js';
import type { FailingCheck, RepairFinding, RepairOutcome as RepairResult } from '../repair/index.js';
import { crashPoint } from './crash-seam.js';
import type { AutomergeEnvironment } from './types.js';

/** The commits `newSha` adds over the old head and the base, oldest first (best effort: [] when git cannot tell). */
async function newCommits(repoDir: string, request: PushRequest, base: string): Promise<string[]> {
  try {
    const listing = await gitText(repoDir, [
      'rev-list',
      '--reverse',
      request.newSha,
      ...(request.expectedOldSha === null ? [] : [`^${request.expectedOldSha}`]),
      `^${base}`,
    ]);
    return listing.split('\n').filter((line) => /^[0-9a-f]{40,64}$/.test(line));
  } catch {
    return [];
  }
}

/**
 * How a repair publishes, the one place its pushes happen: the target must be
 * the change's own head ref, which is not protected, under a change whose base
 * is (else `PROTECTED_BRANCH`, nothing pushed or recorded); the push intent is
 * recorded first (a `repair-push` step naming the new head and its commits, so
 * a restarted job can tell a push that landed from one that did not), then one
 * compare-and-swap from the head the repair started on, by the forge's change
 * workspace (`publish`: the local forge moves the branch in the repository,
 * GitHub's pushes with lease from the clone).
 */
function publisher(env: AutomergeEnvironment, snapshot: ChangeSnapshot, repairId: string, repoDir: string): (request: PushRequest) => Promise<void> {
  return async (request) => {
    await requireOwnHeadPush(env.forge, snapshot, request.branch);
    if (request.expectedOldSha !== snapshot.head.sha) {
      throw new ProofgateError(
        'HEAD_MOVED',
        `change ${snapshot.id}: a repair pushes over the head it started on (${snapshot.head.sha}), not ${request.expectedOldSha ?? '(absent)'}`,
        { changeId: snapshot.id },
      );
    }
    const commits = await newCommits(repoDir, request, snapshot.base.sha);
    await env.store.step(snapshot.id, 'repair-push', {
      repair: repairId,
      branch: request.branch,
      oldSha: request.expectedOldSha,
      newSha: request.newSha,
      commits,
    });
    crashPoint('repair-committed');
    await env.forge.workspace.publish(repoDir, request);
    crashPoint('repair-pushed');
  };
}

/**
 * Whether the change's head lacks its base's tip (a rebase would change it).
 * A forge that says BEHIND is believed; otherwise git answers in the
 * workspace; when neither can tell, false (no rebase-only repair is tried).
 */
export async function headBehindBase(env: AutomergeEnvironment, snapshot: ChangeSnapshot): Promise<boolean> {
  if (snapshot.mergeStateStatus === 'BEHIND') return true;
  try {
    const repoDir = await env.forge.workspace.prepare(snapshot);
    return !(await isAncestor(repoDir, snapshot.base.sha, snapshot.head.sha));
  } catch {
    return false;
  }
}

export interface RepairRequest {
  readonly repair: RepairKind;
  readonly reason: string;
  /** Dispatched by the loop (counts against the caps) rather than by a human command. */
  readonly automatic: boolean;
}

function readFinding(value: unknown): RepairFinding | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const raw = value as Record<string, unknown>;
  if (typeof raw.title !== 'string' || typeof raw.evidence !== 'string') return null;
  return {
    title: raw.title,
    evidence: raw.evidence,
    ...(typeof raw.path === 'string' ? { path: raw.path } : {}),
    ...(typeof raw.line === 'number' ? { line: raw.line } : {}),
  };
}

/** The findings of the latest verdict recorded for `head` (pure). */
export function findingsFor(steps: readonly StepEvent[], head: string): RepairFinding[] {
  for (let index = steps.length - 1; index >= 0; index -= 1) {
    const step = steps[index];
    if (step?.step !== 'review-verdict' || step.head !== head) continue;
    const findings = Array.isArray(step.findings) ? step.findings : [];
    return findings.map(readFinding).filter((finding): finding is RepairFinding => finding !== null);
  }
  return [];
}

async function failingChecks(env: AutomergeEnvironment, snapshot: ChangeSnapshot, policy: CheckPolicy): Promise<FailingCheck[]> {
  const summary = summarizeChecks(
    snapshot.checks.filter((check) => check.headSha === snapshot.head.sha),
    policy,
  );
  const out: FailingCheck[] = [];
  const onHead = snapshot.checks.filter((check) => check.headSha === snapshot.head.sha);
  for (const blocker of summary.terminalBlockers.filter((b) => b.repairable)) {
    const check = onHead.filter((c) => c.name === blocker.name && c.workflow === blocker.workflow).pop();
    if (check === undefined) continue;
    let log: string | null = null;
    if (check.url !== null && env.checkLog !== undefined) log = await env.checkLog(check.url).catch(() => null);
    out.push({ check, log });
  }
  return out;
}

export async function runRepairStep(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  request: RepairRequest,
  context: { readonly config: RepoConfig; readonly checkPolicy: CheckPolicy; readonly steps: readonly StepEvent[]; readonly signal?: AbortSignal },
): Promise<RepairResult> {
  const id = newId('rpr');
  const changeId = snapshot.id;
  const head = snapshot.head.sha;
  await env.store.record(changeId, {
    type: 'repair-dispatched',
    id,
    head,
    repair: request.repair,
    automatic: request.automatic,
    reason: request.reason,
    at: env.store.now(),
  });
  let result: RepairResult;
  const module = env.repair;
  if (module === null) {
    result = { kind: 'failed', reason: 'no repair worker is available', transient: false };
  } else {
    try {
      const repoDir = await env.forge.workspace.prepare(snapshot);
      result = await module.runRepair({
        repoDir,
        publish: publisher(env, snapshot, id, repoDir),
        snapshot,
        repair: request.repair,
        reason: request.reason,
        failingChecks: request.repair === 'fix-checks' ? await failingChecks(env, snapshot, context.checkPolicy) : [],
        findings: request.repair === 'fix-findings' ? findingsFor(context.steps, head) : [],
        config: module.repairConfigFrom(context.config),
        identity: env.identity,
        agentFixConflicts: context.config.automerge?.agentFix !== undefined,
        ...(context.signal === undefined ? {} : { signal: context.signal }),
        onProgress: (line: string) => env.onProgress?.({ changeId, at: env.store.now(), text: `repair: ${line}` }),
      });
    } catch (error) {
      // No working jail for the agent or the gate: the loop ends with that error (nothing was pushed).
      if (isProofgateError(error, 'JAIL_UNAVAILABLE')) throw error;
      result = { kind: 'failed', reason: errorMessage(error), transient: false };
    }
  }
  await env.store.step(changeId, 'repair-result', {
    repair: id,
    kind: result.kind,
    ...(result.kind === 'pushed'
      ? { method: result.method, oldHead: result.oldHead, newHead: result.newHead, resolved: [...result.resolved] }
      : { reason: result.reason }),
  });
  await env.store.record(changeId, {
    type: 'repair-finished',
    id,
    result: result.kind,
    newHead: result.kind === 'pushed' ? result.newHead : null,
    commits: result.kind === 'pushed' ? [...result.commits] : [],
    at: env.store.now(),
  });
  env.observe?.({ kind: 'repair', repair: request.repair, outcome: result.kind });
  return result;
}
