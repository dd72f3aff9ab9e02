import type { z } from 'zod';
import { ProofgateError } from '../../core/index.js';
import { RUN_EVENT_SCHEMAS, type RunEventType } from '../../contracts/runtime-events.js';
import type { EventStore, StoredEvent } from '../../storage/ports.js';
import type { GraphEvent } from '../graph/contract.js';
import type { ReadonlyJsonValue } from '../json-types.js';

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Run ids: letters, digits, `.`, `_`, `:`, `-`; at most 128 characters. */
export function checkRunId(runId: unknown): string {
  if (typeof runId !== 'string' || !RUN_ID.test(runId)) {
    throw new ProofgateError('INVALID_INPUT', 'runId must match [A-Za-z0-9][A-Za-z0-9._:-]* (at most 128 characters)');
  }
  return runId;
}

export const RUN_STREAM_PREFIX = 'run/';

export function runStreamId(runId: string): string {
  return `${RUN_STREAM_PREFIX}${checkRunId(runId)}`;
}

type Schemas = typeof RUN_EVENT_SCHEMAS;

/** A stored run event with its data checked against the v1 contract. */
export type RunEvent = {
  [K in RunEventType]: { readonly type: K; readonly data: z.infer<Schemas[K]>; readonly revision: number; readonly recordedAt: string; readonly id: string };
}[RunEventType];

export type RunEventOf<K extends RunEventType> = Extract<RunEvent, { type: K }>;

function isRunEventType(type: string): type is RunEventType {
  return Object.prototype.hasOwnProperty.call(RUN_EVENT_SCHEMAS, type);
}

/** Check one stored event; unknown types and bad shapes are `INVALID_STORED_VALUE`. */
export function parseRunEvent(event: StoredEvent): RunEvent {
  if (!isRunEventType(event.type)) {
    throw new ProofgateError('INVALID_STORED_VALUE', `run event ${event.id} has unknown type ${event.type}`);
  }
  const parsed = RUN_EVENT_SCHEMAS[event.type].safeParse(event.data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue ? issue.path.join('.') : '';
    throw new ProofgateError(
      'INVALID_STORED_VALUE',
      `run event ${event.id} (${event.type}) is malformed at ${where || '(data)'}: ${issue?.message ?? 'invalid'}`,
    );
  }
  return { type: event.type, data: parsed.data, revision: event.revision, recordedAt: event.recordedAt, id: event.id } as RunEvent;
}

export async function readRunEvents(eventStore: EventStore, runId: string, fromRevision = 0): Promise<RunEvent[]> {
  const stored = await eventStore.read(runStreamId(runId), { fromRevision });
  return stored.map(parseRunEvent);
}

/** The graph-level fact a run event carries, if any. */
export function graphEventOf(event: RunEvent): GraphEvent | null {
  switch (event.type) {
    case 'dispatch-decided':
      return { kind: 'dispatched', position: event.data.position, nodeId: event.data.nodeId };
    case 'attempt-completed':
      return { kind: 'completed', position: event.data.position, nodeId: event.data.nodeId, result: event.data.result as ReadonlyJsonValue };
    case 'attempt-failed':
      return { kind: 'failed', position: event.data.position, nodeId: event.data.nodeId, reason: event.data.reason };
    case 'attempt-paused':
      return { kind: 'paused', position: event.data.position, nodeId: event.data.nodeId, reason: event.data.reason };
    case 'attempt-interrupted':
      return { kind: 'interrupted', position: event.data.position, nodeId: event.data.nodeId, reason: event.data.reason };
    default:
      return null;
  }
}

/** The run-started event, which must be the first event of the stream. */
export function runStartedOf(events: readonly RunEvent[], runId: string): RunEventOf<'run-started'> {
  const first = events[0];
  if (!first) throw new ProofgateError('NOT_FOUND', `run ${runId} has not been started`);
  if (first.type !== 'run-started') throw new ProofgateError('INVALID_STORED_VALUE', `run ${runId} does not begin with run-started`);
  return first;
}
