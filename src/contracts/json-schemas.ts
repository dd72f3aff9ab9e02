import { z } from 'zod';
import { reviewConfigSchema } from './review-config.js';
import { reviewLaneResultSchema } from './review-lane-result.js';
import { reviewRequestSchema } from './review-request.js';

/** The zod schemas published as JSON Schema files in `schemas/<name>.json`. */
const PUBLISHED: Record<string, z.ZodType> = {
  'review-request.v1': reviewRequestSchema,
  'review-lane-result.v1': reviewLaneResultSchema,
  'review-config': reviewConfigSchema,
};

/** JSON Schema (draft 2020-12) of every published contract, keyed by file stem. */
export function contractJsonSchemas(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(PUBLISHED)) {
    out[name] = { $id: `https://proofgate.dev/schemas/${name}.json`, ...z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) };
  }
  return out;
}
