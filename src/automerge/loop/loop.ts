/**
 * The automerge loop of one change: snapshot -> collectVerdicts ->
 * decideAutomerge -> act -> record, until the change merged, stopped or
 * blocked, or a wait window expired. Every judgment is made by the pure
 * functions; this file only reads, acts and records. Each action is recorded
 * in the ledger before and after it runs, so a restarted loop never repeats a
 * merge and never loses one.
 */
import { errorMessage, isProofgateError } from '../../core/index.js';
import type { LOOP_OUTCOME_KINDS } from '../../contracts/automerge-steps.js';
import { decideAutomerge, type AutomergeReasonCode, type ReviewFacts } from '../decide.js';
import { type AutomergeLedgerState } from '../ledger.js';
import { withBaseChecks } from './base-checks.js';
import { LoopCheckRuns } from './checks.js';
import { reviewFacts, type FactsCache } from './facts.js';
import { IterationReader, latestVerdict, type Iteration } from './iteration.js';
import { runManualCommands, type ManualCommand } from './manual.js';
import { forgeQueueGate, leaveForgeQueue, runForgeQueueStep, usesForgeQueue } from './forge-queue.js';
import { deleteMergedHead, finishMerged, runMergeStep } from './merge-step.js';
import { queueSettings, runQueueStep } from '../queue/step.js';
import { gateDecision, mergeSettings, policyFromConfig } from './policy.js';
import { headBehindBase, runRepairStep } from './repair-step.js';
import { runReviewStep } from './review-step.js';
import { DecisionPresenter, StatusWriter } from './status.js';
import type { ForgeComment } from '../../forge/port.js';
import type { AutomergeEnvironment } from './types.js';
import { expiredWindow, nextWindow, parkedWakeAt, parkedWindow, waitKindFor, waitSettings, type WaitWindow } from './waits.js';

export type { ManualCommand } from './manual.js';

/** `merged`, `stopped`, `blocked`, `waiting` (a wait window expired), `interrupted` (aborted) or `parked` (see `LoopOptions.park`). */
export type LoopOutcomeKind = (typeof LOOP_OUTCOME_KINDS)[number];

export interface LoopOutcome {
  readonly kind: LoopOutcomeKind;
  readonly changeId: string;
  readonly reason: string;
  /** The reason code of the decision the loop ended on, when it ended on one. */
  readonly code?: AutomergeReasonCode;
  /** The head the outcome is about (the merged head after a merge). */
  readonly head: string | null;
  readonly mergeCommit: string | null;
  /** The latest trusted verdict of the final head, or of any head when that has none. */
  readonly verdict: string | null;
  /** Repairs that pushed a new head. */
  readonly repairs: number;
  readonly state: AutomergeLedgerState;
  /** Only for `parked`: when to run the change again (ISO time: now plus the poll interval, or the window's deadline if sooner). */
  readonly wakeAt?: string;
}

/** A loop outcome as plain JSON: the fields `proofgate automerge --json` prints, and the service's API answers. Pure. */
export function outcomeJson(outcome: LoopOutcome) {
  return {
    change: outcome.changeId,
    outcome: outcome.kind,
    /** The reason code of the decision the loop ended on (null when it ended without one: interrupted, already merged). */
    code: outcome.code ?? null,
    reason: outcome.reason,
    head: outcome.head,
    mergeCommit: outcome.mergeCommit,
    verdict: outcome.verdict,
    repairs: outcome.repairs,
    timeline: outcome.state.timeline,
  };
}

export interface LoopOptions {
  readonly signal?: AbortSignal;
  /** Shared with the router so both edit the same status comment. */
  readonly writer?: StatusWriter;
  /** Commands queued by the router for this change (drained at every step). */
  readonly takeManual?: () => ManualCommand[];
  /**
   * Heads whose earlier check run was interrupted (a crash): their checks run
   * once more even though runs exist. A head is removed when its checks start.
   */
  readonly rerunChecks?: Set<string>;
  /**
   * Takes the check runs the loop started and that still run when it ends, so
   * an outcome (a stop, a block) is returned at once; without it the loop waits
   * for them before it returns.
   */
  readonly background?: (work: Promise<void>) => void;
  /**
   * Do not wait in this process (a service's worker, run again by its job
   * queue): a wait whose window is open is recorded as a `wait-parked` step
   * and the loop ends `parked` with `wakeAt`; the next run takes that window
   * back (same head and kind: same deadline). An expired window ends as it
   * does without `park`. Default false: the loop waits for an event or its
   * poll (the local CLI, `serve --repo`).
   */
  readonly park?: boolean;
  /**
   * The change's live facts kept from earlier runs (by base and head sha,
   * which they depend on alone): a parked change's next run does not read
   * git again for the head it read last time. Facts that could not be read
   * are forgotten when a run starts (they are kept within a run only).
   */
  readonly facts?: FactsCache;
}

/** Facts of a change that is no longer open (nothing is read: the decision is a stop). */
const CLOSED_FACTS: ReviewFacts = { live: { problem: 'the change is not open' }, records: {}, touchesTrusted: [], approval: null };

export async function runAutomergeLoop(env: AutomergeEnvironment, changeId: string, options: LoopOptions = {}): Promise<LoopOutcome> {
  const writer = options.writer ?? new StatusWriter(env.forge, env.secret, env.intent);
  const signal = options.signal;
  const progress = (text: string): void => env.onProgress?.({ changeId, at: env.store.now(), text });
  const reader = new IterationReader(env, changeId, progress);
  const checks = new LoopCheckRuns(env, changeId, progress, options.rerunChecks);
  const presenter = new DecisionPresenter(env, writer, changeId, progress);
  const factsCache: FactsCache = options.facts ?? new Map();
  for (const [key, facts] of factsCache) if (!facts.ok) factsCache.delete(key);
  const read = (): Promise<Iteration> => reader.read((snapshot) => writer.refresh(snapshot));
  let window: WaitWindow | null = null;
  let ended: LoopOutcomeKind | null = null;
  /** The turn that just reviewed, and its review comment: the next turn may decide on them (see below). */
  let reviewed: { readonly it: Iteration; readonly comment: ForgeComment } | null = null;

  const outcome = (
    kind: LoopOutcomeKind,
    reason: string,
    it: Iteration,
    head: string | null = it.snapshot.head.sha,
    code?: AutomergeReasonCode,
    wakeAt?: string,
  ): LoopOutcome => {
    ended = kind;
    return {
      kind,
      changeId,
      reason,
      ...(code === undefined ? {} : { code }),
      ...(wakeAt === undefined ? {} : { wakeAt }),
      head,
      mergeCommit: it.state.merged?.mergeCommit ?? null,
      verdict: latestVerdict(it.verdicts, it.state.merged?.head ?? it.snapshot.head.sha),
      repairs: it.state.repairs.filter((r) => r.status === 'pushed').length,
      state: it.state,
    };
  };

  try {
    for (;;) {
      // A refusal that no retry can cure (no working jail): end with it instead of waiting on checks that never run.
      if (checks.refused !== undefined) throw checks.refused;
      // After a review, the next turn decides on the same snapshot plus the review comment it wrote, when no event came
      // meanwhile: a review is usually followed by a wait for checks, and that needs no fresh read. Any other decision
      // made on it is made again on a fresh read (below).
      let it: Iteration = (reviewed === null ? null : await reader.reuse(reviewed.it, reviewed.comment)) ?? (await read());
      reviewed = null;
      if (signal?.aborted === true) return outcome('interrupted', 'stopped by the caller', it);
      if (await runManualCommands(env, it, options.takeManual?.() ?? [], progress, signal)) it = await read();
      const policy = policyFromConfig(it.config, env.forge.kind, it.snapshot);
      const agentFix = it.config.automerge?.agentFix !== undefined;
      // The live bindings, stored records and approvals a verdict is judged against (read only while it can merge).
      const facts = it.snapshot.state === 'open' ? await reviewFacts(env, it.snapshot, it.config, it.verdicts, factsCache) : CLOSED_FACTS;
      let proposed = decideAutomerge(it.snapshot, it.state, policy, it.verdicts, facts);
      if (proposed.code === 'checks-failed') {
        // A check that fails on the head may fail on the base as well: then the base is blocked, not the change.
        const baseProblem = async (reason: string): Promise<void> => {
          progress(`the checks of the base could not be read: ${reason}`);
          await env.store.step(changeId, 'base-checks-unavailable', { reason });
        };
        const withBase = await withBaseChecks(env, it.snapshot, it.config, policy.checks, baseProblem, signal);
        if (withBase !== it.snapshot) proposed = decideAutomerge(withBase, it.state, policy, it.verdicts, facts);
      }
      // Without an agent, failing checks can still be repaired by a rebase when the head is behind its base.
      const headBehind =
        proposed.kind === 'repair' && proposed.repair === 'fix-checks' && !agentFix && env.repair !== null ? await headBehindBase(env, it.snapshot) : false;
      const gated = gateDecision(proposed, it.state, {
        repair: env.repair !== null,
        agentFix,
        headBehindBase: headBehind,
        fork: it.snapshot.crossRepository === true,
      });
      const decision = forgeQueueGate(gated, it.snapshot, it.loaded.steps);
      if (it.reused && decision.kind !== 'wait') continue;
      if (decision.kind !== 'stop' && decision.kind !== 'block') checks.start(it);
      await presenter.show(it, decision);
      if (decision.kind !== 'wait') window = null;
      switch (decision.kind) {
        case 'stop':
          if (it.state.merged !== null) {
            await finishMerged(env, writer, it.snapshot, it.state);
            return outcome('merged', decision.reason, it, it.state.merged.head, decision.code);
          }
          // Stopped while in GitHub's merge queue: taken out of it (a change proofgate was never asked to merge is left alone).
          if (decision.code === 'stopped' && (await leaveForgeQueue(env, it.snapshot, it.loaded.steps, decision.reason))) {
            progress(`taken out of GitHub's merge queue of ${it.snapshot.base.ref}`);
          }
          if (it.state.automerge !== null) await writer.applyLabels(it.snapshot, 'stop');
          return outcome('stopped', decision.reason, it, undefined, decision.code);
        case 'block':
          return outcome('blocked', decision.reason, it, undefined, decision.code);
        case 'review': {
          progress(`reviewing ${decision.head.slice(0, 12)}`);
          const review = await runReviewStep(env, it.snapshot, signal);
          if (review.comment !== null) reviewed = { it, comment: review.comment };
          break;
        }
        case 'repair': {
          // Checks of this head may still run in their own worktrees: let them finish before the repair opens one.
          await checks.settled(decision.head);
          const result = await runRepairStep(
            env,
            it.snapshot,
            { repair: decision.repair, reason: decision.reason, automatic: true },
            { config: it.config, checkPolicy: policy.checks, steps: it.loaded.steps, ...(signal === undefined ? {} : { signal }) },
          );
          progress(result.kind === 'pushed' ? `repair (${result.method}) pushed ${result.newHead.slice(0, 12)}` : `repair ${result.kind}: ${result.reason}`);
          break;
        }
        case 'merge': {
          // Where the base requires GitHub's merge queue, the reviewed head is queued there; GitHub merges it (or lets it go).
          if (usesForgeQueue(it.snapshot, env.forge)) {
            const queued = await runForgeQueueStep(env, it.snapshot, decision.head);
            progress(
              queued.kind === 'queued'
                ? `put ${decision.head.slice(0, 12)} in GitHub's merge queue of ${it.snapshot.base.ref}`
                : `GitHub's merge queue refused ${decision.head.slice(0, 12)} (${queued.code}): ${queued.reason}`,
            );
            break;
          }
          // Where the forge has a merge queue of proofgate's own and the base's config turns it on, a ready change lands through it.
          if (env.forge.mergeQueue !== undefined && queueSettings(it.config, env.forge.kind).enabled) {
            const queued = await runQueueStep(env, it.snapshot, decision.head, it.config, {
              writer,
              timeline: () => it.state.timeline,
              progress,
              approvedTrusted: facts.approval === null ? [] : facts.touchesTrusted,
              ...(signal === undefined ? {} : { signal }),
            });
            if (queued.kind === 'merged') {
              progress(`merged ${decision.head.slice(0, 12)} as ${queued.mergeCommit.slice(0, 12)} (merge queue)`);
              await deleteMergedHead(env, it.snapshot, decision.head, mergeSettings(it.config));
              await finishMerged(env, writer, it.snapshot, queued.state);
              return outcome('merged', decision.reason, { ...it, state: queued.state }, decision.head, decision.code);
            }
            if (queued.kind === 'interrupted') return outcome('interrupted', 'stopped by the caller', it);
            if (queued.kind === 'blocked') {
              await presenter.show(it, queued.decision);
              return outcome('blocked', queued.decision.reason, it, undefined, queued.decision.code);
            }
            progress(`left the merge queue (${queued.code}): ${queued.reason}`);
            break;
          }
          const merged = await runMergeStep(env, it.snapshot, decision.head, it.config);
          if (merged.kind === 'merged') {
            progress(`merged ${decision.head.slice(0, 12)} as ${merged.mergeCommit.slice(0, 12)}`);
            await finishMerged(env, writer, it.snapshot, merged.state);
            return outcome('merged', decision.reason, { ...it, state: merged.state }, decision.head, decision.code);
          }
          progress(`merge refused (${merged.code}): ${merged.reason}`);
          break;
        }
        case 'wait': {
          const head = it.snapshot.head.sha;
          const now = env.clock.now().getTime();
          // A parked run's window lives in the ledger: the first wait of a run takes it back from there.
          const open = window ?? (options.park === true ? parkedWindow(it.loaded.steps) : null);
          window = nextWindow(open, waitKindFor(it.state, head, decision.code), head, now, waitSettings(it.config.automerge, env.waits));
          if (now >= window.deadline) {
            await env.store.step(changeId, 'wait-expired', { window: window.kind, reason: decision.reason });
            const end = expiredWindow(window, decision);
            if (end.kind === 'waiting') return outcome('waiting', end.reason, it, undefined, decision.code);
            await presenter.show(it, end.decision);
            return outcome('blocked', end.decision.reason, it, undefined, decision.code);
          }
          if (options.park === true) {
            // An event that arrived since this turn's read: look again rather than park past it.
            if (env.signals.take(changeId)) break;
            const wakeAt = new Date(parkedWakeAt(window, now)).toISOString();
            await env.store.step(changeId, 'wait-parked', {
              window: window.kind,
              head,
              openedAt: new Date(window.openedAt).toISOString(),
              deadline: new Date(window.deadline).toISOString(),
              pollMs: window.pollMs,
              wakeAt,
              reason: decision.reason,
            });
            progress(`parked until ${wakeAt} (${window.kind} wait window open until ${new Date(window.deadline).toISOString()})`);
            return outcome('parked', decision.reason, it, undefined, decision.code, wakeAt);
          }
          // An event (a check finishing, a push, a comment) wakes the loop at once; the poll is the fallback.
          const woke = await env.signals.wait(changeId, Math.min(window.pollMs, window.deadline - now), signal);
          if (woke === 'aborted') return outcome('interrupted', 'stopped by the caller', it);
          break;
        }
      }
    }
  } catch (error) {
    if (isProofgateError(error, 'CONFIG')) {
      await env.store.step(changeId, 'config-invalid', { reason: errorMessage(error) }).catch(() => undefined);
    }
    throw error;
  } finally {
    // A stopped or interrupted loop needs no check result: its running checks are cancelled (a cancelled run runs again).
    await checks.end(ended === 'stopped' || ended === 'interrupted', options.background);
  }
}
