import { ProofgateError, assertSha256Digest, digestJson, errorMessage, newId, sha256Hex, systemClock } from '../core/index.js';
import {
  compileGraph,
  createAcceptedResultRecord,
  createGraphExecutor,
  dagGraphType,
  dagPosition,
  persistRunDefinition,
  readAcceptedResult,
  resolveAcceptedResult,
  resolveGraphPlan,
  writeProofArtifact,
  type AcceptedResultBinding,
  type AcceptedResultQuery,
  type AcceptedResultRecord,
  type AcceptedResultResolution,
  type GraphNode,
  type ReadonlyJsonValue,
  type WorkspaceAnchor,
} from '../runtime/index.js';
import type { RunStorage } from '../storage/policy-types.js';
import { defaultAdapters } from './adapters/index.js';
import { describeAttempt, laneRetryPolicy, type LaneAttempt } from './attempts.js';
import { runLaneAttempt, type LaneOutcome } from './lane.js';
import { judgePanel, type PanelLane } from './panel.js';
import type { LaneToolPort, LaneToolReceipt } from './tools/port.js';
import {
  concludeReview,
  prepareReview,
  whileReviewDiffExists,
  withReviewTools,
  type PreparedReview,
  type ReviewBindings,
  type ReviewOptions,
  type ReviewOutcome,
} from './review.js';

export const PANEL_NODE = 'panel';
/** Where a review run keeps its accepted-result record: the panel node's first (only) dispatch. */
export const REVIEW_RECORD_POSITION = dagPosition(PANEL_NODE, 1);
/** The store namespace review runs are kept in by the CLI and the automerge loop. */
export const REVIEW_RUNS_NAMESPACE = 'reviews';
const LANE_NODE_PREFIX = 'lane.';

export interface RuntimeReviewOptions extends ReviewOptions {
  readonly storage: RunStorage;
  /** Default: a fresh `review-...` id. */
  readonly runId?: string;
}

export interface RuntimeReviewResult {
  readonly outcome: ReviewOutcome;
  readonly runId: string;
  /** Position of the panel node: where the accepted-result record lives. */
  readonly position: string;
  readonly record: AcceptedResultRecord;
  /** The binding the record was made with; rebuild it from live values to resolve. */
  readonly binding: AcceptedResultBinding;
}

/** Concurrency key of a reviewer family (a valid key whatever characters the family has). */
function familyKey(family: string): string {
  return `family.${sha256Hex(family).slice(0, 16)}`;
}

function toJson(value: unknown): ReadonlyJsonValue {
  return JSON.parse(JSON.stringify(value)) as ReadonlyJsonValue;
}

/** The workspace anchor's fingerprint: the diff, where it starts and the head (never the moving base tip). */
function anchorFingerprint(diff: string, mergeBaseSha: string, headSha: string): string {
  return digestJson({ diff, merge_base: mergeBaseSha, head: headSha }).slice('sha256:'.length);
}

/**
 * What a review's accepted result is bound to: the head (as the workspace
 * anchor's head), the diff, contract and trusted-config digests, the review
 * scope (merge base, head, mode) and the reviewers' identities. Any of these
 * differing from the live values makes `resolveAcceptedResult` answer `wait`.
 * Nothing here names the base tip: a base that moves on with unrelated
 * commits leaves every binding as it was.
 */
export function reviewBindingParts(
  prepared: Pick<PreparedReview, 'repoDir' | 'inputs'>,
  lanes: readonly Pick<LaneOutcome, 'lane_id' | 'family' | 'context_id'>[],
): Pick<AcceptedResultBinding, 'inputHashes' | 'proofScope' | 'workspaceAnchor' | 'reviewerIdentity'> {
  const { inputs } = prepared;
  const workspaceAnchor: WorkspaceAnchor = {
    schemaVersion: 1,
    root: prepared.repoDir,
    repositoryId: prepared.repoDir,
    head: inputs.headSha,
    fingerprint: anchorFingerprint(inputs.diff.sha256, inputs.mergeBaseSha, inputs.headSha),
    scope: null,
    files: [],
  };
  return {
    inputHashes: {
      diff: assertSha256Digest(inputs.diff.sha256),
      acceptance_contract: assertSha256Digest(inputs.contract.sha256),
      ...(inputs.configDigest === null ? {} : { config: inputs.configDigest }),
    },
    proofScope: { kind: 'review', subject_id: inputs.subjectId, merge_base_sha: inputs.mergeBaseSha, head_sha: inputs.headSha, mode: inputs.mode },
    workspaceAnchor,
    reviewerIdentity: { lanes: lanes.map((lane) => ({ lane_id: lane.lane_id, family: lane.family, context_id: lane.context_id })) },
  };
}

/**
 * Whether the verdict a review run recorded still holds for a change as it
 * is now: the record's own binding with head, merge base, diff, contract and
 * config replaced by the live values, judged by `resolveAcceptedResult`
 * (`accepted` only while every bound value is equal and the run still proves
 * the result; `wait` with the reason otherwise).
 */
export async function resolveReviewRecord(storage: RunStorage, runId: string, live: ReviewBindings): Promise<AcceptedResultResolution> {
  const record = await readAcceptedResult(storage, runId, REVIEW_RECORD_POSITION);
  if (record === null) return { kind: 'wait', reason: `review run ${runId} has no accepted-result record` };
  const { result: _result, reviewerFingerprint: _fingerprint, ...bound } = record.binding;
  const query: AcceptedResultQuery = {
    ...bound,
    inputHashes: { diff: live.diff, acceptance_contract: live.contract, config: live.config },
    proofScope: { ...bound.proofScope, merge_base_sha: live.mergeBaseSha, head_sha: live.headSha },
    workspaceAnchor: { ...bound.workspaceAnchor, head: live.headSha, fingerprint: anchorFingerprint(live.diff, live.mergeBaseSha, live.headSha) },
  };
  return resolveAcceptedResult(storage, runId, REVIEW_RECORD_POSITION, query);
}

/**
 * The panel node's result, which the accepted-result record repeats: the
 * verdict and its reasons, bound to every plan the review's tools ran and
 * every bundle they came back with (absent when nothing was run).
 */
function panelResult(verdict: string, reasons: readonly string[], proofs: readonly LaneToolReceipt[]): ReadonlyJsonValue {
  return toJson({ verdict, reasons, ...(proofs.length === 0 ? {} : { proofs }) });
}

function nodeOf(runData: GraphNode['runData'], timeoutMs: number): GraphNode {
  return {
    prompt: null,
    scratchDirectory: null,
    workspace: { mode: 'none', directory: null, allowedPaths: [] },
    trustedCaller: {},
    permissions: [],
    policy: {
      inputBytes: 4_000_000,
      outputBytes: 1_000_000,
      timeoutMs,
      teardownGraceMs: 1_000,
      memoryBytes: 0,
      filesChanged: 0,
      linesChanged: 0,
      callTokens: null,
    },
    resultContract: null,
    runData,
    parseResult: null,
    tokenBudget: null,
    decideAction: null,
  };
}

/**
 * Run a review as a DAG graph run: one node per lane (concurrency 1 per
 * reviewer family), a panel node after them, lane results stored as node
 * events, and the panel verdict stored as an accepted-result record.
 */
export async function runReviewOnRuntime(options: RuntimeReviewOptions): Promise<RuntimeReviewResult> {
  const prepared = await prepareReview(options);
  return whileReviewDiffExists(prepared, () =>
    withReviewTools(prepared, options, (tools, startedAtMs) => reviewPreparedOnRuntime(prepared, options, tools, startedAtMs)),
  );
}

async function reviewPreparedOnRuntime(
  prepared: PreparedReview,
  options: RuntimeReviewOptions,
  tools: LaneToolPort | null,
  startedAtMs: number,
): Promise<RuntimeReviewResult> {
  const adapters = { ...defaultAdapters(), ...options.adapters };
  const clock = options.clock ?? systemClock;
  const policy = laneRetryPolicy(prepared.config);
  const runId = options.runId ?? newId('review');
  const families = [...new Set(prepared.lanes.map((lane) => lane.family))];
  const graph = compileGraph(dagGraphType, {
    id: 'proofgate-review',
    definitionVersion: 1,
    data: {
      globalConcurrency: Math.max(1, prepared.lanes.length),
      keyedConcurrency: Object.fromEntries(families.map((family) => [familyKey(family), 1])),
      stopOnError: true,
      // A lane that failed in transport is a failed graph attempt, re-dispatched by the graph (see the lane nodes below).
      retryCapPerNode: policy.retries,
    },
    nodes: [
      ...prepared.lanes.map((lane) => ({ id: `${LANE_NODE_PREFIX}${lane.id}`, data: { kind: 'required' as const, key: familyKey(lane.family) } })),
      { id: PANEL_NODE, data: { kind: 'required' as const, key: null } },
    ],
    edges: prepared.lanes.map((lane) => ({ from: `${LANE_NODE_PREFIX}${lane.id}`, to: PANEL_NODE })),
  });
  const packageIdentity = { source: 'npm:proofgate', version: '0.1.0', digest: digestJson({ review: 'lanes-v1' }) };
  const plan = resolveGraphPlan(graph.describe(), { package: packageIdentity, admission: { package: packageIdentity, permissions: [] }, executionLanes: [] });
  await persistRunDefinition(options.storage, {
    runId,
    eventId: `${runId}-started`,
    timestamp: clock.now().toISOString(),
    graphDefinition: graph.definition,
    resolvedPlan: plan,
    resolvedInputs: toJson({
      diff: prepared.inputs.diff.sha256,
      acceptance_contract: prepared.inputs.contract.sha256,
      config: prepared.inputs.configDigest,
      head_sha: prepared.inputs.headSha,
    }) as { [key: string]: ReadonlyJsonValue },
    workspaceBinding: null,
    hostBinding: null,
  });
  const laneOutcomes = new Map<string, LaneOutcome>();
  const laneAttempts = new Map<string, readonly LaneAttempt[]>();
  // A lane that throws (JAIL_UNAVAILABLE, MUTABLE_INPUT, SELF_REVIEW) ends the review with its own error, not INTERNAL.
  let laneError: { readonly error: unknown } | undefined;
  const nodes: Record<string, GraphNode> = {};
  for (const spec of prepared.lanes) {
    // Each graph attempt of a lane node is one dispatch of the lane. A transport failure the retry policy allows to
    // retry fails the graph attempt (its `attempt-failed` event says why), and the graph dispatches the node again;
    // the final attempt completes with the lane's outcome, every attempt listed.
    nodes[`${LANE_NODE_PREFIX}${spec.id}`] = nodeOf(async (context) => {
      if (laneError !== undefined) throw new Error(`the review stopped: ${errorMessage(laneError.error)}`);
      const step = await runLaneAttempt({
        inputs: prepared.inputs,
        spec,
        review: prepared.config,
        repoDir: prepared.repoDir,
        dataDir: prepared.dataDir,
        trusted: prepared.trustedTree,
        adapters,
        attempt: context.input.attempt,
        earlier: laneAttempts.get(spec.id) ?? [],
        policy,
        startedAtMs,
        tools,
        ...(options.env === undefined ? {} : { env: options.env }),
        ...(options.clock === undefined ? {} : { clock: options.clock }),
      }).catch((error: unknown) => {
        laneError ??= { error };
        throw error;
      });
      const outcome = step.outcome;
      laneAttempts.set(spec.id, outcome.attempts);
      const last = outcome.attempts[outcome.attempts.length - 1];
      if (step.retry && last !== undefined) throw new Error(`lane ${spec.id} ${describeAttempt(last)}`);
      laneOutcomes.set(spec.id, outcome);
      options.onLane?.(outcome);
      return toJson({
        lane_id: outcome.lane_id,
        family: outcome.family,
        context_id: outcome.context_id,
        result: outcome.result,
        validation: outcome.validation,
        attempts: outcome.attempts,
      });
    }, spec.timeoutMs + 60_000);
  }
  nodes[PANEL_NODE] = nodeOf((context) => {
    const lanes = Object.values(context.input.upstream) as unknown as PanelLane[];
    // Every lane has ended: nothing more may start, and what the tools ran is final.
    tools?.close();
    const proofs = tools?.receipts() ?? [];
    const decision = judgePanel(
      { author: prepared.inputs.author, diversity_mode: prepared.inputs.mode },
      lanes,
      { expectedLanes: prepared.lanes.map((lane) => lane.id) },
      proofs,
    );
    return panelResult(decision.verdict, decision.reasons, proofs);
  }, 60_000);
  const executor = await createGraphExecutor({ runId, graph, storage: options.storage, nodes, engines: [] });
  const run = await executor.run();
  if (laneError !== undefined) throw laneError.error;
  if (run.kind !== 'complete') throw new ProofgateError('INTERNAL', `review run ${runId} did not complete: ${run.reason}`);
  const ordered = prepared.lanes.map((lane) => laneOutcomes.get(lane.id)).filter((lane): lane is LaneOutcome => lane !== undefined);
  tools?.close();
  const proofs = tools?.receipts() ?? [];
  const outcome = await concludeReview(prepared, ordered, proofs);
  const scope = { namespace: options.storage.record.namespace, runId };
  const proofArtifact = await writeProofArtifact(
    options.storage.artifactStore,
    scope,
    toJson({
      verdict: outcome.verdict,
      reasons: outcome.reasons,
      lanes: ordered.map((lane) => ({ lane_id: lane.lane_id, result: lane.result, validation: lane.validation, attempts: lane.attempts })),
      proofs,
    }),
  );
  const binding: AcceptedResultBinding = {
    ...reviewBindingParts(prepared, ordered),
    proofArtifact,
    graph: { definitionDigest: plan.plan.graph.definitionDigest, typeVersion: plan.plan.graph.typeVersion },
    result: panelResult(outcome.verdict, outcome.reasons, proofs),
  };
  const position = REVIEW_RECORD_POSITION;
  const record = await createAcceptedResultRecord(options.storage, runId, position, binding);
  return { outcome, runId, position, record, binding };
}
