import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { identityEnvironment, isAncestor } from './git.js';
import { commandEnvironment, outputTail, runCommand } from './process.js';
import type { Workspace } from './workspace.js';

/**
 * The agent-fix adapter: run the configured command in the repair worktree
 * with a JSON context file (why the repair runs, the failing checks with their
 * logs, the review findings), then turn whatever it changed into one commit.
 * The command sees an allow-listed environment only, is killed at its time
 * limit, and never pushes: publishing stays with the repair, after the gate.
 */

export interface AgentFixRequest {
  readonly ws: Workspace;
  readonly command: readonly string[];
  readonly timeoutSeconds: number;
  readonly maxOutputBytes: number;
  /** The commit the worktree is at when the agent starts. */
  readonly start: string;
  /** The result must descend from this commit (the start, or the base when the agent must bring the change up to date). */
  readonly mustDescendFrom: string;
  /** The JSON written to the context file (already redacted). */
  readonly context: unknown;
  /** Extra environment for the agent (`PROOFGATE_*` facts). */
  readonly env: Readonly<Record<string, string>>;
  readonly identity: { readonly name: string; readonly email: string };
  readonly commitMessage: string;
  readonly redact: (text: string) => string;
  readonly signal?: AbortSignal;
}

export type AgentFixResult =
  | { readonly kind: 'changed'; readonly tip: string; readonly commits: readonly string[] }
  | { readonly kind: 'unchanged' }
  | { readonly kind: 'failed'; readonly reason: string; readonly transient: boolean };

export const CONTEXT_FILE_ENV = 'PROOFGATE_REPAIR_CONTEXT';

const IN_PROGRESS = ['MERGE_HEAD', 'CHERRY_PICK_HEAD', 'REVERT_HEAD', 'rebase-merge', 'rebase-apply'];

async function unfinishedOperation(ws: Workspace): Promise<string | null> {
  for (const name of IN_PROGRESS) {
    const path = resolve(ws.dir, await ws.text(['rev-parse', '--git-path', name]));
    if (existsSync(path)) return name;
  }
  return null;
}

export async function runAgentFix(request: AgentFixRequest): Promise<AgentFixResult> {
  const { ws } = request;
  const contextPath = join(ws.scratch, 'repair-context.json');
  await writeFile(contextPath, `${JSON.stringify(request.context, null, 2)}\n`, { mode: 0o600 });
  const env = commandEnvironment(process.env, {
    ...identityEnvironment(request.identity),
    ...request.env,
    [CONTEXT_FILE_ENV]: contextPath,
  });
  const run = await runCommand({
    argv: request.command,
    cwd: ws.dir,
    env,
    timeoutMs: request.timeoutSeconds * 1000,
    maxOutputBytes: request.maxOutputBytes,
    signal: request.signal,
  });
  const tail = () => {
    const text = request.redact(outputTail(run.output));
    return text === '' ? '' : `; output tail: ${text}`;
  };
  if (run.aborted) return { kind: 'failed', reason: 'agent-fix aborted; process group killed', transient: true };
  if (run.timedOut) return { kind: 'failed', reason: `agent-fix timed out after ${request.timeoutSeconds}s; process group killed${tail()}`, transient: false };
  if (run.startError !== null) return { kind: 'failed', reason: `agent-fix could not start: ${run.startError}`, transient: false };
  if (run.exitCode !== 0) {
    const how = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with ${run.exitCode}`;
    return { kind: 'failed', reason: `agent-fix ${how}${tail()}`, transient: false };
  }
  const unfinished = await unfinishedOperation(ws);
  if (unfinished !== null) return { kind: 'failed', reason: `agent-fix left an unfinished git operation (${unfinished}); nothing pushed`, transient: false };
  const attached = await ws.git(['symbolic-ref', '--quiet', 'HEAD'], { okExitCodes: [1] });
  if (attached.exitCode === 0) {
    return { kind: 'failed', reason: `agent-fix checked out ${attached.stdout.toString('utf8').trim()} in the repair worktree; nothing pushed`, transient: false };
  }
  const status = await ws.git(['status', '--porcelain', '-z', '--untracked-files=all']);
  if (status.stdout.length > 0) {
    await ws.git(['add', '--all']);
    await ws.git(['commit', '--quiet', '--no-verify', '--file', '-'], { input: request.commitMessage, env: identityEnvironment(request.identity) });
  }
  const tip = await ws.head();
  if (tip === request.start) return { kind: 'unchanged' };
  if (!(await isAncestor(ws.dir, request.mustDescendFrom, tip))) {
    return { kind: 'failed', reason: `agent-fix moved the worktree to ${tip.slice(0, 12)}, which does not build on ${request.mustDescendFrom.slice(0, 12)}; nothing pushed`, transient: false };
  }
  const listing = await ws.text(['rev-list', '--reverse', tip, `^${request.start}`]);
  return { kind: 'changed', tip, commits: listing.split('\n').filter((line) => line !== '') };
}
