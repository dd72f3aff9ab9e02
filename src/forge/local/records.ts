import { z } from 'zod';
import { ProofgateError, type JsonValue } from '../../core/index.js';
import type { StoredEvent } from '../../storage/ports.js';
import type { AuthorType, CheckConclusion, ForgeCheck, ForgeComment } from '../port.js';

/**
 * What the local forge keeps in proofgate's store, and the pure folds that turn
 * those events back into state. Streams (one namespace per data directory):
 *
 * - `forge/changes`: `change-registered` (allocates the next change number);
 * - `forge/change/<id>`: opened, comments, labels, head pushes, merged, closed;
 * - `forge/checks/<sha>`: queued, started and completed check runs of one commit;
 * - `forge/branch/<name>`: pushes and merges that moved a branch.
 */

/** Every stream of the local forge starts with this, so the namespace can be shared with other records. */
export const STREAM_PREFIX = 'forge/';
export const REGISTRY_STREAM = `${STREAM_PREFIX}changes`;
export const CHANGE_STREAM_PREFIX = `${STREAM_PREFIX}change/`;
export const changeStream = (changeId: string): string => `${CHANGE_STREAM_PREFIX}${changeId}`;
export const checksStream = (sha: string): string => `${STREAM_PREFIX}checks/${sha}`;
export const branchStream = (branch: string): string => `${STREAM_PREFIX}branch/${branch}`;

const sha = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/);
const time = z.string().min(1);
const authorType = z.enum(['User', 'Bot', 'Organization']);
const conclusion = z.enum(['success', 'failure', 'neutral', 'cancelled', 'skipped', 'timed_out', 'action_required', 'startup_failure', 'stale', 'error']);

export const localEventSchemas = {
  'change-registered': z.object({ changeId: z.string(), number: z.number().int().positive() }),
  'change-opened': z.object({
    changeId: z.string(),
    number: z.number().int().positive(),
    title: z.string(),
    baseRef: z.string(),
    headRef: z.string(),
    baseSha: sha,
    headSha: sha,
    author: z.string(),
    at: time,
  }),
  'comment-created': z.object({ commentId: z.string(), author: z.string(), authorType, body: z.string(), at: time }),
  /** Self-contained (author and creation time repeated) so a reader of one event can build the comment. */
  'comment-edited': z.object({ commentId: z.string(), author: z.string(), authorType, createdAt: time, body: z.string(), at: time }),
  'labels-added': z.object({ labels: z.array(z.string()), at: time }),
  'label-removed': z.object({ label: z.string(), at: time }),
  'head-pushed': z.object({ before: sha.nullable(), headSha: sha, at: time }),
  'change-merged': z.object({ mergeCommitSha: sha, reviewedHeadSha: sha, baseBefore: sha, at: time }),
  'change-closed': z.object({ at: time }),
  'check-queued': z.object({ checkRunId: z.string(), name: z.string(), headSha: sha, at: time }),
  'check-started': z.object({ checkRunId: z.string(), at: time }),
  /** Self-contained (name, sha, start time repeated) so a reader of one event can build the check. */
  'check-completed': z.object({
    checkRunId: z.string(),
    name: z.string(),
    headSha: sha,
    changeIds: z.array(z.string()),
    startedAt: time.nullable(),
    conclusion,
    at: time,
    exitCode: z.number().int().nullable(),
    signal: z.string().nullable(),
    durationMs: z.number().nonnegative(),
    output: z.object({ digest: z.string(), bytes: z.number().int().nonnegative(), truncated: z.boolean(), url: z.string() }).nullable(),
    /** How the check ran: jailed, or unjailed under the trusted config's `sandbox: none` (absent: it never started). */
    sandbox: z.enum(['jail', 'none']).optional(),
  }),
  'branch-pushed': z.object({ ref: z.string(), before: sha.nullable(), after: sha, at: time }),
} as const;

export type LocalEventType = keyof typeof localEventSchemas;
export type LocalEventData<T extends LocalEventType> = z.infer<(typeof localEventSchemas)[T]>;

/** Data of a stored event of a known type, validated (`INVALID_STORED_VALUE` when malformed). */
export function readEventData<T extends LocalEventType>(event: StoredEvent, type: T): LocalEventData<T> {
  const parsed = localEventSchemas[type].safeParse(event.data);
  if (!parsed.success) {
    throw new ProofgateError('INVALID_STORED_VALUE', `stored ${type} event ${event.id} in ${event.streamId} is malformed`, { eventId: event.id });
  }
  return parsed.data as LocalEventData<T>;
}

export function isLocalEventType(type: string): type is LocalEventType {
  return Object.hasOwn(localEventSchemas, type);
}

/** Build the data of a new event (typed). */
export function eventData<T extends LocalEventType>(_type: T, data: LocalEventData<T>): JsonValue {
  return data as unknown as JsonValue;
}

/** The state of a change as its stream tells it. */
export interface ChangeRecord {
  readonly changeId: string;
  readonly number: number;
  readonly title: string;
  readonly baseRef: string;
  readonly headRef: string;
  readonly openedBaseSha: string;
  readonly openedHeadSha: string;
  readonly author: string;
  readonly openedAt: string;
  readonly state: 'open' | 'closed' | 'merged';
  readonly labels: readonly string[];
  readonly comments: readonly ForgeComment[];
  readonly merge: { readonly mergeCommitSha: string; readonly reviewedHeadSha: string; readonly baseBefore: string } | null;
  /** Stream revision the record was folded at. */
  readonly revision: number;
}

/** Fold a change stream (in revision order) into its record. */
export function foldChange(events: readonly StoredEvent[]): ChangeRecord | null {
  const first = events[0];
  if (first === undefined || first.type !== 'change-opened') return null;
  const opened = readEventData(first, 'change-opened');
  let state: ChangeRecord['state'] = 'open';
  const labels: string[] = [];
  const comments = new Map<string, ForgeComment>();
  let merge: ChangeRecord['merge'] = null;
  for (const event of events.slice(1)) {
    switch (event.type) {
      case 'comment-created': {
        const data = readEventData(event, 'comment-created');
        if (!comments.has(data.commentId)) {
          comments.set(data.commentId, {
            id: data.commentId,
            author: data.author,
            authorType: data.authorType as AuthorType,
            body: data.body,
            createdAt: data.at,
            updatedAt: data.at,
          });
        }
        break;
      }
      case 'comment-edited': {
        const data = readEventData(event, 'comment-edited');
        const comment = comments.get(data.commentId);
        if (comment !== undefined) comments.set(data.commentId, { ...comment, body: data.body, updatedAt: data.at });
        break;
      }
      case 'labels-added':
        for (const label of readEventData(event, 'labels-added').labels) if (!labels.includes(label)) labels.push(label);
        break;
      case 'label-removed': {
        const index = labels.indexOf(readEventData(event, 'label-removed').label);
        if (index >= 0) labels.splice(index, 1);
        break;
      }
      case 'change-merged': {
        const data = readEventData(event, 'change-merged');
        if (state === 'open') {
          state = 'merged';
          merge = { mergeCommitSha: data.mergeCommitSha, reviewedHeadSha: data.reviewedHeadSha, baseBefore: data.baseBefore };
        }
        break;
      }
      case 'change-closed':
        if (state === 'open') state = 'closed';
        break;
      default:
        break;
    }
  }
  return {
    changeId: opened.changeId,
    number: opened.number,
    title: opened.title,
    baseRef: opened.baseRef,
    headRef: opened.headRef,
    openedBaseSha: opened.baseSha,
    openedHeadSha: opened.headSha,
    author: opened.author,
    openedAt: opened.at,
    state,
    labels,
    comments: [...comments.values()],
    merge,
    revision: events[events.length - 1]?.revision ?? 0,
  };
}

interface CheckRunState {
  name: string;
  headSha: string;
  status: ForgeCheck['status'];
  conclusion: CheckConclusion | null;
  queuedAt: string;
  startedAt: string | null;
  completedAt: string | null;
  url: string | null;
}

/** Fold the `checks/<sha>` stream into the latest run of each check name (in first-seen order). */
export function foldChecks(events: readonly StoredEvent[]): ForgeCheck[] {
  const runs = new Map<string, CheckRunState>();
  const latestByName = new Map<string, string>();
  for (const event of events) {
    if (event.type === 'check-queued') {
      const data = readEventData(event, 'check-queued');
      runs.set(data.checkRunId, {
        name: data.name,
        headSha: data.headSha,
        status: 'queued',
        conclusion: null,
        queuedAt: data.at,
        startedAt: null,
        completedAt: null,
        url: null,
      });
      latestByName.set(data.name, data.checkRunId);
    } else if (event.type === 'check-started') {
      const data = readEventData(event, 'check-started');
      const run = runs.get(data.checkRunId);
      if (run !== undefined && run.status === 'queued') Object.assign(run, { status: 'in_progress', startedAt: data.at });
    } else if (event.type === 'check-completed') {
      const data = readEventData(event, 'check-completed');
      const run = runs.get(data.checkRunId);
      if (run !== undefined && run.status !== 'completed') {
        Object.assign(run, {
          status: 'completed',
          conclusion: data.conclusion,
          completedAt: data.at,
          startedAt: run.startedAt ?? data.at,
          url: data.output?.url ?? null,
        });
      }
    }
  }
  const checks: ForgeCheck[] = [];
  for (const runId of latestByName.values()) {
    const run = runs.get(runId);
    if (run === undefined) continue;
    checks.push({
      kind: 'check_run',
      name: run.name,
      workflow: 'proofgate',
      status: run.status,
      conclusion: run.conclusion,
      startedAt: run.startedAt,
      completedAt: run.completedAt,
      url: run.url,
      headSha: run.headSha,
    });
  }
  return checks;
}

/** A change as `proofgate change list` shows it (and the service's `/api/change-records` answers). Pure. */
export function changeListEntry(record: ChangeRecord) {
  return {
    id: record.changeId,
    number: record.number,
    title: record.title,
    state: record.state,
    base: record.baseRef,
    head: record.headRef,
    author: record.author,
    openedAt: record.openedAt,
    mergeCommitSha: record.merge?.mergeCommitSha ?? null,
  };
}

export type ChangeListEntry = ReturnType<typeof changeListEntry>;
