import type { Command } from 'commander';
import { openLocalAutomerge, outcomeJson, type Dispatch, type LocalAutomerge, type LoopOutcome, type LoopProgress } from '../../automerge/loop/index.js';
import { parseCommands } from '../../automerge/commands.js';
import { GitRepository, defaultLocalDataDir, openLocalForge, type LocalForge } from '../../forge/local/index.js';
import type { ForgeComment } from '../../forge/port.js';
import { mergedOutcome } from '../../service/api-write.js';
import { ProofgateError } from '../../core/index.js';
import { resolveDataDir } from '../data-dir.js';
import { emit, setExitStatus, usageError } from '../io.js';
import { untrustedText } from '../untrusted-text.js';
import { followComment, notRemote, remoteCall, remoteTarget, renderable, type RemoteOutcome } from '../remote.js';

/**
 * Exit status per loop outcome: 0 merged, 3 blocked, 4 still waiting (also
 * `parked`, which only a job queue's worker asks for), 5 stopped or interrupted.
 */
export const AUTOMERGE_EXIT: Record<LoopOutcome['kind'], number> = { merged: 0, blocked: 3, waiting: 4, parked: 4, stopped: 5, interrupted: 5 };

interface AutomergeFlags {
  repo?: string;
  data?: string;
  json?: boolean;
  replay?: string;
}

/** One progress line for a terminal (its text may quote comments, authors and reasons: shown escaped). */
export function progressLine(progress: LoopProgress): string {
  return `[change ${untrustedText(progress.changeId)}] ${untrustedText(progress.text)}`;
}

/** The human summary of an outcome (of this process's loop, or one a server reported). */
export function renderOutcome(outcome: Pick<LoopOutcome, 'kind' | 'changeId' | 'head' | 'repairs' | 'verdict' | 'mergeCommit' | 'reason'>): string {
  const head = outcome.head === null ? '' : ` head ${outcome.head.slice(0, 12)}`;
  const repairs = `${outcome.repairs} repair${outcome.repairs === 1 ? '' : 's'}`;
  const verdict = untrustedText(outcome.verdict ?? 'no verdict');
  if (outcome.kind === 'merged') {
    return `change ${outcome.changeId}: merged${head} as ${outcome.mergeCommit ?? '?'} (${verdict}, ${repairs})`;
  }
  return `change ${outcome.changeId}: ${outcome.kind}${head} (${verdict}, ${repairs}): ${untrustedText(outcome.reason)}`;
}

/** What routing a posted comment did: nothing to run, a job that ran to an outcome, or a job another process holds. */
export type RoutedComment =
  | { readonly kind: 'none' }
  | { readonly kind: 'ran'; readonly outcome: LoopOutcome }
  | { readonly kind: 'held-elsewhere'; readonly holder: string; readonly until: string };

/**
 * Route a comment just posted on the local forge through the automerge router
 * (`proofgate change comment ID "/proofgate automerge"`): refused commands are
 * reported, and a started job runs to its end with progress on stderr; the
 * caller reports the outcome as `proofgate automerge ID` does.
 */
export async function routeLocalComment(forge: LocalForge, dataDir: string, changeId: string, comment: ForgeComment): Promise<RoutedComment> {
  if (parseCommands(comment.body).length === 0) return { kind: 'none' };
  const automerge = await openLocalAutomerge({ forge, dataDir, onProgress: (progress) => process.stderr.write(`${progressLine(progress)}\n`) });
  try {
    const routed = await automerge.router.handleComment(changeId, comment);
    if (routed.dispatch === null) return { kind: 'none' };
    const result = await routed.dispatch.done;
    if (result.kind !== 'ran') {
      process.stderr.write(`proofgate: change ${changeId} is being automerged by ${untrustedText(result.holder.owner)}; it will see this command\n`);
      return { kind: 'held-elsewhere', holder: result.holder.owner, until: result.holder.until };
    }
    return { kind: 'ran', outcome: result.outcome };
  } finally {
    await automerge.close();
  }
}

/** A merge proofgate attempted that the forge shows but the ledger does not have yet (a run killed mid-merge). */
async function mergeToRecord(automerge: LocalAutomerge, changeId: string): Promise<boolean> {
  const { state, steps } = await automerge.env.store.load(changeId);
  return state.merged === null && steps.some((step) => step.step === 'merge-attempt');
}

/**
 * `automerge ID` in client mode: post `/proofgate automerge` as the token's
 * identity and follow the job the server runs to its end, printing its
 * progress lines on stderr as the server streams them. Nothing is posted
 * for a closed or merged change, as in direct mode; a command the server's
 * router refuses (permission below write) is an error (READ_ONLY).
 */
async function remoteAutomerge(remote: NonNullable<ReturnType<typeof remoteTarget>>, id: string, json: boolean): Promise<void> {
  const current = (await remoteCall<{ change: { state: string } }>(remote, 'GET', `/api/change-records/${id}`)).change;
  if (current.state === 'closed')
    throw new ProofgateError('NOT_MERGEABLE', `change ${id} is closed without merging; nothing to automerge (nothing was posted)`);
  let outcome: RemoteOutcome;
  if (current.state === 'merged') {
    outcome = await remoteCall<RemoteOutcome>(remote, 'GET', `/api/changes/${id}/merged-outcome`);
  } else {
    const posted = await remoteCall<{ comment: ForgeComment; refused: { reason: string }[]; following: boolean }>(
      remote,
      'POST',
      `/api/changes/${id}/comments`,
      {
        body: '/proofgate automerge',
      },
    );
    const refusal = posted.refused[0];
    if (refusal !== undefined) throw new ProofgateError('READ_ONLY', `change ${id}: ${refusal.reason} (nothing was started)`);
    if (!posted.following) throw new ProofgateError('INVALID_INPUT', `change ${id}: the server started no automerge job`);
    // The job's progress lines as direct mode prints them, as the server streams them.
    const followed = await followComment(remote, id, posted.comment.id, (progress) => process.stderr.write(`${progressLine(progress)}\n`));
    if (followed.kind !== 'ran') {
      throw new ProofgateError('INVALID_INPUT', `change ${id} is already being automerged by ${followed.holder} (lease until ${followed.until})`);
    }
    outcome = followed.outcome;
  }
  await emit(json, outcome, () => renderOutcome(renderable(outcome)));
  setExitStatus(AUTOMERGE_EXIT[outcome.outcome]);
}

export function registerAutomergeCommands(program: Command): void {
  program
    .command('automerge')
    .description('review, repair and merge one change of the local forge at its exact reviewed head; progress on stderr')
    .argument('<id>', 'the change id')
    .option('--repo <dir>', 'the git repository (default: the repository of the current directory)')
    .option('--data <dir>', 'state directory (default: $PROOFGATE_DATA_DIR, else .git/proofgate/ of the repository)')
    .option('--json', 'print the outcome as JSON')
    .option(
      '--replay <comment-id>',
      'instead of posting /proofgate automerge, process again one command comment of this change that was processed before (by someone with write permission), then run the loop',
    )
    .addHelpText(
      'after',
      [
        '',
        'Replay: --replay COMMENT_ID reprocesses that comment on purpose (the ledger otherwise skips a comment it has processed), e.g. after',
        "a fix to proofgate; its commands run as if posted now, under its author's name, and the timeline records the replay and that",
        'the local operator asked for it. Only a command comment on this change, by someone with write permission, can be replayed;',
        'anything else is a one-line error and nothing is stored.',
        '',
        'Exit status: 0 merged (also a change merged before: reported, nothing posted), 1 error (also a change closed without merging), 2 usage, 3 blocked (a human must look), 4 still waiting when the wait window ended, 5 stopped.',
      ].join('\n'),
    )
    .action(async (id: string, flags: AutomergeFlags) => {
      if (!/^[1-9][0-9]*$/.test(id)) throw usageError(`change id must be a positive number, got "${id}"`);
      const remote = remoteTarget();
      if (remote !== null) {
        if (flags.replay !== undefined) throw notRemote('automerge --replay');
        await remoteAutomerge(remote, id, Boolean(flags.json));
        return;
      }
      const repo = await GitRepository.open(flags.repo ?? process.cwd());
      const dataDir = resolveDataDir(flags.data, defaultLocalDataDir(repo));
      const opened = await openLocalForge({ repoDir: repo.root, dataDir });
      try {
        await opened.forge.store.requireChange(id);
        const current = await opened.forge.snapshot(id);
        if (current.state === 'closed') {
          throw new ProofgateError('NOT_MERGEABLE', `change ${id} is closed without merging; nothing to automerge (nothing was posted)`);
        }
        if (flags.replay !== undefined && current.state !== 'open') {
          throw new ProofgateError('NOT_MERGEABLE', `change ${id} is ${current.state}; a comment is replayed only on an open change (nothing was stored)`);
        }
        const automerge = await openLocalAutomerge({
          forge: opened.forge,
          dataDir,
          onProgress: (progress) => process.stderr.write(`${progressLine(progress)}\n`),
        });
        const interrupt = (): void => void automerge.jobs.close();
        process.once('SIGINT', interrupt);
        try {
          if (current.state === 'merged' && !(await mergeToRecord(automerge, id))) {
            const outcome = await mergedOutcome(automerge, current);
            await emit(Boolean(flags.json), outcomeJson(outcome), () => renderOutcome(outcome));
            setExitStatus(AUTOMERGE_EXIT.merged);
            return;
          }
          let dispatch: Dispatch;
          if (current.state === 'merged') {
            // proofgate's own merge landed but a killed run did not record it: the job records it and writes the final comment.
            dispatch = automerge.jobs.dispatch(id);
          } else if (flags.replay !== undefined) {
            const routed = await automerge.router.replayComment(id, flags.replay, await opened.forge.localIdentity());
            dispatch = routed.dispatch ?? automerge.jobs.dispatch(id);
          } else {
            const comment = await opened.forge.commentAs(id, '/proofgate automerge', await opened.forge.localIdentity());
            const routed = await automerge.router.handleComment(id, comment, { operator: true });
            dispatch = routed.dispatch ?? automerge.jobs.dispatch(id);
          }
          const result = await dispatch.done;
          if (result.kind !== 'ran') {
            throw new ProofgateError(
              'INVALID_INPUT',
              `change ${id} is already being automerged by ${result.holder.owner} (lease until ${result.holder.until})`,
            );
          }
          const replayed = flags.replay === undefined ? {} : { replayed: flags.replay };
          await emit(Boolean(flags.json), { ...outcomeJson(result.outcome), ...replayed }, () => renderOutcome(result.outcome));
          setExitStatus(AUTOMERGE_EXIT[result.outcome.kind]);
        } finally {
          process.removeListener('SIGINT', interrupt);
          await automerge.close();
        }
      } finally {
        await opened.close();
      }
    });
}
