import { realpath, stat } from 'node:fs/promises';
import { basename, isAbsolute, join, sep } from 'node:path';
import { reviewLaneResultSchema, type ReviewLaneResultV1, type ReviewRequestV1 } from '../contracts/index.js';
import { formatSchemaIssues } from '../contracts/repo-config.js';
import { evidenceFileName } from './evidence.js';
import { verifyRequestInputs } from './request.js';

/** Why a lane result does not count. */
export type LaneValidationCode =
  | 'MALFORMED'
  | 'AMBIGUOUS_OUTCOME'
  | 'MISSING_OUTCOME'
  | 'FAILURE_WITHOUT_REASON'
  | 'NONCE_MISMATCH'
  | 'SELF_REVIEW'
  | 'LANE_MISMATCH'
  | 'NOT_READ_ONLY'
  | 'EVIDENCE_MISSING'
  | 'EVIDENCE_NAME'
  | 'EVIDENCE_OUTSIDE'
  | 'EVIDENCE_NOT_REGULAR'
  | 'EVIDENCE_EMPTY'
  | 'REFUTED_WITHOUT_FINDINGS'
  | 'MUTABLE_INPUT'
  | 'READ_ONLY_VIOLATED'
  | 'REPOSITORY_MODIFIED';

export type LaneValidation = { readonly valid: true } | { readonly valid: false; readonly code: LaneValidationCode; readonly reason: string };

export function invalid(code: LaneValidationCode, reason: string): LaneValidation {
  return { valid: false, code, reason };
}

export const VALID: LaneValidation = Object.freeze({ valid: true });

/** What the caller knows about the lane it dispatched (optional extra binding). */
export interface LaneExpectation {
  readonly laneId?: string;
  readonly contextId?: string;
}

function shapeCheck(raw: unknown): LaneValidation | ReviewLaneResultV1 {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return invalid('MALFORMED', 'a lane result must be a JSON object');
  const record = raw as Record<string, unknown>;
  const hasDisposition = record.disposition !== undefined;
  const hasFailure = record.failure !== undefined;
  if (hasDisposition && hasFailure) return invalid('AMBIGUOUS_OUTCOME', 'a lane result carries both a disposition and a failure');
  if (!hasDisposition && !hasFailure) return invalid('MISSING_OUTCOME', 'a lane result carries neither a disposition nor a failure');
  if (hasFailure) {
    const failure = record.failure as { reason?: unknown } | null;
    if (failure === null || typeof failure !== 'object' || typeof failure.reason !== 'string' || failure.reason.trim() === '') {
      return invalid('FAILURE_WITHOUT_REASON', 'a transport failure must carry a reason');
    }
  }
  const parsed = reviewLaneResultSchema.safeParse(raw);
  if (!parsed.success) {
    return invalid('MALFORMED', `not a review-lane-result.v1: ${formatSchemaIssues(parsed.error.issues)}`);
  }
  return parsed.data;
}

async function checkEvidence(path: string, request: ReviewRequestV1): Promise<LaneValidation> {
  const expected = evidenceFileName(request.subject_id, request.head_sha, request.nonce);
  if (basename(path) !== expected) return invalid('EVIDENCE_NAME', `evidence file must be named ${expected}, got ${basename(path)}`);
  const given = isAbsolute(path) ? path : join(request.evidence_dir, path);
  let realDir: string;
  let realFile: string;
  try {
    realDir = await realpath(request.evidence_dir);
  } catch {
    return invalid('EVIDENCE_MISSING', `evidence directory ${request.evidence_dir} does not exist`);
  }
  try {
    realFile = await realpath(given);
  } catch {
    return invalid('EVIDENCE_MISSING', `evidence ${given} does not exist`);
  }
  if (!realFile.startsWith(realDir + sep)) {
    return invalid('EVIDENCE_OUTSIDE', `evidence resolves to ${realFile}, outside ${realDir}`);
  }
  const info = await stat(realFile);
  if (!info.isFile()) return invalid('EVIDENCE_NOT_REGULAR', `evidence ${realFile} is not a regular file`);
  if (info.size === 0) return invalid('EVIDENCE_EMPTY', `evidence ${realFile} is empty`);
  return VALID;
}

/**
 * Check a lane result against the request it answers. Returns a typed reason
 * instead of throwing: a result that does not validate simply does not count.
 */
export async function validateLaneResult(raw: unknown, request: ReviewRequestV1, expect: LaneExpectation = {}): Promise<LaneValidation> {
  const shaped = shapeCheck(raw);
  if ('valid' in shaped) return shaped;
  const result = shaped;
  if (result.nonce !== request.nonce) return invalid('NONCE_MISMATCH', 'the result does not echo the request nonce');
  if (result.context_id === request.author.context_id) {
    return invalid('SELF_REVIEW', `reviewer context ${result.context_id} is the author's context`);
  }
  if (expect.laneId !== undefined && result.lane_id !== expect.laneId) {
    return invalid('LANE_MISMATCH', `result names lane ${result.lane_id}, expected ${expect.laneId}`);
  }
  if (expect.contextId !== undefined && result.context_id !== expect.contextId) {
    return invalid('LANE_MISMATCH', `result names context ${result.context_id}, expected ${expect.contextId}`);
  }
  try {
    await verifyRequestInputs(request);
  } catch (error) {
    return invalid('MUTABLE_INPUT', error instanceof Error ? error.message : String(error));
  }
  if ('failure' in result) return VALID;
  if (result.read_only !== true) return invalid('NOT_READ_ONLY', 'the reviewer does not attest read-only execution');
  const evidence = await checkEvidence(result.evidence_path, request);
  if (!evidence.valid) return evidence;
  if (result.disposition === 'REFUTED' && result.findings.length === 0) {
    return invalid('REFUTED_WITHOUT_FINDINGS', 'a REFUTED result must carry at least one finding');
  }
  return VALID;
}
