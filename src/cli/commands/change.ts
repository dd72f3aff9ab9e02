import type { Command } from 'commander';
import { ProofgateError } from '../../core/index.js';
import { outcomeJson } from '../../automerge/loop/index.js';
import { AUTOMERGE_NAMESPACE } from '../../automerge/loop/local.js';
import { describeQueueItem, type ChangeQueueView } from '../../automerge/queue/queue.js';
import { listedChanges, shownChange, type ListedChange, type ListedQueue, type ShownChange } from '../../automerge/queue/change-records.js';
import type { EventStore } from '../../storage/ports.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
import type { ChangeSnapshot, ForgeComment } from '../../forge/port.js';
import { GitRepository, defaultLocalDataDir, openLocalForge, type LocalForge } from '../../forge/local/index.js';
import { resolveDataDir } from '../data-dir.js';
import { AUTOMERGE_EXIT, progressLine, renderOutcome, routeLocalComment, type RoutedComment } from './automerge.js';
import { emit, setExitStatus, usageError } from '../io.js';
import { untrustedText } from '../untrusted-text.js';
import { followComment, notRemote, refuseAs, remoteCall, remoteTarget, renderable } from '../remote.js';

/** `--repo` / `--data`, shared by every local-forge command. */
export interface LocalForgeFlags {
  repo?: string;
  data?: string;
  json?: boolean;
}

export function addLocalForgeOptions(command: Command): Command {
  return command
    .option('--repo <dir>', 'the git repository (default: the repository of the current directory)')
    .option('--data <dir>', 'state directory (default: $PROOFGATE_DATA_DIR, else .git/proofgate/ of the repository)');
}

/** Open the local forge for a command, run `action` (with the data directory), and always close the store. */
export async function withLocalForge<T>(flags: LocalForgeFlags, action: (forge: LocalForge, dataDir: string) => Promise<T>): Promise<T> {
  const repo = await GitRepository.open(flags.repo ?? process.cwd());
  const dataDir = resolveDataDir(flags.data, defaultLocalDataDir(repo));
  const opened = await openLocalForge({ repoDir: repo.root, dataDir });
  try {
    return await action(opened.forge, dataDir);
  } finally {
    await opened.close();
  }
}

/** `action` with the data directory's automerge store's events (the merge queue streams), opened for the call. */
async function withQueueEvents<T>(dataDir: string, action: (events: EventStore) => Promise<T>): Promise<T> {
  const storage = createLocalRunStorage({ directory: dataDir, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
  try {
    return await action(storage.eventStore);
  } finally {
    await storage.close();
  }
}

/** The state column of `change list`: the state, and where a queued change waits. */
function listState(state: string, queue: ListedQueue | null | undefined): string {
  if (queue === null || queue === undefined) return state;
  return `${state}, queued ${queue.position}/${queue.of} on ${untrustedText(queue.base)}${queue.paused ? ' (paused)' : ''}`;
}

/** The queue lines of `change show` (every text from the queue shown inert). */
function renderQueue(view: ChangeQueueView): string[] {
  const where =
    view.status === 'waiting'
      ? `position ${view.position ?? '?'} of ${view.of ?? '?'} in the merge queue of ${untrustedText(view.base)}${view.paused ? ' (paused)' : ''}, head ${short(view.head)}`
      : `${view.status} (merge queue of ${untrustedText(view.base)}, head ${short(view.head)})`;
  const candidate = view.candidate;
  return [
    `queue      ${where}`,
    ...(candidate === null
      ? []
      : [
          `  candidate ${untrustedText(candidate.candidate)} (${candidate.index} of ${candidate.size}), tip ${short(candidate.tip)}, checks ${candidate.checks}${
            candidate.failure === null ? '' : `: ${untrustedText(candidate.failure.check ?? 'a check')}`
          }`,
        ]),
    ...view.history.map((item) => `  ${untrustedText(item.at)} ${item.kind}: ${untrustedText(describeQueueItem(item))}`),
  ];
}

const short = (sha: string): string => sha.slice(0, 12);

/** Each line of a comment body is shown after this, below its `[id] author at time:` line. */
const COMMENT_BODY = { prefix: '    | ' } as const;

function renderSnapshot(snapshot: ChangeSnapshot & { readonly author: { readonly permission: string }; readonly queue?: ChangeQueueView | null }): string {
  const lines = [
    `change ${snapshot.id}: ${untrustedText(snapshot.title)}`,
    `state      ${snapshot.state}${snapshot.mergeCommitSha === null ? '' : ` (merge commit ${snapshot.mergeCommitSha})`}`,
    `base       ${untrustedText(snapshot.base.ref)} ${snapshot.base.sha}`,
    `head       ${untrustedText(snapshot.head.ref)} ${snapshot.head.sha}`,
    `author     ${untrustedText(snapshot.author.login)} (${snapshot.author.permission})`,
    `mergeable  ${snapshot.mergeable} / ${snapshot.mergeStateStatus}`,
    `labels     ${snapshot.labels.length === 0 ? '-' : snapshot.labels.map((label) => untrustedText(label)).join(', ')}`,
    `checks     ${snapshot.checks.length === 0 ? '-' : ''}`,
    ...snapshot.checks.map((check) => `  ${untrustedText(check.name)}: ${check.status}${check.conclusion === null ? '' : ` ${check.conclusion}`}`),
    ...(snapshot.queue === undefined || snapshot.queue === null ? [] : renderQueue(snapshot.queue)),
    `comments   ${snapshot.comments.length === 0 ? '-' : ''}`,
    ...snapshot.comments.flatMap((comment) => [
      `  [${untrustedText(comment.id)}] ${untrustedText(comment.author)} at ${untrustedText(comment.updatedAt)}:`,
      ...untrustedText(comment.body, COMMENT_BODY).split('\n'),
    ]),
  ];
  return lines.map((line) => line.trimEnd()).join('\n');
}

function renderComment(changeId: string, comment: ForgeComment): string {
  return `comment ${untrustedText(comment.id)} on change ${untrustedText(changeId)} by ${untrustedText(comment.author)}`;
}

function nonEmpty(value: string, what: string): string {
  if (value.trim() === '') throw usageError(`${what} must not be empty`);
  return value;
}

const STATES = ['open', 'closed', 'merged', 'all'] as const;

/** A change id as a path segment for the server; any other text names no change (NOT_FOUND, as in direct mode, nothing sent). */
export function changeIdPath(id: string): string {
  if (!/^[1-9][0-9]{0,15}$/.test(id)) throw new ProofgateError('NOT_FOUND', `no change with id "${id}"`, { changeId: id });
  return id;
}

const AS_HELP = "author login (default: the local git identity, user.name); never proofgate's own, in any letter case (RESERVED_IDENTITY)";

export function registerChangeCommands(program: Command): void {
  const change = program.command('change').description('changes of the local forge: a head branch proposed into a base branch');

  addLocalForgeOptions(
    change
      .command('open')
      .description('register a change: --head BRANCH proposed into --base BRANCH (a protected branch)')
      .requiredOption('--head <branch>', 'the branch with the work (never a protected branch)')
      .option('--base <branch>', 'the protected branch to merge into (default: the trusted branch, see `proofgate config trusted-branch`)')
      .option('--title <text>', 'title (default: the subject of the head commit)')
      .option('--as <login>', AS_HELP)
      .option('--json', 'print the snapshot as JSON')
      .addHelpText(
        'after',
        "\nRefused, with nothing registered: a base that is not protected or a head that is (PROTECTED_BRANCH), a base whose .proofgate.yml is invalid (CONFIG), proofgate's own login as author (RESERVED_IDENTITY).",
      ),
  ).action(async (flags: LocalForgeFlags & { head: string; base?: string; title?: string; as?: string }) => {
    const remote = remoteTarget();
    if (remote !== null) refuseAs(flags.as);
    const snapshot =
      remote !== null
        ? (
            await remoteCall<{ change: ChangeSnapshot }>(remote, 'POST', '/api/changes', {
              head: nonEmpty(flags.head, '--head'),
              ...(flags.base === undefined ? {} : { base: nonEmpty(flags.base, '--base') }),
              ...(flags.title === undefined ? {} : { title: flags.title }),
            })
          ).change
        : await withLocalForge(flags, async (forge) =>
            forge.openChange({
              head: nonEmpty(flags.head, '--head'),
              base: nonEmpty(flags.base ?? (await forge.trustedBranch()), '--base'),
              title: flags.title,
              author: flags.as,
            }),
          );
    await emit(
      Boolean(flags.json),
      snapshot,
      () => `opened change ${snapshot.id}: ${untrustedText(snapshot.head.ref)} -> ${untrustedText(snapshot.base.ref)} (head ${short(snapshot.head.sha)})`,
    );
  });

  addLocalForgeOptions(
    change
      .command('list')
      .description('list the changes of the repository')
      .option('--state <state>', `only changes in this state: ${STATES.join(', ')}`, 'all')
      .option('--json', 'print a JSON array'),
  ).action(async (flags: LocalForgeFlags & { state: string }) => {
    if (!(STATES as readonly string[]).includes(flags.state)) throw usageError(`--state must be one of ${STATES.join(', ')}`);
    const remote = remoteTarget();
    const all: ListedChange[] =
      remote !== null
        ? (await remoteCall<{ changes: ListedChange[] }>(remote, 'GET', '/api/change-records')).changes
        : await withLocalForge(flags, (forge, dataDir) => withQueueEvents(dataDir, (events) => listedChanges(forge, events)));
    const entries = all.filter((entry) => flags.state === 'all' || entry.state === flags.state);
    await emit(Boolean(flags.json), entries, () =>
      entries.length === 0
        ? 'no changes'
        : entries
            .map(
              (entry) =>
                `${entry.id}\t${listState(entry.state, entry.queue)}\t${untrustedText(entry.head)} -> ${untrustedText(entry.base)}\t${untrustedText(entry.title)}`,
            )
            .join('\n'),
    );
  });

  addLocalForgeOptions(
    change
      .command('show')
      .description('show a change: refs, mergeability, labels, the checks of the current head, its merge queue (place, candidate, history), comments')
      .argument('<id>', 'change id')
      .option('--json', 'print the snapshot as JSON'),
  ).action(async (id: string, flags: LocalForgeFlags) => {
    // The author's permission is shown beside the snapshot (asked of the forge: a snapshot does not carry it).
    const remote = remoteTarget();
    const snapshot: ShownChange =
      remote !== null
        ? (await remoteCall<{ change: ShownChange }>(remote, 'GET', `/api/change-records/${changeIdPath(id)}`)).change
        : await withLocalForge(flags, (forge, dataDir) => withQueueEvents(dataDir, (events) => shownChange(forge, events, id)));
    await emit(Boolean(flags.json), snapshot, () => renderSnapshot(snapshot));
  });

  addLocalForgeOptions(
    change
      .command('comment')
      .description('add a comment to a change')
      .argument('<id>', 'change id')
      .argument('<text>', 'the comment body')
      .option('--as <login>', AS_HELP)
      .option('--json', 'print the comment as JSON (with the automerge outcome when the comment ran a job)')
      .addHelpText(
        'after',
        '\nA comment holding proofgate commands is routed like a forge comment. When it starts or joins an automerge job, the job runs to its end here (progress on stderr) and the outcome is reported as `proofgate automerge ID` does: the outcome line after the comment line, --json prints the outcome object with a "comment" field, and the exit status is 0 merged, 3 blocked, 4 still waiting, 5 stopped. Otherwise: exit 0.',
      ),
  ).action(async (id: string, text: string, flags: LocalForgeFlags & { as?: string }) => {
    nonEmpty(text, 'the comment text');
    const remote = remoteTarget();
    if (remote !== null) {
      refuseAs(flags.as);
      const posted = await remoteCall<{ comment: ForgeComment; refused: { reason: string }[]; following: boolean }>(
        remote,
        'POST',
        `/api/changes/${changeIdPath(id)}/comments`,
        { body: text },
      );
      for (const refusal of posted.refused) process.stderr.write(`[change ${untrustedText(id)}] ${untrustedText(refusal.reason)}\n`);
      if (!posted.following) {
        await emit(Boolean(flags.json), posted.comment, () => renderComment(id, posted.comment));
        return;
      }
      // The job's progress lines on stderr as the server streams them, as direct mode prints them.
      const followed = await followComment(remote, id, posted.comment.id, (progress) => process.stderr.write(`${progressLine(progress)}\n`));
      if (followed.kind === 'held-elsewhere') {
        process.stderr.write(`proofgate: change ${id} is being automerged by ${untrustedText(followed.holder)}; it will see this command\n`);
        await emit(Boolean(flags.json), posted.comment, () => renderComment(id, posted.comment));
        return;
      }
      const ended = followed.outcome;
      await emit(Boolean(flags.json), { ...ended, comment: posted.comment }, () => `${renderComment(id, posted.comment)}\n${renderOutcome(renderable(ended))}`);
      setExitStatus(AUTOMERGE_EXIT[ended.outcome]);
      return;
    }
    const { comment, routed } = await withLocalForge(flags, async (forge): Promise<{ comment: ForgeComment; routed: RoutedComment }> => {
      const posted = await forge.commentAs(id, text, flags.as ?? (await forge.localIdentity()));
      return { comment: posted, routed: await routeLocalComment(forge, resolveDataDir(flags.data, defaultLocalDataDir(forge.repo)), id, posted) };
    });
    if (routed.kind !== 'ran') {
      await emit(Boolean(flags.json), comment, () => renderComment(id, comment));
      return;
    }
    const { outcome } = routed;
    await emit(Boolean(flags.json), { ...outcomeJson(outcome), comment }, () => `${renderComment(id, comment)}\n${renderOutcome(outcome)}`);
    setExitStatus(AUTOMERGE_EXIT[outcome.kind]);
  });

  addLocalForgeOptions(
    change.command('close').description('close a change without merging it').argument('<id>', 'change id').option('--json', 'print the snapshot as JSON'),
  ).action(async (id: string, flags: LocalForgeFlags) => {
    const remote = remoteTarget();
    const snapshot =
      remote !== null
        ? (await remoteCall<{ change: ChangeSnapshot }>(remote, 'POST', `/api/changes/${changeIdPath(id)}/close`, {})).change
        : await withLocalForge(flags, (forge) => forge.closeChange(id));
    await emit(Boolean(flags.json), snapshot, () => `closed change ${id}`);
  });

  addLocalForgeOptions(
    change
      .command('merge')
      .description('squash-merge a change at exactly --expected-head (compare-and-swap of the base branch)')
      .argument('<id>', 'change id')
      .requiredOption('--expected-head <sha>', 'the full sha of the head that was reviewed')
      .option('--title <text>', 'title of the squash commit (default: the change title)')
      .option('--message <text>', 'body of the squash commit', '')
      .option('--json', 'print {"merged","sha"} as JSON'),
  ).action(async (id: string, flags: LocalForgeFlags & { expectedHead: string; title?: string; message: string }) => {
    if (remoteTarget() !== null) throw notRemote('change merge');
    if (!/^[0-9a-f]{40}$/.test(flags.expectedHead)) throw usageError('--expected-head must be a full 40-character sha');
    const result = await withLocalForge(flags, (forge) =>
      forge.merge(id, { expectedHeadSha: flags.expectedHead, title: flags.title ?? '', message: flags.message }),
    );
    await emit(Boolean(flags.json), result, () => `merged change ${id} as ${result.sha}`);
  });
}
