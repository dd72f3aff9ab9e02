/**
 * The automerge ledger, persisted: one event stream per change
 * (`automerge/change/<id>`) holding the ledger records (`ledger`), every step
 * the router and the loop took (`step`) and the job leases (`lease`). Every
 * event read is validated against its schema (src/contracts/automerge-steps.ts):
 * a malformed one is `INVALID_STORED_VALUE` naming the event and the field.
 *
 * The store keeps the fold of each change it has read in memory and reads
 * only the events after the last revision it saw, before every decision and
 * append, so an append costs the same however long the change's history is,
 * and what another process appended is still seen. Appends name the stream
 * revision they were decided on; a concurrent writer makes the append fail
 * with REVISION_CONFLICT and the decision is taken again on fresh state, so
 * two processes never both run one command.
 *
 * Fencing: a job appends through `fenced(changeId, owner)`, a view of the
 * store whose appends to that change are made only while `owner` still holds
 * the change's lease. The check runs inside the decision, on the fold the
 * append is made at, so check and append are one compare-and-swap: a lease
 * another process takes first makes the append a REVISION_CONFLICT, and the
 * retry sees the new holder and fails with LEASE_LOST (nothing appended).
 */
import { ProofgateError, isProofgateError, newId, systemClock, type Clock, type JsonValue } from '../../core/index.js';
import {
  AUTOMERGE_STEP_NAMES,
  knownStepSchema,
  ledgerEventSchema,
  leaseEventSchema,
  stepEventSchema,
  type KnownStep,
} from '../../contracts/automerge-steps.js';
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

/**
 * A step of the router or the loop: a name, a time and JSON details, kept for
 * the record. The steps recovery and decisions read come typed in
 * `LoadedLedger.typedSteps` as well.
 */
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
  { readonly acquired: true; readonly tookOver: string | null; readonly unclean: boolean } | { readonly acquired: false; readonly holder: Lease };

export interface LoadedLedger {
  readonly state: AutomergeLedgerState;
  readonly revision: number;
  readonly lease: Lease | null;
  /** Every step, oldest first. */
  readonly steps: readonly StepEvent[];
  /** The steps recovery and decisions read (`knownStepSchema`), typed, oldest first. */
  readonly typedSteps: readonly KnownStep[];
}

/**
 * Why `owner` may no longer write for the change (pure): a `LEASE_LOST`
 * error naming the change and the holder, or null while `owner` holds it.
 * `owner` holds the lease while the change's latest lease event is its own:
 * another process can only take the lease by appending a lease event, which
 * every later check sees. An expired lease nobody took is still held (no one
 * else runs the change), and so is the owner's own released lease (the check
 * runs its job left behind still record their end) until another owner
 * acquires it.
 */
export function leaseLost(changeId: string, lease: Lease | null, owner: string): ProofgateError | null {
  if (lease !== null && lease.owner === owner) return null;
  const holder = lease === null ? 'nobody' : `${lease.owner} (${lease.released ? 'released' : 'until'} ${lease.until})`;
  return new ProofgateError('LEASE_LOST', `change ${changeId}: the lease is held by ${holder}, not ${owner}; no further effect is made`, {
    changeId,
    owner,
    holder: lease,
  });
}

/** The lease holder a `LEASE_LOST` error names (null when the change has no lease at all). */
export function leaseLostHolder(error: ProofgateError): Lease | null {
  const holder = error.details?.holder;
  return typeof holder === 'object' && holder !== null ? (holder as Lease) : null;
}

/** One validated event of a change stream. */
export type LedgerEvent =
  | { readonly type: 'ledger'; readonly record: LedgerRecord }
  | { readonly type: 'lease'; readonly lease: Lease }
  | { readonly type: 'step'; readonly step: StepEvent; readonly typed: KnownStep | null };

const MAX_ATTEMPTS = 50;
/** Folds kept in memory (least recently used first out); a change not kept is read again in full. */
const MAX_CACHED_CHANGES = 256;

function toJson(value: unknown): JsonValue {
  return JSON.parse(JSON.stringify(value)) as JsonValue;
}

type Issues = readonly { readonly path: readonly PropertyKey[]; readonly message: string }[];
type Decoded = { readonly ok: true; readonly event: LedgerEvent } | { readonly ok: false; readonly issues: Issues | null };

/** Check an event's data against the schema of its type (`issues: null`: no such type). */
function decode(type: string, data: unknown): Decoded {
  switch (type) {
    case 'ledger': {
      const parsed = ledgerEventSchema.safeParse(data);
      if (!parsed.success) return { ok: false, issues: parsed.error.issues };
      const record: LedgerRecord = parsed.data.record;
      return { ok: true, event: { type: 'ledger', record } };
    }
    case 'lease': {
      const parsed = leaseEventSchema.safeParse(data);
      return parsed.success ? { ok: true, event: { type: 'lease', lease: parsed.data } } : { ok: false, issues: parsed.error.issues };
    }
    case 'step': {
      const parsed = stepEventSchema.safeParse(data);
      if (!parsed.success) return { ok: false, issues: parsed.error.issues };
      const step: StepEvent = parsed.data;
      if (!AUTOMERGE_STEP_NAMES.has(step.step)) return { ok: true, event: { type: 'step', step, typed: null } };
      const typed = knownStepSchema.safeParse(data);
      return typed.success ? { ok: true, event: { type: 'step', step, typed: typed.data } } : { ok: false, issues: typed.error.issues };
    }
    default:
      return { ok: false, issues: null };
  }
}

/** Where the first issue is and what it says: `record.delivery.comment.updatedAt: expected string`. */
function describeIssues(type: string, issues: Issues | null): { readonly field: string | null; readonly text: string } {
  if (issues === null) return { field: null, text: `has unknown type ${type}` };
  const issue = issues[0];
  const field = issue === undefined || issue.path.length === 0 ? '(data)' : issue.path.map(String).join('.');
  return { field, text: `is malformed at ${field}: ${issue?.message ?? 'invalid'}` };
}

/** Check one stored event of a change stream; unknown types and bad shapes are `INVALID_STORED_VALUE` naming the event and the field. */
export function parseLedgerEvent(changeId: string, event: StoredEvent): LedgerEvent {
  const decoded = decode(event.type, event.data);
  if (decoded.ok) return decoded.event;
  const { field, text } = describeIssues(event.type, decoded.issues);
  throw new ProofgateError('INVALID_STORED_VALUE', `automerge ${event.type} event ${event.id} (change ${changeId}, revision ${event.revision}) ${text}`, {
    changeId,
    eventId: event.id,
    type: event.type,
    revision: event.revision,
    field,
  });
}

/** Check an event before it is appended, so nothing unreadable is ever stored (`INVALID_INPUT`, nothing appended). */
function checkNewEvent(changeId: string, event: NewEvent): void {
  const decoded = decode(event.type, event.data);
  if (decoded.ok) return;
  const { field, text } = describeIssues(event.type, decoded.issues);
  throw new ProofgateError('INVALID_INPUT', `automerge ${event.type} event for change ${changeId} ${text}`, { changeId, type: event.type, field });
}

/**
 * The running fold of one change stream. `steps` and `typedSteps` only grow;
 * a reader gets a copy of the part that existed when it loaded.
 */
interface Fold {
  readonly changeId: string;
  revision: number;
  state: AutomergeLedgerState;
  lease: Lease | null;
  readonly steps: StepEvent[];
  readonly typedSteps: KnownStep[];
}

function newFold(changeId: string): Fold {
  return { changeId, revision: 0, state: initialLedger(changeId), lease: null, steps: [], typedSteps: [] };
}

/** Apply the events after `fold.revision` (earlier ones, already applied, are skipped); each is validated first. */
function advance(fold: Fold, events: readonly StoredEvent[]): void {
  for (const event of events) {
    if (event.revision <= fold.revision) continue;
    if (event.revision !== fold.revision + 1) {
      throw new ProofgateError('INTERNAL', `automerge stream of change ${fold.changeId} skips from revision ${fold.revision} to ${event.revision}`);
    }
    const parsed = parseLedgerEvent(fold.changeId, event);
    if (parsed.type === 'ledger') fold.state = applyRecord(fold.state, parsed.record);
    else if (parsed.type === 'lease') fold.lease = parsed.lease;
    else {
      fold.steps.push(parsed.step);
      if (parsed.typed !== null) fold.typedSteps.push(parsed.typed);
    }
    fold.revision = event.revision;
  }
}

/** What a reader sees of a fold now: later events never show up in it. */
function view(fold: Fold): LoadedLedger {
  const { steps, typedSteps } = fold;
  const stepCount = steps.length;
  const typedCount = typedSteps.length;
  let stepsView: readonly StepEvent[] | null = null;
  let typedView: readonly KnownStep[] | null = null;
  return {
    state: fold.state,
    revision: fold.revision,
    lease: fold.lease,
    get steps() {
      return (stepsView ??= Object.freeze(steps.slice(0, stepCount)));
    },
    get typedSteps() {
      return (typedView ??= Object.freeze(typedSteps.slice(0, typedCount)));
    },
  };
}

/** Fold a change stream's events, each validated (pure). */
export function foldLedgerEvents(changeId: string, events: readonly StoredEvent[]): LoadedLedger {
  const fold = newFold(changeId);
  advance(fold, events);
  return view(fold);
}

/** Appends to `changeId` only while `owner` holds its lease. */
interface Fence {
  readonly changeId: string;
  readonly owner: string;
}

export interface AppendOptions {
  /** Append only while this owner holds the change's lease (`leaseLost`), else `LEASE_LOST` and nothing is appended. */
  readonly heldBy?: string;
}

export class LedgerStore {
  readonly events: EventStore;
  readonly #clock: Clock;
  #folds = new Map<string, Fold>();
  #fence: Fence | null = null;

  constructor(events: EventStore, clock: Clock = systemClock) {
    this.events = events;
    this.#clock = clock;
  }

  /**
   * A view of this store (same events, same kept folds) whose every append to
   * `changeId` is made only while `owner` holds the change's lease: steps,
   * ledger records and lease renewals alike. A job writes through it; an
   * append after another owner took the lease is `LEASE_LOST`, nothing appended.
   * Appends to other changes are not fenced.
   */
  fenced(changeId: string, owner: string): LedgerStore {
    const view = new LedgerStore(this.events, this.#clock);
    view.#folds = this.#folds;
    view.#fence = { changeId, owner };
    return view;
  }

  /** The lease `owner` holds on the change, read afresh; `LEASE_LOST` when it no longer holds it. */
  async requireLease(changeId: string, owner: string): Promise<Lease> {
    const { lease } = await this.load(changeId);
    const lost = leaseLost(changeId, lease, owner);
    if (lost !== null || lease === null) throw lost ?? new ProofgateError('INTERNAL', `change ${changeId} has no lease`);
    return lease;
  }

  now(): string {
    return this.#clock.now().toISOString();
  }

  /**
   * The change's ledger now: the kept fold plus the events appended since it
   * was last read (by this store or any other process).
   */
  async load(changeId: string): Promise<LoadedLedger> {
    const fold = this.#folds.get(changeId) ?? newFold(changeId);
    const events = await this.events.read(automergeStream(changeId), { fromRevision: fold.revision });
    // Kept as the most recently used; a fold that a malformed event stopped is kept where it stopped.
    this.#folds.delete(changeId);
    this.#folds.set(changeId, fold);
    if (this.#folds.size > MAX_CACHED_CHANGES) {
      const oldest = this.#folds.keys().next().value;
      if (oldest !== undefined) this.#folds.delete(oldest);
    }
    advance(fold, events);
    return view(fold);
  }

  /**
   * Decide on the current stream and append what `decide` returns, at the
   * revision it decided on; on REVISION_CONFLICT decide again on fresh state.
   */
  async appendWith<T>(changeId: string, decide: (loaded: LoadedLedger) => { events: readonly NewEvent[]; result: T }, options: AppendOptions = {}): Promise<T> {
    const stream = automergeStream(changeId);
    const heldBy = options.heldBy ?? (this.#fence?.changeId === changeId ? this.#fence.owner : undefined);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const loaded = await this.load(changeId);
      const { events, result } = decide(loaded);
      if (events.length === 0) return result;
      // Checked on the fold the append is made at: a lease taken since makes the append conflict, and the retry fails here.
      const lost = heldBy === undefined ? null : leaseLost(changeId, loaded.lease, heldBy);
      if (lost !== null) throw lost;
      for (const event of events) checkNewEvent(changeId, event);
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
      const events: NewEvent[] = [{ id: newId('aml'), type: 'ledger', data: toJson({ record }) }];
      if (application.run.length > 0) {
        // In the same append: which lines the route of this comment version is to run (a route killed before it ends is found by it).
        const { comment } = delivery;
        const data = { step: 'commands-routed', at: this.now(), comment: comment.id, updatedAt: comment.updatedAt, lines: application.run.map((c) => c.line) };
        events.push({ id: newId('ams'), type: 'step', data });
      }
      return { events, result: application };
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
    await this.stepUnless(changeId, step, details, () => null);
  }

  /**
   * Append a step unless `refuse`, asked on the fold the append is made at,
   * gives a reason: then nothing is appended and the reason is returned. One
   * compare-and-swap, so a command recorded by another process before the
   * append (a stop) is seen by `refuse`, never missed.
   */
  async stepUnless(
    changeId: string,
    step: string,
    details: Record<string, JsonValue>,
    refuse: (loaded: LoadedLedger) => string | null,
  ): Promise<string | null> {
    const data = toJson({ ...details, step, at: this.now() });
    return this.appendWith(changeId, (loaded) => {
      const reason = refuse(loaded);
      return reason !== null ? { events: [], result: reason } : { events: [{ id: newId('ams'), type: 'step', data }], result: null };
    });
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
      const data =
        ttlMs === 'release'
          ? { owner, until: new Date(now).toISOString(), released: true }
          : { owner, until: new Date(now + ttlMs).toISOString(), released: false };
      return { events: [{ id: newId('aml'), type: 'lease', data }], result: true };
    });
  }
}
