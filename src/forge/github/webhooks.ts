/**
 * Webhook deliveries: verify `X-Hub-Signature-256` over the exact body bytes
 * with @octokit/webhooks, then map the payload to a typed forge event that
 * keeps the delivery id (`X-GitHub-Delivery`) for idempotency. A missing or
 * wrong signature throws WEBHOOK_SIGNATURE before anything is parsed, so the
 * caller records nothing.
 */
import { Webhooks } from '@octokit/webhooks';
import pino, { type Logger } from 'pino';
import { ProofgateError } from '../../core/errors.js';
import { parseJson } from '../../core/canonical-json.js';
import { mapWebhookPayload, type GitHubForgeEvent, type IgnoredDelivery } from './webhook-events.js';

export type { GitHubForgeEvent, IgnoredDelivery, GitHubRepositoryRef } from './webhook-events.js';

export type WebhookHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface WebhookDelivery {
  readonly headers: WebhookHeaders;
  /** The raw request body, exactly as received. */
  readonly body: string | Uint8Array;
  readonly secret: string;
  /** Secrets still accepted during a rotation. */
  readonly previousSecrets?: readonly string[];
  /** Branches whose pushes count as base pushes; default: the repository's default branch. */
  readonly baseBranches?: readonly string[];
  readonly logger?: Logger;
}

export type WebhookResult = GitHubForgeEvent | IgnoredDelivery;

const silent = pino({ level: 'silent' });

export async function parseWebhookDelivery(delivery: WebhookDelivery): Promise<WebhookResult> {
  const logger = delivery.logger ?? silent;
  if (delivery.secret === '') throw new ProofgateError('CONFIG', 'webhook secret is empty');
  const signature = header(delivery.headers, 'x-hub-signature-256');
  if (signature === null || signature === '') {
    throw new ProofgateError('WEBHOOK_SIGNATURE', 'webhook delivery has no X-Hub-Signature-256 header');
  }
  const body = bodyText(delivery.body);
  if (body === '' || !(await signedByAny([delivery.secret, ...(delivery.previousSecrets ?? [])], body, signature))) {
    throw new ProofgateError('WEBHOOK_SIGNATURE', 'webhook signature does not match the body');
  }
  const deliveryId = header(delivery.headers, 'x-github-delivery');
  const eventName = header(delivery.headers, 'x-github-event');
  if (deliveryId === null || deliveryId === '') throw new ProofgateError('INVALID_INPUT', 'webhook delivery has no X-GitHub-Delivery header');
  if (eventName === null || eventName === '') throw new ProofgateError('INVALID_INPUT', 'webhook delivery has no X-GitHub-Event header');
  const payload = parseJson(body, 'webhook body');
  const result = mapWebhookPayload(payload, { eventName, deliveryId, ...(delivery.baseBranches ? { baseBranches: delivery.baseBranches } : {}) });
  if (result.kind === 'ignored') {
    logger.debug({ deliveryId, eventName, reason: result.reason }, 'webhook delivery ignored');
  } else {
    logger.debug({ deliveryId, eventName, kind: result.kind }, 'webhook delivery accepted');
  }
  return result;
}

async function signedByAny(secrets: readonly string[], body: string, signature: string): Promise<boolean> {
  for (const secret of secrets) {
    if (secret !== '' && (await new Webhooks({ secret }).verify(body, signature))) return true;
  }
  return false;
}

function header(headers: WebhookHeaders, name: string): string | null {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    if (value === undefined) return null;
    return typeof value === 'string' ? value : (value[0] ?? null);
  }
  return null;
}

function bodyText(body: string | Uint8Array): string {
  if (typeof body === 'string') return body;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    throw new ProofgateError('INVALID_INPUT', 'webhook body is not UTF-8');
  }
}
