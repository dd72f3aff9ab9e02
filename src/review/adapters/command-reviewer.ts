import { constants } from 'node:fs';
import { chmod, mkdir, open, realpath, writeFile } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { ReviewRequestV1 } from '../../contracts/index.js';
import type { SandboxMode } from '../../host/index.js';
import { reviewerEnvironment, type ReviewerToolVariables } from '../environment.js';
import { evidenceFileName } from '../evidence.js';
import { createSandbox, removeSandbox, treeManifest } from '../sandbox.js';
import type { LaneToolbox } from '../tools/port.js';
import { mcpConfig } from '../tools/relay.js';
import { serveLaneTools, type LaneToolServer } from '../tools/socket.js';
import { invalid, validateLaneResult } from '../validate.js';
import { runContained, type ProcessOutcome } from './process.js';
import { transportFailure, type LaneAdapter, type LaneRunContext, type LaneRun } from './types.js';

/** Largest stdout a reviewer may print (1 MiB); more is a transport failure. */
export const DEFAULT_OUTPUT_LIMIT = 1024 * 1024;

function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.slice(0, 200) ?? '';
}

/** What was stopped when a reviewer ran out of time: jailed, the whole jail; unjailed, its process group. */
function whatWasKilled(sandbox: SandboxMode): string {
  return sandbox === 'jail' ? 'its jail and everything in it killed' : 'process group killed';
}

function interpret(context: LaneRunContext, outcome: ProcessOutcome & { readonly sandbox: SandboxMode }): unknown {
  switch (outcome.kind) {
    case 'timeout':
      return transportFailure(context, `timed out after ${Math.round(outcome.ms / 1000)}s; ${whatWasKilled(outcome.sandbox)}`);
    case 'too-large':
      return transportFailure(context, `output too large (more than ${outcome.limit} bytes)`);
    case 'spawn-error':
      return transportFailure(context, `cannot start reviewer: ${firstLine(outcome.message)}`);
    case 'signaled':
      return transportFailure(context, `reviewer killed by ${outcome.signal}`);
    case 'exited': {
      if (outcome.code !== 0) {
        const detail = firstLine(outcome.stderr);
        return transportFailure(context, `reviewer exited with code ${outcome.code}${detail ? `: ${detail}` : ''}`);
      }
      const text = outcome.stdout.toString('utf8').trim();
      if (text === '') return transportFailure(context, 'reviewer printed no lane result');
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return transportFailure(context, 'reviewer output is not JSON');
      }
    }
  }
}

/**
 * Take the reviewer's evidence out of its job (the program has ended, and
 * everything it started with it). The answer is first judged against the
 * request the reviewer saw (`validateLaneResult` on the staged request: its
 * copies of the diff and contract still match the bound digests, and the
 * evidence is a nonempty regular file inside the job's evidence directory
 * after resolving symlinks); a result that fails there is returned as the
 * breach. A verdict's evidence is then copied into the lane's real evidence
 * directory and the result points there. A transport failure's evidence
 * path is dropped: the job dir does not outlive the lane.
 */
async function collectEvidence(context: LaneRunContext, seen: ReviewRequestV1, raw: unknown): Promise<Pick<LaneRun, 'raw' | 'breach'>> {
  const validation = await validateLaneResult(raw, seen, { laneId: context.lane.id, contextId: context.contextId });
  if (!validation.valid) return { raw, breach: validation };
  const result = raw as Record<string, unknown> & { evidence_path?: string };
  const { evidence_path: evidencePath, ...rest } = result;
  if (evidencePath === undefined) return { raw };
  if (!('disposition' in result)) return { raw: rest };
  const source = await realpath(isAbsolute(evidencePath) ? evidencePath : join(seen.evidence_dir, evidencePath));
  const target = join(context.request.evidence_dir, evidenceFileName(seen.subject_id, seen.head_sha, seen.nonce));
  const handle = await open(source, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    if (!(await handle.stat()).isFile()) return { raw, breach: invalid('EVIDENCE_NOT_REGULAR', `evidence ${source} is not a regular file`) };
    await writeFile(target, await handle.readFile(), { mode: 0o444, flag: 'wx' });
  } finally {
    await handle.close();
  }
  return { raw: { ...rest, evidence_path: target } };
}

/**
 * Offer a lane its tools inside its job dir (which the jail binds writable):
 * the socket in a `tools/` directory proofgate owns, the MCP client config
 * naming the relay (`mcp.json`) and the instructions (`review-instructions.txt`),
 * both read-only files proofgate owns, written like the staged request. The
 * caller binds `dir` read-only over itself in the jail (a mount point the
 * jailed program can neither write nor rename, so the path proofgate closes
 * and Node unlinks is still its own directory) and closes the server when
 * the lane ends.
 */
async function offerTools(toolbox: LaneToolbox, jobDir: string): Promise<{ server: LaneToolServer; dir: string; vars: ReviewerToolVariables }> {
  const dir = join(jobDir, 'tools');
  await mkdir(dir, { mode: 0o755 });
  await chmod(dir, 0o755);
  const server = await serveLaneTools(toolbox, { dir });
  try {
    const configFile = join(jobDir, 'mcp.json');
    const instructionsFile = join(jobDir, 'review-instructions.txt');
    await writeFile(configFile, `${JSON.stringify(mcpConfig(server.socketPath, server.token), null, 2)}\n`, { mode: 0o444, flag: 'wx' });
    await writeFile(instructionsFile, toolbox.instructions.endsWith('\n') ? toolbox.instructions : `${toolbox.instructions}\n`, { mode: 0o444, flag: 'wx' });
    return { server, dir, vars: { mcpConfig: configFile, socket: server.socketPath, token: server.token, instructions: instructionsFile } };
  } catch (error) {
    await server.close();
    throw error;
  }
}

/**
 * The `command` adapter. The configured program is resolved and started in a
 * read-only export of the TRUSTED commit (the base the config came from), so
 * a change cannot edit the reviewer that judges it; the head under review is
 * a read-only export at $PROOFGATE_HEAD_DIR, data the program reads. It runs
 * jailed with its job directory as the only writable tree and the only other
 * thing it sees: HOME, TMPDIR, its evidence directory and read-only copies of
 * the request, the diff and the contract (nothing of proofgate's data dir),
 * no network unless the lane says `network: true`, and only the provider
 * variables its `env` names. It reads the request JSON on stdin (also at
 * $PROOFGATE_REVIEW_REQUEST; its paths are the copies, its digests the bound
 * ones), writes its evidence at $PROOFGATE_EVIDENCE_PATH and prints one lane
 * result JSON on stdout; proofgate then collects the evidence (see
 * `collectEvidence`). A lane offered tools (`context.tools`, at least one)
 * reaches them over its own socket in its job dir, for the length of the run
 * only: see `offerTools` and tools/socket.ts.
 */
export function commandReviewer(options: { outputLimit?: number } = {}): LaneAdapter {
  return async (context): Promise<LaneRun> => {
    const { lane, request, trusted } = context;
    const argv = lane.config.command;
    if (argv === undefined) return { raw: transportFailure(context, 'lane has no command') };
    const sandbox = await createSandbox(context.repoDir, trusted.sha, request);
    let tools: LaneToolServer | undefined;
    try {
      const offered = context.tools !== undefined && context.tools.tools.length > 0 ? await offerTools(context.tools, sandbox.jobDir) : undefined;
      tools = offered?.server;
      const seen = sandbox.request;
      const env = reviewerEnvironment(
        context.env,
        {
          home: sandbox.home,
          tmp: sandbox.tmp,
          requestFile: sandbox.requestFile,
          headDir: sandbox.snapshot,
          evidenceDir: seen.evidence_dir,
          evidencePath: join(seen.evidence_dir, evidenceFileName(seen.subject_id, seen.head_sha, seen.nonce)),
          laneId: lane.id,
          family: lane.family,
          contextId: context.contextId,
          ...(offered === undefined ? {} : { tools: offered.vars }),
        },
        lane.config.env ?? [],
      );
      const outcome = await runContained({
        argv,
        sandbox: trusted.sandbox,
        jobDir: sandbox.jobDir,
        cwd: sandbox.program,
        env,
        mounts: [
          { path: sandbox.program, writable: false },
          { path: sandbox.snapshot, writable: false },
          ...(offered === undefined ? [] : [{ path: offered.dir, writable: false }]),
        ],
        ...(trusted.cacheDir === undefined ? {} : { cacheDir: trusted.cacheDir }),
        network: lane.config.network === true,
        stdin: sandbox.requestText,
        timeoutMs: lane.timeoutMs,
        outputLimit: options.outputLimit ?? DEFAULT_OUTPUT_LIMIT,
      });
      const after = await treeManifest(sandbox.snapshot).catch(() => 'unreadable');
      const collected = await collectEvidence(context, seen, interpret(context, outcome));
      if (after !== sandbox.manifest) {
        return {
          raw: collected.raw,
          sandbox: outcome.sandbox,
          breach: invalid('READ_ONLY_VIOLATED', 'the reviewer changed its read-only snapshot of the head'),
        };
      }
      return { ...collected, sandbox: outcome.sandbox };
    } finally {
      await tools?.close();
      await removeSandbox(sandbox.root);
    }
  };
}
