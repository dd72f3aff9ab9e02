/**
 * What verifying a bundle came to, for the evidence tests: `ACCEPTED`, or
 * the typed reason of the refusal, after checking the refusal's form (an
 * `EVIDENCE_INVALID` error whose one-line message starts with its reason and
 * holds nothing `forbidden` matches).
 */
import { expect } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { evidenceReason, verifyEvidenceBundle, type EvidenceExpectation, type EvidenceReason } from '../../src/proof/index.js';

export type Outcome = EvidenceReason | 'ACCEPTED';

export async function verifyOutcome(source: Buffer | string, expectation: EvidenceExpectation | undefined, forbidden: RegExp): Promise<Outcome> {
  try {
    await verifyEvidenceBundle(source, expectation);
    return 'ACCEPTED';
  } catch (error) {
    expect(isProofgateError(error, 'EVIDENCE_INVALID'), String(error)).toBe(true);
    const reason = evidenceReason(error);
    expect(reason).not.toBeNull();
    const message = (error as Error).message;
    expect(message.startsWith(`${reason}: `)).toBe(true);
    expect(message).not.toMatch(forbidden);
    return reason as EvidenceReason;
  }
}
