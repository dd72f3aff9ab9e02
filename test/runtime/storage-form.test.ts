import { expect, it } from 'vitest';
import {
  createAcceptedResultRecord,
  createApprovalCallbackGate,
  createGraphExecutor,
  createStoredCallbackClient,
  persistRunDefinition,
  readRunEvents,
  resolveAcceptedResult,
  resolveApproval,
  writeProofArtifact,
  type AcceptedResultBinding,
  type ApprovalSubjectInput,
  type CallbackGateDefinition,
  type Sha256Digest,
  type WorkspaceAnchor,
} from '../../src/runtime/index.js';
import { canonicalBytes, digestJson, sha256Digest, type JsonValue } from '../../src/core/index.js';
import type { RunStorage, StoredEvent } from '../../src/storage/index.js';
import { dag, node, optional, planFor, policy, required, startRun, writePermission } from './fixtures.js';
import { describeEachStore, testPolicy } from './stores.js';

const d = (digit: string) => `sha256:${digit.repeat(64)}` as Sha256Digest;
const anchor: WorkspaceAnchor = {
  schemaVersion: 1,
  root: '/w',
  repositoryId: '/w/.git',
  head: 'a'.repeat(40),
  fingerprint: 'b'.repeat(64),
  scope: null,
  files: [],
};
const SECRET = 'kn0wn-s3cret-VALUE';

async function everything(storage: RunStorage): Promise<StoredEvent[]> {
  return storage.eventStore.readAll();
}

function dataOf(events: readonly StoredEvent[], type: string): { [key: string]: JsonValue }[] {
  return events.filter((event) => event.type === type).map((event) => event.data as { [key: string]: JsonValue });
}

/** Every digest a stored record carries is the digest of its stored bytes. */
function expectDigestOfStored(record: { [key: string]: JsonValue }): void {
  const { digest, ...body } = record;
  expect(digest).toBe(digestJson(body));
}

describeEachStore('runtime digests match the stored bytes', (newStore) => {
  it('an executor digests a redacted result as stored, and downstream nodes see the stored form', async () => {
    const store = newStore();
    const storage = await store.open();
    const graph = dag([required('a'), required('b')], [{ from: 'a', to: 'b' }]);
    await startRun(storage, 'redact', graph);
    let seen: JsonValue = null;
    const executor = await createGraphExecutor({
      runId: 'redact',
      graph,
      storage,
      engines: [],
      nodes: {
        a: node(() => ({ log: 'password=hunter2', n: 1 })),
        b: node(({ input }) => {
          seen = input.upstream.a as JsonValue;
          return 'ok';
        }),
      },
    });
    expect((await executor.run()).kind).toBe('complete');
    const reopened = await store.open();
    const completed = (await readRunEvents(reopened.eventStore, 'redact')).filter((event) => event.type === 'attempt-completed');
    const a = completed.find((event) => event.data.nodeId === 'a');
    expect(a?.data.result).toEqual({ log: 'password=[redacted:assignment]', n: 1 });
    expect(a?.data.resultDigest).toBe(sha256Digest(canonicalBytes(a?.data.result)));
    expect(a?.data.outputBytes).toBe(canonicalBytes(a?.data.result).byteLength);
    expect(seen).toEqual({ log: 'password=[redacted:assignment]', n: 1 });
    for (const event of completed) expect(event.data.resultDigest).toBe(sha256Digest(canonicalBytes(event.data.result)));
    expect(JSON.stringify(await everything(reopened))).not.toContain('hunter2');
  });

  it('a host settling a paused attempt with secret-looking text stores a digest of the stored result', async () => {
    const storage = await newStore().open();
    const graph = dag([required('a')]);
    await startRun(storage, 'host', graph);
    const executor = await createGraphExecutor({
      runId: 'host',
      graph,
      storage,
      engines: [],
      nodes: { a: node(() => 'draft', { decideAction: () => ({ kind: 'ask', reason: 'apply?' }) }) },
    });
    expect((await executor.run()).kind).toBe('paused');
    await executor.resolvePaused('dag/a/1', { kind: 'completed', result: { note: 'api_key=xyz987' } });
    const [event] = dataOf(await everything(storage), 'attempt-completed');
    expect(event?.result).toEqual({ note: 'api_key=[redacted:assignment]' });
    expect(event?.resultDigest).toBe(digestJson(event?.result));
  });

  it('accepted results with redacted text: the record matches its digest, resolves, and a live query with the same text is accepted', async () => {
    const store = newStore();
    const storage = await store.open();
    const graph = dag([required('a')]);
    const plan = await startRun(storage, 'acc', graph);
    const executor = await createGraphExecutor({ runId: 'acc', graph, storage, engines: [], nodes: { a: node(() => ({ log: 'password=hunter2' })) } });
    expect((await executor.run()).kind).toBe('complete');
    const proofArtifact = await writeProofArtifact(storage.artifactStore, { namespace: storage.record.namespace, runId: 'acc' }, { tests: 1 });
    const binding: AcceptedResultBinding = {
      inputHashes: { proposal: d('1') },
      proofScope: { kind: 'change', note: 'secret: opensesame' },
      proofArtifact,
      graph: { definitionDigest: plan.plan.graph.definitionDigest, typeVersion: plan.plan.graph.typeVersion },
      workspaceAnchor: anchor,
      result: { log: 'password=hunter2' },
      reviewerIdentity: { provider: 'p', note: 'token=abc123' },
    };
    const record = await createAcceptedResultRecord(storage, 'acc', 'dag/a/1', binding);
    expect(record.binding.reviewerIdentity).toEqual({ provider: 'p', note: 'token=[redacted:assignment]' });
    expect(record.binding.result).toEqual({ log: 'password=[redacted:assignment]' });
    expect(record.resultDigest).toBe(digestJson(record.binding.result));
    expect(record.binding.reviewerFingerprint).toBe(digestJson(record.binding.reviewerIdentity));
    const [stored] = dataOf(await everything(storage), 'accepted-result-recorded');
    expect(stored).toEqual(record);
    expectDigestOfStored(stored ?? {});
    // The same complete record again is still a no-op.
    expect(await createAcceptedResultRecord(storage, 'acc', 'dag/a/1', binding)).toEqual(record);

    const reopened = await store.open();
    const { result, ...query } = binding;
    expect(await resolveAcceptedResult(reopened, 'acc', 'dag/a/1', query)).toMatchObject({ kind: 'accepted', record: { digest: record.digest } });
    expect(await resolveAcceptedResult(reopened, 'acc', 'dag/a/1', { ...query, result })).toMatchObject({ kind: 'accepted' });
    // The stored (already redacted) form resolves too; other values still wait.
    expect((await resolveAcceptedResult(reopened, 'acc', 'dag/a/1', { ...query, reviewerIdentity: record.binding.reviewerIdentity })).kind).toBe('accepted');
    expect((await resolveAcceptedResult(reopened, 'acc', 'dag/a/1', { ...query, reviewerIdentity: { provider: 'p', note: 'other' } })).kind).toBe('wait');
    expect((await resolveAcceptedResult(reopened, 'acc', 'dag/a/1', { ...query, result: { log: 'other' } })).kind).toBe('wait');
    expect(JSON.stringify(await everything(reopened))).not.toMatch(/hunter2|abc123|opensesame/);
  });

  it('the audit repro: a reviewer identity the store redacts still gives a record that resolves', async () => {
    const store = newStore();
    const storage = await store.open();
    const graph = dag([required('a')]);
    const plan = await startRun(storage, 'repro', graph);
    const executor = await createGraphExecutor({ runId: 'repro', graph, storage, engines: [], nodes: { a: node(() => ({ verdict: 'pass' })) } });
    expect((await executor.run()).kind).toBe('complete');
    const proofArtifact = await writeProofArtifact(storage.artifactStore, { namespace: storage.record.namespace, runId: 'repro' }, {});
    const query = {
      inputHashes: {},
      proofScope: {},
      proofArtifact,
      workspaceAnchor: anchor,
      reviewerIdentity: { note: 'token=abc123' },
      graph: { definitionDigest: plan.plan.graph.definitionDigest, typeVersion: plan.plan.graph.typeVersion },
    };
    const record = await createAcceptedResultRecord(storage, 'repro', 'dag/a/1', { ...query, result: { verdict: 'pass' } });
    expect(await resolveAcceptedResult(await store.open(), 'repro', 'dag/a/1', query)).toMatchObject({ kind: 'accepted', record: { digest: record.digest } });
  });

  it('approvals: the answer and its record are stored as hashed; request bytes the policy would change are refused', async () => {
    const store = newStore({ knownSecrets: [SECRET] });
    const storage = await store.open();
    const graph = dag([required('a')]);
    await startRun(storage, 'ap', graph);
    const proofArtifact = await writeProofArtifact(storage.artifactStore, { namespace: storage.record.namespace, runId: 'ap' }, { tests: 1 });
    const subject: ApprovalSubjectInput = {
      workspaceAnchor: null,
      inputArtifactHashes: { proposal: d('1') },
      proofScope: { kind: 'change' },
      proofArtifact,
      proposedOutput: new TextEncoder().encode('patch'),
      effectivePermissions: [writePermission],
    };
    const definition: CallbackGateDefinition = { gateId: 'apply', gateVersion: 1, decisionText: 'Apply?', input: null, responseSchema: { type: 'object' } };
    const client = await createStoredCallbackClient(storage, 'ap');

    const leaky = createApprovalCallbackGate({ ...definition, input: { hint: 'password=hunter2' } }, subject);
    await expect(client.post(leaky, subject)).rejects.toMatchObject({ code: 'POLICY_VIOLATION' });
    const leakySubject = { ...subject, proofScope: { note: `see ${SECRET}` } };
    await expect(client.post(createApprovalCallbackGate(definition, leakySubject), leakySubject)).rejects.toMatchObject({ code: 'POLICY_VIOLATION' });
    expect(await client.listPending()).toEqual([]);

    const request = createApprovalCallbackGate(definition, subject);
    await client.post(request, subject);
    expect(await client.claim(request.requestId, `who-${SECRET}`)).toMatchObject({ ok: false });
    const claim = await client.claim(request.requestId, 'bob');
    if (!claim.ok) throw new Error(claim.reason);
    const refused = await client.submit(request.requestId, claim.claimToken, 'bob', request.digest, { kind: 'allow' }, { id: 'bob', note: SECRET });
    expect(refused).toMatchObject({ ok: false, kind: 'invalid' });
    if (refused.ok) throw new Error('unreachable');
    expect(refused.reason).toContain('KNOWN_SECRET');
    expect(refused.reason).not.toContain(SECRET);

    const done = await client.submit(
      request.requestId,
      claim.claimToken,
      'bob',
      request.digest,
      { kind: 'allow', comment: 'token=abc123' },
      { id: 'bob', note: 'password: hunter2' },
    );
    if (!done.ok) throw new Error(done.reason);
    expect(done.record.actor).toEqual({ id: 'bob', note: 'password: [redacted:assignment]' });
    expect(done.record.decision).toEqual({ kind: 'allow', comment: 'token=[redacted:assignment]' });
    const [stored] = dataOf(await everything(storage), 'approval-recorded');
    expect(stored?.record).toEqual(done.record);
    expectDigestOfStored(stored?.record as { [key: string]: JsonValue });
    const reopened = await store.open();
    expect(await resolveApproval(reopened, 'ap', { request, ...subject })).toMatchObject({ kind: 'allow', record: { digest: done.record.digest } });
    const all = JSON.stringify(await everything(reopened));
    expect(all).not.toContain(SECRET);
    expect(all).not.toMatch(/hunter2|abc123/);
  });

  it('refuses a run definition whose plan the policy would redact, storing nothing', async () => {
    const storage = await newStore().open();
    const graph = dag([required('a')]);
    const plan = planFor(graph, [{ name: 'net', scope: { header: 'Authorization: Bearer abc.def' } }]);
    await expect(
      persistRunDefinition(storage, {
        runId: 'leaky-plan',
        eventId: 'leaky-plan-started',
        timestamp: '2026-01-01T00:00:00.000Z',
        graphDefinition: graph.definition,
        resolvedPlan: plan,
        resolvedInputs: {},
        workspaceBinding: null,
        hostBinding: null,
      }),
    ).rejects.toMatchObject({ code: 'POLICY_VIOLATION' });
    expect(await storage.eventStore.revision('run/leaky-plan')).toBe(0);
  });
});

describeEachStore('a known secret in a node result or error', (newStore) => {
  it('fails the attempt with a reason naming the code and path, records the run, and stores the secret nowhere', async () => {
    const store = newStore({ knownSecrets: [SECRET] });
    const storage = await store.open();
    const graph = dag([required('res'), required('err'), required('key'), optional('ok')], [], { stopOnError: false });
    await startRun(storage, 'leak', graph);
    const executor = await createGraphExecutor({
      runId: 'leak',
      graph,
      storage,
      engines: [],
      nodes: {
        res: node(() => ({ out: [`value ${SECRET} here`] })),
        err: node(() => {
          throw new Error(`connect failed with ${SECRET}`);
        }),
        key: node(() => ({ [SECRET]: 1 })),
        ok: node(() => 'fine'),
      },
    });
    const outcome = await executor.run();
    expect(outcome.kind).toBe('failed');
    expect(outcome.reason).not.toContain(SECRET);
    const events = await everything(await store.open());
    expect(JSON.stringify(events)).not.toContain(SECRET);
    const failed = new Map(dataOf(events, 'attempt-failed').map((data) => [data.nodeId, data]));
    expect(failed.get('res')).toMatchObject({ failureClass: 'invalid-result', reason: 'result rejected by the storage policy: KNOWN_SECRET at $.out[0]' });
    expect(failed.get('key')).toMatchObject({ failureClass: 'invalid-result', reason: expect.stringContaining('KNOWN_SECRET at $') });
    expect(failed.get('err')).toMatchObject({ failureClass: 'error', reason: 'error text withheld: rejected by the storage policy: KNOWN_SECRET at $' });
    expect(dataOf(events, 'attempt-completed').map((data) => data.nodeId)).toEqual(['ok']);
    expect(events.at(-1)?.type).toBe('run-failed');
    // Running it again does nothing more.
    const again = await createGraphExecutor({
      runId: 'leak',
      graph,
      storage: await store.open(),
      engines: [],
      nodes: { res: node(() => 1), err: node(() => 1), key: node(() => 1), ok: node(() => 1) },
    });
    expect(await again.run()).toEqual(outcome);
    expect((await everything(storage)).length).toBe(events.length);
  });

  it('stops the run on the first refused result when stopOnError is set', async () => {
    const storage = await newStore({ knownSecrets: [SECRET] }).open();
    const graph = dag([required('a'), required('b')], [{ from: 'a', to: 'b' }], { stopOnError: true });
    await startRun(storage, 'stop', graph);
    let bRan = false;
    const executor = await createGraphExecutor({
      runId: 'stop',
      graph,
      storage,
      engines: [],
      nodes: {
        a: node(() => SECRET),
        b: node(() => {
          bRan = true;
          return 1;
        }),
      },
    });
    expect(await executor.run()).toMatchObject({ kind: 'failed' });
    expect(bRan).toBe(false);
    expect(JSON.stringify(await everything(storage))).not.toContain(SECRET);
  });

  it('fails a result the policy rejects as a marked value, and one too large for an event, instead of crashing', async () => {
    const small = { ...testPolicy, maxEventPayloadBytes: 2_000, maxAppendBatchBytes: 3_000 };
    const storage = await newStore({ policy: small }).open();
    const graph = dag([required('marked'), required('big'), required('m1'), required('m2')], [], { stopOnError: false });
    await startRun(storage, 'limits', graph);
    const medium = 'm'.repeat(1_500);
    const executor = await createGraphExecutor({
      runId: 'limits',
      graph,
      storage,
      engines: [],
      nodes: {
        marked: node(() => ({ pin: { $sensitive: '1234' } })),
        big: node(() => 'x'.repeat(5_000), { policy: policy({ outputBytes: 100_000 }) }),
        // Two results that fit one event each but not one batch together.
        m1: node(() => medium),
        m2: node(() => medium),
      },
    });
    expect((await executor.run()).kind).toBe('failed');
    const events = await everything(storage);
    const failed = new Map(dataOf(events, 'attempt-failed').map((data) => [data.nodeId, data]));
    expect(failed.get('marked')).toMatchObject({
      failureClass: 'invalid-result',
      reason: 'result rejected by the storage policy: POLICY_VIOLATION at $.pin (a marked value)',
    });
    expect(failed.get('big')).toMatchObject({ failureClass: 'output-too-large' });
    expect(
      dataOf(events, 'attempt-completed')
        .map((data) => data.nodeId)
        .sort(),
    ).toEqual(['m1', 'm2']);
    expect(events.at(-1)?.type).toBe('run-failed');
  });
});
