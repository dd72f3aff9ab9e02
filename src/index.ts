/**
 * proofgate: the library. Subpaths: `proofgate/storage/local` (SQLite) and
 * `proofgate/storage/postgres` (PostgreSQL).
 *
 * The public API is this list of named exports (docs/design.md, "The
 * package's API"); each layer's own index holds more, for proofgate's own
 * code and tests. Nothing here is a test seam.
 */

// core: typed errors, canonical JSON, digests, the clock, the secret catalogue
export { ERROR_CODES, ProofgateError, isProofgateError, type ErrorCode } from './core/index.js';
export { canonicalBytes, canonicalJson, parseJson, type JsonObject, type JsonPrimitive, type JsonValue } from './core/index.js';
export { digestJson, isSha256Digest, sha256Digest, sha256Hex, type Sha256Digest } from './core/index.js';
export { fixedClock, systemClock, type Clock, type ManualClock } from './core/index.js';
export { SECRET_CATALOGUE, findSecrets, redactSecrets, type SecretMatch, type SecretPattern } from './core/index.js';

// storage: the ports and the storage policy (adapters: the storage subpaths)
export { SENSITIVE_MARKER_KEY, STORAGE_POLICY_SCHEMA_VERSION, defaultStoragePolicy, policyDigest, validateStoragePolicy } from './storage/index.js';
export type {
  AppendResult,
  ArtifactMeta,
  ArtifactRef,
  ArtifactScope,
  ArtifactStore,
  EventStore,
  NewEvent,
  ReadAllOptions,
  ReadOptions,
  StorageProvider,
  StoredEvent,
  StreamInfo,
  RetentionPolicy,
  RunStorage,
  SensitiveContentPolicy,
  StoragePolicy,
  StorageRecord,
} from './storage/index.js';

// runtime: graphs, the executor, proof artifacts, accepted results, approvals, workspace anchors
export type { ReadonlyJsonObject, ReadonlyJsonValue } from './runtime/index.js';
export {
  compileGraph,
  type CompiledGraph,
  type DispatchCommand,
  type GraphCommand,
  type GraphDefinition,
  type GraphDefinitionInput,
  type GraphDescription,
  type GraphEdgeInput,
  type GraphEvent,
  type GraphNodeInput,
  type GraphPosition,
  type GraphType,
} from './runtime/index.js';
export {
  classifyDag,
  dagGraphType,
  dagNodeState,
  dagPosition,
  parseDagPosition,
  type DagDefinition,
  type DagGraphData,
  type DagNodeData,
  type DagNodeKind,
  type DagNodeState,
  type DagNodeView,
  type DagState,
} from './runtime/index.js';
export {
  persistRunDefinition,
  resolveGraphPlan,
  type Admission,
  type ExecutionLane,
  type GraphPlan,
  type PackageIdentity,
  type Permission,
  type PlanGraph,
  type ResolvePlanOptions,
  type ResolvedGraphPlan,
  type RunDefinitionInput,
} from './runtime/index.js';
export { checkRunId, parseRunEvent, readRunEvents, runStreamId, type RunEvent } from './runtime/index.js';
export {
  createGraphExecutor,
  type ActionDecision,
  type ExecutionEngine,
  type GraphExecutor,
  type GraphExecutorOptions,
  type GraphNode,
  type NodeInput,
  type NodePolicy,
  type NodeRunContext,
  type NodeWorkspace,
  type PausedRequest,
  type PausedResolution,
  type RunOutcome,
} from './runtime/index.js';
export {
  acceptedStreamId,
  createAcceptedResultRecord,
  judgeAcceptedResult,
  proofArtifactRef,
  readAcceptedResult,
  resolveAcceptedResult,
  writeProofArtifact,
  type AcceptedResultBinding,
  type AcceptedResultQuery,
  type AcceptedResultRecord,
  type AcceptedResultResolution,
  type AcceptedSnapshot,
  type GraphBinding,
  type ProofArtifactRef,
  type StoredAcceptedBinding,
} from './runtime/index.js';
export {
  ApprovalSubjectError,
  createApprovalCallbackGate,
  createStoredCallbackClient,
  resolveApproval,
  type ApprovalDecision,
  type ApprovalRecord,
  type ApprovalResolution,
  type ApprovalSubjectInput,
  type CallbackEventKind,
  type CallbackGateDefinition,
  type CallbackHistoryEntry,
  type CallbackRequest,
  type ClaimResult,
  type PendingCallback,
  type ReleaseResult,
  type StoredApprovalSubject,
  type StoredCallbackClient,
  type SubmitResult,
} from './runtime/index.js';
export { captureWorkspaceAnchor, verifyWorkspaceAnchor, type WorkspaceAnchor, type WorkspaceFileState, type WorkspaceVerification } from './runtime/index.js';

// contracts: the versioned wire records of review (zod schemas and their types)
export {
  REVIEW_LANE_RESULT_SCHEMA,
  REVIEW_REQUEST_SCHEMA,
  contractJsonSchemas,
  reviewConfigSchema,
  reviewFindingSchema,
  reviewLaneResultSchema,
  reviewRequestSchema,
  type BoundFile,
  type DiversityMode,
  type ReviewConfig,
  type ReviewDisposition,
  type ReviewFinding,
  type ReviewLaneConfig,
  type ReviewLaneResultV1,
  type ReviewRequestV1,
  type SemanticLaneResultV1,
  type TransportLaneResultV1,
} from './contracts/index.js';

// forge: the port, the local forge and the GitHub adapter
export type {
  AuthorType,
  ChangeSnapshot,
  ChangeWorkspace,
  ChangeState,
  CheckConclusion,
  CheckStatus,
  Forge,
  ForgeCheck,
  ForgeComment,
  ForgeEvent,
  MergeRequest,
  MergeResult,
  MergeStateStatus,
  Mergeable,
  PushRequest,
  RepoPermission,
} from './forge/index.js';
export {
  LocalForge,
  defaultLocalDataDir,
  openLocalForge,
  type CheckProgress,
  type CheckRunResult,
  type LocalForgeOptions,
  type OpenChangeRequest,
  type OpenLocalForgeOptions,
  type OpenedLocalForge,
  type RunChecksOptions,
} from './forge/index.js';
export {
  createGitHubClient,
  createGitHubForge,
  memoryDeliveryLedger,
  parseWebhookDelivery,
  storeDeliveryLedger,
  type DeliveryKey,
  type DeliveryLedger,
  type DuplicateDelivery,
  type GitHubAuth,
  type GitHubClientOptions,
  type GitHubForgeEvent,
  type GitHubForgeOptions,
  type GitHubOctokit,
  type GitHubRepositoryRef,
  type GitHubRetryOptions,
  type GitHubThrottleOptions,
  type IgnoredDelivery,
  type WebhookDelivery,
  type WebhookHeaders,
  type WebhookResult,
} from './forge/index.js';

// review: a review run, its record on the runtime, the panel, lane adapters, lane-result validation
export {
  REVIEW_RUNS_NAMESPACE,
  configDigest,
  liveReviewBindings,
  resolveReviewRecord,
  reviewBindingParts,
  runReview,
  runReviewOnRuntime,
  type ReviewBindings,
  type ReviewOptions,
  type ReviewOutcome,
  type RuntimeReviewOptions,
  type RuntimeReviewResult,
} from './review/index.js';
export { defaultReviewConfig, loadReviewConfig, type LoadedReviewConfig } from './review/index.js';
export { judgePanel, type PanelDecision, type PanelLane, type PanelPolicy, type PanelRequest, type PanelVerdict } from './review/index.js';
export {
  commandReviewer,
  defaultAdapters,
  openaiReviewer,
  rulesReviewer,
  testsReviewer,
  type AdapterSet,
  type LaneAdapter,
  type LaneRun,
  type LaneRunContext,
  type LaneSpec,
} from './review/index.js';
export { validateLaneResult, type LaneExpectation, type LaneValidation, type LaneValidationCode } from './review/index.js';

// automerge, the judgments (pure): commands, trust, markers, checks, the decision, the ledger, the status comment
export { commandText, parseCommands, type AutomergeCommand, type CommandKind, type ParsedCommand } from './automerge/index.js';
export { authorizeCommand, type Authorization, type CommandActor } from './automerge/index.js';
export {
  collectVerdicts,
  composeMarkedBody,
  createMarker,
  readMarkers,
  visibleText,
  type MarkerReadOptions,
  type MarkerReadResult,
  type MarkerSecret,
  type TrustedMarker,
  type TrustedVerdict,
  type Verdict,
  type VerdictBindings,
} from './automerge/index.js';
export {
  DEFAULT_IGNORED_CHECKS,
  newestChecks,
  summarizeChecks,
  type CheckEntry,
  type CheckPolicy,
  type CheckSummary,
  type TerminalBlocker,
} from './automerge/index.js';
export {
  decideAutomerge,
  defaultAutomergePolicy,
  verdictStanding,
  type AutomergeDecision,
  type AutomergePolicy,
  type ReviewFacts,
  type VerdictStanding,
} from './automerge/index.js';
export {
  applyCommand,
  applyOutcome,
  applyRecord,
  automergeActive,
  foldLedger,
  initialLedger,
  ledgerKey,
  type AutomergeLedgerState,
  type LedgerRecord,
  type TimelineEntry,
} from './automerge/index.js';
export { trustedPathsTouched } from './automerge/index.js';
export { findStatusComment, renderFinalComment, renderStatusComment, type FinalCommentInput, type StatusCommentInput } from './automerge/index.js';

// automerge, the loop: what wires it to a forge (openLocalAutomerge does all of it for the local forge)
export {
  AutomergeRouter,
  ChangeJobs,
  ChangeSignals,
  LedgerStore,
  builtinRepair,
  openLocalAutomerge,
  panelReviewer,
  runAutomergeLoop,
  type AutomergeEnvironment,
  type ChangeJobsOptions,
  type LocalAutomerge,
  type LocalAutomergeOptions,
  type LoopOptions,
  type LoopOutcome,
  type LoopProgress,
  type PanelReviewerOptions,
  type RepairModule,
  type ReviewResult,
  type Reviewer,
  type RouterOptions,
  type WaitSettings,
} from './automerge/index.js';
export type { RepairConfig, RepairContext, RepairFinding, RepairOutcome } from './automerge/index.js';
