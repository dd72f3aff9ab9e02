export {
  DEFAULT_GITHUB_API_URL,
  MARKER_SECRET_MIN_BYTES,
  MAX_WORKERS,
  SERVE_DEFAULTS,
  SETTING,
  httpUrl,
  serveOptionsFrom,
  serviceSettingsFrom,
} from './settings.js';
export type { Environment, GitHubAppSettings, ServeFlags, ServeOptions, ServeStorage, ServiceSettings, SettingsEffects } from './settings.js';
export { DEFAULT_APP_NAME, MANIFEST_EVENTS, MANIFEST_PERMISSIONS, MAX_APP_NAME_LENGTH, WEBHOOK_PATH, githubAppManifest, serviceBaseUrl } from './manifest.js';
export type { GitHubAppManifest, ManifestEventName, ManifestOptions, ManifestPermission, ManifestPermissionName, PermissionAccess } from './manifest.js';
export { DELIVERY_BODY_TYPE, DELIVERY_RECORD_TYPE, INTAKE_STREAM_PREFIX, createWebhookIntake, deliveryEvents, deliveryFacts } from './intake.js';
export type { AcceptedDelivery, DeliveryFacts, DeliverySink, IntakeObservation, IntakeOutcome, WebhookIntake, WebhookIntakeOptions } from './intake.js';
export { DEFAULT_MAX_BODY_BYTES, createServiceServer, hostProblem, isLoopbackAddress, webhookAnswer } from './http.js';
export type { Answer, ApiCaller, ServiceApi, ServiceServer, ServiceServerOptions } from './http.js';
export { localApi, parseRefList, refMoves, refWakes, startLocalService } from './local.js';
export * from './identities.js';
export { createServiceMetrics, METRICS_PATH } from './metrics.js';
export type { LocalService, LocalServiceOptions, RefMove, RefWake } from './local.js';
export { INTAKE_NAMESPACE, startGitHubService } from './github/service.js';
export type { GitHubService, GitHubServiceOptions, GitHubServiceStorage } from './github/service.js';
export { GitHubAppClient } from './github/app.js';
export type { AppIdentity, InstallationRepository, ListedPull } from './github/app.js';
export { RECONCILE_QUEUE, TASK, changeQueue, checkRepository, jobsForDelivery, reconcileJob, repositoryJob, resumeJob, sweepJob } from './github/work.js';
export type { DeliveryWork, PullAddress, RecordRef, SweepSince } from './github/work.js';
