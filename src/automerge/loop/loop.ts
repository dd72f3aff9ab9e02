/**
 * The automerge loop of one change: snapshot -> collectVerdicts ->
 * decideAutomerge -> act -> record, until the change merged, stopped or
 * blocked, or a wait window expired. Every judgment is made by the pure
 * functions; this file only reads, acts and records. Each action is recorded
 * in the ledger before and after it runs, so a restarted loop never repeats a
 * merge and never loses one.
 */
import { errorMessage, isProofgateError, newId } from '../../core/index.js';
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import { decideAutomerge, type AutomergeDecision, type AutomergeReasonCode, type ReviewFacts } from '../decide.js';
import { type AutomergeLedgerState } from '../ledger.js';
import { collectVerdicts, type TrustedVerdict } from '../markers.js';
import { renderStatusComment } from '../status-comment.js';
import { withBaseChecks } from './base-checks.js';
import type { LoadedLedger } from './ledger-store.js';
import { finishMerged, runMergeStep } from './merge-step.js';
import { reviewFacts, type FactsCache } from './facts.js';
import { gateDecision, policyFromConfig, trustedConfig, withoutCancelledRuns } from './policy.js';
import { headBehindBase, runRepairStep } from './repair-step.js';
import { runReviewStep } from './review-step.js';
import { StatusWriter } from './status.js';
import type { AutomergeEnvironment } from './types.js';
import { nextWindow, waitKindFor, waitSettings, type WaitWindow } from './waits.js';

export type LoopOutcomeKind = 'merged' | 'stopped' | 'blocked' | 'waiting' | 'interrupted';

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
}

/** A command a human gave that the loop performs between its own steps. */
export type ManualCommand = { readonly kind: 'review'; readonly actor: string } | { readonly kind: 'rebase'; readonly actor: string };

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
}

/** Facts of a change that is no longer open (nothing is read: the decision is a stop). */
const CLOSED_FACTS: ReviewFacts = { live: { problem: 'the change is not open' }, records: {}, touchesTrusted: [], approval: null };

function latestVerdict(verdicts: readonly TrustedVerdict[], head: string): string | null {
  const forHead = verdicts.filter((v) => v.fields.head === head);
  const pick = forHead[forHead.length - 1] ?? verdicts[verdicts.length - 1];
  return pick?.fields.verdict ?? null;
}

interface Iteration {
  readonly snapshot: ChangeSnapshot;
  readonly config: RepoConfig;
  readonly loaded: LoadedLedger;
  readonly state: AutomergeLedgerState;
  readonly verdicts: readonly TrustedVerdict[];
}

export async function runAutomergeLoop(env: AutomergeEnvironment, changeId: string, options: LoopOptions = {}): Promise<LoopOutcome> {
  const writer = options.writer ?? new StatusWriter(env.forge, env.secret, env.intent);
  const signal = options.signal;
  const checkRuns = new Map<string, Promise<void>>();
  // Cancels the check runs this loop started (when it ends as stopped).
  const cancelChecks = new AbortController();
  const runningHeads = new Set<string>();
  /** A refusal that no retry can cure (no working jail): the loop ends with it instead of waiting on checks that never run. */
  let refused: unknown;
  let ended: LoopOutcomeKind | null = null;
  const seenRejected = new Set<string>();
  const configs = new Map<string, RepoConfig>();
  const factsCache: FactsCache = new Map();
  let window: WaitWindow | null = null;
  let lastKey = '';
  const progress = (text: string): void => env.onProgress?.({ changeId, at: env.store.now(), text });

  const outcome = (
    kind: LoopOutcomeKind,
    reason: string,
    it: Iteration,
    head: string | null = it.snapshot.head.sha,
    code?: AutomergeReasonCode,
  ): LoopOutcome => ({
    kind,
    changeId,
    reason,
    ...(code === undefined ? {} : { code }),
    head,
    mergeCommit: it.state.merged?.mergeCommit ?? null,
    verdict: latestVerdict(it.verdicts, it.state.merged?.head ?? it.snapshot.head.sha),
    repairs: it.state.repairs.filter((r) => r.status === 'pushed').length,
    state: it.state,
  });

  async function read(): Promise<Iteration> {
    env.signals.clear(changeId);
    const current = await env.forge.snapshot(changeId);
    // Checks this process runs itself: a run a stop cancelled is run again rather than read as a failure.
    const snapshot = env.startChecks === undefined ? current : withoutCancelledRuns(current);
    writer.refresh(snapshot);
    // The trusted config is bound to the base sha: read it once per base.
    const config = configs.get(snapshot.base.sha) ?? (await trustedConfig(env.forge, snapshot));
    configs.set(snapshot.base.sha, config);
    const loaded = await env.store.load(changeId);
    const { verdicts, rejected } = collectVerdicts(snapshot.comments, { selfLogin: env.forge.selfLogin, secret: env.secret, changeId });
    for (const marker of rejected) {
      const key = `${marker.commentId}#${marker.index}`;
      if (seenRejected.has(key)) continue;
      seenRejected.add(key);
      progress(`ignored a marker in comment ${marker.commentId}: ${marker.reason} (${marker.detail})`);
      await env.store.step(changeId, 'marker-rejected', { comment: marker.commentId, reason: marker.reason, detail: marker.detail });
    }
    let state = loaded.state;
    // A merge this loop attempted may have landed right before a crash: the forge knows, the ledger catches up.
    const attempted = loaded.typedSteps.some((step) => step.step === 'merge-attempt' && step.head === snapshot.head.sha);
    if (snapshot.state === 'merged' && state.merged === null && snapshot.mergeCommitSha !== null && attempted) {
      state = await env.store.record(changeId, {
        type: 'merged',
        id: `recovered-${snapshot.mergeCommitSha}`,
        head: snapshot.head.sha,
        mergeCommit: snapshot.mergeCommitSha,
        at: env.store.now(),
      });
    }
    return { snapshot, config, loaded, state, verdicts };
  }

  async function runManual(it: Iteration): Promise<boolean> {
    const commands = options.takeManual?.() ?? [];
    for (const command of commands) {
      if (it.snapshot.state !== 'open') break;
      if (command.kind === 'review') {
        progress(`review of ${it.snapshot.head.sha.slice(0, 12)} asked by ${command.actor}`);
        await runReviewStep(env, it.snapshot, signal);
      } else {
        progress(`rebase asked by ${command.actor}`);
        const policy = policyFromConfig(it.config, env.forge.kind);
        await runRepairStep(
          env,
          it.snapshot,
          { repair: 'rebase', reason: `rebase asked by ${command.actor}`, automatic: false },
          { config: it.config, checkPolicy: policy.checks, steps: it.loaded.steps, ...(signal === undefined ? {} : { signal }) },
        );
      }
    }
    return commands.length > 0;
  }

  function startChecks(it: Iteration): void {
    const head = it.snapshot.head.sha;
    if (env.startChecks === undefined || it.config.checks.length === 0 || it.snapshot.state !== 'open') return;
    if (checkRuns.has(head)) return;
    const rerun = options.rerunChecks?.has(head) === true;
    // Run when a configured check has no run on this head (none yet, or its run was cancelled).
    const onHead = it.snapshot.checks.filter((check) => check.headSha === head);
    if (!rerun && it.config.checks.every((configured) => onHead.some((check) => check.name === configured.name))) return;
    options.rerunChecks?.delete(head);
    progress(`${rerun ? 'running again (the earlier run was interrupted)' : 'running'} ${it.config.checks.length} check(s) on ${head.slice(0, 12)}`);
    const startChecks = env.startChecks;
    // `checks-started` / `checks-finished` steps let a restarted job see a run that a crash cut short.
    runningHeads.add(head);
    const run = env.store
      .step(changeId, 'checks-started', { head })
      .then(() => startChecks(changeId, head, cancelChecks.signal))
      .then(() => env.store.step(changeId, 'checks-finished', { head }))
      .catch(async (error: unknown) => {
        if (isProofgateError(error, 'JAIL_UNAVAILABLE')) refused ??= error;
        progress(`checks on ${head.slice(0, 12)} could not run: ${errorMessage(error)}`);
        await env.store.step(changeId, 'checks-failed-to-run', { head, reason: errorMessage(error) }).catch(() => undefined);
        await env.store.step(changeId, 'checks-finished', { head }).catch(() => undefined);
      })
      .finally(() => {
        runningHeads.delete(head);
        env.signals.notify(changeId);
      });
    checkRuns.set(head, run);
  }

  async function baseProblem(reason: string): Promise<void> {
    progress(`the checks of the base could not be read: ${reason}`);
    await env.store.step(changeId, 'base-checks-unavailable', { reason });
  }

  async function show(it: Iteration, decision: AutomergeDecision): Promise<void> {
    const key = `${decision.kind}|${decision.reason}|${it.snapshot.head.sha}`;
    if (key === lastKey) return;
    lastKey = key;
    progress(`${decision.kind}: ${decision.reason}`);
    await env.store.step(changeId, 'decision', { kind: decision.kind, code: decision.code, reason: decision.reason, head: it.snapshot.head.sha });
    if (decision.kind === 'stop' && (it.state.automerge === null || it.state.merged !== null)) return;
    if (decision.kind === 'merge') {
      await writer.applyLabels(it.snapshot, 'merge');
      return;
    }
    let state = it.state;
    if (decision.kind === 'block' || decision.kind === 'stop' || decision.kind === 'wait') {
      state = await env.store.record(changeId, { type: 'note', id: newId('note'), text: `${decision.kind}: ${decision.reason}`, at: env.store.now() });
    }
    await writer.writeComment(
      it.snapshot,
      renderStatusComment({ changeId, intent: writer.intent, head: it.snapshot.head.sha, decision, timeline: state.timeline }, env.secret),
    );
    await writer.applyLabels(it.snapshot, decision.kind);
  }

  const finish = (result: LoopOutcome): LoopOutcome => {
    ended = result.kind;
    return result;
  };

  try {
    for (;;) {
      if (refused !== undefined) throw refused;
      let it = await read();
      if (signal?.aborted === true) return outcome('interrupted', 'stopped by the caller', it);
      if (await runManual(it)) it = await read();
      const policy = policyFromConfig(it.config, env.forge.kind);
      const agentFix = it.config.automerge?.agentFix !== undefined;
      // The live bindings, stored records and approvals a verdict is judged against (read only while it can merge).
      const facts = it.snapshot.state === 'open' ? await reviewFacts(env, it.snapshot, it.config, it.verdicts, factsCache) : CLOSED_FACTS;
      let proposed = decideAutomerge(it.snapshot, it.state, policy, it.verdicts, facts);
      if (proposed.code === 'checks-failed') {
        // A check that fails on the head may fail on the base as well: then the base is blocked, not the change.
        const withBase = await withBaseChecks(env, it.snapshot, it.config, policy.checks, baseProblem, signal);
        if (withBase !== it.snapshot) proposed = decideAutomerge(withBase, it.state, policy, it.verdicts, facts);
      }
      // Without an agent, failing checks can still be repaired by a rebase when the head is behind its base.
      const headBehind =
        proposed.kind === 'repair' && proposed.repair === 'fix-checks' && !agentFix && env.repair !== null ? await headBehindBase(env, it.snapshot) : false;
      const decision = gateDecision(proposed, it.state, { repair: env.repair !== null, agentFix, headBehindBase: headBehind });
      if (decision.kind !== 'stop' && decision.kind !== 'block') startChecks(it);
      await show(it, decision);
      if (decision.kind !== 'wait') window = null;
      switch (decision.kind) {
        case 'stop':
          if (it.state.merged !== null) {
            await finishMerged(env, writer, it.snapshot, it.state);
            return outcome('merged', decision.reason, it, it.state.merged.head, decision.code);
          }
          if (it.state.automerge !== null) await writer.applyLabels(it.snapshot, 'stop');
          return finish(outcome('stopped', decision.reason, it, undefined, decision.code));
        case 'block':
          return outcome('blocked', decision.reason, it, undefined, decision.code);
        case 'review':
          progress(`reviewing ${decision.head.slice(0, 12)}`);
          await runReviewStep(env, it.snapshot, signal);
          break;
        case 'repair': {
          // Checks of this head may still run in their own worktrees: let them finish before the repair opens one.
          await checkRuns.get(decision.head);
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
          const merged = await runMergeStep(env, it.snapshot, decision.head);
          if (merged.kind === 'merged') {
            progress(`merged ${decision.head.slice(0, 12)} as ${merged.mergeCommit.slice(0, 12)}`);
            await finishMerged(env, writer, it.snapshot, merged.state);
            return outcome('merged', decision.reason, { ...it, state: merged.state }, decision.head, decision.code);
          }
          progress(`merge refused (${merged.code}): ${merged.reason}`);
          break;
        }
        case 'wait': {
          const now = env.clock.now().getTime();
          window = nextWindow(
            window,
            waitKindFor(it.state, it.snapshot.head.sha, decision.code),
            it.snapshot.head.sha,
            now,
            waitSettings(it.config.automerge, env.waits),
          );
          if (now >= window.deadline) {
            const reason = `${window.kind} wait window of ${window.deadline - window.openedAt} ms expired: ${decision.reason}`;
            await env.store.step(changeId, 'wait-expired', { window: window.kind, reason: decision.reason });
            // Only a person can give a missing approval: the change is blocked until one does (the approval restarts it).
            if (window.kind === 'review') {
              const blocked: AutomergeDecision = {
                kind: 'block',
                code: decision.code,
                reason: `no required approval within the ${window.deadline - window.openedAt} ms review window: ${decision.reason}`,
              };
              await show(it, blocked);
              return outcome('blocked', blocked.reason, it, undefined, decision.code);
            }
            return outcome('waiting', reason, it, undefined, decision.code);
          }
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
    // A stopped change needs no check result: cut its runs short (they are recorded as cancelled).
    if (ended === 'stopped' && runningHeads.size > 0) {
      progress(`cancelling the checks running on ${[...runningHeads].map((head) => head.slice(0, 12)).join(', ')}`);
      cancelChecks.abort();
    }
    if (options.background === undefined) await Promise.allSettled([...checkRuns.values()]);
    else for (const run of checkRuns.values()) options.background(run);
  }
}
