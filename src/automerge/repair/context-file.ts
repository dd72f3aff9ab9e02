import { CREDENTIAL_NAME } from '../../host/index.js';
import { redactFreeText } from '../../storage/index.js';
import { GATE_OUTPUT_ENV, GATE_OUTPUT_FILE_NAME } from './agent-fix.js';
import type { RepairContext } from './types.js';

/**
 * What the agent-fix command gets to read: a JSON file, path in
 * `PROOFGATE_REPAIR_CONTEXT`, and on a validation pass the failed gate's
 * output, path in `PROOFGATE_GATE_OUTPUT`. Everything taken from outside
 * proofgate (logs, findings, the reason, the gate's output) passes through the
 * redactor first.
 */

export const REPAIR_CONTEXT_VERSION = 1;

/** The most of the failed gate's output a validation pass gets (its tail, in bytes of UTF-8). */
export const GATE_OUTPUT_MAX_BYTES = 128 * 1024;

/** Values shorter than this are left alone: they would match ordinary text. */
const MIN_ENVIRONMENT_SECRET_LENGTH = 8;

/** The values of credential-looking variables of `environment` (a provider key an agent was given, a forge token). */
export function environmentSecrets(environment: Readonly<Record<string, string | undefined>>): string[] {
  return Object.entries(environment)
    .filter((entry): entry is [string, string] => entry[1] !== undefined && CREDENTIAL_NAME.test(entry[0]) && entry[1].length >= MIN_ENVIRONMENT_SECRET_LENGTH)
    .map(([, value]) => value);
}

/**
 * Blank out known secret values and the values of proofgate's credential-like
 * environment variables, then secret-looking fragments (storage free-text
 * rules).
 */
export function makeRedactor(
  knownSecrets: readonly string[] = [],
  environment: Readonly<Record<string, string | undefined>> = process.env,
): (text: string) => string {
  const values = [...knownSecrets.filter((secret) => secret.length >= 4), ...environmentSecrets(environment)];
  const secrets = [...new Set(values)].sort((a, b) => b.length - a.length);
  return (text: string) => {
    let out = text;
    for (const secret of secrets) out = out.split(secret).join('[redacted]');
    return redactFreeText(out);
  };
}

export interface AgentWorktreeFacts {
  /** The commit the worktree holds when the agent starts. */
  readonly startSha: string;
  /** The base the change was replayed onto before the agent started, or null. */
  readonly rebasedOnto: string | null;
  /** The rebase onto the base stopped at a conflict the resolvers could not settle. */
  readonly rebaseConflict: { readonly commit: string; readonly paths: readonly string[]; readonly reason: string } | null;
  /** What the result must build on. */
  readonly mustDescendFrom: string;
}

/** The failed gate's output as a validation pass gets it. */
export interface GateOutputForAgent {
  readonly text: string;
  /** Its size in bytes (at most GATE_OUTPUT_MAX_BYTES). */
  readonly bytes: number;
  /** Only the tail is there: the runner or this bound cut the start. */
  readonly truncated: boolean;
}

/**
 * Bound the gate's (already redacted) output for the agent: its last
 * GATE_OUTPUT_MAX_BYTES bytes, starting at a line. Cutting after redaction
 * never splits a secret into a part the redactor would miss.
 */
export function boundGateOutput(output: { readonly text: string; readonly cut: boolean }): GateOutputForAgent {
  const all = Buffer.from(output.text, 'utf8');
  if (all.length <= GATE_OUTPUT_MAX_BYTES) return { text: output.text, bytes: all.length, truncated: output.cut };
  let text = all.subarray(all.length - GATE_OUTPUT_MAX_BYTES).toString('utf8');
  const newline = text.indexOf('\n');
  if (newline !== -1 && newline < text.length - 1) text = text.slice(newline + 1);
  // A multi-byte character cut in two decodes as a replacement character: drop it so the bound holds.
  text = text.replace(/^\uFFFD+/, '');
  return { text, bytes: Buffer.byteLength(text, 'utf8'), truncated: true };
}

/** What a validation pass is told about the gate that failed. */
export interface ValidationFacts {
  /** Which pass this is (1-based) and how many there are at most. */
  readonly pass: number;
  readonly passes: number;
  /** The commit the gate failed on: the previous result, and the tree this pass starts from. */
  readonly failedSha: string;
  readonly gateCommand: readonly string[];
  /** How the gate ended (`exited with 1`). */
  readonly ended: string;
  readonly output: GateOutputForAgent;
}

function worktreeRule(facts: AgentWorktreeFacts): string {
  return facts.mustDescendFrom === facts.startSha
    ? 'The tree is worktree.startSha; the result is committed on top of it.'
    : "The rebase onto the base stopped at a conflict: the files hold git's merge of the base into the head, with conflict markers. Resolve them; the result is committed as a merge of the base into the head.";
}

/**
 * The context file's JSON. `validation` is null on the first pass; on a
 * validation pass it says which gate failed on which commit and where its
 * output is.
 */
export function buildAgentContext(
  context: RepairContext,
  facts: AgentWorktreeFacts,
  redact: (text: string) => string,
  validation: ValidationFacts | null = null,
): unknown {
  const { snapshot } = context;
  return {
    version: REPAIR_CONTEXT_VERSION,
    repair: context.repair,
    reason: redact(context.reason),
    change: {
      id: snapshot.id,
      number: snapshot.number,
      title: redact(snapshot.title),
      url: snapshot.url,
      base: { ref: snapshot.base.ref, sha: snapshot.base.sha },
      head: { ref: snapshot.head.ref, sha: snapshot.head.sha },
    },
    worktree: {
      startSha: facts.startSha,
      rebasedOnto: facts.rebasedOnto,
      rebaseConflict:
        facts.rebaseConflict === null ? null : { ...facts.rebaseConflict, paths: [...facts.rebaseConflict.paths], reason: redact(facts.rebaseConflict.reason) },
      mustDescendFrom: facts.mustDescendFrom,
    },
    failingChecks: context.failingChecks.map(({ check, log }) => ({
      name: check.name,
      workflow: check.workflow,
      status: check.status,
      conclusion: check.conclusion,
      url: check.url,
      headSha: check.headSha,
      log: log === null ? null : redact(log),
    })),
    findings: context.findings.map((finding) => ({
      title: redact(finding.title),
      evidence: redact(finding.evidence),
      path: finding.path ?? null,
      line: finding.line ?? null,
    })),
    validation:
      validation === null
        ? null
        : {
            pass: validation.pass,
            passes: validation.passes,
            failedSha: validation.failedSha,
            gate: { command: validation.gateCommand.map(redact), ended: validation.ended },
            outputFile: GATE_OUTPUT_FILE_NAME,
            outputEnv: GATE_OUTPUT_ENV,
            outputBytes: validation.output.bytes,
            outputTruncated: validation.output.truncated,
          },
    rules: [
      'Edit the files in the current directory (an exported tree, no git repository) so the failing checks pass and the findings are addressed.',
      worktreeRule(facts),
      'Only file edits count: proofgate commits them itself. Anything under .git, symlinks pointing outside the tree and special files are left out.',
      'Exit 0 when done; a nonzero exit discards everything. A gate command must pass before anything is published.',
      ...(validation === null
        ? []
        : [
            `Validation pass ${validation.pass} of ${validation.passes}: the gate failed on your previous result (validation.failedSha, the tree you start from). Its output (redacted; the tail when long) is the file named by ${GATE_OUTPUT_ENV}. Make the gate pass; if it fails again, the repair fails.`,
          ]),
    ],
  };
}
