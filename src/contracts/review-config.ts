import { z } from 'zod';

const positiveInt = (max: number) =>
  z
    .number({ error: 'expected a positive integer' })
    .int({ error: 'expected a positive integer' })
    .positive({ error: 'expected a positive integer' })
    .max(max, { error: `expected at most ${max}` });

/** One reviewer lane in `.proofgate.yml` (`review.lanes[]`). Exactly one of builtin / command / openai. */
export const reviewLaneConfigSchema = z
  .object({
    id: z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, 'lane id: lowercase letters, digits, . _ -'),
    family: z.string().min(1).optional(),
    builtin: z.enum(['rules', 'tests']).optional(),
    command: z.array(z.string().min(1)).min(1).optional(),
    openai: z
      .object({
        baseUrl: z.string().url(),
        model: z.string().min(1),
        /** Name of the environment variable that holds the API key (never the key itself). */
        apiKeyEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/).optional(),
      })
      .strict()
      .optional(),
    timeoutSeconds: positiveInt(86_400).optional(),
  })
  .strict()
  .refine((lane) => [lane.builtin, lane.command, lane.openai].filter((x) => x !== undefined).length === 1, {
    message: 'a lane needs exactly one of builtin, command or openai',
  });

/** Settings of the builtin `rules` reviewer. */
export const reviewRulesConfigSchema = z
  .object({
    /** Largest diff (bytes) the rules reviewer accepts. */
    maxDiffBytes: positiveInt(1 << 30).optional(),
    /** Path prefixes or globs (`*`, `**`) a change must not touch. */
    forbiddenPaths: z.array(z.string().min(1)).optional(),
  })
  .strict();

/** Settings of the builtin `tests` reviewer. */
export const reviewTestsConfigSchema = z
  .object({
    /** Globs of source files that need a test change alongside. */
    sourcePaths: z.array(z.string().min(1)).optional(),
    /** Globs of test files. */
    testPaths: z.array(z.string().min(1)).optional(),
  })
  .strict();

export const reviewConfigSchema = z
  .object({
    mode: z.enum(['fresh-context', 'multi-model']).default('fresh-context'),
    lanes: z.array(reviewLaneConfigSchema).min(1),
    /** Repository path (read from the base branch) of the acceptance contract given to reviewers. */
    acceptanceContract: z.string().min(1).optional(),
    rules: reviewRulesConfigSchema.optional(),
    tests: reviewTestsConfigSchema.optional(),
  })
  .strict()
  .refine((config) => new Set(config.lanes.map((lane) => lane.id)).size === config.lanes.length, {
    message: 'lane ids must be unique',
    path: ['lanes'],
  });

export type ReviewLaneConfig = z.infer<typeof reviewLaneConfigSchema>;
export type ReviewConfig = z.infer<typeof reviewConfigSchema>;
export type ReviewRulesConfig = z.infer<typeof reviewRulesConfigSchema>;
export type ReviewTestsConfig = z.infer<typeof reviewTestsConfigSchema>;
