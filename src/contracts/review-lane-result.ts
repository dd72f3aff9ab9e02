import { z } from 'zod';

/** Schema identifier carried inside every lane result. */
export const REVIEW_LANE_RESULT_SCHEMA = 'review-lane-result.v1';

export const reviewFindingSchema = z
  .object({
    title: z.string().min(1),
    evidence: z.string().min(1),
    path: z.string().min(1).optional(),
    line: z.number().int().positive().optional(),
  })
  .strict();

const laneIdentity = {
  schema: z.literal(REVIEW_LANE_RESULT_SCHEMA),
  lane_id: z.string().min(1),
  family: z.string().min(1),
  context_id: z.string().min(1),
  nonce: z.string().min(1),
  read_only: z.boolean(),
  findings: z.array(reviewFindingSchema),
};

/** A semantic judgment: the reviewer looked and decided. */
export const semanticLaneResultSchema = z
  .object({
    ...laneIdentity,
    evidence_path: z.string().min(1),
    disposition: z.enum(['CONFIRMED', 'REFUTED']),
  })
  .strict();

/** The lane did not produce a judgment (timeout, crash, malformed output ...). Never a refutation. */
export const transportLaneResultSchema = z
  .object({
    ...laneIdentity,
    evidence_path: z.string().min(1).optional(),
    failure: z
      .object({
        class: z.literal('transport'),
        reason: z.string().min(1),
      })
      .strict(),
  })
  .strict();

/** `review-lane-result.v1`: either a disposition or a transport failure, never both. */
export const reviewLaneResultSchema = z.union([semanticLaneResultSchema, transportLaneResultSchema]);

export type ReviewFinding = z.infer<typeof reviewFindingSchema>;
export type SemanticLaneResultV1 = z.infer<typeof semanticLaneResultSchema>;
export type TransportLaneResultV1 = z.infer<typeof transportLaneResultSchema>;
export type ReviewLaneResultV1 = z.infer<typeof reviewLaneResultSchema>;
export type ReviewDisposition = SemanticLaneResultV1['disposition'];
