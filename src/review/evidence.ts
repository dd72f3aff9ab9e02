import { createHash } from 'node:crypto';

/**
 * The evidence file a lane must leave in its evidence directory:
 * `review-evidence-<hex of the first 8 bytes of sha256(subject_id NUL head_sha NUL nonce)>.txt`.
 */
export function evidenceFileName(subjectId: string, headSha: string, nonce: string): string {
  const digest = createHash('sha256').update(`${subjectId}\0${headSha}\0${nonce}`, 'utf8').digest();
  return `review-evidence-${digest.subarray(0, 8).toString('hex')}.txt`;
}
