import { expect, it } from 'vitest';
import {
  ApprovalSubjectError,
  createAcceptedResultRecord,
  createApprovalCallbackGate,
  createGraphExecutor,
  createStoredCallbackClient,
  resolveAcceptedResult,
  resolveApproval,
  writeProofArtifact,
  type AcceptedResultBinding,
  type ApprovalSubjectInput,
  type CallbackGateDefinition,
  type Sha256Digest,
  type WorkspaceAnchor,
} from '../../src/runtime/index.js';
import type { RunStorage } from '../../src/storage/index.js';
import { fixedClock, sha256Digest } from '../../src/core/index.js';
import { dag, node, required, startRun, writePermission } from './fixtures.js';
import { describeEachStore } from './stores.js';

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

async function completedRun(storage: RunStorage, runId: string) {
  const graph = dag([required('a'), required('b')]);
  const plan = await startRun(storage, runId, graph);
  const executor = await createGraphExecutor({
    runId,
    graph,
    storage,
    nodes: { a: node(() => ({ verdict: 'pass' })), b: node(() => ({ verdict: 'pass' })) },
    engines: [],
  });
  expect((await executor.run()).kind).toBe('complete');
  const proofArtifact = await writeProofArtifact(storage.artifactStore, { namespace: storage.record.namespace, runId }, { tests: 3 });
  const binding: AcceptedResultBinding = {
    inputHashes: { proposal: d('1') },
    proofScope: { kind: 'change', paths: ['src'] },
    proofArtifact,
    graph: { definitionDigest: plan.plan.graph.definitionDigest, typeVersion: plan.plan.graph.typeVersion },
    workspaceAnchor: anchor,
    result: { verdict: 'pass' },
    reviewerIdentity: { provider: 'p', model: 'm' },
  };
  return { graph, plan, binding };
}

describeEachStore('proof records and approvals', (newStore) => {
  it('writes the known-answer proof packet; field order does not change the digest', async () => {
    const storage = await newStore().open();
    const scope = { namespace: storage.record.namespace, runId: 'p1' };
    const ref = await writeProofArtifact(storage.artifactStore, scope, { inputs: { proposal: d('1') }, result: { passed: true, tests: 21 } });
    expect(ref).toEqual({
      digest: 'sha256:db5b2a0eb5743b52617a78335dbc003a9a10619dc6cab05f6099f81c9b7fb329',
      byteLength: 133,
      mediaType: 'application/json',
      purpose: 'proof-packet',
    });
    const reordered = await writeProofArtifact(storage.artifactStore, scope, { result: { tests: 21, passed: true }, inputs: { proposal: d('1') } });
    expect(reordered.digest).toBe(ref.digest);
    const changed = await writeProofArtifact(storage.artifactStore, scope, { inputs: { proposal: d('1') }, result: { passed: true, tests: 22 } });
    expect(changed.digest).not.toBe(ref.digest);
    expect(new TextDecoder().decode(await storage.artifactStore.read(scope, ref))).toBe(
      `{"inputs":{"proposal":"${d('1')}"},"result":{"passed":true,"tests":21}}`,
    );
  });

  it('records an accepted result once, resolves it while every bound value matches, and waits on any change', async () => {
    const store = newStore();
    const storage = await store.open();
    const { binding } = await completedRun(storage, 'acc');
    const record = await createAcceptedResultRecord(storage, 'acc', 'dag/a/1', binding);
    expect(record.binding.reviewerFingerprint).toMatch(/^sha256:/);
    expect(record.binding.reviewerIdentity).toEqual({ provider: 'p', model: 'm' });
    expect(await createAcceptedResultRecord(storage, 'acc', 'dag/a/1', binding)).toEqual(record);
    await expect(createAcceptedResultRecord(storage, 'acc', 'dag/a/1', { ...binding, inputHashes: { proposal: d('2') } })).rejects.toMatchObject({
      code: 'REVISION_CONFLICT',
    });
    const reopened = await store.open();
    const { result: _result, ...query } = binding;
    expect(await resolveAcceptedResult(reopened, 'acc', 'dag/a/1', query)).toMatchObject({ kind: 'accepted', record: { digest: record.digest } });
    const changes: [string, Partial<AcceptedResultBinding>][] = [
      ['inputHashes', { inputHashes: { proposal: d('3') } }],
      ['proofScope', { proofScope: { kind: 'change', paths: ['docs'] } }],
      ['proofArtifact', { proofArtifact: { ...binding.proofArtifact, digest: d('4') } }],
      ['workspaceAnchor', { workspaceAnchor: { ...anchor, fingerprint: 'c'.repeat(64) } }],
      ['reviewer', { reviewerIdentity: { provider: 'p', model: 'other' } }],
      ['graph', { graph: { ...binding.graph, typeVersion: 2 } }],
      ['result', { result: { verdict: 'fail' } }],
    ];
    for (const [field, change] of changes) {
      const outcome = await resolveAcceptedResult(reopened, 'acc', 'dag/a/1', { ...query, ...change });
      expect(outcome.kind, field).toBe('wait');
    }
    expect(await resolveAcceptedResult(reopened, 'acc', 'dag/b/1', query)).toMatchObject({ kind: 'wait' });
  });

  it('refuses accepted results the run does not prove', async () => {
    const storage = await newStore().open();
    const { binding } = await completedRun(storage, 'bad');
    const expectInvalid = (promise: Promise<unknown>) => expect(promise).rejects.toMatchObject({ code: 'INVALID_STORED_VALUE' });
    await expectInvalid(createAcceptedResultRecord(storage, 'bad', 'dag/zzz/1', binding));
    await expectInvalid(createAcceptedResultRecord(storage, 'bad', 'dag/a/1', { ...binding, result: { verdict: 'fail' } }));
    await expectInvalid(createAcceptedResultRecord(storage, 'bad', 'dag/a/1', { ...binding, graph: { ...binding.graph, definitionDigest: d('9') } }));
    const graph = dag([required('x')]);
    await startRun(storage, 'failed-run', graph);
    const executor = await createGraphExecutor({
      runId: 'failed-run',
      graph,
      storage,
      nodes: {
        x: node(() => {
          throw new Error('no');
        }),
      },
      engines: [],
    });
    expect((await executor.run()).kind).toBe('failed');
    const proofArtifact = await writeProofArtifact(storage.artifactStore, { namespace: storage.record.namespace, runId: 'failed-run' }, {});
    await expectInvalid(
      createAcceptedResultRecord(storage, 'failed-run', 'dag/x/1', {
        ...binding,
        proofArtifact,
        graph: { definitionDigest: graph.definitionDigest, typeVersion: 1 },
      }),
    );
  });

  it('runs an approval through post, claim, submit and resolve, fencing stale claims', async () => {
    const store = newStore();
    const storage = await store.open();
    const { binding } = await completedRun(storage, 'ap');
    const subject: ApprovalSubjectInput = {
      workspaceAnchor: null,
      inputArtifactHashes: binding.inputHashes,
      proofScope: binding.proofScope,
      proofArtifact: binding.proofArtifact,
      proposedOutput: new TextEncoder().encode('x'.repeat(10_000)),
      effectivePermissions: [{ name: writePermission.name, scope: { paths: ['src'] } }],
    };
    const definition: CallbackGateDefinition = {
      gateId: 'apply',
      gateVersion: 1,
      decisionText: 'Apply?',
      input: null,
      responseSchema: { type: 'object', properties: { kind: { type: 'string', enum: ['allow', 'deny'] } }, required: ['kind'] },
    };
    const request = createApprovalCallbackGate(definition, subject);
    expect(request.subjectDigest).toMatch(/^sha256:/);
    // The client's clock moves only when the test moves it: a lease runs out because the test says so.
    const clock = fixedClock(new Date().toISOString());
    const client = await createStoredCallbackClient(storage, 'ap', { clock });
    await client.post(request, subject);
    await client.post(request, subject);
    expect((await client.listPending()).map((item) => item.requestId)).toEqual([request.requestId]);
    const first = await client.claim(request.requestId, 'alice', { leaseMs: 1 });
    expect(first.ok).toBe(true);
    clock.advance(5);
    const second = await client.claim(request.requestId, 'bob');
    expect(second.ok).toBe(true);
    expect(await client.claim(request.requestId, 'carol')).toEqual({ ok: false, reason: 'the request is claimed by bob' });
    if (!first.ok || !second.ok) throw new Error('claims failed');
    expect(await client.submit(request.requestId, first.claimToken, 'alice', request.digest, { kind: 'allow' }, { id: 'alice' })).toMatchObject({
      ok: false,
      kind: 'stale-claim',
    });
    expect(await client.submit(request.requestId, second.claimToken, 'bob', request.digest, { kind: 'maybe' }, { id: 'bob' })).toMatchObject({
      ok: false,
      kind: 'invalid',
    });
    const before = await storage.eventStore.revision(`run/ap/callback/${request.requestId}`);
    const done = await client.submit(request.requestId, second.claimToken, 'bob', request.digest, { kind: 'allow' }, { id: 'bob', kind: 'human' });
    expect(done.ok).toBe(true);
    expect(await storage.eventStore.revision(`run/ap/callback/${request.requestId}`)).toBe(before + 2);
    const history = await client.history(request.requestId);
    expect(history.map((entry) => entry.kind)).toEqual(['callback-posted', 'callback-claimed', 'callback-claimed', 'callback-submitted', 'approval-recorded']);
    expect(JSON.stringify(history)).not.toContain('x'.repeat(100));
    expect(await client.listPending()).toEqual([]);

    const reopened = await store.open();
    expect(await resolveApproval(reopened, 'ap', { request, ...subject })).toMatchObject({ kind: 'allow' });
    const changedOutput = { ...subject, proposedOutput: new TextEncoder().encode('other') };
    expect((await resolveApproval(reopened, 'ap', { request, ...changedOutput })).kind).toBe('wait');
    expect((await resolveApproval(reopened, 'ap', { request, ...subject, workspaceAnchor: anchor })).kind).toBe('wait');
    expect((await resolveApproval(reopened, 'ap', { request: { ...request, decisionText: 'Other?' }, ...subject })).kind).toBe('wait');
  });

  it('checks effective permissions against the plan: post throws, submit is invalid, resolve waits', async () => {
    const storage = await newStore().open();
    const { binding } = await completedRun(storage, 'perm');
    const base = {
      workspaceAnchor: null,
      inputArtifactHashes: binding.inputHashes,
      proofScope: binding.proofScope,
      proofArtifact: binding.proofArtifact,
      proposedOutput: new Uint8Array([1, 2, 3]),
    };
    const definition: CallbackGateDefinition = { gateId: 'g', gateVersion: 1, decisionText: 'ok?', input: {}, responseSchema: { type: 'object' } };
    const client = await createStoredCallbackClient(storage, 'perm');
    const wide: ApprovalSubjectInput = { ...base, effectivePermissions: [{ name: 'workspace.write', scope: { paths: ['src', 'docs'] } }] };
    const wideRequest = createApprovalCallbackGate(definition, wide);
    const error = await client.post(wideRequest, wide).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ApprovalSubjectError);
    expect(error).toMatchObject({ code: 'SUBJECT_MISMATCH' });
    expect((await resolveApproval(storage, 'perm', { request: wideRequest, ...wide })).kind).toBe('wait');
    const none: ApprovalSubjectInput = { ...base, effectivePermissions: [] };
    await expect(client.post(createApprovalCallbackGate(definition, none), wide)).rejects.toMatchObject({ code: 'SUBJECT_MISMATCH' });

    // A subject stored before a check tightened (written directly) is invalid at submit and waits at resolve.
    const request = createApprovalCallbackGate(definition, wide);
    await storage.eventStore.append(`run/perm/callback/${request.requestId}`, 0, [
      {
        id: 'forged-post',
        type: 'callback-posted',
        data: JSON.parse(JSON.stringify({ request, subject: { ...wide, proposedOutput: { digest: sha256Digest(new Uint8Array([1, 2, 3])), byteLength: 3 } } })),
      },
    ]);
    const claim = await client.claim(request.requestId, 'c');
    if (!claim.ok) throw new Error(claim.reason);
    expect(await client.submit(request.requestId, claim.claimToken, 'c', request.digest, { kind: 'allow' }, { id: 'c' })).toMatchObject({
      ok: false,
      kind: 'invalid',
      reason: expect.stringContaining('not admitted'),
    });
  });
});
