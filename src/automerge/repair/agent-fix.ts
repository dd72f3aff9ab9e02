import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SandboxMode } from '../../host/index.js';
import { identityEnvironment } from './git.js';
import { openJob } from './job.js';
import { commandEnvironment, outputTail, runCommand, whatWasKilled, withoutCutLine } from './process.js';
import { commitChanges, treeChanges, type RefusedPath } from './tree-commit.js';

/**
 * The agent-fix adapter: run the configured command on an export of the
 * start commit in a job directory (jailed unless the trusted config says
 * `sandbox: none`), with a JSON context file (why the repair runs, the
 * failing checks with their logs, the review findings) and, on a validation
 * pass, the failed gate's output as a second file. The command only
 * edits files: it gets no git repository, no credential and nothing it could
 * push with. proofgate itself then turns the edited tree into one commit on
 * `parents` (see tree-commit.ts), through an index the command never saw.
 */

export interface AgentFixRequest {
  readonly repoDir: string;
  readonly command: readonly string[];
  readonly timeoutSeconds: number;
  readonly maxOutputBytes: number;
  readonly sandbox: SandboxMode;
  readonly cacheDir?: string | undefined;
  readonly network?: boolean;
  /** Names of proofgate's environment variables passed through to the command (its provider key). */
  readonly passEnv?: readonly string[];
  /** The commit whose tree the command gets (and the changes are measured against). */
  readonly treeOf: string;
  /** The new commit's parents (the start commit; for a conflict handed over by a rebase, the head and the base). */
  readonly parents: readonly string[];
  /** The JSON written to the context file (already redacted). */
  readonly context: unknown;
  /**
   * For a validation pass: the failed gate's output, already redacted and
   * bounded, written to `gate-output.txt` beside the context file (its path in
   * `PROOFGATE_GATE_OUTPUT`).
   */
  readonly gateOutput?: string | undefined;
  /** Extra environment for the agent (`PROOFGATE_*` facts). */
  readonly env: Readonly<Record<string, string>>;
  readonly identity: { readonly name: string; readonly email: string };
  readonly commitMessage: string;
  readonly redact: (text: string) => string;
  readonly signal?: AbortSignal | undefined;
}

export type AgentFixResult =
  | { readonly kind: 'changed'; readonly tip: string; readonly refused: readonly RefusedPath[]; readonly sandbox: SandboxMode }
  | { readonly kind: 'unchanged'; readonly refused: readonly RefusedPath[] }
  | { readonly kind: 'failed'; readonly reason: string; readonly transient: boolean };

export const CONTEXT_FILE_ENV = 'PROOFGATE_REPAIR_CONTEXT';
export const CONTEXT_FILE_NAME = 'repair-context.json';
export const GATE_OUTPUT_ENV = 'PROOFGATE_GATE_OUTPUT';
export const GATE_OUTPUT_FILE_NAME = 'gate-output.txt';

export async function runAgentFix(request: AgentFixRequest): Promise<AgentFixResult> {
  const job = await openJob(request.repoDir, request.treeOf);
  try {
    // Both files sit in the job dir, beside the tree (never in it), read-only, and go with the job.
    const contextPath = join(job.jobDir, CONTEXT_FILE_NAME);
    await writeFile(contextPath, `${JSON.stringify(request.context, null, 2)}\n`, { mode: 0o444 });
    const files: Record<string, string> = { [CONTEXT_FILE_ENV]: contextPath };
    if (request.gateOutput !== undefined) {
      files[GATE_OUTPUT_ENV] = join(job.jobDir, GATE_OUTPUT_FILE_NAME);
      await writeFile(files[GATE_OUTPUT_ENV], request.gateOutput, { mode: 0o444 });
    }
    const passed: Record<string, string> = {};
    for (const name of request.passEnv ?? []) {
      const value = process.env[name];
      if (value !== undefined) passed[name] = value;
    }
    const run = await runCommand({
      argv: request.command,
      job,
      env: commandEnvironment(process.env, { ...passed, ...request.env, ...files }),
      sandbox: request.sandbox,
      cacheDir: request.cacheDir,
      network: request.network === true,
      timeoutMs: request.timeoutSeconds * 1000,
      maxOutputBytes: request.maxOutputBytes,
      signal: request.signal,
    });
    const tail = () => {
      const text = outputTail(request.redact(withoutCutLine(run.output, run.truncated)));
      return text === '' ? '' : `; output tail: ${text}`;
    };
    const jailed = whatWasKilled(run.sandbox);
    if (run.aborted) return { kind: 'failed', reason: `agent-fix aborted; ${jailed}`, transient: true };
    if (run.timedOut) return { kind: 'failed', reason: `agent-fix timed out after ${request.timeoutSeconds}s; ${jailed}${tail()}`, transient: false };
    if (run.startError !== null) return { kind: 'failed', reason: `agent-fix could not start: ${run.startError}`, transient: false };
    if (run.exitCode !== 0) {
      const how = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with ${run.exitCode}`;
      return { kind: 'failed', reason: `agent-fix ${how}${tail()}`, transient: false };
    }
    const indexFile = join(job.private, 'index');
    const changes = await treeChanges(request.repoDir, request.treeOf, job.tree, indexFile);
    const tip = await commitChanges(request.repoDir, request.treeOf, changes, indexFile, {
      parents: request.parents,
      message: request.commitMessage,
      env: identityEnvironment(request.identity),
    });
    if (tip === null) return { kind: 'unchanged', refused: changes.refused };
    return { kind: 'changed', tip, refused: changes.refused, sandbox: run.sandbox };
  } finally {
    await job.dispose();
  }
}
