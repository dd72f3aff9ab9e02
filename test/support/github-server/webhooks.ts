/**
 * Signed webhook deliveries built from the real payloads in
 * ../shared/fixtures/github-webhooks/, as GitHub would send them.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fixturesRoot } from './openapi.js';

export const webhookFixturesDir = path.join(fixturesRoot, 'github-webhooks');

export interface FixtureFile {
  readonly eventName: string;
  readonly file: string;
  readonly payload: Record<string, unknown>;
}

/** Every fixture payload, per event folder. */
export function webhookFixtures(): FixtureFile[] {
  return readdirSync(webhookFixturesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((dir) =>
      readdirSync(path.join(webhookFixturesDir, dir.name))
        .filter((file) => file.endsWith('.json'))
        .sort()
        .map((file) => ({
          eventName: dir.name,
          file,
          payload: JSON.parse(readFileSync(path.join(webhookFixturesDir, dir.name, file), 'utf8')) as Record<string, unknown>,
        })),
    );
}

export function fixture(eventName: string, file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(webhookFixturesDir, eventName, file), 'utf8')) as Record<string, unknown>;
}

export interface SignedDelivery {
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly deliveryId: string;
}

export function signDelivery(eventName: string, payload: unknown, secret: string, deliveryId: string = randomUUID()): SignedDelivery {
  const body = JSON.stringify(payload);
  return {
    body,
    deliveryId,
    headers: {
      'content-type': 'application/json',
      'x-github-event': eventName,
      'x-github-delivery': deliveryId,
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
      'user-agent': 'GitHub-Hookshot/test',
    },
  };
}
