import { ProofgateError, errorMessage, isProofgateError } from '../../core/index.js';
import { runAgentFix, type AgentFixResult } from './agent-fix.js';
import { validateRepairConfig } from './config.js';
import { boundGateOutput, buildAgentContext, makeRedactor, type AgentWorktreeFacts, type ValidationFacts } from './context-file.js';
import { runGate, type GateFailure, type GateResult } from './gate.js';
import { hasCommit, isAncestor } from '../../host/index.js';
import { mergeWithMarkers, repairGit, repairGitText } from './git.js';
import { replayOnto, type ReplayResult, type ResolvedFile } from './rebase.js';
import type { RepairContext, RepairOutcome } from './types.js';
import { openRepairWorktree } from './worktree.js';

/**
 * One repair of one change, start to end: check the inputs, rebase onto the
 * base in a disposable worktree when the head is behind (mechanical resolvers
 * only; the worktree is removed before anything untrusted runs), run the
 * agent-fix command and the gate, each jailed on an export of the exact
 * commit, when the repair calls for them, and publish the result with ONE
 * compare-and-swap push of the change's head branch. When the gate fails and
 * an agent is configured, the agent gets the gate's output for one validation
 * pass on top of the commit that failed, and the gate judges the new tip; all
 * of it is one repair (one spend of the repair caps).
 */

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/** How many times a failed gate goes back to the agent within one repair ("once"). */
export const VALIDATION_PASSES = 1;

function short(sha: string): string {
  return sha.slice(0, 12);
}

function failed(reason: string, transient: boolean): RepairOutcome {
  return { kind: 'failed', reason, transient };
}

function noChange(reason: string, conflicts: readonly string[] = []): RepairOutcome {
  return { kind: 'no-change', reason, conflicts };
}

function validateContext(context: RepairContext): void {
  const bad = (why: string) => new ProofgateError('INVALID_INPUT', `repair context: ${why}`);
  if (!['rebase', 'fix-checks', 'fix-findings'].includes(context.repair)) throw bad(`unknown repair kind ${JSON.stringify(context.repair)}`);
  if (!SHA.test(context.snapshot.head.sha) || !SHA.test(context.snapshot.base.sha)) throw bad('head and base shas must be full lowercase hex');
  if (context.snapshot.head.ref.trim() === '') throw bad('the change has no head branch');
  if (context.identity.name.trim() === '' || !/^[^\s<>]+@[^\s<>]+$/.test(context.identity.email)) throw bad('identity needs a name and an email');
  validateRepairConfig(context.config);
}

class RepairRun {
  readonly #context: RepairContext;
  readonly #redact: (text: string) => string;
  #pushes = 0;

  constructor(context: RepairContext) {
    this.#context = context;
    this.#redact = makeRedactor(context.knownSecrets);
  }

  #progress(line: string): void {
    this.#context.onProgress?.(line);
  }

  get #head(): string {
    return this.#context.snapshot.head.sha;
  }

  get #base(): string {
    return this.#context.snapshot.base.sha;
  }

  async execute(): Promise<RepairOutcome> {
    const { snapshot, repoDir, config, repair } = this.#context;
    if (this.#context.signal?.aborted === true) return failed('the repair was aborted before it started', true);
    if (snapshot.state !== 'open') return failed(`change ${snapshot.id} is ${snapshot.state}; only open changes are repaired`, false);
    for (const [what, sha] of [
      ['head', this.#head],
      ['base', this.#base],
    ] as const) {
      if (!(await hasCommit(repoDir, sha))) return failed(`the ${what} commit ${short(sha)} is not in ${repoDir}; fetch it before repairing`, false);
    }
    const behind = !(await isAncestor(repoDir, this.#base, this.#head));
    if (repair === 'rebase' && !behind) return noChange(`head ${short(this.#head)} already contains ${snapshot.base.ref} (${short(this.#base)})`);
    if (repair !== 'rebase') {
      if (config.agentFix !== null && config.gate === null)
        return failed('agent-fix is configured without a gate: set automerge.gate, agent-made changes are never pushed ungated', false);
      // Without an agent, only a rebase can help, and only with checks (the base may have fixed them); findings need an edit.
      if (config.agentFix === null && (!behind || repair === 'fix-findings')) {
        return noChange(
          `no agent-fix command is configured (automerge.agentFix) to ${repair === 'fix-checks' ? 'fix the failing checks' : 'address the findings'}`,
        );
      }
    }
    let replay: ReplayResult | null = null;
    if (behind) {
      // The replay is proofgate's own git work: a disposable worktree, removed before anything untrusted runs.
      const ws = await openRepairWorktree(repoDir, this.#head);
      try {
        this.#progress(`worktree at ${short(this.#head)} (${snapshot.head.ref})`);
        replay = await replayOnto(ws, {
          base: this.#base,
          head: this.#head,
          identity: this.#context.identity,
          signal: this.#context.signal,
          onProgress: (line) => this.#progress(line),
        });
      } finally {
        await ws.dispose();
      }
      if (replay.kind === 'replayed' && replay.commits.length === 0)
        return noChange(`every commit of the change is already in ${snapshot.base.ref} (${short(this.#base)})`);
    }
    return this.#repairAfter(replay);
  }

  async #repairAfter(replay: ReplayResult | null): Promise<RepairOutcome> {
    const { config, repair, snapshot, repoDir } = this.#context;
    const replayed = replay?.kind === 'replayed' ? replay : null;
    const conflict = replay?.kind === 'conflict' ? replay : null;
    const resolutions = replayed?.resolved ?? [];
    if (conflict !== null) this.#progress(`rebase stopped at ${short(conflict.commit)}: ${conflict.reason}`);
    const stopped = () =>
      noChange(
        this.#redact(`rebase onto ${snapshot.base.ref} (${short(this.#base)}) stopped at ${short(conflict?.commit ?? '')}: ${conflict?.reason ?? ''}`),
        conflict?.paths ?? [],
      );

    if (repair === 'rebase') {
      if (replayed !== null) return this.#publish(replayed.tip, 'rebase', resolutions, false);
      if (this.#context.agentFixConflicts !== true || config.agentFix === null || config.gate === null) return stopped();
    }
    if (config.agentFix === null) {
      // fix-checks without an agent: the rebase alone is the repair.
      if (replayed === null) return stopped();
      return this.#gateThenPublish(replayed.tip, 'rebase', resolutions, null);
    }
    // The agent starts from the rebased tip, or from the exact head when the rebase could not finish. A conflict
    // handed over by a rebase becomes a merge of the base into the head: the agent gets git's merge of the two,
    // conflict markers included, and its result is committed with both as parents.
    const start = replayed?.tip ?? this.#head;
    const merging = repair === 'rebase';
    const facts: AgentWorktreeFacts = {
      startSha: start,
      rebasedOnto: replayed === null ? null : this.#base,
      rebaseConflict: conflict,
      mustDescendFrom: merging ? this.#base : start,
    };
    const treeOf = merging ? await mergeWithMarkers(repoDir, this.#head, this.#base, this.#context.identity) : start;
    this.#progress(`agent-fix: ${config.agentFix.command.join(' ')} (limit ${config.agentFix.timeoutSeconds}s)`);
    const agent = await this.#runAgent({
      treeOf,
      parents: merging ? [this.#head, this.#base] : [start],
      facts,
      validation: null,
      commitMessage: `proofgate agent-fix: ${repair} for change ${snapshot.id}\n\n${this.#redact(this.#context.reason).slice(0, 4000)}\n`,
    });
    if (agent.kind === 'failed') return failed(agent.reason, agent.transient);
    if (agent.kind === 'unchanged') {
      // Review findings are about the change's content: a rebase alone does not answer them.
      if (replayed === null || repair === 'fix-findings') return noChange('agent-fix made no change');
      this.#progress('agent-fix made no change; the rebase alone is the repair');
      return this.#gateThenPublish(replayed.tip, 'rebase', resolutions, facts);
    }
    this.#progress(
      `agent-fix changed files${agent.sandbox === 'none' ? ' (ran unjailed: sandbox: none)' : ''}; proofgate committed them as ${short(agent.tip)}`,
    );
    const emptied = await this.#emptied(agent.tip, 'agent-fix');
    if (emptied !== null) return emptied;
    return this.#gateThenPublish(agent.tip, 'agent-fix', resolutions, facts);
  }

  /** The agent-fix command, jailed, on an export of `treeOf`; its refused paths become progress lines. Every pass runs through here: same jail, limits and environment. */
  async #runAgent(pass: {
    treeOf: string;
    parents: readonly string[];
    facts: AgentWorktreeFacts;
    validation: ValidationFacts | null;
    commitMessage: string;
  }): Promise<AgentFixResult> {
    const { config, repair, snapshot, repoDir } = this.#context;
    if (config.agentFix === null) throw new ProofgateError('INTERNAL', 'agent-fix run without an agent-fix command');
    const result = await runAgentFix({
      repoDir,
      command: config.agentFix.command,
      timeoutSeconds: config.agentFix.timeoutSeconds,
      maxOutputBytes: config.maxOutputBytes,
      sandbox: config.sandbox ?? 'jail',
      cacheDir: config.cacheDir,
      network: config.agentFix.network === true,
      passEnv: config.agentFix.env ?? [],
      treeOf: pass.treeOf,
      parents: pass.parents,
      context: buildAgentContext(this.#context, pass.facts, this.#redact, pass.validation),
      gateOutput: pass.validation?.output.text,
      env: {
        PROOFGATE_REPAIR_KIND: repair,
        PROOFGATE_CHANGE_ID: snapshot.id,
        PROOFGATE_BASE_SHA: this.#base,
        PROOFGATE_HEAD_SHA: this.#head,
        PROOFGATE_START_SHA: pass.facts.startSha,
      },
      identity: this.#context.identity,
      commitMessage: pass.commitMessage,
      redact: this.#redact,
      signal: this.#context.signal,
    });
    if (result.kind !== 'failed')
      for (const refused of result.refused) this.#progress(this.#redact(`agent-fix result: left out ${JSON.stringify(refused.path)}: ${refused.reason}`));
    return result;
  }

  /** `failed` when the agent's result has no difference from the base (nothing left to merge), else null. */
  async #emptied(tip: string, what: string): Promise<RepairOutcome | null> {
    const diff = await repairGit(this.#context.repoDir, ['diff', '--quiet', '--no-ext-diff', '--no-textconv', this.#base, tip], { okExitCodes: [1] });
    return diff.exitCode === 0 ? failed(`after ${what} the change has no difference from ${this.#context.snapshot.base.ref}; nothing pushed`, false) : null;
  }

  async #gate(tip: string): Promise<GateResult> {
    const { config } = this.#context;
    const command = config.gate ?? [];
    this.#progress(`gate: ${command.join(' ')} (limit ${config.timeoutSeconds}s)`);
    const gate = await runGate({
      repoDir: this.#context.repoDir,
      sha: tip,
      command,
      timeoutSeconds: config.timeoutSeconds,
      maxOutputBytes: config.maxOutputBytes,
      sandbox: config.sandbox ?? 'jail',
      cacheDir: config.cacheDir,
      env: { CI: 'true', PROOFGATE_REPAIR_KIND: this.#context.repair, PROOFGATE_HEAD_SHA: tip },
      redact: this.#redact,
      signal: this.#context.signal,
    });
    if (gate.passed)
      this.#progress(
        `gate passed on ${short(tip)} in ${(gate.durationMs / 1000).toFixed(1)}s${gate.sandbox === 'none' ? ' (ran unjailed: sandbox: none)' : ''}`,
      );
    return gate;
  }

  /**
   * Gate `tip` and publish it when the gate passes. When it fails in a way the
   * agent can answer (an exit code or a signal: not an abort, a timeout or a
   * failed start) and an agent is configured, the gate's output goes back to
   * the agent for a validation pass on top of `tip`, at most
   * VALIDATION_PASSES times; the gate then judges the new tip. That holds
   * after the agent's commit and after a rebase the agent had nothing to add
   * to; a gated rebase with no agent configured has no one to hand it to, and
   * its gate failure stands.
   */
  async #gateThenPublish(
    tip: string,
    method: 'rebase' | 'agent-fix',
    resolutions: readonly ResolvedFile[],
    facts: AgentWorktreeFacts | null,
  ): Promise<RepairOutcome> {
    const { config } = this.#context;
    if (config.gate === null) return this.#publish(tip, method, resolutions, false);
    let current = { tip, method };
    let gate = await this.#gate(tip);
    for (let pass = 1; !gate.passed; pass += 1) {
      const another = pass <= VALIDATION_PASSES && config.agentFix !== null && facts !== null && gate.output !== null;
      if (pass > 1)
        this.#progress(
          `gate failed again on ${short(current.tip)} (${gate.ended}) after validation pass ${pass - 1}${another ? '' : '; the repair failed, nothing pushed'}`,
        );
      if (!another) {
        const story = pass > 1 ? `the gate failed again after agent-fix's validation pass, on ${short(current.tip)}: ` : '';
        return failed(`${story}${gate.reason}; nothing pushed`, gate.transient);
      }
      const next = await this.#validationPass(current.tip, gate, pass, facts);
      if (next.kind !== 'changed') return next.outcome;
      current = { tip: next.tip, method: 'agent-fix' };
      gate = await this.#gate(current.tip);
    }
    return this.#publish(current.tip, current.method, resolutions, true);
  }

  /** One validation pass: the agent gets the failed gate's output and starts from the commit the gate failed on. */
  async #validationPass(
    failedTip: string,
    gate: GateFailure,
    pass: number,
    first: AgentWorktreeFacts,
  ): Promise<{ kind: 'changed'; tip: string } | { kind: 'stop'; outcome: RepairOutcome }> {
    const { config, repair, snapshot } = this.#context;
    const stop = (outcome: RepairOutcome) => ({ kind: 'stop' as const, outcome });
    const output = boundGateOutput(gate.output ?? { text: '', cut: false });
    if (this.#context.signal?.aborted === true) return stop(failed('the repair was aborted before the validation pass; nothing pushed', true));
    const more = VALIDATION_PASSES - pass + 1;
    this.#progress(
      `gate failed on ${short(failedTip)} (${gate.ended}); agent-fix gets ${more} more pass${more === 1 ? '' : 'es'} with the gate's output (${output.bytes} bytes${output.truncated ? ', the tail' : ''})`,
    );
    this.#progress(
      `agent-fix validation pass ${pass} of ${VALIDATION_PASSES}: ${config.agentFix?.command.join(' ') ?? ''} (limit ${config.agentFix?.timeoutSeconds ?? 0}s)`,
    );
    const agent = await this.#runAgent({
      treeOf: failedTip,
      parents: [failedTip],
      facts: { startSha: failedTip, rebasedOnto: first.rebasedOnto, rebaseConflict: null, mustDescendFrom: failedTip },
      validation: { pass, passes: VALIDATION_PASSES, failedSha: failedTip, gateCommand: config.gate ?? [], ended: gate.ended, output },
      commitMessage: `proofgate agent-fix: ${repair} for change ${snapshot.id} (validation pass ${pass})\n\nThe gate failed on ${short(failedTip)} (${gate.ended}); this pass answers its output.\n`,
    });
    const gateFailed = `the gate failed on ${short(failedTip)}: ${gate.reason}; nothing pushed`;
    if (agent.kind === 'failed') {
      this.#progress(`validation pass failed: ${agent.reason}; the repair failed, nothing pushed`);
      return stop(failed(`agent-fix's validation pass failed (${agent.reason}) after ${gateFailed}`, agent.transient));
    }
    if (agent.kind === 'unchanged') {
      this.#progress('validation pass made no change; the repair failed, nothing pushed');
      return stop(failed(`agent-fix's validation pass made no change after ${gateFailed}`, false));
    }
    this.#progress(
      `validation pass changed files${agent.sandbox === 'none' ? ' (ran unjailed: sandbox: none)' : ''}; proofgate committed them as ${short(agent.tip)}`,
    );
    const emptied = await this.#emptied(agent.tip, 'the validation pass');
    if (emptied !== null) return stop(emptied);
    return { kind: 'changed', tip: agent.tip };
  }

  async #publish(tip: string, method: 'rebase' | 'agent-fix', resolutions: readonly ResolvedFile[], gated: boolean): Promise<RepairOutcome> {
    const { snapshot } = this.#context;
    // Publishing is one compare-and-swap, by the caller's `publish` (the loop's: the forge's change workspace).
    // The hard per-call guard: whatever the path, one runRepair call pushes at most once.
    if (this.#pushes > 0) throw new ProofgateError('INTERNAL', 'a repair call pushes at most once');
    if (this.#context.signal?.aborted === true) return failed('the repair was aborted before the push; nothing pushed', true);
    this.#pushes += 1;
    const listing = await repairGitText(this.#context.repoDir, ['rev-list', '--reverse', tip, `^${this.#head}`, `^${this.#base}`]);
    const commits = listing.split('\n').filter((line) => line !== '');
    try {
      const request = { branch: snapshot.head.ref, newSha: tip, expectedOldSha: this.#head };
      await this.#context.publish(request);
    } catch (error) {
      if (isProofgateError(error, 'HEAD_MOVED')) {
        return failed(`${snapshot.head.ref} moved away from ${short(this.#head)} during the repair; nothing pushed`, true);
      }
      const transient = isProofgateError(error) && ['FORGE_API', 'IO', 'TIMEOUT'].includes(error.code);
      return failed(this.#redact(`push of ${short(tip)} to ${snapshot.head.ref} failed: ${errorMessage(error)}`), transient);
    }
    this.#progress(`pushed ${snapshot.head.ref}: ${short(this.#head)} -> ${short(tip)}`);
    return {
      kind: 'pushed',
      method,
      oldHead: this.#head,
      newHead: tip,
      commits,
      resolved: [...new Set(resolutions.map((file) => file.path))],
      resolutions,
      gated,
    };
  }
}

/**
 * Repair one change as decided; see docs/automerge.md, section "Repair".
 * Throws JAIL_UNAVAILABLE when the agent or the gate must run jailed and the
 * jail does not work here (nothing pushed); other errors are a `failed` outcome.
 */
export async function runRepair(context: RepairContext): Promise<RepairOutcome> {
  validateContext(context);
  try {
    return await new RepairRun(context).execute();
  } catch (error) {
    if (isProofgateError(error, 'ABORTED')) return failed('the repair was aborted; nothing pushed', true);
    // No working jail is the machine's problem, not this repair's: it stops the caller with that one error.
    if (isProofgateError(error, 'INTERNAL') || isProofgateError(error, 'JAIL_UNAVAILABLE')) throw error;
    return failed(makeRedactor(context.knownSecrets)(`repair failed: ${errorMessage(error)}`), false);
  }
}
