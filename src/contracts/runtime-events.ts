import { z } from 'zod';

/**
 * Stored events of a graph run (stream `run/<runId>`), version 1. The runtime
 * validates every event it reads against these schemas; anything else is
 * `INVALID_STORED_VALUE`.
 */
const digest = z.string().regex(/^sha256:[0-9a-f]{64}$/);
const name = z.string().min(1);
const json = z.unknown();
const count = z.number().int().min(0);
const where = { position: name, nodeId: name };

export const runStartedSchema = z.strictObject({
  schemaVersion: z.literal(1),
  runId: name,
  timestamp: name,
  graphDefinition: json,
  definitionDigest: digest,
  resolvedPlan: z.strictObject({ plan: json, digest }),
  resolvedInputs: json,
  workspaceBinding: json,
  hostBinding: json,
});

export const dispatchDecidedSchema = z.strictObject({ ...where, attempt: z.number().int().min(1), executorId: name });

export const attemptStartedSchema = z.strictObject({
  ...where,
  executorId: name,
  restart: count,
  inputDigest: digest,
  inputBytes: count,
  leaseExpiresAt: name,
});

export const attemptCompletedSchema = z.strictObject({
  ...where,
  result: json,
  resultDigest: digest,
  outputBytes: count,
  resolvedBy: z.enum(['executor', 'host']),
});

export const failureClassSchema = z.enum(['error', 'timeout', 'input-too-large', 'output-too-large', 'invalid-result', 'denied', 'host']);

export const attemptFailedSchema = z.strictObject({ ...where, failureClass: failureClassSchema, reason: z.string() });

export const attemptPausedSchema = z.strictObject({
  ...where,
  reason: z.string(),
  request: z.strictObject({ kind: z.enum(['reconcile', 'action']), detail: z.string() }),
});

export const attemptInterruptedSchema = z.strictObject({ ...where, reason: z.string() });

export const runOutcomeSchema = z.strictObject({ reason: z.string() });

/** Event type -> schema of its data. */
export const RUN_EVENT_SCHEMAS = {
  'run-started': runStartedSchema,
  'dispatch-decided': dispatchDecidedSchema,
  'attempt-started': attemptStartedSchema,
  'attempt-completed': attemptCompletedSchema,
  'attempt-failed': attemptFailedSchema,
  'attempt-paused': attemptPausedSchema,
  'attempt-interrupted': attemptInterruptedSchema,
  'run-paused': runOutcomeSchema,
  'run-completed': runOutcomeSchema,
  'run-failed': runOutcomeSchema,
} as const;

export type RunEventType = keyof typeof RUN_EVENT_SCHEMAS;
export type FailureClass = z.infer<typeof failureClassSchema>;
