/**
 * What the GitHub App service's dashboard reads, without asking GitHub:
 *
 * - Change facts. Every snapshot a job takes of a pull request (the loop and
 *   the router take them anyway) is recorded, when it differs from the last
 *   one recorded, as a `change-facts` event in the store namespace
 *   `github-changes` (stream `change/<owner/name>#<number>`, lower case):
 *   its repository, number, title, author, branches, head, state, merge
 *   commit, check runs, and the bindings of proofgate's own signed verdict
 *   markers found in its comments (`collectVerdicts`: a marker in anyone
 *   else's comment counts for nothing). `changeFactsOf` is pure;
 *   `recordingForge` wraps a forge so its snapshots are recorded.
 * - The feed (`githubFeed`): the facts namespace and each repository's
 *   ledger namespace (`github:<owner/name>`), whose events name the changes
 *   to compute again. A change's id is `owner/name#number` in lower case, so
 *   pull request 1 of two repositories is two changes.
 * - The read API (`githubReadApi`): the projection's reads, the same
 *   `projectionAnswer` as `serve --repo`, plus `GET /api/changes/:id` (the
 *   change's row); every write is refused (`405`, `READ_ONLY`): writes go to
 *   a local repository's service.
 *
 * Untrusted text (a title, a login, a branch name) is stored as data, cut
 * where the projection cuts it, and only ever leaves as a JSON string.
 */
import { canonicalJson, isProofgateError, newId, type JsonValue } from '../../core/index.js';
import { collectVerdicts, type MarkerSecret } from '../../automerge/markers.js';
import { AUTOMERGE_STREAM_PREFIX, LedgerStore, automergeStream } from '../../automerge/loop/ledger-store.js';
import type { ChangeRecord } from '../../forge/local/records.js';
import type { ChangeSnapshot, ForgeCheck, Forge } from '../../forge/port.js';
import type { GitHubForgeEvent } from '../../forge/github/webhook-events.js';
import type { EventStore, StoredEvent } from '../../storage/ports.js';
import type { Answer, ApiCaller, ServiceApi } from '../http.js';
import { isChangeNumber } from './work.js';
import type { IdentityStore } from '../identities.js';
import {
  MAX_TEXT,
  MAX_TITLE,
  changeIdOf,
  clip,
  projectionAnswer,
  type ChangeProjection,
  type FeedChange,
  type FeedTail,
  type ProjectionFeed,
  type VerdictBindings,
} from '../projection.js';

/** The store namespace of the change facts. */
export const CHANGES_NAMESPACE = 'github-changes';
/** The prefix of a change's facts stream. */
export const FACTS_STREAM_PREFIX = 'change/';
/** The event type of a change's facts. */
export const FACTS_EVENT = 'change-facts';
/** Most check runs kept per record (a snapshot's, newest last). */
export const MAX_FACT_CHECKS = 200;

/** A change's id on the board: `owner/name#number`, lower case (GitHub's names are case-insensitive). Pure. */
export function githubChangeId(repository: string, number: number | string): string {
  return `${repository.toLowerCase()}#${String(number)}`;
}

/** What one snapshot says of a pull request, as recorded. */
export interface ChangeFactsRecord {
  readonly repository: string;
  readonly number: number;
  readonly title: string;
  readonly author: string;
  readonly base: string;
  readonly head: string;
  readonly headSha: string;
  readonly state: ChangeRecord['state'];
  readonly mergeCommit: string | null;
  readonly checks: readonly Pick<ForgeCheck, 'name' | 'headSha' | 'status' | 'conclusion' | 'startedAt' | 'completedAt'>[];
  readonly verdicts: readonly ({ readonly review: string } & VerdictBindings)[];
}

/** The facts of a snapshot (pure): untrusted text cut, the trusted verdict markers' bindings only. */
export function changeFactsOf(
  repository: string,
  snapshot: ChangeSnapshot,
  markers: { readonly selfLogin: string; readonly secret: MarkerSecret },
): ChangeFactsRecord {
  const { verdicts } = collectVerdicts(snapshot.comments, { selfLogin: markers.selfLogin, secret: markers.secret, changeId: snapshot.id });
  return {
    repository,
    number: snapshot.number,
    title: clip(snapshot.title, MAX_TITLE),
    author: clip(snapshot.author.login, MAX_TEXT),
    base: clip(snapshot.base.ref, MAX_TEXT),
    head: clip(snapshot.head.ref, MAX_TEXT),
    headSha: snapshot.head.sha,
    state: snapshot.state,
    mergeCommit: snapshot.mergeCommitSha,
    checks: snapshot.checks.slice(-MAX_FACT_CHECKS).map((check) => ({
      name: clip(check.name, MAX_TEXT),
      headSha: check.headSha,
      status: check.status,
      conclusion: check.conclusion,
      startedAt: check.startedAt,
      completedAt: check.completedAt,
    })),
    verdicts: verdicts.map(({ fields }) => ({ review: fields.review, head: fields.head, diff: fields.diff, contract: fields.contract, config: fields.config })),
  };
}

/** The facts stream of a change. */
export function factsStream(repository: string, number: number | string): string {
  return `${FACTS_STREAM_PREFIX}${githubChangeId(repository, number)}`;
}

/**
 * Record `facts` unless the change's last record says the same (a no-op then).
 * Another process recording at once makes the append a conflict: read again
 * and decide again. `readAt`, when given, is the stream's revision from
 * before the facts were read from the forge: a record appended since then (a
 * delivery's, or another job's snapshot) may be newer than these facts, so
 * they are not recorded over it (false), and the board never shows a head
 * going back to one it had already left. The next snapshot records again.
 */
export async function recordChangeFacts(events: EventStore, facts: ChangeFactsRecord, readAt?: number): Promise<boolean> {
  const stream = factsStream(facts.repository, facts.number);
  const data = facts as unknown as JsonValue;
  const same = canonicalJson(data);
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const revision = await events.revision(stream);
    if (readAt !== undefined && revision !== readAt) return false;
    if (revision > 0) {
      const [last] = await events.read(stream, { fromRevision: revision - 1, limit: 1 });
      if (last !== undefined && canonicalJson(last.data) === same) return false;
    }
    try {
      await events.append(stream, revision, [{ id: newId('facts'), type: FACTS_EVENT, data }]);
      return true;
    } catch (error) {
      if (isProofgateError(error, 'REVISION_CONFLICT')) continue;
      throw error;
    }
  }
  return false;
}

/**
 * What a delivery says of a change already recorded (pure): closed or
 * merged, a new head, reopened; null when it says nothing new of the facts.
 * A change closed by hand shows so on the board though no job looks at it.
 */
export function deliveredFacts(last: ChangeFactsRecord, event: GitHubForgeEvent): ChangeFactsRecord | null {
  switch (event.kind) {
    case 'change-closed':
      return { ...last, state: event.merged ? 'merged' : 'closed' };
    case 'change-synchronized':
      return { ...last, headSha: event.headSha };
    case 'change-opened':
      return { ...last, state: 'open', headSha: event.headSha };
    default:
      return null;
  }
}

/** Record what a delivery says of a change (`deliveredFacts`), when the change has a record already; true when something was recorded. */
export async function recordDeliveredFacts(events: EventStore, event: GitHubForgeEvent): Promise<boolean> {
  if (!('changeId' in event) || !isChangeNumber(event.changeId)) return false;
  const stream = factsStream(`${event.repository.owner}/${event.repository.repo}`, event.changeId);
  const revision = await events.revision(stream);
  if (revision === 0) return false;
  const [stored] = await events.read(stream, { fromRevision: revision - 1, limit: 1 });
  const last = stored === undefined ? null : storedFacts(stored);
  const next = last === null ? null : deliveredFacts(last, event);
  return next === null ? false : recordChangeFacts(events, next);
}

/**
 * `forge` whose every snapshot is also recorded as the change's facts in
 * `facts` (`toFacts` makes the record; `onError` hears a record that failed,
 * which never fails the snapshot). The facts stream's revision is read before
 * the snapshot is taken, so that a record appended while it was in flight
 * wins (`recordChangeFacts`'s `readAt`).
 */
export function recordingForge(
  forge: Forge,
  facts: EventStore,
  repository: string,
  toFacts: (snapshot: ChangeSnapshot) => ChangeFactsRecord,
  onError: (snapshot: ChangeSnapshot, error: unknown) => void,
): Forge {
  return new Proxy(forge, {
    get(target, property, receiver) {
      if (property === 'snapshot') {
        return async (changeId: string): Promise<ChangeSnapshot> => {
          const readAt = isChangeNumber(changeId) ? await facts.revision(factsStream(repository, changeId)).catch(() => undefined) : undefined;
          const snapshot = await target.snapshot(changeId);
          try {
            await recordChangeFacts(facts, toFacts(snapshot), readAt);
          } catch (error) {
            onError(snapshot, error);
          }
          return snapshot;
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** A repository's ledger, as the feed reads it. */
export interface RepositoryLedger {
  readonly events: EventStore;
  readonly ledger: Pick<LedgerStore, 'load'>;
}

export interface GitHubFeedOptions {
  /** The facts namespace's events. */
  readonly facts: EventStore;
  /** A repository's ledger namespace (`github:<owner/name>`), by its lower-case name. */
  readonly ledgerOf: (repository: string) => Promise<RepositoryLedger>;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The facts of a stored event (null: not a facts event of the shape recorded). */
function storedFacts(event: StoredEvent): ChangeFactsRecord | null {
  if (event.type !== FACTS_EVENT || !isObject(event.data)) return null;
  const data = event.data;
  const strings = ['repository', 'title', 'author', 'base', 'head', 'headSha', 'state'].every((key) => typeof data[key] === 'string');
  return strings && typeof data.number === 'number' && Array.isArray(data.checks) && Array.isArray(data.verdicts)
    ? (data as unknown as ChangeFactsRecord)
    : null;
}

/** The commands a ledger applied (its `commands` records), oldest first. */
function appliedCommands(events: readonly StoredEvent[]): { at: string; actor: string; text: string }[] {
  const commands: { at: string; actor: string; text: string }[] = [];
  for (const event of events) {
    if (event.type !== 'ledger' || !isObject(event.data) || !isObject(event.data.record) || event.data.record.type !== 'commands') continue;
    const delivery = event.data.record.delivery;
    if (!isObject(delivery) || !isObject(delivery.comment) || !Array.isArray(delivery.commands)) continue;
    const { author, updatedAt } = delivery.comment;
    for (const command of delivery.commands) {
      if (isObject(command) && typeof command.source === 'string' && typeof author === 'string' && typeof updatedAt === 'string')
        commands.push({ at: updatedAt, actor: author, text: command.source });
    }
  }
  return commands;
}

/**
 * The GitHub service's changes (see the module comment). The repositories
 * are learnt from the facts: at the first `tails()` by listing the facts
 * streams, then from each facts event as it passes.
 */
export function githubFeed(options: GitHubFeedOptions): ProjectionFeed {
  /** lower-case repository -> its ledger (opened once). */
  const repositories = new Map<string, Promise<RepositoryLedger>>();
  let listed = false;
  const repositoryOfId = (id: string): { repository: string; number: string } | null => {
    const match = /^([^#]+)#([1-9][0-9]{0,9})$/.exec(id);
    return match === null ? null : { repository: match[1] as string, number: match[2] as string };
  };
  const learn = (id: string): void => {
    const at = repositoryOfId(id);
    if (at !== null && !repositories.has(at.repository)) {
      const opened = options.ledgerOf(at.repository);
      opened.catch(() => repositories.delete(at.repository));
      repositories.set(at.repository, opened);
    }
  };
  const factsIds = (event: StoredEvent): readonly string[] => {
    if (!event.streamId.startsWith(FACTS_STREAM_PREFIX)) return [];
    const id = event.streamId.slice(FACTS_STREAM_PREFIX.length);
    learn(id);
    return [id];
  };
  const changeIds = async (): Promise<string[]> => {
    const streams = await options.facts.listStreams(FACTS_STREAM_PREFIX);
    const ids = streams.map((stream) => stream.streamId.slice(FACTS_STREAM_PREFIX.length));
    for (const id of ids) learn(id);
    return ids;
  };
  return {
    async tails() {
      if (!listed) {
        await changeIds();
        listed = true;
      }
      const tails: FeedTail[] = [{ key: CHANGES_NAMESPACE, events: options.facts, idsOf: factsIds }];
      for (const [repository, opened] of repositories) {
        const { events } = await opened;
        tails.push({
          key: `github:${repository}`,
          events,
          idsOf: (event) =>
            event.streamId.startsWith(AUTOMERGE_STREAM_PREFIX) ? [githubChangeId(repository, event.streamId.slice(AUTOMERGE_STREAM_PREFIX.length))] : [],
        });
      }
      return tails;
    },
    changeIds,
    async reader() {
      return async (id: string): Promise<FeedChange | null> => {
        const at = repositoryOfId(id);
        if (at === null) return null;
        const stored = await options.facts.read(`${FACTS_STREAM_PREFIX}${id}`);
        const records = stored.map((event) => ({ event, facts: storedFacts(event) })).filter((entry) => entry.facts !== null) as {
          event: StoredEvent;
          facts: ChangeFactsRecord;
        }[];
        const first = records[0];
        const last = records[records.length - 1];
        if (first === undefined || last === undefined) return null;
        learn(id);
        const { ledger, events } = await (repositories.get(at.repository) as Promise<RepositoryLedger>);
        const loaded = await ledger.load(at.number);
        const commands = appliedCommands(await events.read(automergeStream(at.number)));
        // The facts' history as forge events: a new head is a push, the first merged or closed record the end.
        const forgeEvents: { type: string; data: JsonValue; recordedAt: string }[] = [];
        const checks = new Map<string, ForgeCheck>();
        const bindings = new Map<string, VerdictBindings>();
        let previous: ChangeFactsRecord | null = null;
        for (const { event, facts } of records) {
          if (previous !== null && facts.headSha !== previous.headSha)
            forgeEvents.push({ type: 'head-pushed', data: { headSha: facts.headSha, before: previous.headSha }, recordedAt: event.recordedAt });
          if (facts.state !== (previous?.state ?? 'open')) {
            if (facts.state === 'merged')
              forgeEvents.push({
                type: 'change-merged',
                data: { mergeCommitSha: facts.mergeCommit, reviewedHeadSha: facts.headSha },
                recordedAt: event.recordedAt,
              });
            else if (facts.state === 'closed') forgeEvents.push({ type: 'change-closed', data: {}, recordedAt: event.recordedAt });
          }
          for (const check of facts.checks)
            checks.set(`${check.headSha}\n${check.name}`, { ...check, kind: 'check_run', workflow: null, url: null } as ForgeCheck);
          for (const verdict of facts.verdicts)
            bindings.set(verdict.review, { head: verdict.head, diff: verdict.diff, contract: verdict.contract, config: verdict.config });
          previous = facts;
        }
        // Opened: when proofgate first heard of it, a command or its first record, whichever came first.
        const openedAt = [first.event.recordedAt, ...commands.map((command) => command.at)].reduce((earliest, at) =>
          Date.parse(at) < Date.parse(earliest) ? at : earliest,
        );
        const merged = loaded.state.merged;
        const state: ChangeRecord['state'] = merged !== null ? 'merged' : last.facts.state;
        const mergeCommit = merged?.mergeCommit ?? last.facts.mergeCommit;
        const record: ChangeRecord = {
          changeId: id,
          number: last.facts.number,
          title: last.facts.title,
          baseRef: last.facts.base,
          headRef: last.facts.head,
          openedBaseSha: '',
          openedHeadSha: first.facts.headSha,
          author: last.facts.author,
          openedAt,
          state,
          labels: [],
          comments: [],
          merge:
            state === 'merged' && mergeCommit !== null
              ? { mergeCommitSha: mergeCommit, reviewedHeadSha: merged?.head ?? last.facts.headSha, baseBefore: '' }
              : null,
          revision: last.event.revision,
        };
        return {
          facts: {
            repo: last.facts.repository,
            record,
            forgeEvents,
            branchSha: last.facts.headSha,
            ledger: loaded,
            checks: [...checks.values()],
            bindings,
            commands,
          },
          // First recorded first: the list is newest first by when proofgate first saw the change.
          order: first.event.position,
        };
      };
    },
  };
}

/** The answer to every write on the GitHub service. */
export const READ_ONLY_ANSWER: Answer = {
  status: 405,
  body: { error: 'this service is read-only: writes go to a local repository (proofgate serve --repo)', code: 'READ_ONLY' },
};

/**
 * The GitHub service's API: a token of the store's identities reads (its
 * permission is the ceiling; there is no one trusted config to lower it),
 * the reads are the projection's, and every write is refused.
 */
export function githubReadApi(identities: IdentityStore, projection: ChangeProjection): ServiceApi {
  return {
    async authenticate(token: string): Promise<ApiCaller | null> {
      const identity = await identities.authenticate(token);
      return identity === null ? null : { login: identity.login, permission: identity.permission };
    },
    get(path: string, _caller: ApiCaller | null, query: URLSearchParams = new URLSearchParams()): Promise<Answer | null> {
      const projected = projectionAnswer(projection, path, query);
      if (projected !== null) return Promise.resolve(projected);
      const match = /^\/api\/changes\/([^/]+)$/.exec(path);
      if (match === null) return Promise.resolve(null);
      const id = changeIdOf(match[1] as string);
      const row = id === null ? null : projection.change(id);
      return Promise.resolve(row === null ? { status: 404, body: { error: 'no such change' } } : { status: 200, body: { change: row } });
    },
    writeRefusal: READ_ONLY_ANSWER,
  };
}
