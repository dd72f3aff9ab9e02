/**
 * The comment router: a comment event -> parseCommands -> authorizeCommand
 * (repository permission, the change's author) -> the ledger (keyed by
 * comment id + updated_at, so a redelivery or an unchanged edit runs nothing)
 * -> status comment and labels -> start or join the change's job. Other forge
 * events (a check finished, a push, a close) wake the change's job at once,
 * or restart it when automerge is on and no job runs. Every step is an event
 * in the store.
 *
 * Replies are written once. Each carries a signed `command-reply` marker
 * naming the comment version and the command's line. The ledger append that
 * applies a comment's commands also records the lines its route is to run
 * (`commands-routed`); a route that ends records `commands-finished`. A route
 * cut short by a failure (a reply GitHub refused, say) records a
 * `commands-interrupted` step with the lines it ran and the ones it finished;
 * the next delivery of that comment version (the retried job), which the
 * ledger skips as applied, claims the rest (`commands-resumed`, one claimant)
 * and runs the unfinished commands on the current state, writing only the
 * replies whose marker is not among proofgate's own comments in the snapshot
 * it read. Where routes of a change never run at once (`serial`: a service's
 * queue), a route that neither finished nor recorded a failure was killed,
 * and the next delivery finishes it the same way.
 *
 * The router writes replies only. Status comments and labels are the loop's,
 * written under the change's lease: a command routed in one process while
 * another process's loop merges cannot overwrite the final comment.
 */
import { isProofgateError, newId, ProofgateError, type JsonValue } from '../../core/index.js';
import type { ChangeSnapshot, ForgeComment, ForgeEvent, RepoPermission } from '../../forge/port.js';
import { commandMention, commandText, parseCommands, type ParsedCommand } from '../commands.js';
import { automergeActive, type AutomergeLedgerState, type SkipReason } from '../ledger.js';
import { answeredCommandLines, composeMarkedBody, type CommandReplyFields } from '../markers.js';
import { escapeText } from '../status-comment.js';
import { authorizeCommand, type Authorization } from '../trust.js';
import { approveChange } from './facts.js';
import type { ChangeJobs, Dispatch } from './job.js';
import type { LoadedLedger, StepEvent } from './ledger-store.js';
import { trustedConfig } from './policy.js';
import { admitProofCommand, proofSettingsOf, type ProofAdmission } from '../../proof/index.js';

export interface RouteResult {
  readonly commands: readonly ParsedCommand[];
  readonly refused: readonly { readonly command: string; readonly reason: string }[];
  /** Commands acted on now (empty for a redelivery or an unchanged edit). */
  readonly ran: readonly ParsedCommand[];
  readonly skipped: SkipReason | null;
  /**
   * Commands of a redelivered comment version whose first route was cut short
   * before they finished, finished now (their missing replies written).
   */
  readonly resumed: readonly ParsedCommand[];
  /** The change's job when one was started or joined. */
  readonly dispatch: Dispatch | null;
}

export interface CommentOptions {
  /**
   * The command comes from the operator of a local forge (the person running
   * `proofgate automerge`), who holds the repository itself: treated as admin.
   */
  readonly operator?: boolean;
  /**
   * Routes of this change never run at once: the caller's queue runs one job
   * of a change's comments at a time, and fences a job taken from a worker
   * thought dead (`fence`). A redelivered comment version whose route neither
   * finished nor recorded a failure was then cut off by a crash, and is
   * finished now. Default false (a local CLI and `serve --repo` may route one
   * comment in two processes at once).
   */
  readonly serial?: boolean;
  /**
   * Asked before each command and each reply: throws (`LEASE_LOST`) once the
   * caller's job was taken from it, and the route stops there, recording
   * nothing more (the job's new holder finishes the route).
   */
  readonly fence?: () => Promise<void>;
}

export const HELP_TEXT = [
  "proofgate understands these commands, one per line (with `/proofgate` or `@proofgate`; on GitHub also `@` and the App's name):",
  '',
  '- `/proofgate automerge`: review, repair and merge this change at its exact reviewed head',
  '- `/proofgate stop`: stop automerge (until a later `/proofgate automerge`)',
  '- `/proofgate review`: review the current head again',
  '- `/proofgate rebase`: rebase the change onto its base',
  '- `/proofgate status`: refresh the status comment (while automerge is off: a short reply)',
  '- `/proofgate approve [40-hex sha]`: approve the current head of a change that touches what proofgate trusts or whose base requires approvals (maintainers only)',
  '- `@proofgate proof [scenario[,scenario...]] [40-hex sha]`: ask for behavioural proof',
].join('\n');

/**
 * The short reply to `/proofgate status` while automerge is off (pure): why
 * it is off and how to turn it on; a merged change names its merge.
 */
export function statusReply(head: string, state: AutomergeLedgerState, asker: string): string {
  const shortHead = `\`${head.slice(0, 12).replace(/[^0-9a-f]/g, '')}\``;
  let why: string;
  if (state.merged !== null) why = `merged: head \`${state.merged.head.slice(0, 12)}\` as \`${state.merged.mergeCommit.slice(0, 12)}\``;
  else if (state.automerge === null) why = 'off: automerge was never requested for this change';
  else why = `off: stopped by ${escapeText(state.stop?.actor ?? 'someone')}`;
  const verdicts = state.reviews.filter((r) => r.verdict !== null);
  const last = verdicts[verdicts.length - 1];
  const review = last === undefined ? 'no review yet' : `last review: ${last.verdict ?? ''} on \`${last.head.slice(0, 12)}\``;
  const lines = [`proofgate status (asked by ${escapeText(asker)}): automerge is ${why}. Head ${shortHead}; ${review}.`];
  if (state.merged === null) lines.push('', 'Comment `/proofgate automerge` to review, repair and merge this change.');
  return lines.join('\n');
}

/** The reply to a command that would start or stop work on a merged or closed change (pure). */
export function endedReply(snapshot: Pick<ChangeSnapshot, 'state'>, state: AutomergeLedgerState, command: string, asker: string): string {
  const merged = state.merged === null ? '' : ` (head \`${state.merged.head.slice(0, 12)}\` as \`${state.merged.mergeCommit.slice(0, 12)}\`)`;
  const what = state.merged !== null ? 'merged' : snapshot.state === 'merged' ? 'merged' : 'closed';
  return `proofgate (asked by ${escapeText(asker)}): this change is ${what}${merged}; \`${escapeText(command)}\` does nothing.`;
}

const EMPTY: RouteResult = { commands: [], refused: [], ran: [], skipped: null, dispatch: null, resumed: [] };

type Refusal = Extract<Authorization, { readonly allowed: false }>;

/** Commands that would start, stop or redo work: on a merged or closed change they only get a reply. */
const ENDED_COMMANDS: ReadonlySet<ParsedCommand['kind']> = new Set(['automerge', 'stop', 'review', 'rebase']);

/** Permissions that may give every command (and so have a comment replayed). */
const WRITERS: ReadonlySet<RepoPermission> = new Set(['admin', 'maintain', 'write']);

/** A comment whose commands the router acts on: its author's permission, and the replay id when it is replayed. */
interface CommandSource {
  readonly comment: ForgeComment;
  readonly permission: RepoPermission;
  readonly replay: string | null;
  /** The `updated_at` of the delivered version (a replay's: the time of the replay). */
  readonly updatedAt: string;
  readonly fence: (() => Promise<void>) | undefined;
}

/**
 * How far one route of a comment version got: `answered`, on a resumed
 * route, the lines whose reply proofgate's own comments already hold (null
 * on a first route); `done`, the lines whose command finished (filled in as
 * they finish).
 */
interface RouteProgress {
  readonly answered: ReadonlySet<number> | null;
  readonly done: Set<number>;
}

/** The steps that say which lines a route of one comment version is to run, how it ended, or who took it up again. */
const ROUTED = 'commands-routed';
const INTERRUPTED = 'commands-interrupted';
const RESUMED = 'commands-resumed';
const FINISHED = 'commands-finished';
const ROUTE_STEPS: ReadonlySet<string> = new Set([ROUTED, INTERRUPTED, RESUMED, FINISHED]);

function numbers(value: JsonValue | undefined): number[] {
  return Array.isArray(value) ? value.filter((item): item is number => typeof item === 'number' && Number.isInteger(item)) : [];
}

/** The route steps of a comment version, oldest first, with their positions among the steps. */
function routeSteps(steps: readonly StepEvent[], comment: string, updatedAt: string): { readonly index: number; readonly step: StepEvent }[] {
  const found: { readonly index: number; readonly step: StepEvent }[] = [];
  steps.forEach((step, index) => {
    if (ROUTE_STEPS.has(step.step) && step.comment === comment && step.updatedAt === updatedAt) found.push({ index, step });
  });
  return found;
}

/**
 * What is left of a comment version's route (pure): null when nothing is
 * (it finished, or it never recorded its lines), else the lines it was to run
 * and those finished (as the latest failure recorded them). A route whose
 * latest step is a failure is left only when that failure was recorded before
 * `known` steps (so a snapshot read after them shows every reply it wrote);
 * one killed before it ended (its latest step `commands-routed` or
 * `commands-resumed`) only when routes are `serial`: else it may still run.
 */
export function unfinishedRoute(
  steps: readonly StepEvent[],
  comment: string,
  updatedAt: string,
  known: number,
  serial: boolean,
): { readonly lines: number[]; readonly done: number[] } | null {
  const route = routeSteps(steps, comment, updatedAt);
  const last = route[route.length - 1];
  if (last === undefined || last.step.step === FINISHED) return null;
  if (last.step.step === INTERRUPTED ? last.index >= known : !serial) return null;
  const withLines = [...route].reverse().find((entry) => entry.step.step === ROUTED || entry.step.step === INTERRUPTED);
  if (withLines === undefined) return null;
  const failure = [...route].reverse().find((entry) => entry.step.step === INTERRUPTED);
  return { lines: numbers(withLines.step.lines), done: numbers(failure?.step.done) };
}

function actorOf(snapshot: ChangeSnapshot, comment: ForgeComment, permission: RepoPermission) {
  return {
    login: comment.author,
    permission,
    isChangeAuthor: snapshot.author.login.toLowerCase() === comment.author.toLowerCase(),
    isBot: comment.authorType === 'Bot',
  };
}

export interface RouterOptions {
  /**
   * Restart a change's job on a forge event when automerge is on and no job
   * runs (a service does; a one-shot command does not). Default true.
   */
  readonly restartOnEvents?: boolean;
}

export class AutomergeRouter {
  readonly jobs: ChangeJobs;
  readonly #restart: boolean;

  constructor(jobs: ChangeJobs, options: RouterOptions = {}) {
    this.jobs = jobs;
    this.#restart = options.restartOnEvents ?? true;
  }

  get #env() {
    return this.jobs.env;
  }

  #progress(changeId: string, text: string): void {
    this.#env.onProgress?.({ changeId, at: this.#env.store.now(), text });
  }

  /** Route one forge event (a webhook delivery, a local forge action). */
  async handleEvent(event: ForgeEvent): Promise<RouteResult> {
    const { signals } = this.#env;
    switch (event.kind) {
      case 'comment-created':
      case 'comment-edited':
        return this.handleComment(event.changeId, event.comment);
      case 'check-completed':
        if (event.changeIds.length === 0) {
          signals.notifyAll();
          return EMPTY;
        }
        for (const changeId of event.changeIds) await this.#wake(changeId);
        return EMPTY;
      case 'change-synchronized':
      case 'change-closed':
      case 'change-opened':
      case 'change-enqueued':
      case 'change-dequeued':
      case 'review-submitted':
        await this.#wake(event.changeId);
        return EMPTY;
      case 'merge-group':
        // A merge group's checks are not a change's head checks: only a wake-up, the snapshot says what the queue did.
        for (const changeId of event.changeIds) await this.#wake(changeId);
        return EMPTY;
      case 'base-pushed':
        signals.notifyAll();
        return EMPTY;
    }
  }

  /** Wake the change's job, or restart it when automerge is on and no job runs here. */
  async #wake(changeId: string): Promise<void> {
    if (this.jobs.active(changeId)) {
      this.#env.signals.notify(changeId);
      return;
    }
    if (!this.#restart) return;
    const loaded = await this.#env.store.load(changeId);
    if (automergeActive(loaded.state) && loaded.state.merged === null) this.jobs.dispatch(changeId);
  }

  async handleComment(changeId: string, comment: ForgeComment, options: CommentOptions = {}): Promise<RouteResult> {
    const env = this.#env;
    const commands = parseCommands(comment.body, commandMention(env.forge.selfLogin));
    if (commands.length === 0 || comment.author.toLowerCase() === env.forge.selfLogin.toLowerCase()) return { ...EMPTY, commands };
    // What the ledger held before the snapshot was read: a route interrupted since may have replies the snapshot does not show.
    const seen = await env.store.load(changeId);
    const snapshot = await env.forge.snapshot(changeId);
    const permission: RepoPermission = options.operator === true ? 'admin' : await env.forge.permission(comment.author);
    const actor = actorOf(snapshot, comment, permission);
    const allowed: ParsedCommand[] = [];
    const refused: { command: string; reason: string }[] = [];
    for (const command of commands) {
      const verdict = authorizeCommand(command, actor, env.forge.selfLogin);
      if (verdict.allowed) allowed.push(command);
      else refused.push({ command: command.source, reason: verdict.reason });
    }
    for (const entry of refused) {
      this.#progress(changeId, entry.reason);
      await env.store.step(changeId, 'command-refused', { comment: comment.id, command: entry.command, reason: entry.reason });
    }
    if (allowed.length === 0) return { commands, refused, ran: [], skipped: null, dispatch: null, resumed: [] };
    const application = await env.store.applyCommands(changeId, {
      comment: { id: comment.id, author: comment.author, updatedAt: comment.updatedAt },
      commands: allowed,
    });
    const source: CommandSource = { comment, permission, replay: null, updatedAt: comment.updatedAt, fence: options.fence };
    if (application.skipped !== null || application.run.length === 0) {
      await options.fence?.();
      await env.store.step(changeId, 'command-skipped', {
        comment: comment.id,
        updatedAt: comment.updatedAt,
        reason: application.skipped ?? 'no-new-commands',
      });
      const resumed = application.skipped === 'redelivery' ? await this.#resume(changeId, snapshot, seen, source, allowed, options.serial === true) : null;
      return { commands, refused, ran: [], skipped: application.skipped, dispatch: resumed?.dispatch ?? null, resumed: resumed?.commands ?? [] };
    }
    const progress: RouteProgress = { answered: null, done: new Set() };
    const lines = application.run.map((command) => command.line);
    const dispatch = await this.#guarded(changeId, source, lines, progress, () => this.#run(changeId, snapshot, source, application.run, progress));
    return { commands, refused, ran: application.run, skipped: null, dispatch, resumed: [] };
  }

  /**
   * Run a route; when it fails, record how far it got (`commands-interrupted`:
   * the lines it was to run and those that finished) so that the next
   * delivery of the same comment version finishes it, then fail as it did.
   */
  async #guarded(
    changeId: string,
    source: CommandSource,
    lines: readonly number[],
    progress: RouteProgress,
    route: () => Promise<Dispatch | null>,
  ): Promise<Dispatch | null> {
    try {
      const dispatch = await route();
      await this.#env.store.step(changeId, FINISHED, { comment: source.comment.id, updatedAt: source.updatedAt });
      return dispatch;
    } catch (error) {
      // Taken over (the caller's job went to another worker): the new holder finishes the route; this one records nothing.
      if (isProofgateError(error, 'LEASE_LOST')) throw error;
      const done = [...progress.done].sort((a, b) => a - b);
      this.#progress(
        changeId,
        `comment ${source.comment.id}: ${done.length} of ${lines.length} command(s) finished before a failure; the next delivery finishes the rest`,
      );
      try {
        await this.#env.store.step(changeId, INTERRUPTED, {
          comment: source.comment.id,
          updatedAt: source.updatedAt,
          lines: [...lines],
          done,
        });
      } catch {
        // The store failed too: the original failure is the one to report.
      }
      throw error;
    }
  }

  /**
   * A redelivery of a comment version whose route was cut short
   * (`unfinishedRoute`: a failure recorded before this delivery's snapshot
   * was read, so the snapshot shows every reply written before it; with
   * `serial`, also a route that was killed): claim it (`commands-resumed`, at
   * one stream revision: one claimant) and run its unfinished commands that
   * are still allowed, on the current state; a reply whose marker is already
   * among proofgate's own comments is not written again. Null when there is
   * nothing to finish (a redelivery after a route that finished, or one
   * another delivery resumes).
   */
  async #resume(
    changeId: string,
    snapshot: ChangeSnapshot,
    seen: LoadedLedger,
    source: CommandSource,
    allowed: readonly ParsedCommand[],
    serial: boolean,
  ): Promise<{ readonly commands: readonly ParsedCommand[]; readonly dispatch: Dispatch | null } | null> {
    const env = this.#env;
    const { comment, updatedAt } = source;
    const known = seen.steps.length;
    const cut = await env.store.appendWith(changeId, (loaded) => {
      const left = unfinishedRoute(loaded.steps, comment.id, updatedAt, known, serial);
      if (left === null) return { events: [], result: null };
      const data = { step: RESUMED, at: env.store.now(), comment: comment.id, updatedAt };
      return { events: [{ id: newId('ams'), type: 'step', data }], result: left };
    });
    if (cut === null) return null;
    const { lines } = cut;
    const progress: RouteProgress = {
      answered: answeredCommandLines(snapshot.comments, { selfLogin: env.forge.selfLogin, secret: env.secret, changeId }, { comment: comment.id, updatedAt }),
      done: new Set(cut.done),
    };
    const pending = allowed.filter((command) => lines.includes(command.line) && !progress.done.has(command.line));
    this.#progress(changeId, `comment ${comment.id}: finishing ${pending.length} command(s) a failure cut short`);
    const dispatch = await this.#guarded(changeId, source, lines, progress, () => this.#run(changeId, snapshot, source, pending, progress));
    return { commands: pending, dispatch };
  }

  /**
   * Check that a comment may be replayed, storing nothing (`ProofgateError`
   * otherwise, one line): it is a comment on this change (`NOT_FOUND`), it
   * holds proofgate commands and is not proofgate's own, and its author has
   * write permission or more and may give every command in it, as the router
   * checks a new comment (`INVALID_INPUT`).
   */
  async checkReplay(
    changeId: string,
    commentId: string,
  ): Promise<{
    readonly snapshot: ChangeSnapshot;
    readonly comment: ForgeComment;
    readonly commands: readonly ParsedCommand[];
    readonly permission: RepoPermission;
  }> {
    const env = this.#env;
    const snapshot = await env.forge.snapshot(changeId);
    const comment = snapshot.comments.find((candidate) => candidate.id === commentId);
    if (comment === undefined) {
      throw new ProofgateError(
        'NOT_FOUND',
        `change ${changeId} has no comment ${commentId}: only a comment on this change can be replayed (nothing was stored)`,
        { changeId, commentId },
      );
    }
    const commands = parseCommands(comment.body, commandMention(env.forge.selfLogin));
    if (commands.length === 0 || comment.author.toLowerCase() === env.forge.selfLogin.toLowerCase()) {
      throw new ProofgateError(
        'INVALID_INPUT',
        `comment ${commentId} on change ${changeId} is not a proofgate command comment; nothing to replay (nothing was stored)`,
        { changeId, commentId },
      );
    }
    const permission = await env.forge.permission(comment.author);
    const actor = actorOf(snapshot, comment, permission);
    const refusal = WRITERS.has(permission)
      ? commands.map((command) => authorizeCommand(command, actor, env.forge.selfLogin)).find((verdict): verdict is Refusal => !verdict.allowed)?.reason
      : `${comment.author} has ${permission} permission`;
    if (refusal !== undefined) {
      throw new ProofgateError(
        'INVALID_INPUT',
        `comment ${commentId} on change ${changeId} cannot be replayed: ${refusal}; only a command comment from someone with write permission can be (nothing was stored)`,
        { changeId, commentId },
      );
    }
    return { snapshot, comment, commands, permission };
  }

  /**
   * Replay one command comment on purpose (`proofgate automerge ID --replay
   * COMMENT_ID`): the ledger would skip it as already processed, so it is
   * delivered again as a replay, `<comment id>:replay-<n>` at the time of the
   * replay, and its commands run as if posted now, under its author's name.
   * The ledger's timeline and a `command-replayed` step say who asked
   * (`operator`). `checkReplay` refuses first, storing nothing.
   */
  async replayComment(changeId: string, commentId: string, operator: string): Promise<RouteResult> {
    const env = this.#env;
    const { snapshot, comment, commands, permission } = await this.checkReplay(changeId, commentId);
    const before = await env.store.load(changeId);
    const prefix = `${comment.id}:replay-`;
    const replay = `${prefix}${Object.keys(before.state.comments).filter((id) => id.startsWith(prefix)).length + 1}`;
    const at = env.store.now();
    this.#progress(changeId, `replaying comment ${comment.id} by ${comment.author}, asked by ${operator}`);
    await env.store.step(changeId, 'command-replayed', { comment: comment.id, replay, operator, author: comment.author, updatedAt: comment.updatedAt });
    await env.store.record(changeId, { type: 'note', id: `note-${replay}`, text: `${operator} replayed comment ${comment.id} by ${comment.author}`, at });
    const application = await env.store.applyCommands(changeId, { comment: { id: replay, author: comment.author, updatedAt: at }, commands });
    if (application.skipped !== null || application.run.length === 0) {
      await env.store.step(changeId, 'command-skipped', { comment: replay, updatedAt: at, reason: application.skipped ?? 'no-new-commands' });
      return { commands, refused: [], ran: [], skipped: application.skipped, dispatch: null, resumed: [] };
    }
    const source: CommandSource = { comment, permission, replay, updatedAt: at, fence: undefined };
    const dispatch = await this.#run(changeId, snapshot, source, application.run, { answered: null, done: new Set() });
    return { commands, refused: [], ran: application.run, skipped: null, dispatch, resumed: [] };
  }

  /**
   * Act on the authorized, newly applied commands of one comment (or of its
   * replay), in order, marking each finished one in `progress.done`. On a
   * resumed route (`progress.answered` set) a reply already written is not
   * written again, and `automerge` / `stop` act only while the ledger still
   * says what they asked for (a later command has the last word).
   */
  async #run(
    changeId: string,
    snapshot: ChangeSnapshot,
    source: CommandSource,
    commands: readonly ParsedCommand[],
    progress: RouteProgress,
  ): Promise<Dispatch | null> {
    const env = this.#env;
    const { comment } = source;
    const resumed = progress.answered !== null;
    const replayed: Record<string, string> = source.replay === null ? {} : { replay: source.replay };
    const resumedStep: Record<string, boolean> = resumed ? { resumed: true } : {};
    let dispatch: Dispatch | null = null;
    const start = (): Dispatch => (dispatch ??= this.jobs.dispatch(changeId));
    // A merged or closed change keeps its final status comment and labels: a command that would start or stop work gets a short reply instead.
    const ended = snapshot.state !== 'open' || (await env.store.load(changeId)).state.merged !== null;
    for (const command of commands) {
      this.#progress(changeId, `${comment.author}: ${commandText(command)}`);
      await source.fence?.();
      await env.store.step(changeId, 'command-run', { comment: comment.id, actor: comment.author, command: commandText(command), ...replayed, ...resumedStep });
      await this.#command(changeId, snapshot, source, command, { ended, resumed, answered: progress.answered?.has(command.line) ?? false, start });
      progress.done.add(command.line);
    }
    return dispatch;
  }

  /**
   * A reply to `command` (once): the text with a signed marker naming the
   * comment version and the command's line.
   */
  async #reply(changeId: string, snapshot: ChangeSnapshot, source: CommandSource, command: ParsedCommand, text: string): Promise<void> {
    const env = this.#env;
    const fields: CommandReplyFields = {
      kind: 'command-reply',
      change: changeId,
      head: snapshot.head.sha,
      comment: source.replay ?? source.comment.id,
      updatedAt: source.updatedAt,
      line: command.line,
    };
    let body: string;
    try {
      body = composeMarkedBody(text, [fields], env.secret);
    } catch (error) {
      if (!isProofgateError(error, 'INVALID_INPUT')) throw error;
      // A comment id or time no marker can name (not one a forge gives): the reply goes out unmarked rather than not at all.
      this.#progress(changeId, `comment ${source.comment.id}: the reply to line ${command.line} carries no marker (${error.message})`);
      body = text;
    }
    await source.fence?.();
    await env.forge.createComment(changeId, body);
  }

  /**
   * `/proofgate approve`: record the maintainer's approval of the current head
   * (the approval store answers `already` for one recorded before) and reply
   * with what was recorded or why nothing was. True when it was recorded.
   */
  async #approve(changeId: string, snapshot: ChangeSnapshot, source: CommandSource, command: Extract<ParsedCommand, { kind: 'approve' }>): Promise<boolean> {
    const env = this.#env;
    const { comment, permission } = source;
    const config = await trustedConfig(env.forge, snapshot);
    const approved = await approveChange(env, snapshot, config, { login: comment.author, permission, commentId: comment.id }, command.sha);
    const head = `\`${snapshot.head.sha.slice(0, 12)}\``;
    if (approved.kind === 'refused') {
      this.#progress(changeId, `approval by ${comment.author} not recorded: ${approved.reason}`);
      await env.store.step(changeId, 'approval-refused', { comment: comment.id, actor: comment.author, reason: approved.reason });
      await this.#reply(changeId, snapshot, source, command, `Approval by ${escapeText(comment.author)} not recorded: ${escapeText(approved.reason)}.`);
      return false;
    }
    await env.store.step(changeId, 'approval-recorded', { comment: comment.id, actor: comment.author, head: approved.head, paths: [...approved.paths] });
    const touches = approved.paths.length === 0 ? '' : `, which touches ${escapeText(approved.paths.join(', '))}`;
    const own =
      actorOf(snapshot, comment, permission).isChangeAuthor && approved.required > 0
        ? ` As the change's author, ${escapeText(comment.author)} does not count toward the ${approved.required} required approval(s).`
        : '';
    await this.#reply(
      changeId,
      snapshot,
      source,
      command,
      `${escapeText(comment.author)} approved head ${head} of this change${touches}.${own} A new head voids this approval.`,
    );
    return true;
  }

  /**
   * Admit a `@proofgate proof` command (admitProofCommand, pure) and record
   * the decision; the reply names the tools the review will be offered and
   * every coverage gap. Returns the decision to review with, or null (refused,
   * or the same comment for the same head again: the decision stands and
   * nothing runs twice).
   */
  async #admitProof(
    changeId: string,
    snapshot: ChangeSnapshot,
    source: CommandSource,
    command: Extract<ParsedCommand, { kind: 'proof' }>,
  ): Promise<ProofAdmission | null> {
    const env = this.#env;
    const { comment, permission } = source;
    const refuse = async (reason: string, message: string): Promise<null> => {
      this.#progress(changeId, `proof request by ${comment.author} refused: ${reason}`);
      await env.store.step(changeId, 'proof-refused', { comment: comment.id, actor: comment.author, reason, message });
      await this.#reply(changeId, snapshot, source, command, `Proof request by ${escapeText(comment.author)} refused (${reason}): ${escapeText(message)}`);
      return null;
    };
    let settings;
    try {
      const config = await trustedConfig(env.forge, snapshot);
      settings = proofSettingsOf(config, { branch: await env.forge.trustedBranch(), config });
    } catch (error) {
      if (!isProofgateError(error, 'CONFIG')) throw error;
      return refuse('CONFIG', error.message);
    }
    const { typedSteps } = await env.store.load(changeId);
    let previous: ProofAdmission | null = null;
    for (const step of typedSteps) if (step.step === 'proof-admitted' && step.decision.commentId === comment.id) previous = step.decision;
    const kinds = env.proofProducers ?? ['local'];
    const result = admitProofCommand({
      command: { scenarios: command.scenarios, sha: command.sha },
      commentId: comment.id,
      author: { login: comment.author, permission },
      change: {
        id: changeId,
        state: snapshot.state,
        locked: snapshot.locked === true,
        crossRepository: snapshot.crossRepository === true,
        headSha: snapshot.head.sha,
      },
      scenarios: settings.scenarios,
      capabilities: {
        lease: { owner: `router:${changeId}`, epoch: 0 },
        headSha: snapshot.head.sha,
        scenarios: settings.scenarios.filter((scenario) => kinds.includes(scenario.producer.kind)).map((scenario) => scenario.id),
      },
      now: env.clock.now().getTime(),
      previous,
    });
    if (result.kind === 'unchanged') {
      this.#progress(changeId, `proof request ${comment.id} was admitted before for ${result.decision.headSha.slice(0, 12)}: nothing runs twice`);
      return null;
    }
    if (result.kind === 'refused') return refuse(result.reason, result.message);
    const { decision, coverage } = result;
    await env.store.step(changeId, 'proof-admitted', { decision: decision as unknown as JsonValue });
    const head = `\`${decision.headSha.slice(0, 12)}\``;
    const offered =
      coverage.offered.length === 0 ? 'no proof tool (the review runs without proof)' : coverage.offered.map((tool) => `\`${tool.name}\``).join(', ');
    const gaps = coverage.gaps.map((gap) => `\n- not offered: ${escapeText(gap.scenarioId)} (${gap.reason})`).join('');
    await this.#reply(
      changeId,
      snapshot,
      source,
      command,
      `Proof-focused review of head ${head} asked by ${escapeText(comment.author)}: the reviewers are offered ${offered}.${gaps}`,
    );
    return decision;
  }

  /** One command of a route. */
  async #command(
    changeId: string,
    snapshot: ChangeSnapshot,
    source: CommandSource,
    command: ParsedCommand,
    route: { readonly ended: boolean; readonly resumed: boolean; readonly answered: boolean; readonly start: () => Dispatch },
  ): Promise<void> {
    const env = this.#env;
    const { comment } = source;
    const { resumed, answered, start } = route;
    const reply = async (text: () => string | Promise<string>): Promise<void> => {
      if (answered) {
        this.#progress(changeId, `comment ${comment.id}: the reply to line ${command.line} was already written`);
        return;
      }
      await this.#reply(changeId, snapshot, source, command, await text());
    };
    if (route.ended && ENDED_COMMANDS.has(command.kind)) {
      await reply(async () => endedReply(snapshot, (await env.store.load(changeId)).state, commandText(command), comment.author));
      return;
    }
    switch (command.kind) {
      // The loop writes the status comment and labels, under the change's lease; the router only starts or wakes it.
      case 'automerge': {
        const { state } = await env.store.load(changeId);
        if (resumed && !(automergeActive(state) && state.merged === null)) return;
        start();
        return;
      }
      case 'stop': {
        if (this.jobs.active(changeId)) {
          env.signals.notify(changeId);
          return;
        }
        const { state } = await env.store.load(changeId);
        if (resumed && automergeActive(state)) return;
        // A loop decides `stop` at once and shows it (a loop running elsewhere reads the stop at its next step).
        if (state.automerge !== null) start();
        else
          await reply(
            () =>
              `proofgate (asked by ${escapeText(comment.author)}): automerge was never requested for this change; \`${escapeText(command.source)}\` does nothing.`,
          );
        return;
      }
      case 'review':
      case 'rebase':
        this.jobs.enqueue(changeId, { kind: command.kind, actor: comment.author });
        start();
        return;
      case 'status': {
        const { state } = await env.store.load(changeId);
        // While automerge is on, the job refreshes the status comment (the command is a new timeline line).
        if (automergeActive(state) && state.merged === null) start();
        else await reply(() => statusReply(snapshot.head.sha, state, comment.author));
        return;
      }
      case 'approve': {
        // A reply already written means the approval was decided and recorded (or refused) before: only the job is left to start.
        if (!answered && !(await this.#approve(changeId, snapshot, source, command))) return;
        const { state } = await env.store.load(changeId);
        if (automergeActive(state) && state.merged === null) start();
        return;
      }
      case 'proof': {
        if (answered) return;
        const admission = await this.#admitProof(changeId, snapshot, source, command);
        if (admission === null) return;
        this.jobs.enqueue(changeId, { kind: 'proof', actor: comment.author, admission });
        start();
        return;
      }
      case 'unknown':
      case 'invalid': {
        const why =
          command.kind === 'invalid'
            ? `"${escapeText(command.text)}" is not valid: ${escapeText(command.reason)}`
            : `"${escapeText(command.text)}" is not a proofgate command.`;
        await reply(() => `${why}\n\n${HELP_TEXT}`);
        return;
      }
    }
  }
}
