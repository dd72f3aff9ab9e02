import { ProofgateError } from '../../core/index.js';
import type { StoredEvent } from '../../storage/ports.js';
import { isJsonObject } from '../json-types.js';
import { runStreamId } from '../run/stream.js';
import type { ApprovalRecord, CallbackEventKind, CallbackRequest, StoredApprovalSubject } from './types.js';

export const CALLBACK_KINDS: readonly CallbackEventKind[] = [
  'callback-posted',
  'callback-claimed',
  'callback-released',
  'callback-submitted',
  'approval-recorded',
];

export function callbackStreamPrefix(runId: string): string {
  return `${runStreamId(runId)}/callback/`;
}

export function callbackStreamId(runId: string, requestId: string): string {
  if (typeof requestId !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(requestId)) {
    throw new ProofgateError('INVALID_INPUT', 'requestId must match [A-Za-z0-9][A-Za-z0-9._-]*');
  }
  return `${callbackStreamPrefix(runId)}${requestId}`;
}

export type ActiveClaim = { readonly claimer: string; readonly tokenDigest: string; readonly leaseExpiresAt: number };

/** A fold of one callback stream. */
export type CallbackState = {
  readonly revision: number;
  readonly posted: { readonly request: CallbackRequest; readonly subject: StoredApprovalSubject } | null;
  readonly claim: ActiveClaim | null;
  readonly approval: ApprovalRecord | null;
};

function field(data: unknown, name: string): unknown {
  return isJsonObject(data) ? data[name] : undefined;
}

/** Fold the stored events of a callback stream (pure). */
export function foldCallback(events: readonly StoredEvent[]): CallbackState {
  let state: CallbackState = { revision: 0, posted: null, claim: null, approval: null };
  for (const event of events) {
    const { data } = event;
    switch (event.type) {
      case 'callback-posted':
        state = { ...state, posted: { request: field(data, 'request') as CallbackRequest, subject: field(data, 'subject') as StoredApprovalSubject } };
        break;
      case 'callback-claimed':
        state = {
          ...state,
          claim: {
            claimer: String(field(data, 'claimer')),
            tokenDigest: String(field(data, 'tokenDigest')),
            leaseExpiresAt: Date.parse(String(field(data, 'leaseExpiresAt'))),
          },
        };
        break;
      case 'callback-released':
        state = { ...state, claim: null };
        break;
      case 'callback-submitted':
        break;
      case 'approval-recorded':
        state = { ...state, approval: field(data, 'record') as ApprovalRecord };
        break;
      default:
        throw new ProofgateError('INVALID_STORED_VALUE', `callback event ${event.id} has unknown type ${event.type}`);
    }
    state = { ...state, revision: event.revision };
  }
  if (events.length > 0 && !state.posted) throw new ProofgateError('INVALID_STORED_VALUE', 'callback stream does not begin with callback-posted');
  return state;
}

/** The claim in force at `now`, if any. */
export function activeClaim(state: CallbackState, now: number): ActiveClaim | null {
  return state.claim && state.claim.leaseExpiresAt > now ? state.claim : null;
}
