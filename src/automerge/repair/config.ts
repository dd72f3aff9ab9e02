import { ProofgateError } from '../../core/index.js';
import type { AutomergeConfig } from '../../contracts/repo-config.js';

/**
 * What a repair may run, taken from the trusted configuration (the base
 * branch's `.proofgate.yml`, `automerge:` section), never from the change.
 */
export interface RepairConfig {
  /** Command (argv, no shell) that must pass in the repaired worktree before agent-made changes are pushed. */
  readonly gate: readonly string[] | null;
  /** The agent-fix command (argv, no shell) and its time limit; null: no agent-fix. */
  readonly agentFix: { readonly command: readonly string[]; readonly timeoutSeconds: number } | null;
  /** Time limit of the gate command. */
  readonly timeoutSeconds: number;
  /** Output kept per command (the tail). */
  readonly maxOutputBytes: number;
}

export const DEFAULT_GATE_TIMEOUT_SECONDS = 600;
export const DEFAULT_AGENT_FIX_TIMEOUT_SECONDS = 1800;
export const DEFAULT_REPAIR_OUTPUT_BYTES = 1024 * 1024;

/**
 * Optional fields read when the configuration schema has them: time limits and
 * the output cap. Without them the defaults above apply.
 */
type RepairSection = AutomergeConfig & {
  readonly gateTimeoutSeconds?: number;
  readonly repairOutputBytes?: number;
  readonly agentFix?: { readonly command: readonly string[]; readonly timeoutSeconds?: number };
};

/** Map the trusted configuration (a parsed `.proofgate.yml`) to the repair configuration. */
export function repairConfigFrom(trusted: { readonly automerge?: AutomergeConfig | undefined }): RepairConfig {
  const section: RepairSection = trusted.automerge ?? {};
  const config: RepairConfig = {
    gate: section.gate === undefined ? null : [...section.gate],
    agentFix:
      section.agentFix === undefined
        ? null
        : { command: [...section.agentFix.command], timeoutSeconds: section.agentFix.timeoutSeconds ?? DEFAULT_AGENT_FIX_TIMEOUT_SECONDS },
    timeoutSeconds: section.gateTimeoutSeconds ?? DEFAULT_GATE_TIMEOUT_SECONDS,
    maxOutputBytes: section.repairOutputBytes ?? DEFAULT_REPAIR_OUTPUT_BYTES,
  };
  validateRepairConfig(config);
  return config;
}

function validArgv(argv: readonly string[]): boolean {
  return argv.length > 0 && argv.every((part) => typeof part === 'string' && part !== '' && !part.includes('\0'));
}

function positive(value: number): boolean {
  return Number.isFinite(value) && value > 0;
}

/** One `INVALID_INPUT` error naming the first bad field. */
export function validateRepairConfig(config: RepairConfig): void {
  const bad = (field: string, why: string) => new ProofgateError('INVALID_INPUT', `repair config ${field}: ${why}`, { field });
  if (config.gate !== null && !validArgv(config.gate)) throw bad('gate', 'expected a nonempty argv of nonempty strings');
  if (config.agentFix !== null) {
    if (!validArgv(config.agentFix.command)) throw bad('agentFix.command', 'expected a nonempty argv of nonempty strings');
    if (!positive(config.agentFix.timeoutSeconds)) throw bad('agentFix.timeoutSeconds', 'expected a number > 0');
  }
  if (!positive(config.timeoutSeconds)) throw bad('timeoutSeconds', 'expected a number > 0');
  if (!Number.isInteger(config.maxOutputBytes) || config.maxOutputBytes < 1) throw bad('maxOutputBytes', 'expected an integer >= 1');
}
