import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalJson } from '../../core/index.js';
import { reviewerEnvironment } from '../environment.js';
import { evidenceFileName } from '../evidence.js';
import { createSandbox, removeSandbox, treeManifest } from '../sandbox.js';
import { invalid } from '../validate.js';
import { runContained, type ProcessOutcome } from './process.js';
import { transportFailure, type LaneAdapter, type LaneRunContext, type LaneRun } from './types.js';

/** Largest stdout a reviewer may print (1 MiB); more is a transport failure. */
export const DEFAULT_OUTPUT_LIMIT = 1024 * 1024;

function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.slice(0, 200) ?? '';
}

function interpret(context: LaneRunContext, outcome: ProcessOutcome): unknown {
  switch (outcome.kind) {
    case 'timeout':
      return transportFailure(context, `timed out after ${Math.round(outcome.ms / 1000)}s; process group killed`);
    case 'too-large':
      return transportFailure(context, `output too large (more than ${outcome.limit} bytes)`);
    case 'spawn-error':
      return transportFailure(context, `cannot start reviewer: ${outcome.message}`);
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
 * The `command` adapter: the configured program runs in a fresh read-only
 * snapshot of the head with a cut-down environment, reads the request JSON on
 * stdin (also at $PROOFGATE_REVIEW_REQUEST), writes its evidence at
 * $PROOFGATE_EVIDENCE_PATH and prints one lane result JSON on stdout.
 */
export function commandReviewer(options: { outputLimit?: number } = {}): LaneAdapter {
  return async (context): Promise<LaneRun> => {
    const argv = context.lane.config.command;
    if (argv === undefined) return { raw: transportFailure(context, 'lane has no command') };
    const { request } = context;
    const sandbox = await createSandbox(context.repoDir, request.head_sha);
    try {
      const requestText = `${canonicalJson(request)}\n`;
      const requestFile = join(sandbox.root, 'request.json');
      await writeFile(requestFile, requestText);
      await chmod(requestFile, 0o444);
      const env = reviewerEnvironment(process.env, {
        home: sandbox.home,
        tmp: sandbox.tmp,
        requestFile,
        evidenceDir: request.evidence_dir,
        evidencePath: join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce)),
        laneId: context.lane.id,
        family: context.lane.family,
        contextId: context.contextId,
      });
      const outcome = await runContained(argv, {
        cwd: sandbox.snapshot,
        env,
        stdin: requestText,
        timeoutMs: context.lane.timeoutMs,
        outputLimit: options.outputLimit ?? DEFAULT_OUTPUT_LIMIT,
      });
      const raw = interpret(context, outcome);
      const after = await treeManifest(sandbox.snapshot).catch(() => 'unreadable');
      if (after !== sandbox.manifest) {
        return { raw, breach: invalid('READ_ONLY_VIOLATED', 'the reviewer changed its read-only snapshot of the head') };
      }
      return { raw };
    } finally {
      await removeSandbox(sandbox.root);
    }
  };
}
