/**
 * The automerge ledger, persisted: one event stream per change
 * (`automerge/change/<id>`) holding the ledger records (`ledger`), every step
 * the router and the loop took (`step`) and the job leases (`lease`). Appends
 * name the stream revision they were decided on; a concurrent writer makes the
 * append fail with REVISION_CONFLICT and the decision is taken again on fresh
 * state, so two processes never both run one command.
 */
import { ProofgateError, isProofgateError, newId, systemClock, type Clock, type JsonValue } from '../../core/index.js';
import type { EventStore, NewEvent, StoredEvent } from '../../storage/ports.js';
import {
  applyCommand,
  applyRecord,
  initialLedger,
  type AutomergeLedgerState,
  type CommandApplication,
  type CommandDelivery,
  type LedgerOutcome,
  type LedgerRecord,
} from '../ledger.js';

export const AUTOMERGE_STREAM_PREFIX = 'automerge/change/';
export const automergeStream = (changeId: string): string => `${AUTOMERGE_STREAM_PREFIX}${changeId}`;

/** A step of the router or the loop, kept for the record (never folded into decisions). */
export interface StepEvent {
  readonly step: string;
  readonly at: string;
  readonly [key: string]: JsonValue | undefined;
}

/** A job lease: who runs the change's loop, until when. */
export interface Lease {
  readonly owner: string;
  readonly until: string;
  readonly released: boolean;
}

/**
 * `tookOver`: the owner of a live lease that was taken over because its holder
 * is gone. `unclean`: the previous holder never released its lease (it was
 * killed, or hung until the lease ran out), so what it ran may be cut short.
 */
export type LeaseAttempt =
  | { readonly acquired: true; readonly tookOver: string | null; readonly unclean: boolean }
  | { readonly acquired: false; readonly holder: Lease };

export interface LoadedLedger {
  readonly state: AutomergeLedgerState;
  readonly revision: number;
  readonly lease: Lease | null;
  readonly steps: readonly StepEvent[];
}

const MAX_ATTEMPTS = 50;

function toJson(value: unknown): JsonValue {
  return JSON.parse(JSON.stringify(value)) as JsonValue;
}

/** Fold a change stream's events (pure). */
export function foldLedgerEvents(changeId: string, events: readonly StoredEvent[]): LoadedLedger {
  let state = initialLedger(changeId);
  let lease: Lease | null = null;
  const steps: StepEvent[] = [];
  for (const event of events) {
    const data = event.data as Record<string, unknown>;
    if (event.type === 'ledger') state = applyRecord(state, data.record as LedgerRecord);
    else if (event.type === 'lease') lease = { owner: String(data.owner), until: String(data.until), released: data.released === true };
    else if (event.type === 'step') steps.push(data as unknown as StepEvent);
  }
  return { state, revision: events[events.length - 1]?.revision ?? 0, lease, steps };
}

export class LedgerStore {
  readonly events: EventStore;
  readonly #clock: Clock;

  constructor(events: EventStore, clock: Clock = systemClock) {
    this.events = events;
    this.#clock = clock;
  }

  now(): string {
    return this.#clock.now().toISOString();
  }

  async load(changeId: string): Promise<LoadedLedger> {
    return foldLedgerEvents(changeId, await this.events.read(automergeStream(changeId)));
  }

  /**
   * Decide on the current stream and append what `decide` returns, at the
   * revision it decided on; on REVISION_CONFLICT decide again on fresh state.
   */
  async appendWith<T>(changeId: string, decide: (loaded: LoadedLedger) => { events: readonly NewEvent[]; result: T }): Promise<T> {
    const stream = automergeStream(changeId);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const loaded = await this.load(changeId);
      const { events, result } = decide(loaded);
      if (events.length === 0) return result;
      try {
        await this.events.append(stream, loaded.revision, events);
        return result;
      } catch (error) {
        if (isProofgateError(error, 'REVISION_CONFLICT')) continue;
        throw error;
      }
    }
    throw new ProofgateError('REVISION_CONFLICT', `automerge stream of change ${changeId} kept changing; gave up after ${MAX_ATTEMPTS} attempts`);
  }

  /** Apply a delivered comment's authorized commands once: a redelivery or unchanged edit runs nothing. */
  applyCommands(changeId: string, delivery: CommandDelivery): Promise<CommandApplication> {
    return this.appendWith(changeId, (loaded) => {
      const application = applyCommand(loaded.state, delivery);
      if (application.state === loaded.state) return { events: [], result: application };
      const record: LedgerRecord = { type: 'commands', delivery };
      return { events: [{ id: newId('aml'), type: 'ledger', data: toJson({ record }) }], result: application };
    });
  }

  /** Record outcomes; one already recorded (same key) is not appended again. */
  record(changeId: string, ...outcomes: readonly LedgerOutcome[]): Promise<AutomergeLedgerState> {
    return this.appendWith(changeId, (loaded) => {
      let state = loaded.state;
      const events: NewEvent[] = [];
      for (const outcome of outcomes) {
        const next = applyRecord(state, outcome);
        if (next === state) continue;
        state = next;
        events.push({ id: newId('aml'), type: 'ledger', data: toJson({ record: outcome }) });
      }
      return { events, result: state };
    });
  }

  /** Record one step (an event in the store for every thing the router or the loop did). */
  async step(changeId: string, step: string, details: Record<string, JsonValue> = {}): Promise<void> {
    const data = toJson({ ...details, step, at: this.now() });
    await this.appendWith(changeId, () => ({ events: [{ id: newId('ams'), type: 'step', data }], result: undefined }));
  }

  /**
   * Take the change's lease for `owner` unless another owner holds a live one
   * (one that `holderGone` does not declare dead). Returns the holder when it
   * is someone else.
   */
  acquireLease(changeId: string, owner: string, ttlMs: number, holderGone: (holder: Lease) => boolean = () => false): Promise<LeaseAttempt> {
    return this.appendWith<LeaseAttempt>(changeId, (loaded) => {
      const held = loaded.lease;
      const now = this.#clock.now().getTime();
      const live = held !== null && !held.released && held.owner !== owner && Date.parse(held.until) > now;
      if (live && !holderGone(held)) {
        return { events: [], result: { acquired: false as const, holder: held } };
      }
      const until = new Date(now + ttlMs).toISOString();
      const tookOver = live ? held.owner : null;
      const unclean = held !== null && !held.released && held.owner !== owner;
      return { events: [{ id: newId('aml'), type: 'lease', data: { owner, until, released: false } }], result: { acquired: true as const, tookOver, unclean } };
    });
  }

  /** Extend or release `owner`'s lease; a lease someone else took over is left alone. */
  updateLease(changeId: string, owner: string, ttlMs: number | 'release'): Promise<boolean> {
    return this.appendWith(changeId, (loaded) => {
      if (loaded.lease === null || loaded.lease.owner !== owner || loaded.lease.released) return { events: [], result: false };
      const now = this.#clock.now().getTime();
      const data = ttlMs === 'release' ? { owner, until: new Date(now).toISOString(), released: true } : { owner, until: new Date(now + ttlMs).toISOString(), released: false };
      return { events: [{ id: newId('aml'), type: 'lease', data }], result: true };
    });
  }
}
