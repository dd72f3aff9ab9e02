/**
 * A local forge's changes as `proofgate change list` and `change show` give
 * them, with where each stands in its base's merge queue: read once here for
 * the CLI's direct mode and for the service's `/api/change-records`, so both
 * answer the same.
 */
import { changeListEntry, type ChangeListEntry, type LocalForge } from '../../forge/local/index.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import type { EventStore } from '../../storage/ports.js';
import { changeQueueView, foldQueue, queueHistory, type ChangeQueueView, type QueueEvent, type QueueState } from './queue.js';
import { readQueueEvents } from './store.js';

/** Where a waiting change stands in its base's queue, as `change list` shows it. */
export interface ListedQueue {
  readonly base: string;
  readonly position: number;
  readonly of: number;
  readonly paused: boolean;
}

/** A change list entry; `queue` only on an open change waiting in a queue. */
export type ListedChange = ChangeListEntry & { readonly queue?: ListedQueue };

/** A change as `change show` shows it: the snapshot, its author's permission and (when it was ever queued) its queue view. */
export type ShownChange = ChangeSnapshot & {
  readonly author: ChangeSnapshot['author'] & { readonly permission: string };
  readonly queue?: ChangeQueueView;
};

interface ReadQueue {
  readonly state: QueueState;
  readonly events: readonly QueueEvent[];
}

/** The merge queues of `bases`, each stream read once. */
async function readQueues(events: Pick<EventStore, 'read'>, bases: Iterable<string>): Promise<Map<string, ReadQueue>> {
  const queues = new Map<string, ReadQueue>();
  for (const base of new Set(bases)) {
    const read = await readQueueEvents(events, base);
    queues.set(base, { state: foldQueue(base, read), events: read });
  }
  return queues;
}

/** A change's view of the queue of its base (null: never queued there). Pure. */
function queueViewOf(queue: ReadQueue | undefined, changeId: string): ChangeQueueView | null {
  if (queue === undefined) return null;
  return changeQueueView(queue.state, changeId, queueHistory(queue.state.base, queue.events, changeId));
}

/** Where a change waits (null: not waiting in a merge queue). Pure. */
function listedQueue(view: ChangeQueueView | null): ListedQueue | null {
  if (view === null || view.status !== 'waiting' || view.position === null || view.of === null) return null;
  return { base: view.base, position: view.position, of: view.of, paused: view.paused };
}

/** Every change of the forge, with where the open ones wait; `events`: the automerge store's events (the queue streams). */
export async function listedChanges(forge: LocalForge, events: Pick<EventStore, 'read'>): Promise<ListedChange[]> {
  const listed = (await forge.listChanges()).map(changeListEntry);
  // Only an open change can wait in a queue: the queues of their bases are read, once each.
  const queues = await readQueues(
    events,
    listed.filter((entry) => entry.state === 'open').map((entry) => entry.base),
  );
  return listed.map((entry) => {
    const queue = entry.state === 'open' ? listedQueue(queueViewOf(queues.get(entry.base), entry.id)) : null;
    return queue === null ? entry : { ...entry, queue };
  });
}

/** One change as `change show` shows it (`NOT_FOUND` for an unknown id, from the forge). */
export async function shownChange(forge: LocalForge, events: Pick<EventStore, 'read'>, changeId: string): Promise<ShownChange> {
  const read = await forge.snapshot(changeId);
  const queue = queueViewOf((await readQueues(events, [read.base.ref])).get(read.base.ref), read.id);
  const shown = { ...read, author: { ...read.author, permission: await forge.permission(read.author.login) } };
  return queue === null ? shown : { ...shown, queue };
}
