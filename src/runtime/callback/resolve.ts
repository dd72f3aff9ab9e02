import { checkRunId } from '../run/stream.js';
import type { RunStorage } from '../../storage/policy-types.js';
import { sameJson } from '../proof/completion.js';
import { checkApprovalDigest, subjectProblem } from './approval-record.js';
import { loadPlan } from './client.js';
import { requestIntact } from './gate.js';
import { callbackStreamId, foldCallback } from './state.js';
import { storedSubject, subjectDigest } from './subject.js';
import type { ApprovalResolution, ApprovalSubjectInput, CallbackRequest } from './types.js';

/**
 * The stored decision for `request`, only while the request, the current
 * subject (every covered byte), the plan and its admitted permissions still
 * match the approval record; otherwise `wait` with the reason.
 */
export async function resolveApproval(
  storage: RunStorage,
  runId: string,
  current: ApprovalSubjectInput & { readonly request: CallbackRequest },
): Promise<ApprovalResolution> {
  checkRunId(runId);
  const { request, ...subjectInput } = current;
  const wait = (reason: string): ApprovalResolution => ({ kind: 'wait', reason });
  if (!requestIntact(request)) return wait('the request does not match its id and digest');
  const subject = storedSubject(subjectInput);
  const digest = subjectDigest(subject);
  if (digest !== request.subjectDigest) return wait('a covered byte changed: the subject is not the one approved');
  const state = foldCallback(await storage.eventStore.read(callbackStreamId(runId, request.requestId)));
  if (!state.approval) return wait(state.posted ? 'the request is not answered yet' : 'the request was never posted');
  const record = checkApprovalDigest(state.approval);
  const { plan, planDigest } = await loadPlan(storage, runId);
  if (record.requestDigest !== request.digest || record.subjectDigest !== digest || !sameJson(record.subject, subject)) {
    return wait('the approval record covers another request or subject');
  }
  if (record.planDigest !== planDigest) return wait('the run plan changed');
  if (!sameJson(record.graph, { definitionDigest: plan.graph.definitionDigest, typeVersion: plan.graph.typeVersion })) return wait('the graph changed');
  const problem = subjectProblem(request, subject, plan);
  if (problem) return wait(problem);
  return { kind: record.decision.kind, record };
}
