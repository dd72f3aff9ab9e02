import { ProofgateError, errorMessage, isProofgateError } from '../../core/index.js';
import { runAgentFix } from './agent-fix.js';
import { validateRepairConfig } from './config.js';
import { buildAgentContext, makeRedactor } from './context-file.js';
import { runGate } from './gate.js';
import { hasCommit, isAncestor, mergeWithMarkers, repairGit, repairGitText } from './git.js';
import { replayOnto, type ReplayResult, type ResolvedFile } from './rebase.js';
import type { RepairContext, RepairOutcome } from './types.js';
import { openWorkspace } from './workspace.js';

/**
 * One repair of one change, start to end: check the inputs, rebase onto the
 * base in a disposable worktree when the head is behind (mechanical resolvers
 * only; the worktree is removed before anything untrusted runs), run the
 * agent-fix command and the gate, each jailed on an export of the exact
 * commit, when the repair calls for them, and publish the result with ONE
 * compare-and-swap push of the change's head branch.
 */

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

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
    for (const [what, sha] of [['head', this.#head], ['base', this.#base]] as const) {
      if (!(await hasCommit(repoDir, sha))) return failed(`the ${what} commit ${short(sha)} is not in ${repoDir}; fetch it before repairing`, false);
    }
    const behind = !(await isAncestor(repoDir, this.#base, this.#head));
    if (repair === 'rebase' && !behind) return noChange(`head ${short(this.#head)} already contains ${snapshot.base.ref} (${short(this.#base)})`);
    if (repair !== 'rebase') {
      if (config.agentFix !== null && config.gate === null) return failed('agent-fix is configured without a gate: set automerge.gate, agent-made changes are never pushed ungated', false);
      // Without an agent, only a rebase can help, and only with checks (the base may have fixed them); findings need an edit.
      if (config.agentFix === null && (!behind || repair === 'fix-findings')) {
        return noChange(`no agent-fix command is configured (automerge.agentFix) to ${repair === 'fix-checks' ? 'fix the failing checks' : 'address the findings'}`);
      }
    }
    let replay: ReplayResult | null = null;
    if (behind) {
      // The replay is proofgate's own git work: a disposable worktree, removed before anything untrusted runs.
      const ws = await openWorkspace(repoDir, this.#head);
      try {
        this.#progress(`worktree at ${short(this.#head)} (${snapshot.head.ref})`);
        replay = await replayOnto(ws, { base: this.#base, head: this.#head, identity: this.#context.identity, signal: this.#context.signal, onProgress: (line) => this.#progress(line) });
      } finally {
        await ws.dispose();
      }
      if (replay.kind === 'replayed' && replay.commits.length === 0) return noChange(`every commit of the change is already in ${snapshot.base.ref} (${short(this.#base)})`);
    }
    return this.#repairAfter(replay);
  }

  async #repairAfter(replay: ReplayResult | null): Promise<RepairOutcome> {
    const { config, repair, snapshot, repoDir } = this.#context;
    const replayed = replay?.kind === 'replayed' ? replay : null;
    const conflict = replay?.kind === 'conflict' ? replay : null;
    const resolutions = replayed?.resolved ?? [];
    if (conflict !== null) this.#progress(`rebase stopped at ${short(conflict.commit)}: ${conflict.reason}`);
    const stopped = () => noChange(this.#redact(`rebase onto ${snapshot.base.ref} (${short(this.#base)}) stopped at ${short(conflict?.commit ?? '')}: ${conflict?.reason ?? ''}`), conflict?.paths ?? []);

    if (repair === 'rebase') {
      if (replayed !== null) return this.#publish(replayed.tip, 'rebase', resolutions, false);
      if (this.#context.agentFixConflicts !== true || config.agentFix === null || config.gate === null) return stopped();
    }
    if (config.agentFix === null) {
      // fix-checks without an agent: the rebase alone is the repair.
      if (replayed === null) return stopped();
      return this.#gateThenPublish(replayed.tip, 'rebase', resolutions);
    }
    // The agent starts from the rebased tip, or from the exact head when the rebase could not finish. A conflict
    // handed over by a rebase becomes a merge of the base into the head: the agent gets git's merge of the two,
    // conflict markers included, and its result is committed with both as parents.
    const start = replayed?.tip ?? this.#head;
    const merging = repair === 'rebase';
    const mustDescendFrom = merging ? this.#base : start;
    const treeOf = merging ? await mergeWithMarkers(repoDir, this.#head, this.#base, this.#context.identity) : start;
    this.#progress(`agent-fix: ${config.agentFix.command.join(' ')} (limit ${config.agentFix.timeoutSeconds}s)`);
    const agent = await runAgentFix({
      repoDir,
      command: config.agentFix.command,
      timeoutSeconds: config.agentFix.timeoutSeconds,
      maxOutputBytes: config.maxOutputBytes,
      sandbox: config.sandbox ?? 'jail',
      cacheDir: config.cacheDir,
      network: config.agentFix.network === true,
      passEnv: config.agentFix.env ?? [],
      treeOf,
      parents: merging ? [this.#head, this.#base] : [start],
      context: buildAgentContext(this.#context, { startSha: start, rebasedOnto: replayed === null ? null : this.#base, rebaseConflict: conflict, mustDescendFrom }, this.#redact),
      env: {
        PROOFGATE_REPAIR_KIND: repair,
        PROOFGATE_CHANGE_ID: snapshot.id,
        PROOFGATE_BASE_SHA: this.#base,
        PROOFGATE_HEAD_SHA: this.#head,
        PROOFGATE_START_SHA: start,
      },
      identity: this.#context.identity,
      commitMessage: `proofgate agent-fix: ${repair} for change ${snapshot.id}\n\n${this.#redact(this.#context.reason).slice(0, 4000)}\n`,
      redact: this.#redact,
      signal: this.#context.signal,
    });
    if (agent.kind === 'failed') return failed(agent.reason, agent.transient);
    for (const refused of agent.refused) this.#progress(this.#redact(`agent-fix result: left out ${JSON.stringify(refused.path)}: ${refused.reason}`));
    if (agent.kind === 'unchanged') {
      // Review findings are about the change's content: a rebase alone does not answer them.
      if (replayed === null || repair === 'fix-findings') return noChange('agent-fix made no change');
      this.#progress('agent-fix made no change; the rebase alone is the repair');
      return this.#gateThenPublish(replayed.tip, 'rebase', resolutions);
    }
    this.#progress(`agent-fix changed files${agent.sandbox === 'none' ? ' (ran unjailed: sandbox: none)' : ''}; proofgate committed them as ${short(agent.tip)}`);
    const emptied = await repairGit(repoDir, ['diff', '--quiet', '--no-ext-diff', '--no-textconv', this.#base, agent.tip], { okExitCodes: [1] });
    if (emptied.exitCode === 0) return failed(`after agent-fix the change has no difference from ${snapshot.base.ref}; nothing pushed`, false);
    return this.#gateThenPublish(agent.tip, 'agent-fix', resolutions);
  }

  async #gateThenPublish(tip: string, method: 'rebase' | 'agent-fix', resolutions: readonly ResolvedFile[]): Promise<RepairOutcome> {
    const { config } = this.#context;
    if (config.gate === null) return this.#publish(tip, method, resolutions, false);
    this.#progress(`gate: ${config.gate.join(' ')} (limit ${config.timeoutSeconds}s)`);
    const gate = await runGate({
      repoDir: this.#context.repoDir,
      sha: tip,
      command: config.gate,
      timeoutSeconds: config.timeoutSeconds,
      maxOutputBytes: config.maxOutputBytes,
      sandbox: config.sandbox ?? 'jail',
      cacheDir: config.cacheDir,
      env: { CI: 'true', PROOFGATE_REPAIR_KIND: this.#context.repair, PROOFGATE_HEAD_SHA: tip },
      redact: this.#redact,
      signal: this.#context.signal,
    });
    if (!gate.passed) return failed(`${gate.reason}; nothing pushed`, gate.transient);
    this.#progress(`gate passed in ${(gate.durationMs / 1000).toFixed(1)}s${gate.sandbox === 'none' ? ' (ran unjailed: sandbox: none)' : ''}`);
    return this.#publish(tip, method, resolutions, true);
  }

  async #publish(tip: string, method: 'rebase' | 'agent-fix', resolutions: readonly ResolvedFile[], gated: boolean): Promise<RepairOutcome> {
    const { forge, snapshot } = this.#context;
    // Publishing is one compare-and-swap: `pushCommits` when the caller gives one (it carries the objects), else the forge's ref move.
    // The hard per-call guard: whatever the path, one runRepair call pushes at most once.
    if (this.#pushes > 0) throw new ProofgateError('INTERNAL', 'a repair call pushes at most once');
    if (this.#context.signal?.aborted === true) return failed('the repair was aborted before the push; nothing pushed', true);
    this.#pushes += 1;
    const listing = await repairGitText(this.#context.repoDir, ['rev-list', '--reverse', tip, `^${this.#head}`, `^${this.#base}`]);
    const commits = listing.split('\n').filter((line) => line !== '');
    try {
      const request = { branch: snapshot.head.ref, newSha: tip, expectedOldSha: this.#head };
      await (this.#context.pushCommits === undefined ? forge.pushBranch(request) : this.#context.pushCommits(request));
    } catch (error) {
      if (isProofgateError(error, 'HEAD_MOVED')) {
        return failed(`${snapshot.head.ref} moved away from ${short(this.#head)} during the repair; nothing pushed`, true);
      }
      const transient = isProofgateError(error) && ['FORGE_API', 'IO', 'TIMEOUT'].includes(error.code);
      return failed(this.#redact(`push of ${short(tip)} to ${snapshot.head.ref} failed: ${errorMessage(error)}`), transient);
    }
    this.#progress(`pushed ${snapshot.head.ref}: ${short(this.#head)} -> ${short(tip)}`);
    return { kind: 'pushed', method, oldHead: this.#head, newHead: tip, commits, resolved: [...new Set(resolutions.map((file) => file.path))], resolutions, gated };
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
