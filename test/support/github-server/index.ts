export { startGitHubServer, DEFAULT_APP_EVENTS, DEFAULT_APP_PERMISSIONS } from './server.js';
export type { AppRegistration, GitHubTestServer, GitHubTestServerOptions, InjectedFailure, RecordedRequest, SchemaCheck } from './server.js';
export { RepositoryModel } from './model.js';
export type { AppPermissionLevel, ModelApp, ModelPullRequest, ModelCheckRun, ModelStatus, ModelComment, Role } from './model.js';
export { validateSchema } from './json-schema.js';
export type { SchemaObject, SchemaViolation } from './json-schema.js';
export { checkResponse, responseSchema, matchRoute } from './openapi.js';
export { fixture, signDelivery, webhookFixtures, MAPPED_EVENTS } from './webhooks.js';
export type { FixtureFile, SignedDelivery } from './webhooks.js';
export { checkRunCompletedPayload, issueCommentPayload, mergeGroupPayload, pullRequestPayload, repositoryPayload } from './deliveries.js';
export { MergeQueueModel, QueueRefusal } from './merge-queue-model.js';
export type { ModelDelivery, ModelQueueEntry, ModelQueueRemoval } from './merge-queue-model.js';
export { ActionsModel } from './actions-model.js';
export type {
  DispatchContext,
  DispatchDecision,
  DispatchHook,
  ModelArtifact,
  ModelDispatch,
  ModelRunStatus,
  ModelWorkflow,
  ModelWorkflowRun,
} from './actions-model.js';
export type { ArtifactStorage, StorageRequest } from './storage.js';
