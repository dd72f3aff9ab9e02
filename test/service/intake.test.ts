import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  GATHER_TURNS,
  INTAKE_STREAM_PREFIX,
  NOT_JSON_REASON,
  createWebhookIntake,
  type IntakeObservation,
  type IntakeOutcome,
} from '../../src/service/intake.js';
import { defaultStoragePolicy, type RunStorage } from '../../src/storage/index.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { fixture, signDelivery } from '../support/github-server/index.js';

const SECRET = 'webhook-secret-for-intake-tests';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function openStore(): RunStorage {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-intake-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const storage = createLocalRunStorage({ directory: dir, namespace: 'service', policy: defaultStoragePolicy, knownSecrets: [SECRET] });
  cleanups.push(() => storage.close());
  return storage;
}

function pullRequest(number: number) {
  const payload = fixture('pull_request', 'opened.payload.json');
  (payload.pull_request as Record<string, unknown>).number = number;
  payload.number = number;
  const delivery = signDelivery('pull_request', payload, SECRET);
  return { headers: delivery.headers, body: Buffer.from(delivery.body, 'utf8'), deliveryId: delivery.deliveryId };
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function rig() {
  const storage = openStore();
  const committed: number[] = [];
  const observe = (o: IntakeObservation): void => {
    if (o.kind === 'committed') committed.push(o.size);
  };
  const intake = createWebhookIntake({ events: storage.eventStore, secret: SECRET, sink: () => undefined, observe });
  return { storage, intake, committed };
}

describe('webhook intake: forming groups', () => {
  it('commits a lone delivery after one turn of the event loop', async () => {
    const { intake, committed } = rig();
    const outcome = await intake.receive(pullRequest(1).headers, pullRequest(1).body);
    expect(outcome.kind).toBe('accepted');
    expect(committed).toEqual([1]);
  });

  it('keeps a group open while deliveries join it turn after turn, so they share one commit', async () => {
    const { storage, intake, committed } = rig();
    const deliveries = [pullRequest(10), pullRequest(11), pullRequest(12), pullRequest(13)];
    const pending: Promise<IntakeOutcome>[] = [];
    // Two read in one turn, then one more in each of the next two turns (as bodies finish arriving).
    pending.push(intake.receive(deliveries[0]!.headers, deliveries[0]!.body), intake.receive(deliveries[1]!.headers, deliveries[1]!.body));
    await nextTurn();
    pending.push(intake.receive(deliveries[2]!.headers, deliveries[2]!.body));
    await nextTurn();
    pending.push(intake.receive(deliveries[3]!.headers, deliveries[3]!.body));
    const outcomes = await Promise.all(pending);
    expect(outcomes.map((o) => o.kind)).toEqual(['accepted', 'accepted', 'accepted', 'accepted']);
    expect(committed).toEqual([4]);
    const streams = await storage.eventStore.listStreams(INTAKE_STREAM_PREFIX);
    expect(streams).toHaveLength(1);
    expect(streams[0]!.revision).toBe(8);
  });

  it(`closes the group after ${GATHER_TURNS} turns however many keep arriving, and takes the rest in the next`, async () => {
    const { intake, committed } = rig();
    const count = 3 * GATHER_TURNS;
    const pending: Promise<IntakeOutcome>[] = [];
    const first = pullRequest(100);
    const second = pullRequest(101);
    pending.push(intake.receive(first.headers, first.body), intake.receive(second.headers, second.body));
    for (let i = 2; i < count; i += 1) {
      await nextTurn();
      const delivery = pullRequest(100 + i);
      pending.push(intake.receive(delivery.headers, delivery.body));
    }
    const outcomes = await Promise.all(pending);
    expect(outcomes.every((o) => o.kind === 'accepted')).toBe(true);
    expect(committed.reduce((a, b) => a + b, 0)).toBe(count);
    expect(committed[0]).toBeLessThanOrEqual(GATHER_TURNS + 1);
    expect(committed.length).toBeGreaterThan(1);
  });
});

describe('webhook intake: reading what was signed', () => {
  const signedText = (eventName: string, text: string) => ({
    headers: {
      'content-type': 'application/json',
      'x-github-event': eventName,
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(text).digest('hex')}`,
    },
    body: Buffer.from(text, 'utf8'),
  });

  it('refuses a body that names a member twice, also while Object.prototype has an enumerable name, and records nothing', async () => {
    const { storage, intake, committed } = rig();
    const twice = signedText('pull_request', '{"action":"opened","action":"closed","number":1}');
    expect(await intake.receive(twice.headers, twice.body)).toEqual({ kind: 'invalid', reason: NOT_JSON_REASON });
    // An inherited enumerable name must neither hide the duplicate nor count as a key of the payload's objects.
    Object.defineProperty(Object.prototype, 'inheritedName', { value: 1, enumerable: true, configurable: true });
    let tampered: Promise<IntakeOutcome>;
    try {
      tampered = intake.receive(twice.headers, twice.body);
    } finally {
      delete (Object.prototype as Record<string, unknown>).inheritedName;
    }
    expect(await tampered).toEqual({ kind: 'invalid', reason: NOT_JSON_REASON });
    expect(committed).toEqual([]);
    expect(await storage.eventStore.readAll({ streamPrefix: INTAKE_STREAM_PREFIX })).toEqual([]);
  });

  it('reads its headers in any case, from the headers object itself and never from its prototype', async () => {
    const { intake } = rig();
    const delivery = pullRequest(40);
    const mixedCase = {
      'Content-Type': 'application/json',
      'X-GitHub-Event': delivery.headers['x-github-event'],
      'X-GitHub-Delivery': delivery.deliveryId,
      'X-Hub-Signature-256': delivery.headers['x-hub-signature-256'],
    };
    expect((await intake.receive(mixedCase, delivery.body)).kind).toBe('accepted');
    const inherited = Object.create({ 'x-hub-signature-256': pullRequest(41).headers['x-hub-signature-256'] }) as Record<string, string>;
    Object.assign(inherited, { 'x-github-event': 'pull_request', 'x-github-delivery': randomUUID() });
    expect((await intake.receive(inherited, pullRequest(41).body)).kind).toBe('unauthenticated');
  });
});
