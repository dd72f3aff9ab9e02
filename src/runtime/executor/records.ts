import { ProofgateError, canonicalBytes, sha256Digest } from '../../core/index.js';
import type { JsonValue } from '../../core/index.js';
import type { NewEvent } from '../../storage/ports.js';
import type { AttemptOutcome } from './attempt.js';
import type { AttemptRecord } from './ledger.js';
import type { PausedResolution } from './types.js';

/** The stored event for how an attempt ended. */
export function outcomeEvent(id: string, position: string, nodeId: string, outcome: AttemptOutcome): NewEvent {
  switch (outcome.kind) {
    case 'completed':
      return {
        id,
        type: 'attempt-completed',
        data: { position, nodeId, result: outcome.result as JsonValue, resultDigest: outcome.resultDigest, outputBytes: outcome.outputBytes, resolvedBy: 'executor' },
      };
    case 'failed':
      return { id, type: 'attempt-failed', data: { position, nodeId, failureClass: outcome.failureClass, reason: outcome.reason } };
    case 'paused':
      return { id, type: 'attempt-paused', data: { position, nodeId, reason: outcome.reason, request: { kind: 'action', detail: outcome.reason } } };
    case 'interrupted':
      return { id, type: 'attempt-interrupted', data: { position, nodeId, reason: outcome.reason } };
  }
}

/** The stored event for a host's settlement of a paused attempt. */
export function resolutionEvent(id: string, attempt: AttemptRecord, resolution: PausedResolution): NewEvent {
  const { position, nodeId } = attempt;
  switch (resolution.kind) {
    case 'completed': {
      const bytes = canonicalBytes(resolution.result);
      return {
        id,
        type: 'attempt-completed',
        data: { position, nodeId, result: resolution.result as JsonValue, resultDigest: sha256Digest(bytes), outputBytes: bytes.byteLength, resolvedBy: 'host' },
      };
    }
    case 'failed':
      return { id, type: 'attempt-failed', data: { position, nodeId, failureClass: 'host', reason: String(resolution.reason) } };
    case 'rerun':
      return { id, type: 'attempt-interrupted', data: { position, nodeId, reason: `host asked for a new attempt: ${String(resolution.reason)}` } };
    default:
      throw new ProofgateError('INVALID_INPUT', 'resolution kind must be completed, failed or rerun');
  }
}
