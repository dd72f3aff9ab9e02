import { ProofgateError, canonicalJson, isProofgateError, newId, randomHex, sha256Digest, systemClock, type Clock, type JsonValue } from '../../core/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import { policyRefusal } from '../../storage/sensitive.js';
import type { NewEvent } from '../../storage/ports.js';
import { isJsonObject } from '../json-types.js';
import type { GraphPlan } from '../plan/types.js';
import { checkRunId, readRunEvents, runStartedOf } from '../run/stream.js';
import { buildApprovalRecord, responseProblem, subjectProblem } from './approval-record.js';
import { requestIntact } from './gate.js';
import { activeClaim, callbackStreamId, callbackStreamPrefix, foldCallback, type CallbackState } from './state.js';
import { ApprovalSubjectError, storedSubject, subjectDigest, unadmittedPermissions } from './subject.js';
import type { ApprovalDecision, CallbackEventKind, ClaimResult, ReleaseResult, StoredCallbackClient, SubmitResult } from './types.js';

const DEFAULT_CLAIM_MS = 10 * 60_000;

/** Load a run's plan for callback and approval checks. */
export async function loadPlan(storage: RunStorage, runId: string): Promise<{ plan: GraphPlan; planDigest: `sha256:${string}` }> {
  const started = runStartedOf(await readRunEvents(storage.eventStore, runId, 0), runId);
  return { plan: started.data.resolvedPlan.plan as GraphPlan, planDigest: started.data.resolvedPlan.digest as `sha256:${string}` };
}

/**
 * A callback client over the run's storage: requests, claims and answers are
 * events in `run/<runId>/callback/<requestId>`, so they survive reopening and
 * are shared by every process using the same store.
 */
export async function createStoredCallbackClient(storage: RunStorage, runId: string, options: { readonly clock?: Clock } = {}): Promise<StoredCallbackClient> {
  checkRunId(runId);
  const { plan, planDigest } = await loadPlan(storage, runId);
  const clock = options.clock ?? systemClock;
  const events = storage.eventStore;
  const load = async (requestId: string): Promise<CallbackState> => foldCallback(await events.read(callbackStreamId(runId, requestId)));
  const event = (type: CallbackEventKind, data: unknown): NewEvent => ({ id: newId('evt'), type, data: data as JsonValue });
  /** Why the storage policy would refuse or change `value` (stored under `what`), or null when it stores it as given. */
  const storedChange = (value: unknown, what: string): string | null => {
    try {
      return canonicalJson(storage.prepareJson(value, what)) === canonicalJson(value) ? null : 'the storage policy would redact part of it';
    } catch (error) {
      const refusal = policyRefusal(error, what);
      if (refusal === null) throw error;
      return `the storage policy refuses it: ${refusal}`;
    }
  };

  /** Re-read and retry after a lost race; `attempt` returns a result or events to append. */
  async function withRetry<T>(requestId: string, attempt: (state: CallbackState) => { done: T } | { append: NewEvent[]; then: T }): Promise<T> {
    for (;;) {
      const state = await load(requestId);
      const step = attempt(state);
      if ('done' in step) return step.done;
      try {
        await events.append(callbackStreamId(runId, requestId), state.revision, step.append);
        return step.then;
      } catch (error) {
        if (!isProofgateError(error, 'REVISION_CONFLICT')) throw error;
      }
    }
  }

  return Object.freeze({
    async post(request, subject) {
      if (!requestIntact(request)) throw new ApprovalSubjectError('the request does not match its id and digest');
      const stored = storedSubject(subject);
      if (subjectDigest(stored) !== request.subjectDigest) throw new ApprovalSubjectError('the subject is not the one the request was made for');
      const outside = unadmittedPermissions(stored, plan.admission.permissions);
      if (outside.length > 0) throw new ApprovalSubjectError(`permissions not admitted by the run plan: ${outside.join(', ')}`, { permissions: outside });
      const data = JSON.parse(canonicalJson({ request, subject: stored })) as JsonValue;
      // The request's id and digest and the subject digest were computed from
      // these bytes; a store that kept other bytes would break them for good.
      const change = storedChange(data, 'callback request');
      if (change !== null) {
        throw new ProofgateError('POLICY_VIOLATION', `the request or its subject cannot be stored as it is hashed (${change}); nothing was stored`, {
          requestId: request.requestId,
        });
      }
      await events.append(callbackStreamId(runId, request.requestId), 0, [
        { id: `callback-posted:${runId}:${request.requestId}`, type: 'callback-posted', data },
      ]);
    },

    async claim(requestId, claimer, claimOptions = {}) {
      if (typeof claimer !== 'string' || claimer.length === 0) return { ok: false, reason: 'claimer must be a nonempty string' };
      const claimerChange = storedChange(claimer, 'claimer');
      if (claimerChange !== null) return { ok: false, reason: `the claimer name cannot be stored as given: ${claimerChange}` };
      const leaseMs = claimOptions.leaseMs ?? DEFAULT_CLAIM_MS;
      return withRetry<ClaimResult>(requestId, (state) => {
        const now = clock.now().getTime();
        if (!state.posted) return { done: { ok: false, reason: 'no such request' } as const };
        if (state.approval) return { done: { ok: false, reason: 'the request is already answered' } as const };
        const held = activeClaim(state, now);
        if (held) return { done: { ok: false, reason: `the request is claimed by ${held.claimer}` } as const };
        const claimToken = randomHex(32);
        const leaseExpiresAt = new Date(now + leaseMs).toISOString();
        return {
          append: [event('callback-claimed', { claimer, tokenDigest: sha256Digest(claimToken), leaseExpiresAt })],
          then: { ok: true, claimToken, leaseExpiresAt } as const,
        };
      });
    },

    async submit(requestId, claimToken, claimer, requestDigest, response, actor) {
      return withRetry<SubmitResult>(requestId, (state) => {
        const refuse = (kind: 'invalid' | 'stale-claim' | 'answered' | 'not-found', reason: string) => ({ done: { ok: false, kind, reason } as const });
        if (!state.posted) return refuse('not-found', 'no such request');
        if (state.approval) return refuse('answered', 'the request is already answered');
        const { request, subject } = state.posted;
        if (requestDigest !== request.digest) return refuse('invalid', 'the request digest is not the posted request');
        const held = activeClaim(state, clock.now().getTime());
        if (!held || held.claimer !== claimer || held.tokenDigest !== sha256Digest(String(claimToken))) {
          return refuse('stale-claim', 'the claim token is not the claim in force');
        }
        const problem = responseProblem(request, response) ?? subjectProblem(request, subject, plan);
        if (problem) return refuse('invalid', problem);
        if (!isJsonObject(actor)) return refuse('invalid', 'actor must be a JSON object');
        let record;
        let submitted;
        try {
          submitted = storage.prepareJson({ claimer, tokenDigest: held.tokenDigest, response, actor }, 'callback answer');
          record = buildApprovalRecord((value, where) => storage.prepareJson(value, where), {
            runId,
            request,
            subject,
            plan,
            planDigest,
            actor,
            claimer,
            decision: response as ApprovalDecision,
          });
        } catch (error) {
          const refusal = policyRefusal(error, 'callback answer') ?? policyRefusal(error, 'approval record');
          if (refusal === null) throw error;
          return refuse('invalid', `the answer holds content the storage policy refuses: ${refusal}`);
        }
        return {
          append: [event('callback-submitted', submitted), event('approval-recorded', { record })],
          then: { ok: true, record },
        };
      });
    },

    async release(requestId, claimToken, claimer) {
      return withRetry<ReleaseResult>(requestId, (state) => {
        const held = activeClaim(state, clock.now().getTime());
        if (!held || held.claimer !== claimer || held.tokenDigest !== sha256Digest(String(claimToken))) {
          return { done: { ok: false, reason: 'the claim token is not the claim in force' } as const };
        }
        return { append: [event('callback-released', { claimer, tokenDigest: held.tokenDigest })], then: { ok: true } as const };
      });
    },

    async history(requestId) {
      const stored = await events.read(callbackStreamId(runId, requestId));
      foldCallback(stored);
      return stored.map((entry) => ({ kind: entry.type as CallbackEventKind, revision: entry.revision, recordedAt: entry.recordedAt, data: entry.data }));
    },

    async listPending() {
      const streams = await events.listStreams(callbackStreamPrefix(runId));
      const pending = [];
      for (const stream of streams) {
        const state = foldCallback(await events.read(stream.streamId));
        if (!state.posted || state.approval) continue;
        const claim = activeClaim(state, clock.now().getTime());
        const { request } = state.posted;
        pending.push({
          requestId: request.requestId,
          requestDigest: request.digest,
          gateId: request.gateId,
          decisionText: request.decisionText,
          claimedBy: claim?.claimer ?? null,
        });
      }
      return pending;
    },
  } satisfies StoredCallbackClient);
}
