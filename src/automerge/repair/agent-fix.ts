import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SandboxMode } from '../../host/index.js';
import { identityEnvironment } from './git.js';
import { openJob } from './job.js';
import { commandEnvironment, outputTail, runCommand, whatWasKilled } from './process.js';
import { commitChanges, treeChanges, type RefusedPath } from './tree-commit.js';

/**
 * The agent-fix adapter: run the configured command on an export of the
 * start commit in a job directory (jailed unless the trusted config says
 * `sandbox: none`), with a JSON context file (why the repair runs, the
 * failing checks with their logs, the review findings). The command only
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

export async function runAgentFix(request: AgentFixRequest): Promise<AgentFixResult> {
  const job = await openJob(request.repoDir, request.treeOf);
  try {
    const contextPath = join(job.jobDir, 'repair-context.json');
    await writeFile(contextPath, `${JSON.stringify(request.context, null, 2)}\n`, { mode: 0o444 });
    const passed: Record<string, string> = {};
    for (const name of request.passEnv ?? []) {
      const value = process.env[name];
      if (value !== undefined) passed[name] = value;
    }
    const run = await runCommand({
      argv: request.command,
      job,
      env: commandEnvironment(process.env, { ...passed, ...request.env, [CONTEXT_FILE_ENV]: contextPath }),
      sandbox: request.sandbox,
      cacheDir: request.cacheDir,
      network: request.network === true,
      timeoutMs: request.timeoutSeconds * 1000,
      maxOutputBytes: request.maxOutputBytes,
      signal: request.signal,
    });
    const tail = () => {
      const text = request.redact(outputTail(run.output));
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
