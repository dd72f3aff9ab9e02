import { ProofgateError } from '../../core/index.js';
import { reservedPassThroughEnv } from '../../contracts/index.js';
import type { AutomergeConfig } from '../../contracts/repo-config.js';
import type { SandboxMode } from '../../host/index.js';

/**
 * What a repair may run, taken from the trusted configuration (the base
 * branch's `.proofgate.yml`, `automerge:` section), never from the change.
 */
export interface RepairConfig {
  /** Command (argv, no shell) that must pass in the repaired worktree before agent-made changes are pushed. */
  readonly gate: readonly string[] | null;
  /**
   * The agent-fix command (argv, no shell), its time limit, whether it gets
   * outbound network (default no) and which of proofgate's variables it gets
   * (its provider key; the names lanes may not pass are refused here too);
   * null: no agent-fix.
   */
  readonly agentFix: {
    readonly command: readonly string[];
    readonly timeoutSeconds: number;
    readonly network?: boolean;
    readonly env?: readonly string[];
  } | null;
  /** Time limit of the gate command. */
  readonly timeoutSeconds: number;
  /** Output kept per command (the tail). */
  readonly maxOutputBytes: number;
  /** How the gate and agent-fix run: `jail` (default) or, when the trusted config says so, `none`. */
  readonly sandbox?: SandboxMode;
  /** A cache directory the trusted config names, shared by jobs (package caches). */
  readonly cacheDir?: string;
}

export const DEFAULT_GATE_TIMEOUT_SECONDS = 600;
export const DEFAULT_AGENT_FIX_TIMEOUT_SECONDS = 1800;
export const DEFAULT_REPAIR_OUTPUT_BYTES = 1024 * 1024;

/** What of the trusted configuration a repair reads: the `automerge:` section and the jail policy. */
export interface RepairTrustedConfig {
  readonly automerge?: AutomergeConfig | undefined;
  readonly sandbox?: SandboxMode | undefined;
  readonly cacheDir?: string | undefined;
}

/** Map the trusted configuration (a parsed `.proofgate.yml`) to the repair configuration. */
export function repairConfigFrom(trusted: RepairTrustedConfig): RepairConfig {
  const section: AutomergeConfig = trusted.automerge ?? {};
  const agent = section.agentFix;
  const config: RepairConfig = {
    gate: section.gate === undefined ? null : [...section.gate],
    agentFix:
      agent === undefined
        ? null
        : {
            command: [...agent.command],
            timeoutSeconds: agent.timeoutSeconds ?? DEFAULT_AGENT_FIX_TIMEOUT_SECONDS,
            ...(agent.network === undefined ? {} : { network: agent.network }),
            ...(agent.env === undefined ? {} : { env: [...agent.env] }),
          },
    timeoutSeconds: section.gateTimeoutSeconds ?? DEFAULT_GATE_TIMEOUT_SECONDS,
    maxOutputBytes: section.repairOutputBytes ?? DEFAULT_REPAIR_OUTPUT_BYTES,
    sandbox: trusted.sandbox ?? 'jail',
    ...(trusted.cacheDir === undefined ? {} : { cacheDir: trusted.cacheDir }),
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
    for (const name of config.agentFix.env ?? []) {
      const reason = reservedPassThroughEnv(name);
      if (reason !== undefined) throw bad('agentFix.env', `${name} cannot be passed: ${reason}`);
    }
  }
  if (config.sandbox !== undefined && config.sandbox !== 'jail' && config.sandbox !== 'none') throw bad('sandbox', "expected 'jail' or 'none'");
  if (!positive(config.timeoutSeconds)) throw bad('timeoutSeconds', 'expected a number > 0');
  if (!Number.isInteger(config.maxOutputBytes) || config.maxOutputBytes < 1) throw bad('maxOutputBytes', 'expected an integer >= 1');
}
