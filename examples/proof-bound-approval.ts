/**
 * Proof-bound acceptance and approval, end to end on the embedded store.
 *
 * A two-node review graph runs; one proof packet is stored; two accepted-result
 * records cite it; an approval is posted, claimed and answered; then the store
 * is reopened and the records are resolved again with the same bytes and with
 * one changed value each. Prints one JSON report line.
 *
 * The workspace anchor here is made-up caller data (no checkout is bound); a
 * real host captures one with captureWorkspaceAnchor and verifies it first.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  compileGraph,
  createAcceptedResultRecord,
  createApprovalCallbackGate,
  createGraphExecutor,
  createStoredCallbackClient,
  dagGraphType,
  defaultStoragePolicy,
  persistRunDefinition,
  resolveAcceptedResult,
  resolveApproval,
  resolveGraphPlan,
  writeProofArtifact,
  type AcceptedResultBinding,
  type ApprovalSubjectInput,
  type CallbackGateDefinition,
  type GraphNode,
  type Sha256Digest,
  type WorkspaceAnchor,
} from 'proofgate';
import { createLocalRunStorage } from 'proofgate/storage/local';

const RUN = 'example-approval-run';
const NAMESPACE = 'example-approval';
const repeated = (hex: string): Sha256Digest => `sha256:${hex.repeat(64)}`;

const reviewers = {
  design: { provider: 'local', model: 'design-reviewer' },
  tests: { provider: 'local', model: 'test-reviewer' },
} as const;

const graph = compileGraph(dagGraphType, {
  id: 'example-review',
  definitionVersion: 1,
  data: { globalConcurrency: 2, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: 0 },
  nodes: Object.keys(reviewers).map((id) => ({ id, data: { kind: 'required' as const, key: null } })),
  edges: [],
});

const release = { source: 'npm:@example/approval-demo', version: '0.1.0', digest: repeated('7') };
const grant = { name: 'workspace.write', scope: { paths: ['lib'] } };
const plan = resolveGraphPlan(graph.describe(), {
  package: release,
  admission: { package: release, permissions: [grant] },
  executionLanes: [],
});

const anchor: WorkspaceAnchor = {
  schemaVersion: 1,
  root: '/demo',
  repositoryId: '/demo/.git',
  head: 'a'.repeat(40),
  fingerprint: 'b'.repeat(64),
  scope: null,
  files: [],
};

function reviewer(): GraphNode {
  return {
    prompt: 'review the proposal',
    scratchDirectory: null,
    workspace: { mode: 'none', directory: null, allowedPaths: [] },
    trustedCaller: { host: 'example' },
    permissions: [],
    policy: {
      inputBytes: 10_000,
      outputBytes: 10_000,
      timeoutMs: 2_000,
      teardownGraceMs: 50,
      memoryBytes: 50_000_000,
      filesChanged: 0,
      linesChanged: 0,
      callTokens: null,
    },
    resultContract: { type: 'object', required: ['verdict'] },
    runData: () => ({ verdict: 'pass' }),
    parseResult: null,
    tokenBudget: null,
    decideAction: () => ({ kind: 'allow' }),
  };
}

const gate: CallbackGateDefinition = {
  gateId: 'apply-output',
  gateVersion: 1,
  decisionText: 'May these reviewed bytes be applied?',
  responseSchema: { type: 'object', properties: { kind: { type: 'string', enum: ['allow', 'deny'] } }, required: ['kind'] },
  input: { change: 'demo' },
};

const folder = mkdtempSync(join(tmpdir(), 'proofgate-example-'));
const open = () => createLocalRunStorage({ directory: folder, namespace: NAMESPACE, policy: defaultStoragePolicy });

try {
  const storage = open();
  await persistRunDefinition(storage, {
    runId: RUN,
    eventId: `${RUN}:started`,
    timestamp: '2026-02-01T12:00:00.000Z',
    graphDefinition: graph.definition,
    resolvedPlan: plan,
    resolvedInputs: {},
    workspaceBinding: null,
    hostBinding: null,
  });
  const firstWave = graph.decide(graph.initialState());
  const positionOf = (nodeId: string): string => {
    const command = firstWave.find((entry) => entry.kind === 'dispatch' && entry.nodeId === nodeId);
    if (command?.kind !== 'dispatch') throw new Error(`no dispatch for ${nodeId}`);
    return command.position;
  };

  const executor = await createGraphExecutor({
    runId: RUN,
    graph,
    storage,
    nodes: { design: reviewer(), tests: reviewer() },
    engines: [],
  });
  const outcome = await executor.run(new AbortController().signal);
  if (outcome.kind !== 'complete') throw new Error(`run ended ${outcome.kind}: ${outcome.reason}`);

  const proof = await writeProofArtifact(
    storage.artifactStore,
    { namespace: storage.record.namespace, runId: RUN },
    {
      result: { tests: 21, passed: true },
      inputs: { proposal: repeated('1') },
    },
  );
  const shared: Omit<AcceptedResultBinding, 'result' | 'reviewerIdentity'> = {
    inputHashes: { proposal: repeated('1') },
    proofScope: { kind: 'change', paths: ['lib'] },
    proofArtifact: proof,
    graph: { definitionDigest: plan.plan.graph.definitionDigest, typeVersion: plan.plan.graph.typeVersion },
    workspaceAnchor: anchor,
  };
  const records = [];
  for (const [nodeId, identity] of Object.entries(reviewers)) {
    records.push(await createAcceptedResultRecord(storage, RUN, positionOf(nodeId), { ...shared, result: { verdict: 'pass' }, reviewerIdentity: identity }));
  }

  const subject: ApprovalSubjectInput = {
    workspaceAnchor: anchor,
    inputArtifactHashes: shared.inputHashes,
    proofScope: shared.proofScope,
    proofArtifact: proof,
    proposedOutput: new TextEncoder().encode('reviewed output bytes'),
    effectivePermissions: [grant],
  };
  const request = createApprovalCallbackGate(gate, subject);
  const callbacks = await createStoredCallbackClient(storage, RUN);
  await callbacks.post(request, subject);
  const claim = await callbacks.claim(request.requestId, 'maintainer-desk');
  if (!claim.ok) throw new Error(`claim refused: ${claim.reason}`);
  const answer = await callbacks.submit(
    request.requestId,
    claim.claimToken,
    'maintainer-desk',
    request.digest,
    { kind: 'allow' },
    { id: 'maintainer', kind: 'human' },
  );
  if (!answer.ok) throw new Error(`answer refused: ${answer.reason}`);
  await storage.close();

  const again = open();
  const callbacksAgain = await createStoredCallbackClient(again, RUN);
  const edited: ApprovalSubjectInput = { ...subject, proposedOutput: new TextEncoder().encode('edited output bytes') };
  const editedRequest = createApprovalCallbackGate(gate, edited);
  await callbacksAgain.post(editedRequest, edited);

  const designQuery = { ...shared, reviewerIdentity: reviewers.design };
  const sameAccepted = await resolveAcceptedResult(again, RUN, positionOf('design'), designQuery);
  const movedAnchor = await resolveAcceptedResult(again, RUN, positionOf('design'), {
    ...designQuery,
    workspaceAnchor: { ...anchor, fingerprint: 'c'.repeat(64) },
  });
  const sameApproval = await resolveApproval(again, RUN, { request, ...subject });
  const editedApproval = await resolveApproval(again, RUN, { request, ...edited });
  const history = await callbacksAgain.history(request.requestId);
  const pending = await callbacksAgain.listPending();
  await again.close();

  const report = {
    proof: {
      digest: proof.digest,
      byteLength: proof.byteLength,
      recordsShareDigest: records.every((record) => record.binding.proofArtifact.digest === proof.digest),
    },
    callback: {
      responseSurvivedReopen: history.some((entry) => entry.kind === 'callback-submitted'),
      changedRequest: pending.some((item) => item.requestId === editedRequest.requestId),
    },
    acceptedResult: { unchanged: sameAccepted.kind, changedAnchor: movedAnchor.kind },
    approval: { unchanged: sameApproval.kind, changedOutput: editedApproval.kind },
  };
  console.log(JSON.stringify(report));
} finally {
  rmSync(folder, { recursive: true, force: true });
}
