import type { EventStore, StoredEvent } from '../../storage/ports.js';
import type { AuthorType, ForgeEvent } from '../port.js';
import { CHANGE_STREAM_PREFIX, STREAM_PREFIX, readEventData } from './records.js';
import { ZERO_OID } from './repository.js';

/** A forge event with the store position it came from (resume a tail after it). */
export interface PositionedForgeEvent {
  readonly position: number;
  readonly event: ForgeEvent;
}

export type ForgeEventListener = (event: ForgeEvent) => void;

/** The typed forge event a stored local-forge event stands for, or null when it stands for none. */
export function toForgeEvent(stored: StoredEvent): ForgeEvent | null {
  const changeId = stored.streamId.startsWith(CHANGE_STREAM_PREFIX) ? stored.streamId.slice(CHANGE_STREAM_PREFIX.length) : '';
  const deliveryId = stored.id;
  switch (stored.type) {
    case 'change-opened':
      return { kind: 'change-opened', changeId, headSha: readEventData(stored, 'change-opened').headSha, deliveryId };
    case 'head-pushed':
      return { kind: 'change-synchronized', changeId, headSha: readEventData(stored, 'head-pushed').headSha, deliveryId };
    case 'change-merged':
      return { kind: 'change-closed', changeId, merged: true, deliveryId };
    case 'change-closed':
      return { kind: 'change-closed', changeId, merged: false, deliveryId };
    case 'comment-created': {
      const data = readEventData(stored, 'comment-created');
      const comment = {
        id: data.commentId,
        author: data.author,
        authorType: data.authorType as AuthorType,
        body: data.body,
        createdAt: data.at,
        updatedAt: data.at,
      };
      return { kind: 'comment-created', changeId, comment, deliveryId };
    }
    case 'comment-edited': {
      const data = readEventData(stored, 'comment-edited');
      const comment = {
        id: data.commentId,
        author: data.author,
        authorType: data.authorType as AuthorType,
        body: data.body,
        createdAt: data.createdAt,
        updatedAt: data.at,
      };
      return { kind: 'comment-edited', changeId, comment, deliveryId };
    }
    case 'check-completed': {
      const data = readEventData(stored, 'check-completed');
      return {
        kind: 'check-completed',
        changeIds: data.changeIds,
        headSha: data.headSha,
        check: {
          kind: 'check_run',
          name: data.name,
          workflow: 'proofgate',
          status: 'completed',
          conclusion: data.conclusion,
          startedAt: data.startedAt ?? data.at,
          completedAt: data.at,
          url: data.output?.url ?? null,
          headSha: data.headSha,
        },
        deliveryId,
      };
    }
    case 'branch-pushed': {
      const data = readEventData(stored, 'branch-pushed');
      return { kind: 'base-pushed', ref: data.ref, before: data.before ?? ZERO_OID, after: data.after, deliveryId };
    }
    default:
      return null;
  }
}

export interface TailOptions {
  /** Start after this store position (default 0: from the beginning). */
  readonly afterPosition?: number;
  /** How often to look for events written by other processes (default 500 ms). */
  readonly pollMs?: number;
  readonly signal?: AbortSignal;
}

/**
 * Tail the store as forge events: events appended by this process wake the
 * tail at once (through `wake`), events of other processes are found by polling
 * `readAll({ afterPosition })`. Ends when the signal aborts.
 */
export async function* tailForgeEvents(
  store: EventStore,
  subscribeWake: (wake: () => void) => () => void,
  options: TailOptions = {},
): AsyncGenerator<PositionedForgeEvent> {
  let position = options.afterPosition ?? 0;
  const pollMs = options.pollMs ?? 500;
  const signal = options.signal;
  const aborted = (): boolean => signal?.aborted === true;
  let wakeUp: (() => void) | null = null;
  let pending = false;
  const unsubscribe = subscribeWake(() => {
    pending = true;
    wakeUp?.();
  });
  const onAbort = () => wakeUp?.();
  signal?.addEventListener('abort', onAbort);
  try {
    while (!aborted()) {
      pending = false;
      const batch = await store.readAll({ afterPosition: position, limit: 500, streamPrefix: STREAM_PREFIX });
      for (const stored of batch) {
        position = stored.position;
        const event = toForgeEvent(stored);
        if (event !== null) yield { position, event };
        if (aborted()) return;
      }
      if (batch.length === 500 || pending) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs);
        wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wakeUp = null;
    }
  } finally {
    unsubscribe();
    signal?.removeEventListener('abort', onAbort);
  }
}
