/**
 * The merge queues in the event store: one stream per protected base
 * (`automerge/queue/<base>`), every event validated when it is read, every
 * append made at the revision its decision was made on (a writer that lost
 * the race decides again on the fresh fold). The stream also holds the
 * base's queue lease: whoever holds it runs the queue (runner.ts), and the
 * runner's appends are fenced by it (`heldBy`).
 */
import { ProofgateError, isProofgateError, newId, systemClock, type Clock, type JsonValue } from '../../core/index.js';
import { QUEUE_EVENT_SCHEMAS } from '../../contracts/automerge-steps.js';
import type { EventStore, StoredEvent } from '../../storage/ports.js';
import { foldQueue, initialQueue, queueEventSchema, type QueueEvent, type QueueLease, type QueueState } from './queue.js';

export const QUEUE_STREAM_PREFIX = 'automerge/queue/';
/** The stream of a base's queue (the branch name, percent-encoded: a stream id is one opaque string). */
export const queueStream = (base: string): string => `${QUEUE_STREAM_PREFIX}${encodeURIComponent(base)}`;
/** The base whose queue a stream holds (`queueStream` read back). */
export const queueBaseOf = (streamId: string): string => decodeURIComponent(streamId.slice(QUEUE_STREAM_PREFIX.length));

const MAX_ATTEMPTS = 50;

/** A new queue event, as a decision returns it. */
export type NewQueueEvent = QueueEvent;

function decode(base: string, stored: StoredEvent): QueueEvent {
  const schema = queueEventSchema(stored.type);
  if (schema === undefined) {
    throw new ProofgateError(
      'INVALID_STORED_VALUE',
      `merge queue event ${stored.id} (base ${base}, revision ${stored.revision}) has an unknown type ${JSON.stringify(stored.type)}`,
    );
  }
  const parsed = schema.safeParse(stored.data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') ?? '';
    throw new ProofgateError(
      'INVALID_STORED_VALUE',
      `merge queue event ${stored.id} (base ${base}, revision ${stored.revision}) is malformed at ${field}: ${issue?.message ?? 'invalid'}`,
    );
  }
  return { type: stored.type, data: parsed.data } as QueueEvent;
}

/** Every event of a base's queue stream in order, each validated (`INVALID_STORED_VALUE` otherwise): what a reader outside the runner folds. */
export async function readQueueEvents(events: Pick<EventStore, 'read'>, base: string): Promise<QueueEvent[]> {
  return (await events.read(queueStream(base))).map((stored) => decode(base, stored));
}

/** Whether `owner` holds the queue's lease: the latest lease event is its own (pure). */
export function queueLeaseLost(base: string, lease: QueueLease | null, owner: string): ProofgateError | null {
  if (lease !== null && lease.owner === owner) return null;
  const holder = lease === null ? 'nobody' : `${lease.owner} (${lease.released ? 'released' : 'until'} ${lease.until})`;
  return new ProofgateError('LEASE_LOST', `merge queue of ${base}: the lease is held by ${holder}, not ${owner}; no further effect is made`, { base });
}

export class QueueStore {
  readonly events: EventStore;
  readonly #clock: Clock;
  readonly #folds = new Map<string, QueueState>();

  constructor(events: EventStore, clock: Clock = systemClock) {
    this.events = events;
    this.#clock = clock;
  }

  now(): string {
    return this.#clock.now().toISOString();
  }

  /** The queue of `base` now (the kept fold plus what anyone appended since). */
  async load(base: string): Promise<QueueState> {
    const kept = this.#folds.get(base) ?? initialQueue(base);
    const stored = await this.events.read(queueStream(base), { fromRevision: kept.revision });
    if (stored.length === 0) return kept;
    const state = foldQueue(
      base,
      stored.map((event) => decode(base, event)),
      kept,
    );
    this.#folds.set(base, state);
    return state;
  }

  /**
   * Decide on the queue as it is and append what `decide` returns at that
   * revision; a conflict decides again. With `heldBy`, the append is made
   * only while that owner holds the queue's lease (else `LEASE_LOST`).
   */
  async appendWith<T>(
    base: string,
    decide: (state: QueueState) => { readonly events: readonly NewQueueEvent[]; readonly result: T },
    options: { readonly heldBy?: string } = {},
  ): Promise<T> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const state = await this.load(base);
      const { events, result } = decide(state);
      if (events.length === 0) return result;
      if (options.heldBy !== undefined) {
        const lost = queueLeaseLost(base, state.lease, options.heldBy);
        if (lost !== null) throw lost;
      }
      for (const event of events) {
        const parsed = QUEUE_EVENT_SCHEMAS[event.type].safeParse(event.data);
        if (!parsed.success)
          throw new ProofgateError('INVALID_INPUT', `merge queue ${event.type} event for ${base} is malformed: ${parsed.error.issues[0]?.message ?? ''}`);
      }
      try {
        await this.events.append(
          queueStream(base),
          state.revision,
          events.map((event) => ({ id: newId('amq'), type: event.type, data: event.data as unknown as JsonValue })),
        );
        return result;
      } catch (error) {
        if (isProofgateError(error, 'REVISION_CONFLICT')) continue;
        throw error;
      }
    }
    throw new ProofgateError('REVISION_CONFLICT', `merge queue of ${base} kept changing; gave up after ${MAX_ATTEMPTS} attempts`);
  }

  /** Append events (deciding nothing), fenced by `heldBy` when given. */
  append(base: string, events: readonly NewQueueEvent[], heldBy?: string): Promise<void> {
    return this.appendWith(base, () => ({ events, result: undefined }), heldBy === undefined ? {} : { heldBy });
  }

  /**
   * Take the queue's lease unless another owner holds a live one; a holder
   * `holderGone` says is dead (a killed process of this host) is taken over
   * at once. Returns whether `owner` holds it now.
   */
  acquireLease(base: string, owner: string, ttlMs: number, holderGone: (lease: QueueLease) => boolean): Promise<boolean> {
    return this.appendWith(base, (state) => {
      const held = state.lease;
      const now = this.#clock.now().getTime();
      if (held !== null && !held.released && held.owner !== owner && Date.parse(held.until) > now && !holderGone(held)) return { events: [], result: false };
      const lease = { owner, until: new Date(now + ttlMs).toISOString(), released: false };
      return { events: [{ type: 'queue-lease', data: lease }], result: true };
    });
  }

  /** Extend or release `owner`'s lease; false when another owner holds it. */
  updateLease(base: string, owner: string, ttlMs: number | 'release'): Promise<boolean> {
    return this.appendWith(base, (state) => {
      if (state.lease === null || state.lease.owner !== owner || state.lease.released) return { events: [], result: false };
      const now = this.#clock.now().getTime();
      const lease =
        ttlMs === 'release'
          ? { owner, until: new Date(now).toISOString(), released: true }
          : { owner, until: new Date(now + ttlMs).toISOString(), released: false };
      return { events: [{ type: 'queue-lease', data: lease }], result: true };
    });
  }

  /** `LEASE_LOST` unless `owner` holds the queue's lease (read afresh): the fence before an effect. */
  async requireLease(base: string, owner: string): Promise<void> {
    const lost = queueLeaseLost(base, (await this.load(base)).lease, owner);
    if (lost !== null) throw lost;
  }

  /**
   * The bases whose queue streams have events after store position `after`
   * (each once), and the position read up to: a reader keeps it and reads on
   * from there, so it never reads an event twice.
   */
  async basesSince(after: number): Promise<{ readonly bases: string[]; readonly position: number }> {
    const bases = new Set<string>();
    let position = after;
    for (;;) {
      const batch = await this.events.readAll({ afterPosition: position, limit: 1000, streamPrefix: QUEUE_STREAM_PREFIX });
      for (const event of batch) bases.add(queueBaseOf(event.streamId));
      const last = batch[batch.length - 1];
      if (last === undefined) return { bases: [...bases].sort(), position };
      position = last.position;
    }
  }
}
