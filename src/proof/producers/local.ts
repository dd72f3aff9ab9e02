import { lstat, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalJson, errorMessage, isProofgateError } from '../../core/index.js';
import { PORTABLE_ENV, allowListedEnv, exportCommit, makeJobDir, prepareJobDir, runUntrusted, type JailLimits, type SandboxMode } from '../../host/index.js';
import { makeReadOnly, removeSandbox } from '../../review/sandbox.js';
import { DEFAULT_EVIDENCE_LIMITS, packEvidenceBundle } from '../evidence/index.js';
import { evidenceReason } from '../evidence/reasons.js';
import type { ProducerAnswer, ProducerJob, ProofProducerRunner } from './types.js';

/** stderr kept from a scenario program, for the one-line reason of a failure. */
const STDERR_KEEP = 4096;
/** stdout of a scenario program is not evidence (its files are): only a little is kept, then dropped. */
const STDOUT_KEEP = 4096;

export interface LocalProducerOptions {
  /** The repository holding both the trusted commit and the head. */
  readonly repoDir: string;
  /** `jail` (default) or `none`, as the trusted config says: a scenario program runs like every other untrusted job. */
  readonly sandbox?: SandboxMode;
  readonly cacheDir?: string;
  /** The trusted config's jail limits (`limits:`), as for every other jailed job; unset ones keep the jail's defaults. */
  readonly limits?: Partial<JailLimits>;
  /** Clock for the remaining time before the plan's deadline (ms since the epoch). */
  readonly now?: () => number;
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.slice(0, 200) ?? '';
}

function incomplete(message: string): ProducerAnswer {
  return { kind: 'incomplete', message };
}

/**
 * Move the program's output directory out of the job (into proofgate's own
 * part of the job root, which the jail never sees) and check that it is
 * still a directory: the jailed program may have replaced `out/` itself by a
 * symbolic link to a host directory, which packing would otherwise follow
 * (the packer refuses links below its directory, not the directory itself).
 * Returns the malformed answer, or null when `to` is a real directory.
 */
async function takeOutput(from: string, to: string): Promise<ProducerAnswer | null> {
  try {
    await rename(from, to);
  } catch (error) {
    return { kind: 'malformed', reason: 'CORRUPT', message: `CORRUPT: the output directory is gone: ${errorMessage(error)}` };
  }
  const info = await lstat(to);
  if (info.isSymbolicLink()) {
    return {
      kind: 'malformed',
      reason: 'SYMLINK',
      message: 'SYMLINK: the output directory was replaced by a symbolic link; a bundle holds regular files only',
    };
  }
  if (!info.isDirectory()) {
    return { kind: 'malformed', reason: 'SPECIAL_FILE', message: 'SPECIAL_FILE: the output directory was replaced by something that is not a directory' };
  }
  return null;
}

/**
 * The local producer: the scenario's program, from the TRUSTED commit's tree
 * (never the head's), runs in the jail against a fresh export of the exact
 * head. Its job directory holds:
 *
 * - `trusted/`: the trusted tree, read-only, the working directory;
 * - `job/head/`: the head's files (the program may build and run them there);
 * - `job/plan.json`: the plan (read-only, proofgate's);
 * - `job/out/`: where the program writes its observation files;
 * - `job/home`, `job/tmp`: its HOME and TMPDIR.
 *
 * It gets `PROOFGATE_PROOF_PLAN`, `PROOFGATE_PROOF_OUTPUT`,
 * `PROOFGATE_HEAD_DIR`, `PROOFGATE_HEAD_SHA`, `PROOFGATE_PROOF_SCENARIO` and
 * `PROOFGATE_PROOF_PLAN_DIGEST`, plus PATH and the locale; nothing else of
 * proofgate's environment, no network, no credential. When it exits 0,
 * proofgate packs `out/` into an evidence bundle (refusing links, special
 * files, unsafe names and anything over the scenario's limits) and hands
 * the bytes back unverified: the caller verifies them like any bundle.
 * `out/` is first moved out of the job's reach and must still be a real
 * directory (a link put in its place is refused, never followed).
 * Anything else (exit code, timeout, abort) is `incomplete`; a directory that
 * cannot be packed is `malformed`.
 */
export function localProducer(options: LocalProducerOptions): ProofProducerRunner {
  const now = options.now ?? Date.now;
  return {
    async run(job: ProducerJob): Promise<ProducerAnswer> {
      const producer = job.scenario.producer;
      if (producer.kind !== 'local') return { kind: 'unverifiable', message: `scenario ${job.scenario.id} is not a local scenario` };
      const remainingMs = Math.min(job.deadlineMs - now(), job.scenario.timeoutSeconds * 1000);
      if (remainingMs <= 0) return incomplete('no time left before the plan deadline');
      if (job.signal.aborted) return incomplete('the review ended before the plan started');
      const root = await makeJobDir('proofgate-proof-');
      try {
        const program = join(root, 'trusted');
        const jobDir = join(root, 'job');
        const head = join(jobDir, 'head');
        const out = join(jobDir, 'out');
        const home = join(jobDir, 'home');
        const tmp = join(jobDir, 'tmp');
        await mkdir(program);
        await mkdir(jobDir);
        await Promise.all([head, out, home, tmp].map((dir) => mkdir(dir)));
        await exportCommit(options.repoDir, job.trustedSha, program);
        await makeReadOnly(program);
        await exportCommit(options.repoDir, job.headSha, head);
        await prepareJobDir(jobDir);
        // Written after prepareJobDir, so the plan stays proofgate's file: the jailed uid reads it and cannot rewrite it.
        const planFile = join(jobDir, 'plan.json');
        await writeFile(planFile, `${canonicalJson(job.plan)}\n`, { mode: 0o444, flag: 'wx' });
        const env = allowListedEnv(process.env, PORTABLE_ENV, {
          HOME: home,
          TMPDIR: tmp,
          PROOFGATE_PROOF_PLAN: planFile,
          PROOFGATE_PROOF_OUTPUT: out,
          PROOFGATE_HEAD_DIR: head,
          PROOFGATE_HEAD_SHA: job.headSha,
          PROOFGATE_PROOF_SCENARIO: job.scenario.id,
          PROOFGATE_PROOF_PLAN_DIGEST: job.planDigest,
        });
        // Exporting a large head takes time: what is left of the plan's time is measured again, and an abort seen, before the program starts.
        const timeoutMs = Math.min(job.deadlineMs - now(), remainingMs);
        if (job.signal.aborted) return incomplete('the review ended before the plan started');
        if (timeoutMs <= 0) return incomplete('no time left before the plan deadline');
        job.onProgress?.(`running scenario ${job.scenario.id} on ${job.headSha.slice(0, 12)}`);
        const run = await runUntrusted({
          argv: producer.command,
          sandbox: options.sandbox ?? 'jail',
          jobDir,
          cwd: program,
          env,
          mounts: [{ path: program, writable: false }],
          ...(options.cacheDir === undefined ? {} : { cacheDir: options.cacheDir }),
          ...(options.limits === undefined ? {} : { limits: options.limits }),
          network: false,
          timeoutMs,
          signal: job.signal,
          output: { maxBytes: STDOUT_KEEP, keep: 'tail', onOverflow: 'truncate' },
          stderr: { maxBytes: STDERR_KEEP, keep: 'tail' },
          killGraceMs: 0,
        });
        if (run.startError !== null) return incomplete(`cannot start the scenario program: ${firstLine(run.startError)}`);
        if (run.aborted || job.signal.aborted) return incomplete('the review ended while the plan ran');
        if (run.timedOut) return incomplete(`the scenario program ran out of time after ${Math.round(timeoutMs / 1000)}s`);
        if (run.signal !== null) return incomplete(`the scenario program was killed by ${run.signal}`);
        if (run.exitCode !== 0) {
          const detail = firstLine(run.stderr.toString('utf8'));
          return incomplete(`the scenario program exited with code ${String(run.exitCode)}${detail === '' ? '' : `: ${detail}`}`);
        }
        const taken = await takeOutput(out, join(root, 'out'));
        if (taken !== null) return taken;
        const bundle = join(root, 'bundle.zip');
        try {
          await packEvidenceBundle({
            dir: join(root, 'out'),
            scenario: job.scenario.id,
            planDigest: job.planDigest,
            headSha: job.headSha,
            out: bundle,
            // The same limits the session verifies with (scenarioEvidenceLimits): maxBytes is what the bundle may expand to.
            limits: {
              maxArchiveBytes: job.scenario.evidence.maxBytes,
              maxTotalBytes: Math.min(job.scenario.evidence.maxBytes, DEFAULT_EVIDENCE_LIMITS.maxTotalBytes),
              maxEntries: job.scenario.evidence.maxEntries,
            },
          });
        } catch (error) {
          const reason = evidenceReason(error);
          if (reason === null && !isProofgateError(error)) throw error;
          return { kind: 'malformed', reason: reason ?? 'CORRUPT', message: errorMessage(error) };
        }
        return { kind: 'bundle', bytes: await readFile(bundle) };
      } finally {
        await removeSandbox(root);
      }
    },
  };
}
