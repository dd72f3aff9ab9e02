import { z } from 'zod';

/** Schema identifier carried inside every review request. */
export const REVIEW_REQUEST_SCHEMA = 'review-request.v1';

export const sha256DigestSchema = z.string().regex(/^sha256:[0-9a-f]{64}$/, { error: 'expected sha256:<64 lowercase hex>' });

export const gitShaSchema = z.string().regex(/^[0-9a-f]{40}$/, { error: 'expected a 40-hex git object id' });

/** A file the reviewer reads, bound to the digest of its exact bytes. */
export const boundFileSchema = z
  .object({
    path: z.string().min(1),
    sha256: sha256DigestSchema,
  })
  .strict();

export const diversityModeSchema = z.enum(['fresh-context', 'multi-model']);

/**
 * `review-request.v1`: what one reviewer lane is asked to judge. Every input is
 * bound by digest; the nonce (at least 128 random bits) must come back in the
 * lane result.
 */
export const reviewRequestSchema = z
  .object({
    schema: z.literal(REVIEW_REQUEST_SCHEMA),
    subject_id: z.string().min(1),
    head_sha: gitShaSchema,
    base_sha: gitShaSchema,
    acceptance_contract: boundFileSchema,
    diff: boundFileSchema,
    author: z
      .object({
        context_id: z.string().min(1),
        family: z.string().min(1),
      })
      .strict(),
    diversity_mode: diversityModeSchema,
    nonce: z.string().regex(/^[0-9a-f]{32,}$/, { error: 'expected at least 32 lowercase hex digits (128 bits)' }),
    evidence_dir: z.string().min(1),
    read_only: z.literal(true),
    deadline: z.iso.datetime({ offset: true }),
  })
  .strict();

export type ReviewRequestV1 = z.infer<typeof reviewRequestSchema>;
export type DiversityMode = z.infer<typeof diversityModeSchema>;
export type BoundFile = z.infer<typeof boundFileSchema>;
