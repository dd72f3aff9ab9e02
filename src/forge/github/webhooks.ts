/**
 * Webhook deliveries: verify `X-Hub-Signature-256` (HMAC-SHA256) over the
 * exact bytes received, before anything else is read from them; then take
 * the delivery once: a delivery whose id, or whose signed body, was taken
 * before is answered `duplicate` and maps to nothing; else map the payload to
 * a typed forge event that keeps the delivery id (`X-GitHub-Delivery`).
 *
 * The body is never decoded before the signature is checked: a decoder that
 * drops a byte-order mark (or anything else) would let a body be accepted
 * under a signature made for other bytes. The delivery id header is not
 * covered by the signature, so a replay under a fresh id is caught by the
 * body digest. A missing or wrong signature throws WEBHOOK_SIGNATURE and
 * nothing is recorded.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { ProofgateError, isProofgateError } from '../../core/errors.js';
import { decodeUtf8, parseJson } from '../../core/canonical-json.js';
import { sha256Digest, sha256Hex } from '../../core/digest.js';
import type { EventStore } from '../../storage/ports.js';
import { mapWebhookPayload, type DuplicateDelivery, type GitHubForgeEvent, type IgnoredDelivery } from './webhook-events.js';
import { silentLogger } from '../../host/index.js';

export type { DuplicateDelivery, GitHubForgeEvent, IgnoredDelivery, GitHubRepositoryRef } from './webhook-events.js';

export type WebhookHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** What identifies a delivery for the ledger: its id and the digest of its signed body. */
export interface DeliveryKey {
  readonly deliveryId: string;
  readonly bodyDigest: string;
}

/** Remembers the deliveries already taken. */
export interface DeliveryLedger {
  /** Record the delivery; false when its id or its body digest was recorded before. */
  claim(key: DeliveryKey): Promise<boolean>;
}

export interface WebhookDelivery {
  readonly headers: WebhookHeaders;
  /** The raw request body, exactly as received. */
  readonly body: string | Uint8Array;
  readonly secret: string;
  /** Secrets still accepted during a rotation. */
  readonly previousSecrets?: readonly string[];
  /** Where deliveries already taken are remembered (`storeDeliveryLedger` for a server). */
  readonly deliveries: DeliveryLedger;
  /** Branches whose pushes count as base pushes; default: the repository's default branch. */
  readonly baseBranches?: readonly string[];
  readonly logger?: Logger;
}

export type WebhookResult = GitHubForgeEvent | IgnoredDelivery | DuplicateDelivery;

/** A delivery whose signature matched, read and mapped, and not yet claimed in any ledger. */
export interface VerifiedDelivery {
  readonly key: DeliveryKey;
  readonly eventName: string;
  /** The parsed body (for facts the mapping does not keep: installation, repository, action). */
  readonly payload: unknown;
  readonly result: GitHubForgeEvent | IgnoredDelivery;
}

/**
 * The checks of `parseWebhookDelivery` without the claim: signature over the
 * exact bytes (WEBHOOK_SIGNATURE), the two headers (INVALID_INPUT), the body (INVALID_JSON),
 * then the mapping. Records nothing; for callers that claim deliveries in
 * groups (the service's intake) and then treat a refused claim as a duplicate.
 */
export function verifyWebhookDelivery(delivery: Omit<WebhookDelivery, 'deliveries' | 'logger'>): VerifiedDelivery {
  if (delivery.secret === '') throw new ProofgateError('CONFIG', 'webhook secret is empty');
  const signature = header(delivery.headers, 'x-hub-signature-256');
  if (signature === null || signature === '') {
    throw new ProofgateError('WEBHOOK_SIGNATURE', 'webhook delivery has no X-Hub-Signature-256 header');
  }
  const bytes =
    typeof delivery.body === 'string'
      ? Buffer.from(delivery.body, 'utf8')
      : Buffer.from(delivery.body.buffer, delivery.body.byteOffset, delivery.body.byteLength);
  if (bytes.length === 0 || !signedByAny([delivery.secret, ...(delivery.previousSecrets ?? [])], bytes, signature)) {
    throw new ProofgateError('WEBHOOK_SIGNATURE', 'webhook signature does not match the body');
  }
  const deliveryId = header(delivery.headers, 'x-github-delivery');
  const eventName = header(delivery.headers, 'x-github-event');
  if (deliveryId === null || deliveryId === '') throw new ProofgateError('INVALID_INPUT', 'webhook delivery has no X-GitHub-Delivery header');
  if (eventName === null || eventName === '') throw new ProofgateError('INVALID_INPUT', 'webhook delivery has no X-GitHub-Event header');
  const payload = parseJson(bodyText(bytes), 'webhook body');
  const result = mapWebhookPayload(payload, { eventName, deliveryId, ...(delivery.baseBranches ? { baseBranches: delivery.baseBranches } : {}) });
  return { key: { deliveryId, bodyDigest: sha256Digest(bytes) }, eventName, payload, result };
}

export async function parseWebhookDelivery(delivery: WebhookDelivery): Promise<WebhookResult> {
  const logger = delivery.logger ?? silentLogger();
  const { key, eventName, result } = verifyWebhookDelivery(delivery);
  const { deliveryId } = key;
  if (!(await delivery.deliveries.claim(key))) {
    logger.debug({ deliveryId, eventName }, 'webhook delivery seen before');
    return { kind: 'duplicate', reason: 'this delivery (its id or its signed body) was taken before', eventName, deliveryId };
  }
  if (result.kind === 'ignored') {
    logger.debug({ deliveryId, eventName, reason: result.reason }, 'webhook delivery ignored');
  } else {
    logger.debug({ deliveryId, eventName, kind: result.kind }, 'webhook delivery accepted');
  }
  return result;
}

function signedByAny(secrets: readonly string[], bytes: Buffer, signature: string): boolean {
  const given = Buffer.from(signature, 'utf8');
  return secrets.some((secret) => {
    if (secret === '') return false;
    const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(bytes).digest('hex')}`, 'utf8');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/** The first header named `name` in any case (own keys, in order; a `for...in` walk copies no entries). */
function header(headers: WebhookHeaders, name: string): string | null {
  for (const key in headers) {
    if (!Object.hasOwn(headers, key) || key.toLowerCase() !== name) continue;
    const value = headers[key];
    if (value === undefined) return null;
    return typeof value === 'string' ? value : (value[0] ?? null);
  }
  return null;
}

/** The verified bytes as text, nothing dropped (the JSON parser skips a leading byte-order mark the signature covered). */
function bodyText(bytes: Buffer): string {
  try {
    return decodeUtf8(bytes, 'webhook body');
  } catch {
    throw new ProofgateError('INVALID_INPUT', 'webhook body is not UTF-8');
  }
}

/** A ledger in memory (one process, tests): remembers up to `limit` ids and bodies, forgetting the oldest first. */
export function memoryDeliveryLedger(limit = 100_000): DeliveryLedger {
  const seen = new Set<string>();
  const remember = (key: string): boolean => {
    if (seen.has(key)) return false;
    seen.add(key);
    if (seen.size > limit) seen.delete(seen.values().next().value as string);
    return true;
  };
  return {
    claim: async ({ deliveryId, bodyDigest }) => {
      const newId = remember(`id:${deliveryId}`);
      const newBody = remember(`body:${bodyDigest}`);
      return newId && newBody;
    },
  };
}

/**
 * A ledger in proofgate's event store, shared by every process on that store:
 * one stream per delivery id digest and one per body digest, each created by
 * an append at revision 0. A second append of the same record is the store's
 * no-op retry (`written: false`) or a REVISION_CONFLICT: either way, seen.
 */
export function storeDeliveryLedger(events: EventStore): DeliveryLedger {
  const first = async (stream: string): Promise<boolean> => {
    try {
      return (await events.append(stream, 0, [{ id: stream, type: 'webhook-delivery-seen', data: {} }])).written;
    } catch (error) {
      if (isProofgateError(error, 'REVISION_CONFLICT') || isProofgateError(error, 'DUPLICATE_EVENT_ID')) return false;
      throw error;
    }
  };
  return {
    claim: async (key) => {
      const ids = deliveryClaimIds(key);
      const newId = await first(ids.deliveryId);
      const newBody = await first(ids.body);
      return newId && newBody;
    },
  };
}

/**
 * The names a delivery is claimed under in an event store: `storeDeliveryLedger`
 * uses each as a stream and its one event's id; the service's intake uses them
 * as event ids, so the store's unique event ids refuse a second claim either way.
 */
export function deliveryClaimIds({ deliveryId, bodyDigest }: DeliveryKey): { readonly deliveryId: string; readonly body: string } {
  return { deliveryId: `github-delivery-id:${sha256Hex(deliveryId)}`, body: `github-delivery-body:${bodyDigest.slice('sha256:'.length)}` };
}
