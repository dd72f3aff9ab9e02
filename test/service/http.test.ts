import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ProofgateError, sha256Digest } from '../../src/core/index.js';
import { deliveryClaimIds, parseWebhookDelivery, storeDeliveryLedger } from '../../src/forge/github/webhooks.js';
import { createServiceServer, type ServiceServer } from '../../src/service/http.js';
import { INTAKE_STREAM_PREFIX, createWebhookIntake, type AcceptedDelivery, type IntakeObservation } from '../../src/service/intake.js';
import { defaultStoragePolicy, type EventStore, type NewEvent, type RunStorage } from '../../src/storage/index.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { fixture, signDelivery } from '../support/github-server/index.js';

const SECRET = 'webhook-secret-for-service-tests';
const sign = (body: string | Uint8Array, secret = SECRET): string => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

interface Reply {
  readonly status: number;
  readonly json: Record<string, unknown>;
}

/** One request over a fresh connection; a body may be sent in chunks (no Content-Length). */
function send(url: string, method: string, path: string, headers: Record<string, string> = {}, body?: Uint8Array | string, chunked = false): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const bytes = body === undefined ? undefined : typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
    const req = request(
      `${url}${path}`,
      {
        method,
        agent: false,
        headers: { ...headers, ...(bytes !== undefined && !chunked ? { 'content-length': String(bytes.length) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) });
        });
      },
    );
    // An answer may come before the whole body is written (413): the write side's error does not matter then.
    req.on('error', reject);
    if (bytes === undefined) req.end();
    else if (chunked) {
      const step = 64 * 1024;
      for (let at = 0; at < bytes.length; at += step) req.write(bytes.subarray(at, at + step));
      req.end();
    } else req.end(bytes);
  });
}

/** A real pull_request payload, made distinct by its number. */
function pullRequestPayload(number: number): Record<string, unknown> {
  const payload = fixture('pull_request', 'opened.payload.json');
  (payload.pull_request as Record<string, unknown>).number = number;
  payload.number = number;
  return payload;
}

interface Rig {
  readonly server: ServiceServer;
  readonly storage: RunStorage;
  readonly sunk: AcceptedDelivery[];
  readonly logLines: string[];
  readonly store: TestStore;
}

interface TestStore {
  appends: number;
  /** When set, each append fails with it (the store is down). */
  failure: Error | null;
  /** When set, an append of these events fails with what it returns (null: the append goes on). */
  failWhen: ((events: readonly NewEvent[]) => Error | null) | null;
  /** When set, an append waits for it before writing (a write in flight). */
  gate: Promise<void> | null;
}

/** The SQLite store seen through a wrapper that counts appends and can fail or hold them. */
function wrapStore(inner: EventStore, state: TestStore): EventStore {
  return {
    ...inner,
    async append(streamId, expectedRevision, events) {
      state.appends += 1;
      if (state.gate !== null) await state.gate;
      if (state.failure !== null) throw state.failure;
      const failure = state.failWhen?.(events) ?? null;
      if (failure !== null) throw failure;
      return inner.append(streamId, expectedRevision, events);
    },
  };
}

const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startRig(options: { ready?: () => Promise<boolean>; maxBodyBytes?: number; observe?: (o: IntakeObservation) => void } = {}): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-service-http-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const storage = createLocalRunStorage({ directory: dir, namespace: 'service', policy: defaultStoragePolicy, knownSecrets: [SECRET] });
  cleanups.push(() => storage.close());
  const store: TestStore = { appends: 0, failure: null, failWhen: null, gate: null };
  const sunk: AcceptedDelivery[] = [];
  const logLines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });
  const intake = createWebhookIntake({
    events: wrapStore(storage.eventStore, store),
    secret: SECRET,
    sink: (accepted) => sunk.push(accepted),
    logger,
    ...(options.observe ? { observe: options.observe } : {}),
  });
  const server = await createServiceServer({
    host: '127.0.0.1',
    port: 0,
    intake,
    ready: options.ready ?? (async () => true),
    logger,
    ...(options.maxBodyBytes !== undefined ? { maxBodyBytes: options.maxBodyBytes } : {}),
  });
  cleanups.push(() => server.close());
  return { server, storage, sunk, logLines, store };
}

/** Every intake record in the store. */
async function recorded(storage: RunStorage) {
  return storage.eventStore.readAll({ streamPrefix: INTAKE_STREAM_PREFIX });
}

const post = (rig: Rig, headers: Record<string, string>, body: string | Uint8Array, chunked = false) =>
  send(rig.server.url, 'POST', '/webhooks', headers, body, chunked);

describe('service HTTP: webhook intake', () => {
  it('answers a signed delivery 202 after recording it, and hands it to the sink once', async () => {
    const rig = await startRig();
    const delivery = signDelivery('pull_request', pullRequestPayload(7), SECRET);
    const reply = await post(rig, delivery.headers, delivery.body);
    expect(reply).toEqual({ status: 202, json: { accepted: true, outcome: 'accepted', deliveryId: delivery.deliveryId, kind: 'change-opened' } });
    expect(rig.sunk).toHaveLength(1);
    const accepted = rig.sunk[0]!;
    expect(accepted).toMatchObject({
      deliveryId: delivery.deliveryId,
      eventName: 'pull_request',
      action: 'opened',
      result: { kind: 'change-opened', changeId: '7' },
    });
    expect(accepted.repository).toMatch(/^[^/]+\/[^/]+$/);
    const events = await recorded(rig.storage);
    expect(events.map((e) => e.type)).toEqual(['github-delivery', 'github-delivery-body']);
    expect(events[0]!.id).toBe(accepted.record.eventId);
    expect(events[0]!.streamId).toBe(accepted.record.streamId);
    expect(events[0]!.data).toMatchObject({
      bodyDigest: accepted.bodyDigest,
      repository: accepted.repository,
      result: { kind: 'change-opened', deliveryId: delivery.deliveryId },
    });
    // One JSON line for the delivery, with its facts and without its body.
    const lines = rig.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.deliveryId === delivery.deliveryId);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ event: 'pull_request', status: 202, repository: accepted.repository, installationId: accepted.installationId });
    expect(rig.logLines.join('\n')).not.toContain(SECRET);
    expect(rig.logLines.join('\n')).not.toContain('"pull_request":{');
  });

  it('answers a ping 200 and records only its body claim; the same body again is a duplicate', async () => {
    const rig = await startRig();
    const ping = signDelivery('ping', fixture('ping', 'event.payload.json'), SECRET);
    const reply = await post(rig, ping.headers, ping.body);
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ outcome: 'ping', deliveryId: ping.deliveryId });
    expect(rig.sunk).toEqual([]);
    expect((await recorded(rig.storage)).map((e) => e.type)).toEqual(['github-delivery-body']);
    const again = await post(rig, { ...ping.headers, 'x-github-delivery': randomUUID() }, ping.body);
    expect(again).toMatchObject({ status: 200, json: { outcome: 'duplicate' } });
    expect(rig.sunk).toEqual([]);
  });

  it('records an installation event and hands it on with its installation', async () => {
    const rig = await startRig();
    const delivery = signDelivery('installation', fixture('installation', 'created.payload.json'), SECRET);
    const reply = await post(rig, delivery.headers, delivery.body);
    expect(reply.status).toBe(202);
    expect(rig.sunk).toHaveLength(1);
    expect(rig.sunk[0]).toMatchObject({ eventName: 'installation', action: 'created', result: { kind: 'ignored' } });
    expect(typeof rig.sunk[0]!.installationId).toBe('number');
  });

  it('refuses a body changed by one byte (kept signature, or re-signed with another secret) with 401 and records nothing', async () => {
    const rig = await startRig();
    const delivery = signDelivery('pull_request', pullRequestPayload(8), SECRET);
    const tampered = Buffer.from(delivery.body, 'utf8');
    const at = tampered.indexOf('"opened"') + 1;
    tampered[at] = 'c'.charCodeAt(0); // "opened" -> "cpened"
    expect((await post(rig, delivery.headers, tampered)).status).toBe(401);
    const resigned = { ...delivery.headers, 'x-hub-signature-256': sign(tampered, 'an-attackers-secret') };
    expect((await post(rig, resigned, tampered)).status).toBe(401);
    const unsigned: Record<string, string> = { ...delivery.headers };
    delete unsigned['x-hub-signature-256'];
    expect((await post(rig, unsigned, delivery.body)).status).toBe(401);
    expect(rig.sunk).toEqual([]);
    expect(await recorded(rig.storage)).toEqual([]);
    expect(rig.store.appends).toBe(0);
  });

  it('refuses a BOM-prefixed body carrying the signature of the body without it (401)', async () => {
    const rig = await startRig();
    const delivery = signDelivery('pull_request', pullRequestPayload(9), SECRET);
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(delivery.body, 'utf8')]);
    const reply = await post(rig, delivery.headers, withBom);
    expect(reply.status).toBe(401);
    expect(rig.sunk).toEqual([]);
    expect(await recorded(rig.storage)).toEqual([]);
  });

  it('answers a replay under a fresh delivery id 200 duplicate; the sink sees the delivery once', async () => {
    const rig = await startRig();
    const delivery = signDelivery('pull_request', pullRequestPayload(10), SECRET);
    expect((await post(rig, delivery.headers, delivery.body)).status).toBe(202);
    const replay = await post(rig, { ...delivery.headers, 'x-github-delivery': randomUUID() }, delivery.body);
    expect(replay.status).toBe(200);
    expect(replay.json).toMatchObject({ outcome: 'duplicate' });
    const redelivery = await post(rig, delivery.headers, delivery.body);
    expect(redelivery.status).toBe(200);
    expect(rig.sunk.map((d) => d.deliveryId)).toEqual([delivery.deliveryId]);
    expect(await recorded(rig.storage)).toHaveLength(2);
  });

  it('sees claims made by storeDeliveryLedger on the same store, and they see its claims', async () => {
    const rig = await startRig();
    const ledger = storeDeliveryLedger(rig.storage.eventStore);
    const first = signDelivery('pull_request', pullRequestPayload(11), SECRET);
    const parsed = await parseWebhookDelivery({ headers: first.headers, body: first.body, secret: SECRET, deliveries: ledger });
    expect(parsed.kind).toBe('change-opened');
    expect((await post(rig, first.headers, first.body)).json).toMatchObject({ outcome: 'duplicate' });
    const second = signDelivery('pull_request', pullRequestPayload(12), SECRET);
    expect((await post(rig, second.headers, second.body)).status).toBe(202);
    expect((await parseWebhookDelivery({ headers: second.headers, body: second.body, secret: SECRET, deliveries: ledger })).kind).toBe('duplicate');
  });

  it('answers a missing X-GitHub-Event or X-GitHub-Delivery 400 and records nothing', async () => {
    const rig = await startRig();
    const delivery = signDelivery('pull_request', pullRequestPayload(13), SECRET);
    for (const name of ['x-github-event', 'x-github-delivery']) {
      const headers: Record<string, string> = { ...delivery.headers };
      delete headers[name];
      const reply = await post(rig, headers, delivery.body);
      expect(reply.status).toBe(400);
    }
    expect(rig.store.appends).toBe(0);
  });

  it('answers a 26 MiB body 413 and records nothing', async () => {
    const rig = await startRig();
    const big = Buffer.alloc(26 * 1024 * 1024, 0x20);
    big.write('{"zen":"x"}', 0);
    const headers = { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': sign(big) };
    const reply = await post(rig, headers, big);
    expect(reply.status).toBe(413);
    expect(rig.store.appends).toBe(0);
    expect(rig.sunk).toEqual([]);
    // The server still answers on new connections.
    expect((await send(rig.server.url, 'GET', '/healthz')).status).toBe(200);
  });

  it('answers a chunked body (no Content-Length) over the limit 413 and records nothing', async () => {
    const rig = await startRig({ maxBodyBytes: 16 * 1024 });
    const delivery = signDelivery('pull_request', pullRequestPayload(14), SECRET);
    expect(Buffer.byteLength(delivery.body)).toBeGreaterThan(16 * 1024);
    const reply = await post(rig, delivery.headers, delivery.body, true);
    expect(reply.status).toBe(413);
    expect(rig.store.appends).toBe(0);
  });

  it('commits 50 concurrent deliveries in groups: each answered 202 once, the sink called 50 times, fewer appends than deliveries', async () => {
    const COUNT = 50;
    let release: () => void = () => undefined;
    let released = false;
    // The first write is held in flight until every delivery is queued behind it: then they can only be written as a group.
    const rig = await startRig({
      observe: (o) => {
        if (o.kind === 'queued' && o.waiting + o.inFlight === COUNT && !released) {
          released = true;
          release();
        }
      },
    });
    rig.store.gate = new Promise<void>((resolve) => (release = resolve));
    const deliveries = Array.from({ length: COUNT }, (_, i) => signDelivery('pull_request', pullRequestPayload(100 + i), SECRET));
    const replies = await Promise.all(deliveries.map((d) => post(rig, d.headers, d.body)));
    expect(replies.map((r) => r.status)).toEqual(Array(COUNT).fill(202));
    expect(replies.map((r) => r.json.deliveryId).sort()).toEqual(deliveries.map((d) => d.deliveryId).sort());
    expect(rig.sunk).toHaveLength(COUNT);
    expect(new Set(rig.sunk.map((d) => d.deliveryId)).size).toBe(COUNT);
    expect(rig.store.appends).toBeLessThan(COUNT);
    expect(rig.store.appends).toBe(2);
    const events = await recorded(rig.storage);
    expect(events).toHaveLength(2 * COUNT);
    expect(new Set(events.map((e) => e.streamId)).size).toBe(rig.store.appends);
  });

  it('answers duplicates inside one group: the first is accepted, the copies are duplicates', async () => {
    let release: () => void = () => undefined;
    let released = false;
    const rig = await startRig({
      observe: (o) => {
        if (o.kind === 'queued' && o.waiting + o.inFlight === 4 && !released) {
          released = true;
          release();
        }
      },
    });
    rig.store.gate = new Promise<void>((resolve) => (release = resolve));
    const a = signDelivery('pull_request', pullRequestPayload(200), SECRET);
    const b = signDelivery('pull_request', pullRequestPayload(201), SECRET);
    const replies = await Promise.all([
      post(rig, a.headers, a.body),
      post(rig, b.headers, b.body),
      post(rig, { ...a.headers, 'x-github-delivery': randomUUID() }, a.body),
      post(rig, a.headers, a.body),
    ]);
    expect(replies.filter((r) => r.status === 202)).toHaveLength(2);
    expect(replies.filter((r) => r.status === 200 && r.json.outcome === 'duplicate')).toHaveLength(2);
    // Which copy of `a` comes first is the network's choice; one of them is taken, and `b`.
    expect(rig.sunk).toHaveLength(2);
    expect(new Set(rig.sunk.map((d) => d.bodyDigest)).size).toBe(2);
    expect(rig.sunk.map((d) => d.deliveryId)).toContain(b.deliveryId);
  });

  it('records a delivery sent twice inside one group once: one record, one claim of its id and of its body', async () => {
    let release: () => void = () => undefined;
    let released = false;
    const rig = await startRig({
      observe: (o) => {
        if (o.kind === 'queued' && o.waiting + o.inFlight === 3 && !released) {
          released = true;
          release();
        }
      },
    });
    rig.store.gate = new Promise<void>((resolve) => (release = resolve));
    const a = signDelivery('pull_request', pullRequestPayload(210), SECRET);
    const replies = await Promise.all([post(rig, a.headers, a.body), post(rig, a.headers, a.body), post(rig, a.headers, a.body)]);
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 202]);
    expect(rig.sunk.map((d) => d.deliveryId)).toEqual([a.deliveryId]);
    const ids = deliveryClaimIds({ deliveryId: a.deliveryId, bodyDigest: sha256Digest(Buffer.from(a.body, 'utf8')) });
    const events = await recorded(rig.storage);
    expect(events.map((e) => e.id)).toEqual([ids.deliveryId, ids.body]);
    expect(events.map((e) => e.type)).toEqual(['github-delivery', 'github-delivery-body']);
  });

  it('never answers 202 for a delivery of a group whose write failed: the whole group is 503, nothing is recorded', async () => {
    let release: () => void = () => undefined;
    let released = false;
    const rig = await startRig({
      observe: (o) => {
        if (o.kind === 'queued' && o.waiting + o.inFlight === 4 && !released) {
          released = true;
          release();
        }
      },
    });
    rig.store.gate = new Promise<void>((resolve) => (release = resolve));
    const deliveries = Array.from({ length: 4 }, (_, i) => signDelivery('pull_request', pullRequestPayload(220 + i), SECRET));
    rig.store.failWhen = () => new ProofgateError('IO', 'cannot use the database: disk I/O error');
    const replies = await Promise.all(deliveries.map((d) => post(rig, d.headers, d.body)));
    expect(replies.map((r) => r.status)).toEqual([503, 503, 503, 503]);
    expect(replies.map((r) => r.json.outcome)).toEqual(Array(4).fill('unavailable'));
    expect(rig.sunk).toEqual([]);
    expect(await recorded(rig.storage)).toEqual([]);
    // Not answered as taken, so GitHub's redeliveries are taken normally.
    rig.store.gate = null;
    rig.store.failWhen = null;
    const again = await Promise.all(deliveries.map((d) => post(rig, d.headers, d.body)));
    expect(again.map((r) => r.status)).toEqual([202, 202, 202, 202]);
    expect(await recorded(rig.storage)).toHaveLength(8);
  });

  it('answers 202 exactly for the deliveries whose records were committed when a split group partly fails', async () => {
    let release: () => void = () => undefined;
    let released = false;
    const rig = await startRig({
      observe: (o) => {
        if (o.kind === 'queued' && o.waiting + o.inFlight === 4 && !released) {
          released = true;
          release();
        }
      },
    });
    rig.store.gate = new Promise<void>((resolve) => (release = resolve));
    const leaking = fixture('issue_comment', 'created.payload.json');
    (leaking.comment as Record<string, unknown>).body = `oops ${SECRET}`;
    (leaking.issue as Record<string, unknown>).pull_request = { url: 'https://api.github.com/repos/o/r/pulls/1' };
    const bad = signDelivery('issue_comment', leaking, SECRET);
    const good = Array.from({ length: 3 }, (_, i) => signDelivery('pull_request', pullRequestPayload(230 + i), SECRET));
    const recordId = (d: { deliveryId: string }) => deliveryClaimIds({ deliveryId: d.deliveryId, bodyDigest: 'sha256:' }).deliveryId;
    // The refused record splits the group; a write that holds the last good delivery and not the refused one then fails.
    rig.store.failWhen = (events) => {
      const ids = new Set(events.map((e) => e.id));
      return ids.has(recordId(good[2]!)) && !ids.has(recordId(bad)) ? new ProofgateError('IO', 'cannot use the database: disk I/O error') : null;
    };
    const replies = await Promise.all([good[0]!, bad, good[1]!, good[2]!].map((d) => post(rig, d.headers, d.body)));
    const byId = new Map([good[0]!, bad, good[1]!, good[2]!].map((d, i) => [d.deliveryId, replies[i]!.status] as const));
    expect(byId.get(bad.deliveryId)).toBe(422);
    expect(byId.get(good[2]!.deliveryId)).toBe(503);
    const committed = (await recorded(rig.storage)).filter((e) => e.type === 'github-delivery').map((e) => e.id);
    const answered202 = [...byId].filter(([, status]) => status === 202).map(([id]) => id);
    expect(answered202.length).toBeGreaterThan(0);
    // Every 202 has its record, and no other delivery has one.
    expect(committed.sort()).toEqual(answered202.map((id) => recordId({ deliveryId: id })).sort());
    expect(rig.sunk.map((d) => d.deliveryId).sort()).toEqual(answered202.sort());
  });

  it('answers 503 when the store fails, records nothing, and a redelivery later succeeds', async () => {
    const rig = await startRig();
    const delivery = signDelivery('pull_request', pullRequestPayload(15), SECRET);
    rig.store.failure = new ProofgateError('IO', 'cannot use the database: disk I/O error');
    const failed = await post(rig, delivery.headers, delivery.body);
    expect(failed.status).toBe(503);
    expect(rig.sunk).toEqual([]);
    expect(await recorded(rig.storage)).toEqual([]);
    rig.store.failure = null;
    const again = await post(rig, delivery.headers, delivery.body);
    expect(again.status).toBe(202);
    expect(rig.sunk.map((d) => d.deliveryId)).toEqual([delivery.deliveryId]);
    expect(await recorded(rig.storage)).toHaveLength(2);
  });

  it('writes the rest of a group when the store refuses one record in it', async () => {
    let release: () => void = () => undefined;
    let firstQueued: () => void = () => undefined;
    const queuedOne = new Promise<void>((resolve) => (firstQueued = resolve));
    let released = false;
    const rig = await startRig({
      observe: (o) => {
        if (o.kind !== 'queued') return;
        if (o.waiting + o.inFlight === 1) firstQueued();
        if (o.waiting + o.inFlight === 6 && !released) {
          released = true;
          release();
        }
      },
    });
    rig.store.gate = new Promise<void>((resolve) => (release = resolve));
    const leaking = fixture('issue_comment', 'created.payload.json');
    (leaking.comment as Record<string, unknown>).body = `oops ${SECRET}`;
    (leaking.issue as Record<string, unknown>).pull_request = { url: 'https://api.github.com/repos/o/r/pulls/1' };
    const bad = signDelivery('issue_comment', leaking, SECRET);
    const good = Array.from({ length: 5 }, (_, i) => signDelivery('pull_request', pullRequestPayload(300 + i), SECRET));
    // The first delivery is written alone (held in flight); the five others, the refused one among them, form the next group.
    const first = post(rig, good[0]!.headers, good[0]!.body);
    await queuedOne;
    const rest = [good[1]!, bad, ...good.slice(2)].map((d) => post(rig, d.headers, d.body));
    const replies = await Promise.all([first, ...rest]);
    expect(replies.map((r) => r.status)).toEqual([202, 202, 422, 202, 202, 202]);
    expect(rig.sunk.map((d) => d.deliveryId).sort()).toEqual(good.map((d) => d.deliveryId).sort());
    expect(await recorded(rig.storage)).toHaveLength(2 * good.length);
    // One append for the first, one refused for the group of five, then its halves (and the refused one alone).
    expect(rig.store.appends).toBeGreaterThan(2);
  });

  it('answers a comment holding a configured secret 422: the store refuses the record, nothing is half-written', async () => {
    const rig = await startRig();
    const payload = fixture('issue_comment', 'created.payload.json');
    (payload.comment as Record<string, unknown>).body = `oops ${SECRET}`;
    (payload.issue as Record<string, unknown>).pull_request = { url: 'https://api.github.com/repos/o/r/pulls/1' };
    const delivery = signDelivery('issue_comment', payload, SECRET);
    const reply = await post(rig, delivery.headers, delivery.body);
    expect(reply.status).toBe(422);
    expect(rig.sunk).toEqual([]);
    expect(await recorded(rig.storage)).toEqual([]);
  });
});

describe('service HTTP: routes and health', () => {
  it('answers /healthz 200 and /readyz as ready() says', async () => {
    let ready = false;
    const rig = await startRig({ ready: async () => ready });
    expect(await send(rig.server.url, 'GET', '/healthz')).toEqual({ status: 200, json: { status: 'ok' } });
    expect((await send(rig.server.url, 'GET', '/readyz')).status).toBe(503);
    ready = true;
    expect(await send(rig.server.url, 'GET', '/readyz')).toEqual({ status: 200, json: { status: 'ready' } });
  });

  it('answers /readyz 503 when the readiness check throws, and /healthz still 200', async () => {
    const rig = await startRig({
      ready: async () => {
        throw new Error('database unreachable');
      },
    });
    expect((await send(rig.server.url, 'GET', '/readyz')).status).toBe(503);
    expect((await send(rig.server.url, 'GET', '/healthz')).status).toBe(200);
  });

  it('answers a wrong method 405 and an unknown path 404', async () => {
    const rig = await startRig();
    expect((await send(rig.server.url, 'GET', '/webhooks')).status).toBe(405);
    expect((await send(rig.server.url, 'POST', '/healthz', {}, '{}')).status).toBe(405);
    expect((await send(rig.server.url, 'GET', '/nope')).status).toBe(404);
    expect(rig.store.appends).toBe(0);
  });
});
