import type { ChangeState, RepoPermission } from '../forge/port.js';
import { MAX_PROOF_SCENARIOS } from '../contracts/repo-config.js';
import { findScenario, type ProofScenario } from './scenarios.js';

/**
 * Admission of `@proofgate proof [scenario[,scenario...]] [sha]` (pure). A
 * command from someone with write permission, on an open, unlocked change
 * whose head is a branch of this repository, is admitted for the change's
 * current head (a named sha must be that head). The admitted decision is
 * stored: it carries the captured head and the scenario allowlist, and
 * nothing later (an edited comment, a redelivery, a new head) widens or
 * retargets it (`recheckAdmission`). Which tools a review is then offered is
 * the allowlist, within the configured scenarios, within the capabilities
 * looked up with the live review lease (`proofCoverage`): no capabilities,
 * no tools; everything not offered is a coverage gap with its reason.
 */

export const PROOF_ADMISSION_SCHEMA = 'proof-admission.v1';
/** A scenario's tool is named `proof_<scenario id>`: ids are slugs of at most 48 characters, so names fit tool-calling APIs. */
export const PROOF_TOOL_PREFIX = 'proof_';

/** Names the `proof` command accepts (the command parser's grammar): a name that is no configured id becomes a coverage gap. */
const COMMAND_SCENARIO_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const FULL_SHA = /^[0-9a-f]{40}$/;
const WRITE_PERMISSIONS: readonly RepoPermission[] = ['admin', 'maintain', 'write'];

/** The parsed command: named scenarios (empty: every configured one) and an optional full sha. */
export interface ProofCommandRequest {
  readonly scenarios: readonly string[];
  readonly sha: string | null;
}

/** A review's owner lease: who owns the review now, and which generation of ownership. */
export interface ProofLease {
  readonly owner: string;
  readonly epoch: number;
}

/** What the host allows a review, looked up with its live lease. */
export interface ProofCapabilities {
  readonly lease: ProofLease;
  /** The head the review (and so the lease) is for. */
  readonly headSha: string;
  /** Scenario ids whose producer may run for this review now. Never a wildcard: an id not listed is not available. */
  readonly scenarios: readonly string[];
}

export interface ProofChangeFacts {
  readonly id: string;
  readonly state: ChangeState;
  readonly locked: boolean;
  /** The head branch lives in another repository (a fork). */
  readonly crossRepository: boolean;
  readonly headSha: string;
}

export interface ProofCommandInput {
  readonly command: ProofCommandRequest;
  readonly commentId: string;
  readonly author: { readonly login: string; readonly permission: RepoPermission };
  readonly change: ProofChangeFacts;
  /** The configured scenarios (trusted config). */
  readonly scenarios: readonly ProofScenario[];
  /** Capabilities looked up with the live review lease; null when none could be had. */
  readonly capabilities: ProofCapabilities | null;
  /** Now, in ms since the epoch (the caller's clock). */
  readonly now: number;
  /** The decision already stored for this comment, if any: then only `recheckAdmission` applies. */
  readonly previous?: ProofAdmission | null;
}

/** The stored decision. */
export interface ProofAdmission {
  readonly schema: typeof PROOF_ADMISSION_SCHEMA;
  readonly changeId: string;
  readonly commentId: string;
  readonly requestedBy: string;
  /** The head captured at admission: the only head this decision is for. */
  readonly headSha: string;
  /** `named`: the command named the scenarios; `configured`: it named none, and the allowlist is what was configured then. */
  readonly selection: 'named' | 'configured';
  /** The scenarios the review may be offered, never more (names kept as written, duplicates dropped). */
  readonly allowlist: readonly string[];
  /** The command as admitted (scenarios sorted): how an edit of the comment is recognized. */
  readonly command: ProofCommandRequest;
  readonly admittedAt: string;
}

export type AdmissionRefusalReason =
  | 'PERMISSION'
  | 'NOT_OPEN'
  | 'LOCKED'
  | 'FORK_HEAD'
  | 'INVALID_COMMAND'
  | 'SHA_MISMATCH'
  /** An edit of an admitted comment that would add scenarios (or lift the restriction). */
  | 'WIDENED'
  /** An edit of an admitted comment that names another head. */
  | 'RETARGETED'
  /** Any other edit of an admitted comment: the admitted decision stands as it was. */
  | 'EDITED'
  /** The head moved since admission: the decision does not carry over to the new head. */
  | 'HEAD_MOVED'
  /** Another comment than the admitted one: it is admitted on its own, never through this decision. */
  | 'OTHER_COMMENT';

export interface AdmissionRefusal {
  readonly kind: 'refused';
  readonly reason: AdmissionRefusalReason;
  readonly message: string;
}

export type AdmissionResult =
  | { readonly kind: 'admitted'; readonly decision: ProofAdmission; readonly coverage: ProofCoverage }
  /** The same comment, unchanged, for the same head (a redelivery or a retried job): the stored decision, no new effect. */
  | { readonly kind: 'unchanged'; readonly decision: ProofAdmission }
  | AdmissionRefusal;

/** A tool offered to a reviewer: one per scenario it may run. */
export interface ProofTool {
  readonly name: string;
  readonly scenarioId: string;
  readonly description: string;
  readonly timeoutSeconds: number;
}

export type CoverageGapReason =
  /** Named in the command, but no scenario has that id. */
  | 'UNKNOWN_SCENARIO'
  /** Configured, but the command's list does not name it. */
  | 'NOT_ALLOWED'
  /** Allowed and configured, but its producer is not available to this review. */
  | 'UNAVAILABLE'
  /** No capabilities could be looked up: no tool at all. */
  | 'NO_CAPABILITIES'
  /** The capabilities are for another head than the admitted one. */
  | 'HEAD_MOVED';

export interface CoverageGap {
  readonly scenarioId: string;
  readonly reason: CoverageGapReason;
  readonly message: string;
}

export interface ProofCoverage {
  readonly offered: readonly ProofTool[];
  readonly gaps: readonly CoverageGap[];
}

function refused(reason: AdmissionRefusalReason, message: string): AdmissionRefusal {
  return { kind: 'refused', reason, message };
}

/** The command with its names deduplicated and sorted: two commands that ask the same compare equal. */
function normalizedCommand(command: ProofCommandRequest): ProofCommandRequest {
  return { scenarios: [...new Set(command.scenarios)].sort(), sha: command.sha };
}

function sameCommand(a: ProofCommandRequest, b: ProofCommandRequest): boolean {
  const x = normalizedCommand(a);
  const y = normalizedCommand(b);
  return x.sha === y.sha && x.scenarios.length === y.scenarios.length && x.scenarios.every((name, index) => name === y.scenarios[index]);
}

/** Why the command itself cannot be admitted, or null. */
function commandProblem(command: ProofCommandRequest): string | null {
  if (command.sha !== null && !FULL_SHA.test(command.sha)) return `"${command.sha.slice(0, 64)}" is not a full commit sha (40 lowercase hex digits)`;
  if (command.scenarios.length > MAX_PROOF_SCENARIOS) return `at most ${MAX_PROOF_SCENARIOS} scenarios may be named`;
  const bad = command.scenarios.find((name) => !COMMAND_SCENARIO_NAME.test(name));
  if (bad !== undefined) return `${JSON.stringify(bad.slice(0, 64))} is not a scenario name (lowercase letters, digits, . _ -; at most 64 characters)`;
  return null;
}

/**
 * What a later look at an admitted comment means for its stored decision:
 * the same command for the same head stands (no new effect); anything else
 * is refused with why, and the stored decision stays as it was. A new head
 * never inherits it, an edit never widens it (a name added, or the list
 * removed) nor retargets it (another sha), and any other edit is refused too.
 */
export function recheckAdmission(
  stored: ProofAdmission,
  later: { readonly commentId: string; readonly command: ProofCommandRequest | null; readonly headSha: string },
): { readonly kind: 'stands'; readonly decision: ProofAdmission } | AdmissionRefusal {
  if (later.commentId !== stored.commentId) {
    return refused('OTHER_COMMENT', `comment ${later.commentId} is not the admitted comment ${stored.commentId}; a new command is admitted on its own`);
  }
  const command = later.command;
  if (command !== null && command.sha !== null && command.sha !== stored.headSha) {
    return refused(
      'RETARGETED',
      `the proof command was edited to name ${JSON.stringify(command.sha.slice(0, 64))}; it was admitted for ${stored.headSha} and stays so`,
    );
  }
  if (command !== null && !sameCommand(command, stored.command)) {
    const widened = (command.scenarios.length === 0 && stored.selection === 'named') || command.scenarios.some((name) => !stored.allowlist.includes(name));
    if (widened) {
      return refused(
        'WIDENED',
        `the proof command was edited to allow more than its admitted scenarios (${stored.allowlist.join(', ') || 'none'}); a new request needs a new comment`,
      );
    }
    return refused('EDITED', 'the proof command was edited after it was admitted; the admitted decision stands, a new request needs a new comment');
  }
  if (command === null) return refused('EDITED', 'the proof command was removed from its comment after it was admitted; the admitted decision stands');
  if (later.headSha !== stored.headSha) {
    return refused('HEAD_MOVED', `the head moved from ${stored.headSha} to ${later.headSha}; proof admitted for ${stored.headSha} does not carry over`);
  }
  return { kind: 'stands', decision: stored };
}

/**
 * Admit a `proof` command, or say why not. Checked in order: an admitted
 * comment seen again (`recheckAdmission`), the author's permission (write or
 * more), the change (open, unlocked, not a fork head), the command (a full
 * sha, scenario names), then a named sha against the current head.
 */
export function admitProofCommand(input: ProofCommandInput): AdmissionResult {
  const { command, change, author } = input;
  if (!WRITE_PERMISSIONS.includes(author.permission)) {
    return refused('PERMISSION', `${author.login} has ${author.permission} permission; proof needs write or more`);
  }
  const previous = input.previous ?? null;
  if (previous !== null) {
    const recheck = recheckAdmission(previous, { commentId: input.commentId, command, headSha: change.headSha });
    return recheck.kind === 'stands' ? { kind: 'unchanged', decision: recheck.decision } : recheck;
  }
  if (change.state !== 'open') return refused('NOT_OPEN', `change ${change.id} is ${change.state}; proof runs on open changes only`);
  if (change.locked) return refused('LOCKED', `change ${change.id} is locked; proof runs on unlocked changes only`);
  if (change.crossRepository) {
    return refused('FORK_HEAD', `change ${change.id} has its head in another repository (a fork); proof runs on heads of this repository only`);
  }
  const problem = commandProblem(command);
  if (problem !== null) return refused('INVALID_COMMAND', problem);
  if (command.sha !== null && command.sha !== change.headSha) {
    return refused('SHA_MISMATCH', `the command names ${command.sha}, but the head of change ${change.id} is ${change.headSha}`);
  }
  const named = [...new Set(command.scenarios)];
  const decision: ProofAdmission = {
    schema: PROOF_ADMISSION_SCHEMA,
    changeId: change.id,
    commentId: input.commentId,
    requestedBy: author.login,
    headSha: change.headSha,
    selection: named.length > 0 ? 'named' : 'configured',
    allowlist: named.length > 0 ? named : input.scenarios.map((scenario) => scenario.id),
    command: normalizedCommand(command),
    admittedAt: new Date(input.now).toISOString(),
  };
  return { kind: 'admitted', decision, coverage: proofCoverage(decision, input.scenarios, input.capabilities) };
}

/** The tool of a scenario. */
export function proofTool(scenario: ProofScenario): ProofTool {
  return { name: `${PROOF_TOOL_PREFIX}${scenario.id}`, scenarioId: scenario.id, description: scenario.description, timeoutSeconds: scenario.timeoutSeconds };
}

/**
 * What a review admitted by `decision` is offered: a tool for each scenario
 * that is in the allowlist, configured, and among the capabilities (looked
 * up for the admitted head). Everything else is a gap: allowlisted names
 * first (unknown, unavailable), then configured scenarios the list left out.
 */
export function proofCoverage(decision: ProofAdmission, scenarios: readonly ProofScenario[], capabilities: ProofCapabilities | null): ProofCoverage {
  const offered: ProofTool[] = [];
  const gaps: CoverageGap[] = [];
  const withoutTools: { readonly reason: CoverageGapReason; readonly message: string } | null =
    capabilities === null
      ? { reason: 'NO_CAPABILITIES', message: 'no proof capabilities are available to this review: no proof tool is offered' }
      : capabilities.headSha !== decision.headSha
        ? { reason: 'HEAD_MOVED', message: `the capabilities are for ${capabilities.headSha}, not the admitted head ${decision.headSha}` }
        : null;
  for (const id of decision.allowlist) {
    const scenario = findScenario(scenarios, id);
    if (scenario === null) gaps.push({ scenarioId: id, reason: 'UNKNOWN_SCENARIO', message: `no scenario "${id}" is configured` });
    else if (withoutTools !== null) gaps.push({ scenarioId: id, ...withoutTools });
    else if (!(capabilities?.scenarios ?? []).includes(id)) {
      gaps.push({ scenarioId: id, reason: 'UNAVAILABLE', message: `scenario "${id}" has no producer available to this review` });
    } else offered.push(proofTool(scenario));
  }
  for (const scenario of scenarios) {
    if (!decision.allowlist.includes(scenario.id)) {
      gaps.push({ scenarioId: scenario.id, reason: 'NOT_ALLOWED', message: `scenario "${scenario.id}" is not in the admitted list` });
    }
  }
  return { offered, gaps };
}

/** The tools a review admitted by `decision` is offered (`proofCoverage` without the gaps). */
export function offeredTools(decision: ProofAdmission, scenarios: readonly ProofScenario[], capabilities: ProofCapabilities | null): readonly ProofTool[] {
  return proofCoverage(decision, scenarios, capabilities).offered;
}
