/**
 * Webhook intake: what happens to a delivery between its bytes arriving and
 * the work being handed on. The signature is checked by the forge adapter's
 * `verifyWebhookDelivery` (over the exact bytes, before parsing); then the
 * delivery is recorded and claimed in the event store, and only once that
 * write is committed is it handed to the sink and answered `accepted`.
 *
 * Group commit: deliveries that arrive while a write is in flight are written
 * together by the next write: one `append` (one transaction) holds the record
 * and both claims of every delivery in the group. With no write in flight,
 * the first write starts at the end of the first turn of the event loop in
 * which no delivery joined (at most `GATHER_TURNS` turns): on the embedded
 * SQLite store a commit holds the event loop for its fsync, so nothing joins
 * a group while it is written, and deliveries still being read would
 * otherwise each pay a commit of their own. A request waits for its own
 * group's commit and never for the work the sink starts.
 *
 * The claims are event ids (`deliveryClaimIds`: one for the delivery id, one
 * for the body digest), unique in the store's namespace, so a delivery seen
 * before makes the append fail with DUPLICATE_EVENT_ID naming the id; that
 * delivery is answered `duplicate` and the rest of the group is written
 * again. The names are the ones `storeDeliveryLedger` uses, so both see each
 * other's claims.
 *
 * A `ping` is claimed too, by its body digest only (it has no record and is
 * never handed on): `X-GitHub-Event` is not signed, so without the claim a
 * captured ping body could be sent again under another event name and be
 * taken as that event. Once claimed, the same body under any event name is a
 * duplicate.
 */
import type { Logger } from 'pino';
import { ProofgateError, errorMessage, isProofgateError, newId, redactSecrets, type JsonValue } from '../core/index.js';
import { silentLogger } from '../host/index.js';
import { deliveryClaimIds, verifyWebhookDelivery, type VerifiedDelivery, type WebhookHeaders } from '../forge/github/webhooks.js';
import type { GitHubForgeEvent, IgnoredDelivery } from '../forge/github/webhook-events.js';
import type { EventStore, NewEvent } from '../storage/ports.js';

/** Streams of the intake log: one per group, each written once at revision 0. */
export const INTAKE_STREAM_PREFIX = 'github-intake:';
/** Type of the event that records an accepted delivery (its id is the delivery-id claim). */
export const DELIVERY_RECORD_TYPE = 'github-delivery';
/** Type of the event that claims a delivery's body digest. */
export const DELIVERY_BODY_TYPE = 'github-delivery-body';

/** The reasons given (answer and log) for a signed body proofgate cannot read: fixed text, never the parser's message, which quotes the body. */
export const NOT_JSON_REASON = 'the body is not valid JSON';
export const NOT_UTF8_REASON = 'the body is not UTF-8';

/** Longest text taken from a header or a payload into a log line. */
export const LOG_TEXT_LIMIT = 200;

/**
 * Text from a header or a payload made fit for a log line: secret-looking
 * parts redacted by the one catalogue, then cut to `limit` characters. The
 * text is cut to a window well past the limit before it is scanned (a
 * payload string may be megabytes long), so a secret that starts within the
 * limit is still whole when it is redacted. Pure.
 */
export function logText(text: string, limit = LOG_TEXT_LIMIT): string {
  return redactSecrets(text.slice(0, limit + 4096)).slice(0, limit);
}

/** What the logs and answers say about a delivery (never its body). */
export interface DeliveryFacts {
  readonly deliveryId: string;
  readonly eventName: string;
  readonly action: string | null;
  readonly installationId: number | null;
  /** `owner/name`, when the payload names a repository. */
  readonly repository: string | null;
}

/** A delivery recorded and committed: what the sink receives. */
export interface AcceptedDelivery extends DeliveryFacts {
  readonly bodyDigest: string;
  /** The mapped event, or why proofgate does not act on it (installation events arrive this way too). */
  readonly result: GitHubForgeEvent | IgnoredDelivery;
  /** Where the record is: the group's stream and the record event's id. */
  readonly record: { readonly streamId: string; readonly eventId: string };
}

export type DeliverySink = (accepted: AcceptedDelivery) => void;

/** Every way a delivery can end at the intake; the HTTP layer maps each to a status. */
export type IntakeOutcome =
  | { readonly kind: 'accepted'; readonly delivery: AcceptedDelivery }
  | { readonly kind: 'duplicate'; readonly facts: DeliveryFacts; readonly reason: string }
  | { readonly kind: 'ping'; readonly facts: DeliveryFacts }
  /** Missing or wrong signature: nothing read, nothing recorded. */
  | { readonly kind: 'unauthenticated'; readonly reason: string }
  /** Signed, but a header is missing or the body is not a payload proofgate can read: nothing recorded. */
  | { readonly kind: 'invalid'; readonly reason: string }
  /** The store's policy refuses the record (a known secret in a comment, a size limit): nothing recorded, a redelivery would fail alike. */
  | { readonly kind: 'refused'; readonly facts: DeliveryFacts; readonly reason: string }
  /** The store could not commit (down, closed, busy): nothing recorded; a redelivery may succeed. */
  | { readonly kind: 'unavailable'; readonly facts: DeliveryFacts; readonly reason: string };

/** What the intake reports about its groups (tests, metrics). */
export type IntakeObservation =
  | { readonly kind: 'queued'; readonly waiting: number; readonly inFlight: number }
  | { readonly kind: 'committed'; readonly size: number; readonly accepted: number; readonly duplicates: number }
  | { readonly kind: 'failed'; readonly size: number; readonly reason: string };

export interface WebhookIntakeOptions {
  readonly events: EventStore;
  readonly secret: string;
  /** Secrets still accepted during a rotation. */
  readonly previousSecrets?: readonly string[];
  /** Branches whose pushes count as base pushes; default: each repository's default branch. */
  readonly baseBranches?: readonly string[];
  readonly sink: DeliverySink;
  readonly logger?: Logger;
  /** Most deliveries in one write (default 256). */
  readonly maxGroupSize?: number;
  readonly observe?: (observation: IntakeObservation) => void;
}

export interface WebhookIntake {
  /** Verify, record and hand on one delivery; resolves once its group is committed (or failed). Never rejects for a delivery's fault. */
  receive(headers: WebhookHeaders, body: Uint8Array): Promise<IntakeOutcome>;
}

/** Facts about a verified delivery for logs and answers. Pure. */
export function deliveryFacts(verified: Pick<VerifiedDelivery, 'key' | 'eventName' | 'payload'>): DeliveryFacts {
  const payload = objectAt(verified.payload);
  const action = payload?.action;
  const installationId = objectAt(payload?.installation)?.id;
  const fullName = objectAt(payload?.repository)?.full_name;
  return {
    deliveryId: verified.key.deliveryId,
    eventName: verified.eventName,
    action: typeof action === 'string' ? action : null,
    installationId: typeof installationId === 'number' ? installationId : null,
    repository: typeof fullName === 'string' ? fullName : null,
  };
}

function objectAt(value: unknown): Readonly<Record<string, unknown>> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/**
 * The two events that record and claim a delivery. Pure. The record holds the
 * mapped result (which names the delivery id and event) and the facts it
 * lacks; the body claim holds nothing else: every stored string is scanned by
 * the store's redaction, so nothing is stored twice.
 */
export function deliveryEvents(verified: Pick<VerifiedDelivery, 'key' | 'result'>, facts: DeliveryFacts): [NewEvent, NewEvent] {
  const ids = deliveryClaimIds(verified.key);
  const data = {
    action: facts.action,
    installationId: facts.installationId,
    repository: facts.repository,
    bodyDigest: verified.key.bodyDigest,
    result: verified.result,
  } as unknown as JsonValue;
  return [
    { id: ids.deliveryId, type: DELIVERY_RECORD_TYPE, data },
    { id: ids.body, type: DELIVERY_BODY_TYPE, data: {} },
  ];
}

/** The one event that claims a ping: its body digest (a ping has no record and no delivery-id claim). Pure. */
export function pingEvents(verified: Pick<VerifiedDelivery, 'key'>): [NewEvent] {
  return [{ id: deliveryClaimIds(verified.key).body, type: DELIVERY_BODY_TYPE, data: {} }];
}

/** Most turns of the event loop a group waits for more deliveries before its first write (each turn in which one joined counts). */
export const GATHER_TURNS = 8;

/** Errors that mean the record itself is refused, so that writing it again cannot succeed. */
const REFUSALS = new Set(['POLICY_VIOLATION', 'KNOWN_SECRET', 'NON_JSON_VALUE', 'INVALID_INPUT']);

interface Member {
  /**
   * What is kept of the verified delivery: its key and mapped result, not the
   * parsed payload. A member waits for its group's commit; a payload (a large
   * object graph per delivery) held that long would outlive the young
   * generation, and the garbage collector would copy and promote it.
   */
  readonly verified: Pick<VerifiedDelivery, 'key' | 'result'>;
  readonly facts: DeliveryFacts;
  /** A ping is claimed (its body) but has no record, is not handed on and is answered `ping`. */
  readonly ping: boolean;
  /** Its claims: the record (whose id is the delivery-id claim) and the body claim; a ping's body claim alone. */
  readonly events: readonly NewEvent[];
  readonly settle: (outcome: IntakeOutcome) => void;
}

type Written =
  { readonly kind: 'committed'; readonly streamId: string } | { readonly kind: 'duplicate' } | { readonly kind: 'failed'; readonly error: unknown };

/** `verifyWebhookDelivery`'s error for a body that is not UTF-8 (an INVALID_INPUT, for historical reasons). */
function isNotUtf8(error: unknown): boolean {
  return isProofgateError(error, 'INVALID_INPUT') && / is not UTF-8$/.test(error.message);
}

export function createWebhookIntake(options: WebhookIntakeOptions): WebhookIntake {
  if (options.secret === '') throw new ProofgateError('CONFIG', 'webhook secret is empty');
  const maxGroupSize = options.maxGroupSize ?? 256;
  if (!Number.isSafeInteger(maxGroupSize) || maxGroupSize < 1) throw new ProofgateError('CONFIG', 'maxGroupSize must be an integer >= 1');
  const logger = options.logger ?? silentLogger();
  const observe = options.observe ?? (() => undefined);
  const { events } = options;
  const waiting: Member[] = [];
  let inFlight = 0;
  let running = false;

  /** Write members in one append; on a refusal, halves are written apart so one bad record (or a batch over the size limit) fails alone. */
  const write = async (members: readonly Member[]): Promise<Map<Member, Written>> => {
    const written = new Map<Member, Written>();
    const streamId = `${INTAKE_STREAM_PREFIX}${newId('grp')}`;
    let rest = [...members];
    while (rest.length > 0) {
      try {
        await events.append(
          streamId,
          0,
          rest.flatMap((m) => m.events),
        );
        for (const m of rest) written.set(m, { kind: 'committed', streamId });
        return written;
      } catch (error) {
        const seen = isProofgateError(error, 'DUPLICATE_EVENT_ID') ? rest.find((m) => m.events.some((e) => e.id === error.details?.id)) : undefined;
        if (seen !== undefined) {
          written.set(seen, { kind: 'duplicate' });
          rest = rest.filter((m) => m !== seen);
          continue;
        }
        if (rest.length > 1 && isProofgateError(error) && REFUSALS.has(error.code)) {
          const half = Math.ceil(rest.length / 2);
          for (const part of [rest.slice(0, half), rest.slice(half)]) for (const [m, w] of await write(part)) written.set(m, w);
          return written;
        }
        for (const m of rest) written.set(m, { kind: 'failed', error });
        return written;
      }
    }
    return written;
  };

  const commit = async (group: readonly Member[]): Promise<void> => {
    // A later member with the id or body of an earlier one in the same group shares that one's fate, as a duplicate.
    const firstByKey = new Map<string, Member>();
    const twins = new Map<Member, Member>();
    const unique: Member[] = [];
    for (const m of group) {
      const earlier = m.events.map((e) => firstByKey.get(e.id)).find((found) => found !== undefined);
      if (earlier !== undefined) {
        twins.set(m, earlier);
        continue;
      }
      for (const e of m.events) firstByKey.set(e.id, m);
      unique.push(m);
    }
    const written = await write(unique);
    let accepted = 0;
    let duplicates = 0;
    let pings = 0;
    let failure: unknown;
    for (const m of group) {
      const own = written.get(m);
      const w: Written = own ?? written.get(twins.get(m)!)!;
      if (own !== undefined && w.kind === 'committed' && m.ping) {
        pings += 1;
        m.settle({ kind: 'ping', facts: m.facts });
      } else if (own !== undefined && w.kind === 'committed') {
        accepted += 1;
        const delivery: AcceptedDelivery = {
          ...m.facts,
          bodyDigest: m.verified.key.bodyDigest,
          result: m.verified.result,
          record: { streamId: w.streamId, eventId: m.events[0]!.id },
        };
        try {
          options.sink(delivery);
        } catch (error) {
          // The record is committed: the work is not lost to the store (the reconciliation pass finds it).
          logger.error({ deliveryId: logText(m.facts.deliveryId), event: logText(m.facts.eventName), err: errorMessage(error) }, 'webhook sink failed');
        }
        m.settle({ kind: 'accepted', delivery });
      } else if (w.kind === 'failed') {
        failure = w.error;
        const reason = errorMessage(w.error);
        const refused = isProofgateError(w.error) && REFUSALS.has(w.error.code);
        m.settle(refused ? { kind: 'refused', facts: m.facts, reason } : { kind: 'unavailable', facts: m.facts, reason });
      } else {
        duplicates += 1;
        m.settle({ kind: 'duplicate', facts: m.facts, reason: 'this delivery (its id or its signed body) was taken before' });
      }
    }
    if (failure !== undefined) {
      logger.error({ size: group.length, err: errorMessage(failure) }, 'webhook deliveries not recorded');
      observe({ kind: 'failed', size: group.length, reason: errorMessage(failure) });
    }
    if (accepted + duplicates + pings > 0) observe({ kind: 'committed', size: group.length, accepted, duplicates });
  };

  const run = async (): Promise<void> => {
    try {
      while (waiting.length > 0) {
        const group = waiting.splice(0, maxGroupSize);
        inFlight = group.length;
        try {
          await commit(group);
        } catch (error) {
          const reason = errorMessage(error);
          for (const m of group) m.settle({ kind: 'unavailable', facts: m.facts, reason });
        }
        inFlight = 0;
      }
    } finally {
      running = false;
    }
  };

  const enqueue = (member: Member): void => {
    waiting.push(member);
    observe({ kind: 'queued', waiting: waiting.length, inFlight });
    if (running) return;
    running = true;
    gather(waiting.length, 1);
  };

  /** Start the first write after a turn of the event loop in which no delivery joined, the group is full, or `GATHER_TURNS` turns passed. */
  const gather = (seen: number, turn: number): void => {
    setImmediate(() => {
      if (waiting.length > seen && waiting.length < maxGroupSize && turn < GATHER_TURNS) gather(waiting.length, turn + 1);
      else void run();
    });
  };

  return {
    receive(headers: WebhookHeaders, body: Uint8Array): Promise<IntakeOutcome> {
      let verified: VerifiedDelivery;
      try {
        verified = verifyWebhookDelivery({
          headers,
          body,
          secret: options.secret,
          ...(options.previousSecrets ? { previousSecrets: options.previousSecrets } : {}),
          ...(options.baseBranches ? { baseBranches: options.baseBranches } : {}),
        });
      } catch (error) {
        if (isProofgateError(error, 'WEBHOOK_SIGNATURE')) return Promise.resolve({ kind: 'unauthenticated', reason: error.message });
        // The parser's message quotes the body around the fault: a fixed reason instead.
        if (isNotUtf8(error)) return Promise.resolve({ kind: 'invalid', reason: NOT_UTF8_REASON });
        if (isProofgateError(error, 'INVALID_JSON')) return Promise.resolve({ kind: 'invalid', reason: NOT_JSON_REASON });
        // The other INVALID_INPUT messages name a missing header or a payload field path, never a value.
        if (isProofgateError(error, 'INVALID_INPUT')) return Promise.resolve({ kind: 'invalid', reason: error.message });
        return Promise.reject(error);
      }
      const facts = deliveryFacts(verified);
      const ping = verified.eventName === 'ping';
      const events = ping ? pingEvents(verified) : deliveryEvents(verified, facts);
      const kept = { key: verified.key, result: verified.result };
      return new Promise((settle) => enqueue({ verified: kept, facts, ping, events, settle }));
    },
  };
}
