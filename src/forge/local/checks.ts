import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ProofgateError, isProofgateError, newId, type Clock } from '../../core/index.js';
import { exportCommit, jailStatus, makeJobDir, prepareCacheDir, prepareJobDir, type SandboxMode } from '../../host/index.js';
import { redactFreeText } from '../../storage/index.js';
import type { ArtifactRef } from '../../storage/ports.js';
import type { RepoCheck, RepoConfig } from '../../contracts/repo-config.js';
import type { CheckConclusion } from '../port.js';
import { runCheckProcess, type CheckProcessResult } from './check-process.js';
import { checksStream } from './records.js';
import type { GitRepository } from './repository.js';
import type { LocalForgeStore } from './store.js';

/** Progress of `checks run`, one call per state change of a check. */
export type CheckProgress =
  | { readonly phase: 'queued'; readonly name: string; readonly checkRunId: string; readonly headSha: string }
  | { readonly phase: 'started'; readonly name: string; readonly checkRunId: string; readonly headSha: string }
  | { readonly phase: 'completed'; readonly result: CheckRunResult };

export interface CheckRunResult {
  readonly checkRunId: string;
  readonly name: string;
  readonly headSha: string;
  readonly conclusion: CheckConclusion;
  readonly exitCode: number | null;
  readonly durationMs: number;
  readonly outputBytes: number;
  readonly outputTruncated: boolean;
  /** `artifact://<namespace>/<checkRunId>/sha256:<hex>`, or null when the check printed nothing. */
  readonly outputUrl: string | null;
  /** How the check ran: `jail`, or `none` (unjailed) when the trusted config says `sandbox: none`. */
  readonly sandbox: SandboxMode;
}

export interface RunChecksContext {
  readonly repo: GitRepository;
  readonly store: LocalForgeStore;
  readonly clock: Clock;
  readonly outputCapBytes: number;
  /** proofgate's data dir, when it is not under the repository's git dir (a cacheDir may not overlap it). */
  readonly dataDir?: string;
}

/** The jail policy: the trusted branch's `sandbox`, `cacheDir` and `limits`. */
export type JailPolicy = Pick<RepoConfig, 'sandbox' | 'cacheDir' | 'limits'>;

export interface RunChecksRequest {
  readonly changeId: string;
  readonly headSha: string;
  /** The (protected) base's config: its checks run. */
  readonly config: RepoConfig;
  /** The trusted branch's jail policy (default: `config`'s own). */
  readonly jail?: JailPolicy;
  readonly onProgress?: (progress: CheckProgress) => void;
  /** Cancels the run: the running check's process group is killed, it and the checks not started yet complete as `cancelled`. */
  readonly signal?: AbortSignal;
}

function conclusionOf(result: CheckProcessResult): CheckConclusion {
  if (result.aborted === true) return 'cancelled';
  if (result.timedOut) return 'timed_out';
  if (result.startError !== null) return 'startup_failure';
  return result.exitCode === 0 ? 'success' : 'failure';
}

function describeEnd(result: CheckProcessResult, check: RepoCheck): string {
  if (result.aborted === true) return '\n[proofgate] cancelled; process group killed\n';
  if (result.timedOut) return `\n[proofgate] timed out after ${check.timeoutSeconds}s; process group killed\n`;
  if (result.startError !== null) return `\n[proofgate] could not start: ${result.startError}\n`;
  return '';
}

/**
 * The first line of a cut output: only its tail was kept. The host runner does
 * not count what it dropped, so the line names the cap and what is kept.
 */
function describeCut(result: CheckProcessResult, capBytes: number): string {
  if (!result.truncated) return '';
  return `[proofgate] (first bytes dropped: the output passed the ${capBytes}-byte cap; its last ${result.output.length} bytes follow)\n`;
}

function notRun(startError: string, sandbox: SandboxMode): CheckProcessResult {
  return { exitCode: null, signal: null, timedOut: false, startError, output: Buffer.alloc(0), truncated: false, durationMs: 0, sandbox };
}

/**
 * Run one check in a fresh job dir holding an export of exactly `sha` (a
 * standalone clone with `git: true`), jailed unless the trusted policy says
 * `sandbox: none`; the job dir is removed in every case.
 */
async function runInJob(
  context: RunChecksContext,
  check: RepoCheck,
  sha: string,
  jail: JailPolicy,
  cacheDir: string | undefined,
  signal: AbortSignal | undefined,
): Promise<CheckProcessResult> {
  const jobDir = await makeJobDir('proofgate-check-');
  try {
    const head = join(jobDir, 'head');
    try {
      await prepareJobDir(join(jobDir, 'home'));
      await exportCommit(context.repo.root, sha, head, { git: check.git });
    } catch (error) {
      return notRun(`export: ${error instanceof Error ? error.message : String(error)}`, jail.sandbox);
    }
    return await runCheckProcess({
      command: typeof check.run === 'string' ? check.run : [...check.run],
      jobDir,
      cwd: head,
      sandbox: jail.sandbox,
      network: check.network,
      ...(cacheDir === undefined ? {} : { cacheDir }),
      ...(jail.limits === undefined ? {} : { limits: jail.limits }),
      timeoutMs: check.timeoutSeconds * 1000,
      outputCapBytes: context.outputCapBytes,
      env: { CI: 'true', PROOFGATE_CHECK_NAME: check.name, PROOFGATE_HEAD_SHA: sha },
      ...(signal === undefined ? {} : { signal }),
    });
  } finally {
    await rm(jobDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** Refuse a jail policy that cannot run here, before anything is recorded: no working bwrap, or a cacheDir overlapping proofgate's state. */
async function readyJail(context: RunChecksContext, jail: JailPolicy): Promise<string | undefined> {
  if (jail.sandbox === 'jail') {
    const status = await jailStatus();
    if (!status.available)
      throw new ProofgateError('JAIL_UNAVAILABLE', `checks need the jail: ${status.reason} (or set sandbox: none in the trusted config to run them unjailed)`);
  }
  if (jail.cacheDir === undefined) return undefined;
  return prepareCacheDir(jail.cacheDir, [context.repo.commonDir, ...(context.dataDir === undefined ? [] : [context.dataDir])]);
}

const WITHHELD = '[proofgate] output withheld: it contained a configured secret\n';

/** Store check output (secret-looking fragments already redacted); output holding a known secret is replaced by a notice. */
async function storeOutput(context: RunChecksContext, scope: { namespace: string; runId: string }, text: string): Promise<ArtifactRef> {
  const meta = { mediaType: 'text/plain; charset=utf-8', purpose: 'check-output' };
  const { artifactStore } = context.store.storage;
  try {
    return await artifactStore.write(scope, new Uint8Array(Buffer.from(text, 'utf8')), meta);
  } catch (error) {
    if (!isProofgateError(error, 'KNOWN_SECRET')) throw error;
    return artifactStore.write(scope, new Uint8Array(Buffer.from(WITHHELD, 'utf8')), meta);
  }
}

async function runOneCheck(
  context: RunChecksContext,
  request: RunChecksRequest,
  check: RepoCheck,
  checkRunId: string,
  cacheDir: string | undefined,
): Promise<CheckRunResult> {
  const { store, clock } = context;
  const stream = checksStream(request.headSha);
  const startedAt = clock.now().toISOString();
  await store.append(stream, [{ type: 'check-started', data: { checkRunId, at: startedAt } }]);
  request.onProgress?.({ phase: 'started', name: check.name, checkRunId, headSha: request.headSha });
  const outcome = await runInJob(context, check, request.headSha, request.jail ?? request.config, cacheDir, request.signal);
  const outputText = describeCut(outcome, context.outputCapBytes) + redactFreeText(outcome.output.toString('utf8')) + describeEnd(outcome, check);
  let output: { digest: string; bytes: number; truncated: boolean; url: string } | null = null;
  if (outputText.length > 0) {
    const scope = { namespace: store.storage.namespace, runId: checkRunId };
    const ref = await storeOutput(context, scope, outputText);
    output = { digest: ref.digest, bytes: ref.byteLength, truncated: outcome.truncated, url: `artifact://${scope.namespace}/${checkRunId}/${ref.digest}` };
  }
  const conclusion = conclusionOf(outcome);
  const data = {
    checkRunId,
    name: check.name,
    headSha: request.headSha,
    changeIds: [request.changeId],
    startedAt,
    conclusion,
    at: clock.now().toISOString(),
    exitCode: outcome.exitCode,
    signal: outcome.signal,
    durationMs: outcome.durationMs,
    output,
    sandbox: outcome.sandbox,
  };
  await store.append(stream, [{ type: 'check-completed', data }]);
  return {
    checkRunId,
    name: check.name,
    headSha: request.headSha,
    conclusion,
    exitCode: outcome.exitCode,
    durationMs: outcome.durationMs,
    outputBytes: output?.bytes ?? 0,
    outputTruncated: outcome.truncated,
    outputUrl: output?.url ?? null,
    sandbox: outcome.sandbox,
  };
}

/**
 * Run every configured check at exactly `headSha`, one after another, each
 * jailed in its own job dir (see `runInJob`). All are
 * recorded `queued` first, then `in_progress`, then `completed` with a
 * conclusion; output is stored as an artifact (scope: the check run id). An
 * aborted `signal` ends the run: the running check and those not started yet
 * complete as `cancelled` (only those that ran are in the returned list).
 */
export async function runChecks(context: RunChecksContext, request: RunChecksRequest): Promise<CheckRunResult[]> {
  const { store, clock } = context;
  const stream = checksStream(request.headSha);
  const planned = request.config.checks.map((check) => ({ check, checkRunId: newId('chk') }));
  if (planned.length === 0) return [];
  const cacheDir = await readyJail(context, request.jail ?? request.config);
  const queuedAt = clock.now().toISOString();
  await store.append(
    stream,
    planned.map(({ check, checkRunId }) => ({ type: 'check-queued' as const, data: { checkRunId, name: check.name, headSha: request.headSha, at: queuedAt } })),
  );
  for (const { check, checkRunId } of planned) request.onProgress?.({ phase: 'queued', name: check.name, checkRunId, headSha: request.headSha });

  const results: CheckRunResult[] = [];
  // Leave no run queued or in progress forever: what did not run completes as `conclusion`.
  const closeLeft = (conclusion: 'error' | 'cancelled') => {
    const done = new Set(results.map((result) => result.checkRunId));
    const left = planned.filter((entry) => !done.has(entry.checkRunId));
    const at = clock.now().toISOString();
    return store.append(
      stream,
      left.map(({ check, checkRunId }) => ({
        type: 'check-completed' as const,
        data: {
          checkRunId,
          name: check.name,
          headSha: request.headSha,
          changeIds: [request.changeId],
          startedAt: null,
          conclusion,
          at,
          exitCode: null,
          signal: null,
          durationMs: 0,
          output: null,
        },
      })),
    );
  };
  try {
    for (const { check, checkRunId } of planned) {
      if (request.signal?.aborted === true) {
        await closeLeft('cancelled');
        break;
      }
      const result = await runOneCheck(context, request, check, checkRunId, cacheDir);
      results.push(result);
      request.onProgress?.({ phase: 'completed', result });
    }
  } catch (error) {
    await closeLeft('error').catch(() => undefined);
    throw error;
  }
  return results;
}

/** Parse an `artifact://<namespace>/<checkRunId>/sha256:<hex>` output url. */
export function parseOutputUrl(url: string): { namespace: string; runId: string; digest: `sha256:${string}` } {
  const match = /^artifact:\/\/([^/]+)\/([^/]+)\/(sha256:[0-9a-f]{64})$/.exec(url);
  if (match === null) throw new ProofgateError('INVALID_INPUT', `not a check output url: ${url}`);
  return { namespace: match[1] ?? '', runId: match[2] ?? '', digest: match[3] as `sha256:${string}` };
}
