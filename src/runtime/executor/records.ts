import { ProofgateError, canonicalBytes, sha256Digest } from '../../core/index.js';
import type { NewEvent } from '../../storage/ports.js';
import type { AttemptRecord } from './ledger.js';
import { outcomeData, type StorableOutcome, type StorageFit } from './storable.js';
import type { PausedResolution } from './types.js';

/** The stored event for how an attempt ended. */
export function outcomeEvent(id: string, position: string, nodeId: string, outcome: StorableOutcome): NewEvent {
  return { id, ...outcomeData(position, nodeId, outcome) };
}

/**
 * The stored event for a host's settlement of a paused attempt. The host's
 * result and reason are taken in their stored form (digest of the stored
 * bytes); content the storage policy refuses is its typed error
 * (`KNOWN_SECRET`, `POLICY_VIOLATION`) and nothing is stored.
 */
export function resolutionEvent(id: string, attempt: AttemptRecord, resolution: PausedResolution, fit: StorageFit): NewEvent {
  const { position, nodeId } = attempt;
  switch (resolution.kind) {
    case 'completed': {
      const result = fit.prepare(resolution.result, 'resolution.result');
      const bytes = canonicalBytes(result);
      return {
        id,
        type: 'attempt-completed',
        data: { position, nodeId, result, resultDigest: sha256Digest(bytes), outputBytes: bytes.byteLength, resolvedBy: 'host' },
      };
    }
    case 'failed':
      return {
        id,
        type: 'attempt-failed',
        data: { position, nodeId, failureClass: 'host', reason: fit.prepare(String(resolution.reason), 'resolution.reason') },
      };
    case 'rerun':
      return {
        id,
        type: 'attempt-interrupted',
        data: { position, nodeId, reason: fit.prepare(`host asked for a new attempt: ${String(resolution.reason)}`, 'resolution.reason') },
      };
    default:
      throw new ProofgateError('INVALID_INPUT', 'resolution kind must be completed, failed or rerun');
  }
}
