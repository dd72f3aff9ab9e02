/**
 * The write API of a local repository's service (`proofgate serve --repo`):
 *
 * - `POST /api/changes` `{ head, base?, title? }`: open a change;
 * - `POST /api/changes/:id/comments` `{ body }`: comment (commands in it are
 *   routed to the automerge router at once, as the token's identity);
 * - `POST /api/changes/:id/checks` `{}`: run the change's checks;
 * - `POST /api/changes/:id/close` `{}`: close it without merging;
 *
 * and the reads a client-mode CLI needs to print what direct mode prints:
 *
 * - `GET /api/change-records`: the changes as `proofgate change list` shows them;
 * - `GET /api/change-records/:id`: a snapshot with comments, checks and the
 *   author's permission, as `proofgate change show` shows it;
 * - `GET /api/changes/:id/comments/:commentId/outcome`: the end of the
 *   automerge job a comment posted here started or joined (waits up to
 *   `waitMs` for it; `{ status: "running" }` when it is not over yet);
 * - `GET /api/changes/:id/comments/:commentId/progress[?after=SEQ]`: that
 *   job's progress lines as they come, then its end (NDJSON, see
 *   `automerge-stream.ts`); read permission is enough.
 *
 * Every write is made as the token's identity: the author is never read from
 * the body (unknown fields are dropped). Opening, commenting and running
 * checks need `triage`; closing needs `write`, or `triage` for the change's
 * own author. A read-only token writes nothing. A refused write is one typed
 * line (`{ error, code }`) and changes nothing stored.
 */
import { z } from 'zod';
import type { Logger } from 'pino';
import { ProofgateError, errorMessage, type ErrorCode } from '../core/index.js';
import { automergeActive } from '../automerge/ledger.js';
import { outcomeJson, type AutomergeRouter, type JobResult, type LocalAutomerge, type LoopOutcome, type RouteResult } from '../automerge/loop/index.js';
import type { LocalForge } from '../forge/local/index.js';
import { listedChanges, shownChange } from '../automerge/queue/change-records.js';
import type { ChangeSnapshot, ForgeComment, RepoPermission } from '../forge/port.js';
import { collectVerdicts } from '../automerge/markers.js';
import type { Answer, ApiCaller, ServiceApi } from './http.js';
import { ProgressHub, streamJournal, type ProgressJournal } from './automerge-stream.js';
import { permits, type IdentityStore } from './identities.js';
import { sameLogin } from '../contracts/repo-config.js';

/** The HTTP status of a typed error of a write. Pure. */
export function statusOfError(code: ErrorCode): number {
  switch (code) {
    case 'NOT_FOUND':
      return 404;
    case 'RESERVED_IDENTITY':
    case 'PROTECTED_BRANCH':
    case 'READ_ONLY':
      return 403;
    case 'HEAD_MOVED':
    case 'BASE_MOVED':
    case 'NOT_MERGEABLE':
    case 'REVISION_CONFLICT':
    case 'CONFIG':
    case 'JAIL_UNAVAILABLE':
      return 409;
    case 'INVALID_INPUT':
    case 'USAGE':
    case 'INVALID_JSON':
    case 'POLICY_VIOLATION':
    case 'KNOWN_SECRET':
      return 400;
    default:
      return 500;
  }
}

const refName = z.string().min(1).max(255);
/** Unknown fields (an `author`, say) are dropped, never used. */
const OpenBody = z.object({ head: refName, base: refName.optional(), title: z.string().max(1000).optional() });
const CommentBody = z.object({ body: z.string().min(1).max(60_000) });
const EmptyBody = z.object({});

/** The change id of a path segment: a positive decimal number. */
const CHANGE_ID = '([1-9][0-9]{0,15})';
const WRITE_ROUTES: readonly { readonly kind: WriteKind; readonly pattern: RegExp }[] = [
  { kind: 'open', pattern: /^\/api\/changes$/ },
  { kind: 'comment', pattern: new RegExp(`^/api/changes/${CHANGE_ID}/comments$`) },
  { kind: 'checks', pattern: new RegExp(`^/api/changes/${CHANGE_ID}/checks$`) },
  { kind: 'close', pattern: new RegExp(`^/api/changes/${CHANGE_ID}/close$`) },
];
type WriteKind = 'open' | 'comment' | 'checks' | 'close';

/** The write a POST path names, with its change id, or null. Pure. */
export function writeRoute(path: string): { readonly kind: WriteKind; readonly changeId: string | null } | null {
  for (const route of WRITE_ROUTES) {
    const match = route.pattern.exec(path);
    if (match !== null) return { kind: route.kind, changeId: match[1] ?? null };
  }
  return null;
}

/** The least permission a write needs (closing: see `closeAllowed`). Pure. */
export const WRITE_PERMISSION: Readonly<Record<WriteKind, RepoPermission>> = { open: 'triage', comment: 'triage', checks: 'triage', close: 'write' };

/** Whether `caller` may close a change whose author is `author`: write, or triage for the author. Pure. */
export function closeAllowed(caller: ApiCaller, author: string): boolean {
  return permits(caller.permission, 'write') || (permits(caller.permission, 'triage') && caller.login.toLowerCase() === author.toLowerCase());
}

/** The outcome of a change that merged before anyone asked for its automerge (nothing is posted). */
export async function mergedOutcome(automerge: LocalAutomerge, snapshot: ChangeSnapshot): Promise<LoopOutcome> {
  const { env } = automerge;
  const { state } = await env.store.load(snapshot.id);
  const head = state.merged?.head ?? snapshot.head.sha;
  const { verdicts } = collectVerdicts(snapshot.comments, { selfLogin: env.forge.selfLogin, secret: env.secret, changeId: snapshot.id });
  const forHead = verdicts.filter((v) => v.fields.head === head);
  return {
    kind: 'merged',
    changeId: snapshot.id,
    reason: 'the change was already merged; nothing was done',
    head,
    mergeCommit: snapshot.mergeCommitSha ?? state.merged?.mergeCommit ?? null,
    verdict: forHead[forHead.length - 1]?.fields.verdict ?? null,
    repairs: state.repairs.filter((r) => r.status === 'pushed').length,
    state,
  };
}

const failure = (status: number, error: string, code: ErrorCode): Answer => ({ status, body: { error, code } });

function errorAnswer(error: unknown): Answer | null {
  if (!(error instanceof ProofgateError)) return null;
  return failure(statusOfError(error.code), error.message, error.code);
}

function zodProblem(error: z.ZodError): string {
  const issue = error.issues[0];
  return issue === undefined ? 'the body is malformed' : `${issue.path.join('.') || 'body'}: ${issue.message}`;
}

type Follow = {
  readonly changeId: string;
  readonly done: Promise<Record<string, unknown>>;
  ended: Record<string, unknown> | null;
  /** The job's progress lines, from the comment's post to the job's end. */
  readonly journal: ProgressJournal;
};

function followEnd(result: JobResult): Record<string, unknown> {
  if (result.kind === 'ran') return { status: 'ended', result: 'ran', outcome: outcomeJson(result.outcome) };
  return { status: 'ended', result: result.kind, holder: result.holder.owner, until: result.holder.until };
}

export interface WriteApiOptions {
  readonly forge: LocalForge;
  /** The service's automerge wiring (comments are routed through its router; jobs are followed). */
  readonly automerge: LocalAutomerge;
  readonly logger: Logger;
  /** Longest an outcome read waits for the job (default 20 s). */
  readonly waitMs?: number;
  /** How a comment is routed (default: `routeOnce` of the automerge router); the service shares one with its tail of the store. */
  readonly route?: (changeId: string, comment: ForgeComment) => Promise<RouteResult>;
  /** Where the automerge wiring's progress lines are published (the service's `onProgress`); default: a hub nothing publishes to. */
  readonly progress?: ProgressHub;
}

/** Comment versions remembered by `routeOnce`. */
const MAX_ROUTED = 1000;

/**
 * Route each comment version once in this process (pure bookkeeping around
 * the router): the write API, which posted it, and the service's tail of the
 * store, which sees it next, get the same result, and the router runs (and
 * records a refusal) once.
 */
export function routeOnce(router: Pick<AutomergeRouter, 'handleComment'>): (changeId: string, comment: ForgeComment) => Promise<RouteResult> {
  const seen = new Map<string, Promise<RouteResult>>();
  return (changeId, comment) => {
    const key = `${changeId}\n${comment.id}\n${comment.updatedAt}`;
    let routed = seen.get(key);
    if (routed === undefined) {
      routed = router.handleComment(changeId, comment);
      seen.set(key, routed);
      // A failed route may be tried again.
      routed.catch(() => seen.delete(key));
      const oldest = seen.keys().next().value;
      if (seen.size > MAX_ROUTED && oldest !== undefined) seen.delete(oldest);
    }
    return routed;
  };
}

/** Follows kept at most (the oldest ended ones go first). */
const MAX_FOLLOWS = 1000;
/** Ended follows whose progress lines are kept for a late reader (the oldest ended ones' lines go first). */
export const MAX_ENDED_JOURNALS = 32;

const STREAM_PATH = new RegExp(`^/api/changes/${CHANGE_ID}/comments/(cmt_[A-Za-z0-9_-]{1,64})/progress$`);

/** The write API, joined to a read API (`reads`): its own GET routes first, then `reads`. */
export function withWriteApi(reads: ServiceApi, options: WriteApiOptions): ServiceApi {
  const { forge, automerge, logger } = options;
  const waitMs = options.waitMs ?? 20_000;
  const route = options.route ?? routeOnce(automerge.router);
  const progress = options.progress ?? new ProgressHub();
  const follows = new Map<string, Follow>();
  /** Ended follows whose journals still hold lines, oldest end first. */
  const endedJournals: ProgressJournal[] = [];

  const remember = (commentId: string, changeId: string, done: Promise<JobResult>, journal: ProgressJournal): void => {
    const follow: Follow = {
      changeId,
      ended: null,
      journal,
      done: done.then(followEnd, (error: unknown) => ({ status: 'ended', result: 'failed', error: errorMessage(error) })),
    };
    void follow.done.then((end) => {
      follow.ended = end;
      journal.finish(end);
      endedJournals.push(journal);
      if (endedJournals.length > MAX_ENDED_JOURNALS) endedJournals.shift()?.release();
    });
    follows.set(commentId, follow);
    for (const [key, entry] of follows) {
      if (follows.size <= MAX_FOLLOWS) break;
      if (entry.ended !== null) follows.delete(key);
    }
  };

  const comment = async (changeId: string, body: unknown, caller: ApiCaller): Promise<Answer> => {
    const parsed = CommentBody.safeParse(body);
    if (!parsed.success) return failure(400, zodProblem(parsed.error), 'INVALID_INPUT');
    // The change's progress lines from here on: the router's (the command taken) and the job's, if one follows.
    const journal = progress.capture(changeId);
    let following = false;
    try {
      const posted = await forge.commentAs(changeId, parsed.data.body, caller.login);
      logger.info({ changeId, commentId: posted.id, author: caller.login }, 'comment posted through the api');
      // Routed here (the service's tail may see it first: the ledger applies it once, and a running job is joined).
      let refused: readonly { command: string; reason: string }[] = [];
      try {
        const routed = await route(changeId, posted);
        refused = routed.refused;
        let dispatch = routed.dispatch;
        if (dispatch === null && routed.commands.length > refused.length) {
          const { state } = await automerge.env.store.load(changeId);
          if (automergeActive(state) && state.merged === null) dispatch = automerge.jobs.dispatch(changeId);
        }
        if (dispatch !== null) {
          remember(posted.id, changeId, dispatch.done, journal);
          following = true;
        }
      } catch (error) {
        logger.warn({ changeId, commentId: posted.id, err: errorMessage(error) }, 'comment not routed');
      }
      return { status: 201, body: { comment: posted, refused, following } };
    } finally {
      if (!following) journal.close();
    }
  };

  const write = async (kind: WriteKind, changeId: string | null, body: unknown, caller: ApiCaller): Promise<Answer> => {
    if (kind !== 'close' && !permits(caller.permission, WRITE_PERMISSION[kind])) {
      return failure(
        403,
        `${caller.login} may not ${kind === 'open' ? 'open changes' : kind === 'comment' ? 'comment' : 'run checks'} (permission ${caller.permission})`,
        'READ_ONLY',
      );
    }
    if (kind === 'open') {
      const parsed = OpenBody.safeParse(body);
      if (!parsed.success) return failure(400, zodProblem(parsed.error), 'INVALID_INPUT');
      const base = parsed.data.base ?? (await forge.trustedBranch());
      const change = await forge.openChange({ head: parsed.data.head, base, title: parsed.data.title, author: caller.login });
      logger.info({ changeId: change.id, author: caller.login }, 'change opened through the api');
      return { status: 201, body: { change } };
    }
    const id = changeId as string;
    if (kind === 'comment') return comment(id, body, caller);
    const parsed = EmptyBody.safeParse(body);
    if (!parsed.success) return failure(400, zodProblem(parsed.error), 'INVALID_INPUT');
    if (kind === 'checks') {
      const run = await forge.runChecks(id);
      return { status: 200, body: { changeId: id, headSha: run.headSha, results: run.results } };
    }
    const record = await forge.store.requireChange(id);
    if (!closeAllowed(caller, record.author)) {
      return failure(403, `${caller.login} may not close change ${id} (permission ${caller.permission}; write, or the change's author)`, 'READ_ONLY');
    }
    const change = await forge.closeChange(id);
    logger.info({ changeId: id, by: caller.login }, 'change closed through the api');
    return { status: 200, body: { change } };
  };

  const outcome = async (changeId: string, commentId: string): Promise<Answer> => {
    const follow = follows.get(commentId);
    if (follow === undefined || follow.changeId !== changeId)
      return failure(404, `no job followed for comment ${commentId} on change ${changeId}`, 'NOT_FOUND');
    if (follow.ended !== null) return { status: 200, body: follow.ended };
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), waitMs)));
    try {
      const end = await Promise.race([follow.done, late]);
      return { status: 200, body: end ?? { status: 'running' } };
    } finally {
      clearTimeout(timer);
    }
  };

  const records = async (): Promise<Answer> => ({ status: 200, body: { changes: await listedChanges(forge, automerge.env.store.events) } });

  const record = async (changeId: string): Promise<Answer> => {
    if ((await forge.store.change(changeId)) === null) return failure(404, `no change with id "${changeId}"`, 'NOT_FOUND');
    return { status: 200, body: { change: await shownChange(forge, automerge.env.store.events, changeId) } };
  };

  return {
    authenticate: (token) => reads.authenticate(token),
    async get(path, caller, query) {
      try {
        if (path === '/api/change-records') return await records();
        const one = new RegExp(`^/api/change-records/${CHANGE_ID}$`).exec(path);
        if (one !== null) return await record(one[1] as string);
        const followed = new RegExp(`^/api/changes/${CHANGE_ID}/comments/(cmt_[A-Za-z0-9_-]{1,64})/outcome$`).exec(path);
        if (followed !== null) return await outcome(followed[1] as string, followed[2] as string);
        const merged = new RegExp(`^/api/changes/${CHANGE_ID}/merged-outcome$`).exec(path);
        if (merged !== null) {
          const snapshot = await forge.snapshot(merged[1] as string);
          if (snapshot.state !== 'merged') return failure(409, `change ${snapshot.id} is ${snapshot.state}, not merged`, 'NOT_MERGEABLE');
          return { status: 200, body: outcomeJson(await mergedOutcome(automerge, snapshot)) };
        }
      } catch (error) {
        const answer = errorAnswer(error);
        if (answer === null) throw error;
        return answer;
      }
      return reads.get(path, caller, query);
    },
    async stream(path, _caller, query, res) {
      const match = STREAM_PATH.exec(path);
      if (match === null) return null;
      const [changeId, commentId] = [match[1] as string, match[2] as string];
      const after = query.get('after') ?? '0';
      if (!/^(?:0|[1-9][0-9]{0,15})$/.test(after)) return failure(400, 'after must be a line number (0 or more)', 'INVALID_INPUT');
      const follow = follows.get(commentId);
      if (follow === undefined || follow.changeId !== changeId)
        return failure(404, `no job followed for comment ${commentId} on change ${changeId}`, 'NOT_FOUND');
      await streamJournal(res, progress, follow.journal, Number(after));
      return 'streamed';
    },
    writes: (path) => writeRoute(path) !== null,
    async post(path, body, caller) {
      const route = writeRoute(path);
      if (route === null) return null;
      try {
        return await write(route.kind, route.changeId, body, caller);
      } catch (error) {
        const answer = errorAnswer(error);
        if (answer === null) throw error;
        logger.warn({ path, login: caller.login, code: answer.body.code, status: answer.status }, 'api write refused');
        return answer;
      }
    },
  };
}

/**
 * The permission ceiling of a login under the identities (for
 * `LocalForge.limitPermissions`): its live token's permission; `none` when it
 * only has revoked tokens (what it posted no longer counts); null when it
 * never had a token (a person at the terminal with the data directory).
 */
export function identityCeiling(identities: Pick<IdentityStore, 'list'>): (login: string) => Promise<RepoPermission | null> {
  return async (login) => {
    const mine = (await identities.list()).filter((entry) => sameLogin(entry.login, login));
    if (mine.length === 0) return null;
    return mine.find((entry) => entry.revokedAt === null)?.permission ?? 'none';
  };
}
