import { expect, it } from 'vitest';
import fc from 'fast-check';
import { canonicalJson, isProofgateError, type ErrorCode, type JsonValue } from '../../src/core/index.js';
import { defaultStoragePolicy, type RunStorage, type StoragePolicy } from '../../src/storage/index.js';
import { uniqueNamespace } from '../support/postgres.js';

/** What a conformance run needs from an adapter. */
export interface StorageHarness {
  /** Open (or reopen) a namespace in the harness's one database. */
  open(options: { namespace: string; policy?: StoragePolicy; knownSecrets?: readonly string[] }): Promise<RunStorage>;
  /** Every byte the database holds for a namespace (raw file or all rows), to scan for secrets. */
  dump(namespace: string): Promise<Buffer>;
  /** Overwrite a stored artifact's bytes behind the adapter's back. */
  corruptArtifact(namespace: string, runId: string, digest: string): Promise<void>;
}

export async function expectCode(promise: Promise<unknown> | (() => unknown), code: ErrorCode): Promise<Error> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (error) {
    if (!isProofgateError(error)) throw error;
    expect(error.code, error.message).toBe(code);
    return error;
  }
  throw new Error(`expected ${code}, nothing was thrown`);
}

const policyWith = (changes: Partial<StoragePolicy>): StoragePolicy => ({ ...defaultStoragePolicy, ...changes });
const ev = (id: string, data: JsonValue = { id }, type = 'test.event') => ({ id, type, data });

/**
 * The storage conformance suite. Both adapters run it; it talks only to the
 * public `RunStorage` binding (plus `dump`/`corruptArtifact` to look at or
 * damage what is stored).
 */
export function storageConformance(harness: () => StorageHarness): void {
  const openFresh = async (policy?: StoragePolicy, knownSecrets?: readonly string[]) => {
    const namespace = uniqueNamespace('conf');
    return harness().open({ namespace, ...(policy ? { policy } : {}), ...(knownSecrets ? { knownSecrets } : {}) });
  };

  it('appends and reads a stream with revisions, positions and recordedAt', async () => {
    const storage = await openFresh();
    const store = storage.eventStore;
    expect(await store.revision('run/a')).toBe(0);
    expect(await store.append('run/a', 0, [ev('e1', { n: 1, text: 'é😀' }), ev('e2', [1, null, true])])).toEqual({ revision: 2, written: true });
    expect(await store.append('run/a', 2, [ev('e3')])).toEqual({ revision: 3, written: true });
    const events = await store.read('run/a');
    expect(events.map((e) => [e.id, e.revision, e.streamId, e.type])).toEqual([
      ['e1', 1, 'run/a', 'test.event'],
      ['e2', 2, 'run/a', 'test.event'],
      ['e3', 3, 'run/a', 'test.event'],
    ]);
    expect(events[0]?.data).toEqual({ n: 1, text: 'é😀' });
    expect(events[1]?.data).toEqual([1, null, true]);
    for (const event of events) expect(new Date(event.recordedAt).toISOString()).toBe(event.recordedAt);
    expect(events[1]!.position).toBeGreaterThan(events[0]!.position);
    expect((await store.read('run/a', { fromRevision: 1, limit: 1 })).map((e) => e.id)).toEqual(['e2']);
    expect(await store.revision('run/a')).toBe(3);
    expect(await store.read('run/missing')).toEqual([]);
    await storage.close();
  });

  it('lists streams by prefix and tails all streams by global position', async () => {
    const storage = await openFresh();
    const store = storage.eventStore;
    await store.append('run/2', 0, [ev('a1')]);
    await store.append('job/1', 0, [ev('b1')]);
    await store.append('run/1', 0, [ev('c1'), ev('c2')]);
    expect(await store.listStreams('run/')).toEqual([
      { streamId: 'run/1', revision: 2 },
      { streamId: 'run/2', revision: 1 },
    ]);
    expect((await store.listStreams()).map((s) => s.streamId)).toEqual(['job/1', 'run/1', 'run/2']);
    const all = await store.readAll();
    expect(all.map((e) => e.id)).toEqual(['a1', 'b1', 'c1', 'c2']);
    const positions = all.map((e) => e.position);
    expect([...positions].sort((x, y) => x - y)).toEqual(positions);
    expect(new Set(positions).size).toBe(positions.length);
    const cursor = all[1]!.position;
    expect((await store.readAll({ afterPosition: cursor })).map((e) => e.id)).toEqual(['c1', 'c2']);
    expect((await store.readAll({ streamPrefix: 'run/' })).map((e) => e.id)).toEqual(['a1', 'c1', 'c2']);
    expect((await store.readAll({ afterPosition: all[0]!.position, streamPrefix: 'run/', limit: 1 })).map((e) => e.id)).toEqual(['c1']);
    await store.append('job/1', 1, [ev('b2')]);
    expect((await store.readAll({ afterPosition: all[3]!.position })).map((e) => e.id)).toEqual(['b2']);
    await storage.close();
  });

  it('fences a stale revision with REVISION_CONFLICT and keeps none of the loser', async () => {
    const storage = await openFresh();
    const store = storage.eventStore;
    await store.append('s', 0, [ev('w1')]);
    await expectCode(store.append('s', 0, [ev('l1'), ev('l2')]), 'REVISION_CONFLICT');
    await expectCode(store.append('s', 5, [ev('l1')]), 'REVISION_CONFLICT');
    expect((await store.read('s')).map((e) => e.id)).toEqual(['w1']);
    expect((await store.readAll()).map((e) => e.id)).toEqual(['w1']);
    expect(await store.append('s', 1, [ev('l1'), ev('l2')])).toEqual({ revision: 3, written: true });
    await storage.close();
  });

  it('treats an identical re-append as a safe retry and refuses reused ids', async () => {
    const storage = await openFresh();
    const store = storage.eventStore;
    const batch = [ev('r1', { b: 2, a: [1, 2] }), ev('r2', 'two')];
    await store.append('s', 0, batch);
    await store.append('s', 2, [ev('r3')]);
    const reordered = [ev('r1', { a: [1, 2], b: 2 }), ev('r2', 'two')];
    expect(await store.append('s', 0, reordered)).toEqual({ revision: 2, written: false });
    expect(await store.append('s', 2, [ev('r3')])).toEqual({ revision: 3, written: false });
    expect((await store.read('s')).length).toBe(3);
    await expectCode(store.append('s', 0, [ev('r1', { b: 3, a: [1, 2] }), ev('r2', 'two')]), 'DUPLICATE_EVENT_ID');
    await expectCode(store.append('s', 0, [ev('r1', { a: [1, 2], b: 2 }, 'other.type'), ev('r2', 'two')]), 'DUPLICATE_EVENT_ID');
    await expectCode(store.append('s', 3, [ev('r1', { a: [1, 2], b: 2 })]), 'DUPLICATE_EVENT_ID');
    await expectCode(store.append('other', 0, [ev('r3')]), 'DUPLICATE_EVENT_ID');
    await expectCode(store.append('s', 3, [ev('n0'), ev('r2', 'two')]), 'DUPLICATE_EVENT_ID');
    expect((await store.readAll()).map((e) => e.id)).toEqual(['r1', 'r2', 'r3']);
    expect(await store.listStreams()).toEqual([{ streamId: 's', revision: 3 }]);
    await expectCode(store.append('s', 3, [ev('n1'), ev('n1')]), 'DUPLICATE_EVENT_ID');
    expect((await store.read('s')).length).toBe(3);
    expect(await store.revision('other')).toBe(0);
    await storage.close();
  });

  it('enforces the event, batch and artifact size limits and stores nothing', async () => {
    const policy = policyWith({ maxEventPayloadBytes: 100, maxAppendBatchBytes: 250, maxArtifactBytes: 64, maxTotalArtifactBytesPerRun: 100 });
    const storage = await openFresh(policy);
    const store = storage.eventStore;
    const text = (n: number) => 'x'.repeat(n - 2);
    expect((await store.append('s', 0, [ev('fits', text(100))])).revision).toBe(1);
    await expectCode(store.append('s', 1, [ev('big', text(101))]), 'POLICY_VIOLATION');
    await expectCode(store.append('s', 1, [ev('b1', text(90)), ev('b2', text(90)), ev('b3', text(90))]), 'POLICY_VIOLATION');
    expect((await store.read('s')).map((e) => e.id)).toEqual(['fits']);
    const scope = { namespace: storage.record.namespace, runId: 'run-1' };
    await expectCode(storage.artifactStore.write(scope, new Uint8Array(65), { mediaType: 'application/octet-stream', purpose: 'test' }), 'POLICY_VIOLATION');
    expect(await storage.artifactStore.usage(scope)).toBe(0);
    await storage.close();
  });

  it('refuses known secrets in keys, values, names and artifact bytes, and never stores or reports them', async () => {
    const secret = `sk-live-${Math.random().toString(36).slice(2)}-canary`;
    const storage = await openFresh(undefined, [secret]);
    const store = storage.eventStore;
    const namespace = storage.record.namespace;
    const attempts: (() => Promise<unknown>)[] = [
      () => store.append('s', 0, [ev('k1', { outer: { [`prefix${secret}`]: 1 } })]),
      () => store.append('s', 0, [ev('k2', { outer: [{ deep: `before ${secret} after` }] })]),
      () => store.append('s', 0, [ev('k3'), ev('k4', { list: ['ok', secret] })]),
      () => store.append(`stream-${secret}`, 0, [ev('k5')]),
      () => store.append('s', 0, [ev(`id-${secret}`)]),
      () => store.append('s', 0, [ev('k6', {}, secret)]),
      () => store.append('s', 0, [ev('k7', { marked: { $sensitive: secret } })]),
      () => storage.artifactStore.write({ namespace, runId: 'r' }, Buffer.from(`bytes ${secret} bytes`), { mediaType: 'text/plain', purpose: 'test' }),
      () => storage.artifactStore.write({ namespace, runId: 'r' }, Buffer.from('fine'), { mediaType: 'text/plain', purpose: secret }),
    ];
    for (const attempt of attempts) {
      const error = await expectCode(attempt, 'KNOWN_SECRET');
      expect(error.message).not.toContain(secret);
      expect(JSON.stringify((error as { details?: unknown }).details)).not.toContain(secret);
    }
    expect(await store.readAll()).toEqual([]);
    expect(await storage.artifactStore.usage({ namespace, runId: 'r' })).toBe(0);
    expect(await store.append('s', 0, [ev('clean', { note: 'no secret here' })])).toEqual({ revision: 1, written: true });
    await storage.close();
    expect((await harness().dump(namespace)).includes(Buffer.from(secret))).toBe(false);
    expect(JSON.stringify(storage.record)).not.toContain(secret);
  });

  it('redacts secret-looking free text before hashing, so a retry of the original is identical', async () => {
    const storage = await openFresh();
    const store = storage.eventStore;
    const aws = 'AKIA' + 'ABCDEFGHIJKLMNOP';
    const gh = 'ghp_' + 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8';
    const original = {
      log: `key ${aws} and Authorization: Bearer abc.def-ghi and password=hunter22 and ${gh}`,
      pem: '-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----',
    };
    await store.append('s', 0, [ev('red', original)]);
    const [stored] = await store.read('s');
    const text = canonicalJson(stored!.data);
    for (const leaked of [aws, gh, 'abc.def-ghi', 'hunter22', 'MIIEabc']) expect(text).not.toContain(leaked);
    expect(stored!.data).toEqual({
      log: 'key [redacted:aws-access-key-id] and Authorization: Bearer [redacted:bearer-token] and password=[redacted:assignment] and [redacted:github-token]',
      pem: '[redacted:private-key]',
    });
    expect(await store.append('s', 0, [ev('red', original)])).toEqual({ revision: 1, written: false });
    await expectCode(store.append('s', 1, [ev('mark', { value: { $sensitive: 'x' } })]), 'POLICY_VIOLATION');
    await storage.close();
    expect((await harness().dump(storage.record.namespace)).includes(Buffer.from(aws))).toBe(false);

    const strict = await openFresh(policyWith({ sensitiveContent: { marked: 'redact', exact: 'reject', freeText: 'reject' } }));
    await expectCode(strict.eventStore.append('s', 0, [ev('f', { log: `id ${aws}` })]), 'POLICY_VIOLATION');
    await strict.eventStore.append('s', 0, [ev('m', { value: { $sensitive: 'pin 1234' }, keep: 1 })]);
    expect((await strict.eventStore.read('s'))[0]?.data).toEqual({ value: '[redacted:marked]', keep: 1 });
    await strict.close();

    const open = await openFresh(policyWith({ sensitiveContent: { marked: 'reject', exact: 'reject', freeText: 'allow' } }));
    await open.eventStore.append('s', 0, [ev('a', { log: `id ${aws}` })]);
    expect((await open.eventStore.read('s'))[0]?.data).toEqual({ log: `id ${aws}` });
    await open.close();
  });

  it('stores artifacts by digest, deduplicates, enforces the run quota and verifies bytes on read', async () => {
    const policy = policyWith({ maxArtifactBytes: 1000, maxTotalArtifactBytesPerRun: 1500 });
    const storage = await openFresh(policy);
    const { artifactStore } = storage;
    const namespace = storage.record.namespace;
    const scope = { namespace, runId: 'run-a' };
    const bytes = new Uint8Array(800).map((_, i) => (i * 7) % 256);
    const meta = { mediaType: 'application/octet-stream', purpose: 'proof' };
    const ref = await artifactStore.write(scope, bytes, meta);
    expect(ref).toMatchObject({ byteLength: 800, ...meta });
    expect(ref.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Buffer.from(await artifactStore.read(scope, ref)).equals(Buffer.from(bytes))).toBe(true);
    expect(Buffer.from(await artifactStore.read(scope, ref.digest)).equals(Buffer.from(bytes))).toBe(true);
    expect(await artifactStore.write(scope, bytes, meta)).toEqual(ref);
    expect(await artifactStore.usage(scope)).toBe(800);
    expect(await artifactStore.has(scope, ref.digest)).toBe(true);
    await expectCode(artifactStore.write(scope, new Uint8Array(800).fill(1), meta), 'QUOTA_EXCEEDED');
    expect(await artifactStore.usage(scope)).toBe(800);
    const other = { namespace, runId: 'run-b' };
    expect(await artifactStore.has(other, ref.digest)).toBe(false);
    await expectCode(artifactStore.read(other, ref), 'NOT_FOUND');
    await artifactStore.write(other, new Uint8Array(800).fill(1), meta);
    await expectCode(artifactStore.write({ namespace: 'someone-else', runId: 'r' }, bytes, meta), 'INVALID_INPUT');
    await harness().corruptArtifact(namespace, 'run-a', ref.digest);
    await expectCode(artifactStore.read(scope, ref), 'DIGEST_MISMATCH');
    await storage.close();
  });

  it("treats an artifact's metadata as part of its identity: other metadata for stored bytes is ARTIFACT_CONFLICT", async () => {
    const storage = await openFresh();
    const { artifactStore } = storage;
    const scope = { namespace: storage.record.namespace, runId: 'run-meta' };
    const bytes = Buffer.from('{"same":"bytes"}');
    const ref = await artifactStore.write(scope, bytes, { mediaType: 'application/json', purpose: 'proof-packet' });
    for (const other of [
      { mediaType: 'text/plain', purpose: 'proof-packet' },
      { mediaType: 'application/json', purpose: 'check-output' },
    ]) {
      const error = await expectCode(artifactStore.write(scope, bytes, other), 'ARTIFACT_CONFLICT');
      expect(error.message).toContain(ref.digest);
      expect(error.message).not.toContain('\n');
    }
    // The stored metadata is unchanged, and writing it again returns exactly the stored ref.
    expect(await artifactStore.write(scope, bytes, { mediaType: 'application/json', purpose: 'proof-packet' })).toEqual(ref);
    expect(await artifactStore.usage(scope)).toBe(bytes.length);
    // Another run is another scope: the same bytes may carry other metadata there.
    const elsewhere = await artifactStore.write({ ...scope, runId: 'run-meta-2' }, bytes, { mediaType: 'text/plain', purpose: 'check-output' });
    expect(elsewhere).toEqual({ digest: ref.digest, byteLength: bytes.length, mediaType: 'text/plain', purpose: 'check-output' });
    await storage.close();
  });

  it('survives close and reopen, and refuses a reopen with another policy', async () => {
    const namespace = uniqueNamespace('reopen');
    const first = await harness().open({ namespace });
    await first.eventStore.append('s', 0, [ev('p1'), ev('p2')]);
    const ref = await first.artifactStore.write({ namespace, runId: 'r' }, Buffer.from('kept'), { mediaType: 'text/plain', purpose: 'p' });
    await first.close();
    const second = await harness().open({ namespace });
    expect(second.record).toEqual(first.record);
    expect(Object.isFrozen(second.record)).toBe(true);
    expect(Object.isFrozen(second.record.policy)).toBe(true);
    expect((await second.eventStore.read('s')).map((e) => e.id)).toEqual(['p1', 'p2']);
    expect(Buffer.from(await second.artifactStore.read({ namespace, runId: 'r' }, ref)).toString()).toBe('kept');
    await expectCode(harness().open({ namespace, policy: policyWith({ maxArtifactBytes: 10 }) }), 'STORAGE_MISMATCH');
    expect((await second.eventStore.read('s')).length).toBe(2);
    await second.close();
  });

  it('closes idempotently and refuses every use after close', async () => {
    const storage = await openFresh();
    const scope = { namespace: storage.record.namespace, runId: 'r' };
    await storage.close();
    await storage.close();
    const uses: (() => Promise<unknown>)[] = [
      () => storage.eventStore.append('s', 0, [ev('x')]),
      () => storage.eventStore.read('s'),
      () => storage.eventStore.revision('s'),
      () => storage.eventStore.listStreams(),
      () => storage.eventStore.readAll(),
      () => storage.artifactStore.write(scope, Buffer.from('x'), { mediaType: 'text/plain', purpose: 'p' }),
      () => storage.artifactStore.read(scope, `sha256:${'0'.repeat(64)}`),
      () => storage.artifactStore.has(scope, `sha256:${'0'.repeat(64)}`),
      () => storage.artifactStore.usage(scope),
    ];
    for (const use of uses) await expectCode(use, 'CLOSED');
  });

  it('refuses bad input with one typed error and stores nothing', async () => {
    const storage = await openFresh();
    const store = storage.eventStore;
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const nonJson: unknown[] = [undefined, () => 1, Number.NaN, Infinity, 10n, cycle, new Date(0), { a: [1, undefined] }, '\ud800', new Map()];
    for (const data of nonJson) {
      await expectCode(store.append('s', 0, [ev('ok-first'), { id: 'bad', type: 't', data } as never]), 'NON_JSON_VALUE');
    }
    const invalid: [unknown, unknown, unknown][] = [
      ['', 0, [ev('a')]],
      ['s', -1, [ev('a')]],
      ['s', 1.5, [ev('a')]],
      ['s', 0, []],
      ['s', 0, 'nope'],
      ['s', 0, [{ id: '', type: 't', data: 1 }]],
      ['s', 0, [{ id: 'a', type: 't', data: 1, extra: 2 }]],
      ['s\u0000x', 0, [ev('a')]],
      ['s', 0, [null]],
    ];
    for (const [stream, revision, events] of invalid) {
      await expectCode(store.append(stream as string, revision as number, events as never), 'INVALID_INPUT');
    }
    await expectCode(store.read('s', { fromRevision: -1 }), 'INVALID_INPUT');
    await expectCode(store.readAll({ afterPosition: Number.NaN }), 'INVALID_INPUT');
    await expectCode(storage.artifactStore.read({ namespace: storage.record.namespace, runId: 'r' }, 'sha256:nothex' as never), 'INVALID_INPUT');
    expect(await store.readAll()).toEqual([]);
    expect(await store.listStreams()).toEqual([]);
    await expectCode(harness().open({ namespace: uniqueNamespace('p'), policy: { ...defaultStoragePolicy, extra: 1 } as never }), 'POLICY_VIOLATION');
    await expectCode(
      harness().open({ namespace: uniqueNamespace('p'), policy: { ...defaultStoragePolicy, schemaVersion: 2 } as never }),
      'UNSUPPORTED_SCHEMA_VERSION',
    );
    await expectCode(harness().open({ namespace: uniqueNamespace('p'), policy: policyWith({ maxArtifactBytes: -1 }) }), 'POLICY_VIOLATION');
    await expectCode(harness().open({ namespace: uniqueNamespace('p'), knownSecrets: ['abc'] }), 'INVALID_INPUT');
    await storage.close();
  });

  it('round-trips any JSON value exactly (property)', async () => {
    const storage = await openFresh(policyWith({ sensitiveContent: { marked: 'redact', exact: 'reject', freeText: 'allow' } }));
    const store = storage.eventStore;
    let revision = 0;
    const json = fc.jsonValue({ maxDepth: 4 }).filter((value) => !canonicalJson(value).includes('$sensitive'));
    await fc.assert(
      fc.asyncProperty(fc.array(json, { minLength: 1, maxLength: 4 }), async (values) => {
        const ids = values.map(() => `p-${revision}-${Math.random().toString(36).slice(2)}`);
        const batch = values.map((data, i) => ev(ids[i]!, data as JsonValue));
        const result = await store.append('prop', revision, batch);
        expect(result).toEqual({ revision: revision + values.length, written: true });
        const read = await store.read('prop', { fromRevision: revision });
        expect(read.map((e) => canonicalJson(e.data))).toEqual(values.map((v) => canonicalJson(v)));
        expect(await store.append('prop', revision, batch)).toEqual({ revision: result.revision, written: false });
        revision = result.revision;
      }),
      { numRuns: 40 },
    );
    await storage.close();
  });

  it('keeps a stream equal to a model under random appends at random revisions (property)', async () => {
    const storage = await openFresh();
    const store = storage.eventStore;
    const model: string[] = [];
    let counter = 0;
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: 6 }), fc.integer({ min: 1, max: 3 }), async (expected, size) => {
        const ids = Array.from({ length: size }, () => `m${(counter += 1)}`);
        const attempt = store.append(
          'model',
          expected,
          ids.map((id) => ev(id)),
        );
        if (expected === model.length) {
          expect(await attempt).toEqual({ revision: model.length + size, written: true });
          model.push(...ids);
        } else {
          await expectCode(attempt, 'REVISION_CONFLICT');
        }
        expect((await store.read('model')).map((e) => e.id)).toEqual(model);
      }),
      { numRuns: 40 },
    );
    await storage.close();
  });
}
