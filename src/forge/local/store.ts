import { ProofgateError, isProofgateError, newId } from '../../core/index.js';
import type { ArtifactStore, EventStore, NewEvent, StoredEvent } from '../../storage/ports.js';
import {
  REGISTRY_STREAM,
  changeStream,
  checksStream,
  eventData,
  foldChange,
  foldChecks,
  readEventData,
  type ChangeRecord,
  type LocalEventData,
  type LocalEventType,
} from './records.js';
import type { ForgeCheck } from '../port.js';

/** The parts of a RunStorage the local forge uses. */
export interface LocalForgeStorage {
  readonly namespace: string;
  readonly eventStore: EventStore;
  readonly artifactStore: ArtifactStore;
}

export type TypedEvent = { [T in LocalEventType]: { readonly type: T; readonly data: LocalEventData<T> } }[LocalEventType];

const MAX_ATTEMPTS = 50;

/**
 * Reads and appends of the local forge's streams. Appends are optimistic: read
 * the revision, decide, append at that revision, and on `REVISION_CONFLICT`
 * (another process wrote first) decide again on fresh state.
 */
export class LocalForgeStore {
  readonly storage: LocalForgeStorage;
  readonly #onAppended: (events: readonly StoredEvent[]) => void;

  constructor(storage: LocalForgeStorage, onAppended: (events: readonly StoredEvent[]) => void) {
    this.storage = storage;
    this.#onAppended = onAppended;
  }

  get events(): EventStore {
    return this.storage.eventStore;
  }

  /**
   * Append what `decide` returns for the current stream, retrying on conflict.
   * `decide` gets the stream's events so far; returning an empty list appends nothing.
   */
  async appendWith(streamId: string, decide: (events: readonly StoredEvent[]) => readonly TypedEvent[]): Promise<StoredEvent[]> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const current = await this.events.read(streamId);
      const revision = current[current.length - 1]?.revision ?? 0;
      const batch = decide(current);
      if (batch.length === 0) return [];
      const events: NewEvent[] = batch.map((event) => ({ id: newId('fe'), type: event.type, data: eventData(event.type, event.data) }));
      try {
        await this.events.append(streamId, revision, events);
      } catch (error) {
        if (isProofgateError(error, 'REVISION_CONFLICT')) continue;
        throw error;
      }
      const stored = await this.events.read(streamId, { fromRevision: revision });
      this.#onAppended(stored);
      return stored;
    }
    throw new ProofgateError('REVISION_CONFLICT', `stream ${streamId} kept changing; gave up after ${MAX_ATTEMPTS} attempts`);
  }

  /** Append unconditionally (the events do not depend on the stream's state). */
  append(streamId: string, events: readonly TypedEvent[]): Promise<StoredEvent[]> {
    return this.appendWith(streamId, () => events);
  }

  /** Allocate the next change number (unique across processes sharing the store). */
  async allocateNumber(): Promise<number> {
    let allocated = 0;
    await this.appendWith(REGISTRY_STREAM, (events) => {
      allocated = (events[events.length - 1]?.revision ?? 0) + 1;
      return [{ type: 'change-registered', data: { changeId: String(allocated), number: allocated } }];
    });
    return allocated;
  }

  async change(changeId: string): Promise<ChangeRecord | null> {
    return foldChange(await this.events.read(changeStream(changeId)));
  }

  /** The change record; an unknown id is one `NOT_FOUND` error. */
  async requireChange(changeId: string): Promise<ChangeRecord> {
    const record = /^[1-9][0-9]{0,15}$/.test(changeId) ? await this.change(changeId) : null;
    if (record === null) throw new ProofgateError('NOT_FOUND', `no change with id "${changeId}"`, { changeId });
    return record;
  }

  /** Every registered change, by number. */
  async listChanges(): Promise<ChangeRecord[]> {
    const registry = await this.events.read(REGISTRY_STREAM);
    const records: ChangeRecord[] = [];
    for (const event of registry) {
      if (event.type !== 'change-registered') continue;
      const record = await this.change(readEventData(event, 'change-registered').changeId);
      if (record !== null) records.push(record);
    }
    return records;
  }

  /** Latest check run per name on one commit. */
  async checks(sha: string): Promise<ForgeCheck[]> {
    return foldChecks(await this.events.read(checksStream(sha)));
  }
}
