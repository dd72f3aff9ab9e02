/** The service's job queue: the port (see port.ts for the rules) and its two adapters. */
export type { JobCounts, JobEvent, JobHandler, JobQueue, JobRunner, JobRunnerOptions, JobSpec, ListedJob, TakenJob } from './port.js';
export { DEFAULT_MAX_ATTEMPTS, FAILURE_TEXT_LIMIT, JOB_LIMITS, RUNNER_DEFAULTS, retryDelayMs } from './port.js';
export { SQLITE_JOBS_SCHEMA_VERSION, createSqliteJobQueue, type SqliteJobQueueOptions } from './sqlite.js';
export { DEFAULT_POSTGRES_JOB_SCHEMA, createPostgresJobQueue, type PostgresJobQueueOptions } from './postgres.js';
