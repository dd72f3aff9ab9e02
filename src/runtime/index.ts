/**
 * The graph runtime: graph types, compileGraph, the executor, proof
 * artifacts, accepted results, callback gates and approvals, and the git
 * workspace provider.
 */
export type { Sha256Digest } from '../core/index.js';
export type { ReadonlyJsonValue, ReadonlyJsonObject } from './json-types.js';
export type {
  CompiledGraph,
  DispatchCommand,
  GraphCommand,
  GraphDefinition,
  GraphDefinitionInput,
  GraphDescription,
  GraphEdgeInput,
  GraphEvent,
  GraphNodeInput,
  GraphPosition,
  GraphType,
} from './graph/contract.js';
export { compileGraph } from './graph/compile.js';
export {
  dagGraphType,
  dagPosition,
  parseDagPosition,
  classifyDag,
  dagNodeState,
  type DagGraphData,
  type DagNodeData,
  type DagNodeKind,
  type DagDefinition,
  type DagState,
  type DagNodeState,
  type DagNodeView,
} from './dag/index.js';
export type { Admission, ExecutionLane, GraphPlan, PackageIdentity, Permission, PlanGraph, ResolvePlanOptions, ResolvedGraphPlan } from './plan/types.js';
export { resolveGraphPlan } from './plan/resolve.js';
export { persistRunDefinition, type RunDefinitionInput } from './plan/persist.js';
export { checkRunId, runStreamId, parseRunEvent, readRunEvents, type RunEvent } from './run/stream.js';
export { createGraphExecutor } from './executor/executor.js';
export type {
  ActionDecision,
  ExecutionEngine,
  GraphExecutor,
  GraphExecutorOptions,
  GraphNode,
  NodeInput,
  NodePolicy,
  NodeRunContext,
  NodeWorkspace,
  PausedRequest,
  PausedResolution,
  RunOutcome,
} from './executor/types.js';
export { proofArtifactRef, writeProofArtifact, type ProofArtifactRef } from './proof/artifact.js';
export { createAcceptedResultRecord, readAcceptedResult, resolveAcceptedResult, acceptedStreamId } from './proof/accepted-result.js';
export { judgeAcceptedResult, type AcceptedSnapshot } from './proof/accepted-check.js';
export type {
  AcceptedResultBinding,
  AcceptedResultQuery,
  AcceptedResultRecord,
  AcceptedResultResolution,
  GraphBinding,
  StoredAcceptedBinding,
} from './proof/accepted-types.js';
export { createApprovalCallbackGate } from './callback/gate.js';
export { ApprovalSubjectError } from './callback/subject.js';
export { createStoredCallbackClient } from './callback/client.js';
export { resolveApproval } from './callback/resolve.js';
export type {
  ApprovalDecision,
  ApprovalRecord,
  ApprovalResolution,
  ApprovalSubjectInput,
  CallbackEventKind,
  CallbackGateDefinition,
  CallbackHistoryEntry,
  CallbackRequest,
  ClaimResult,
  PendingCallback,
  ReleaseResult,
  StoredApprovalSubject,
  StoredCallbackClient,
  SubmitResult,
} from './callback/types.js';
export { captureWorkspaceAnchor, verifyWorkspaceAnchor, type WorkspaceVerification } from './workspace/git.js';
export type { WorkspaceAnchor, WorkspaceFileState } from './workspace/types.js';
