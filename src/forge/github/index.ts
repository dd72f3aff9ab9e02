export { createGitHubClient } from './client.js';
export type { GitHubAuth, GitHubClientOptions, GitHubOctokit, GitHubRetryOptions, GitHubThrottleOptions } from './client.js';
export { createGitHubForge } from './forge.js';
export type { GitHubForgeOptions } from './forge.js';
export { STAGING_PREFIX, stagingBranch } from './staging-queue.js';
export type { StagingSettings } from './staging-queue.js';
export { memoryDeliveryLedger, parseWebhookDelivery, storeDeliveryLedger } from './webhooks.js';
export type {
  DeliveryKey,
  DeliveryLedger,
  DuplicateDelivery,
  GitHubForgeEvent,
  GitHubRepositoryRef,
  IgnoredDelivery,
  WebhookDelivery,
  WebhookHeaders,
  WebhookResult,
} from './webhooks.js';
export { SNAPSHOT_OPERATION, SNAPSHOT_QUERY } from './snapshot-query.js';
export { redactSecrets } from './redact.js';
