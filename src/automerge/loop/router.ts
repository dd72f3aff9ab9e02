/**
 * The comment router: a comment event -> parseCommands -> authorizeCommand
 * (repository permission, the change's author) -> the ledger (keyed by
 * comment id + updated_at, so a redelivery or an unchanged edit runs nothing)
 * -> status comment and labels -> start or join the change's job. Other forge
 * events (a check finished, a push, a close) wake the change's job at once,
 * or restart it when automerge is on and no job runs. Every step is an event
 * in the store.
 */
import { ProofgateError } from '../../core/index.js';
import type { ChangeSnapshot, ForgeComment, ForgeEvent, RepoPermission } from '../../forge/port.js';
import { commandText, parseCommands, type ParsedCommand } from '../commands.js';
import type { AutomergeDecision } from '../decide.js';
import { automergeActive, type AutomergeLedgerState, type SkipReason } from '../ledger.js';
import { escapeText, renderStatusComment } from '../status-comment.js';
import { authorizeCommand, type Authorization } from '../trust.js';
import { approveChange } from './facts.js';
import type { ChangeJobs, Dispatch } from './job.js';
import { trustedConfig } from './policy.js';

export interface RouteResult {
  readonly commands: readonly ParsedCommand[];
  readonly refused: readonly { readonly command: string; readonly reason: string }[];
  /** Commands acted on now (empty for a redelivery or an unchanged edit). */
  readonly ran: readonly ParsedCommand[];
  readonly skipped: SkipReason | null;
  /** The change's job when one was started or joined. */
  readonly dispatch: Dispatch | null;
}

export interface CommentOptions {
  /**
   * The command comes from the operator of a local forge (the person running
   * `proofgate automerge`), who holds the repository itself: treated as admin.
   */
  readonly operator?: boolean;
}

export const HELP_TEXT = [
  'proofgate understands these commands, one per line (with `/proofgate` or `@proofgate`):',
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

const EMPTY: RouteResult = { commands: [], refused: [], ran: [], skipped: null, dispatch: null };

type Refusal = Extract<Authorization, { readonly allowed: false }>;

/** Permissions that may give every command (and so have a comment replayed). */
const WRITERS: ReadonlySet<RepoPermission> = new Set(['admin', 'maintain', 'write']);

/** A comment whose commands the router acts on: its author's permission, and the replay id when it is replayed. */
interface CommandSource {
  readonly comment: ForgeComment;
  readonly permission: RepoPermission;
  readonly replay: string | null;
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
      case 'review-submitted':
        await this.#wake(event.changeId);
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
    const commands = parseCommands(comment.body);
    if (commands.length === 0 || comment.author.toLowerCase() === env.forge.selfLogin.toLowerCase()) return { ...EMPTY, commands };
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
    if (allowed.length === 0) return { commands, refused, ran: [], skipped: null, dispatch: null };
    const application = await env.store.applyCommands(changeId, {
      comment: { id: comment.id, author: comment.author, updatedAt: comment.updatedAt },
      commands: allowed,
    });
    if (application.skipped !== null || application.run.length === 0) {
      await env.store.step(changeId, 'command-skipped', {
        comment: comment.id,
        updatedAt: comment.updatedAt,
        reason: application.skipped ?? 'no-new-commands',
      });
      return { commands, refused, ran: [], skipped: application.skipped, dispatch: null };
    }
    const dispatch = await this.#run(changeId, snapshot, { comment, permission, replay: null }, application.run);
    return { commands, refused, ran: application.run, skipped: null, dispatch };
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
    const commands = parseCommands(comment.body);
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
      return { commands, refused: [], ran: [], skipped: application.skipped, dispatch: null };
    }
    const dispatch = await this.#run(changeId, snapshot, { comment, permission, replay }, application.run);
    return { commands, refused: [], ran: application.run, skipped: null, dispatch };
  }

  /** Act on the authorized, newly applied commands of one comment (or of its replay), in order. */
  async #run(changeId: string, snapshot: ChangeSnapshot, source: CommandSource, commands: readonly ParsedCommand[]): Promise<Dispatch | null> {
    const env = this.#env;
    const { comment, permission } = source;
    const replayed: Record<string, string> = source.replay === null ? {} : { replay: source.replay };
    let dispatch: Dispatch | null = null;
    const start = (): Dispatch => (dispatch ??= this.jobs.dispatch(changeId));
    for (const command of commands) {
      this.#progress(changeId, `${comment.author}: ${commandText(command)}`);
      await env.store.step(changeId, 'command-run', { comment: comment.id, actor: comment.author, command: commandText(command), ...replayed });
      switch (command.kind) {
        case 'automerge': {
          await this.jobs.writer.applyLabels(snapshot, 'requested');
          const decision: AutomergeDecision = { kind: 'wait', code: 'automerge-requested', reason: `automerge requested by ${comment.author}; starting` };
          const { state } = await env.store.load(changeId);
          await this.jobs.writer.writeComment(
            snapshot,
            renderStatusComment({ changeId, intent: this.jobs.writer.intent, head: snapshot.head.sha, decision, timeline: state.timeline }, env.secret),
          );
          start();
          break;
        }
        case 'stop':
          if (this.jobs.active(changeId)) {
            env.signals.notify(changeId);
          } else {
            const { state } = await env.store.load(changeId);
            const decision: AutomergeDecision = { kind: 'stop', code: 'stopped', reason: `stopped by ${comment.author}` };
            await this.jobs.writer.writeComment(
              snapshot,
              renderStatusComment({ changeId, intent: this.jobs.writer.intent, head: snapshot.head.sha, decision, timeline: state.timeline }, env.secret),
            );
            await this.jobs.writer.applyLabels(snapshot, 'stop');
          }
          break;
        case 'review':
        case 'rebase':
          this.jobs.enqueue(changeId, { kind: command.kind, actor: comment.author });
          start();
          break;
        case 'status': {
          const { state } = await env.store.load(changeId);
          if (automergeActive(state) && state.merged === null) {
            // The job refreshes the status comment (the command is a new timeline line).
            start();
          } else {
            await env.forge.createComment(changeId, statusReply(snapshot.head.sha, state, comment.author));
          }
          break;
        }
        case 'approve': {
          const config = await trustedConfig(env.forge, snapshot);
          const approved = await approveChange(env, snapshot, config, { login: comment.author, permission, commentId: comment.id }, command.sha);
          const head = `\`${snapshot.head.sha.slice(0, 12)}\``;
          if (approved.kind === 'refused') {
            this.#progress(changeId, `approval by ${comment.author} not recorded: ${approved.reason}`);
            await env.store.step(changeId, 'approval-refused', { comment: comment.id, actor: comment.author, reason: approved.reason });
            await env.forge.createComment(changeId, `Approval by ${escapeText(comment.author)} not recorded: ${escapeText(approved.reason)}.`);
            break;
          }
          await env.store.step(changeId, 'approval-recorded', { comment: comment.id, actor: comment.author, head: approved.head, paths: [...approved.paths] });
          const touches = approved.paths.length === 0 ? '' : `, which touches ${escapeText(approved.paths.join(', '))}`;
          const own =
            actorOf(snapshot, comment, permission).isChangeAuthor && approved.required > 0
              ? ` As the change's author, ${escapeText(comment.author)} does not count toward the ${approved.required} required approval(s).`
              : '';
          await env.forge.createComment(
            changeId,
            `${escapeText(comment.author)} approved head ${head} of this change${touches}.${own} A new head voids this approval.`,
          );
          const { state } = await env.store.load(changeId);
          if (automergeActive(state) && state.merged === null) start();
          break;
        }
        case 'proof':
          await env.forge.createComment(
            changeId,
            `Proof requests (asked by ${escapeText(comment.author)}) are answered by a proof producer, and none is configured for this forge; nothing was run.`,
          );
          break;
        case 'unknown':
        case 'invalid': {
          const why =
            command.kind === 'invalid'
              ? `"${escapeText(command.text)}" is not valid: ${escapeText(command.reason)}`
              : `"${escapeText(command.text)}" is not a proofgate command.`;
          await env.forge.createComment(changeId, `${why}\n\n${HELP_TEXT}`);
          break;
        }
      }
    }
    return dispatch;
  }
}
