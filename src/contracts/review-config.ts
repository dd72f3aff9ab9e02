import { z } from 'zod';

const positiveInt = (max: number) =>
  z
    .number({ error: 'expected a positive integer' })
    .int({ error: 'expected a positive integer' })
    .positive({ error: 'expected a positive integer' })
    .max(max, { error: `expected at most ${max}` });

/** Variables proofgate sets (or copies) itself for every jailed program: a lane cannot override them. */
const RESERVED_PROGRAM_ENV: readonly string[] = ['PATH', 'HOME', 'TMPDIR', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ'];

/**
 * The one rule for which of proofgate's environment variables a command lane
 * (or an agent-fix command) may name in `env` to have them passed through
 * into its jail (its model provider's key, `OPENAI_API_KEY`): never a
 * forge token or one of proofgate's own settings and secrets, never git's or
 * PostgreSQL's connection settings, and never a variable proofgate itself sets
 * for the jailed program. Returns why `name` is refused, or undefined.
 */
export function reservedPassThroughEnv(name: string): string | undefined {
  if (/^PROOFGATE_/.test(name)) return "proofgate's own settings and secrets (PROOFGATE_*) never reach a jailed program";
  if (/^(?:GITHUB_|GH_)/.test(name)) return 'forge tokens and settings (GITHUB_*, GH_*) never reach a jailed program';
  if (/^GIT_/.test(name)) return 'git settings and credentials (GIT_*) never reach a jailed program';
  if (/^PG[A-Z]*$|^PG_|^DATABASE_URL$/.test(name)) return 'database settings (PG*, DATABASE_URL) never reach a jailed program';
  if (RESERVED_PROGRAM_ENV.includes(name)) return `${name} is set by proofgate for the jailed program`;
  return undefined;
}

/** A name a lane or agent-fix may list in `env`: a plain variable name (the reserved ones are refused by `reservedPassThroughEnv`). */
export const passThroughEnvName = z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'expected an environment variable name (A-Z, 0-9, _)');

/** One reviewer lane in `.proofgate.yml` (`review.lanes[]`). Exactly one of builtin / command / openai. */
export const reviewLaneConfigSchema = z
  .object({
    id: z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, 'lane id: lowercase letters, digits, . _ -'),
    family: z.string().min(1).optional(),
    builtin: z.enum(['rules', 'tests', 'proof']).optional(),
    /** The reviewer program, resolved in the trusted base tree (its working directory), never in the head under review. */
    command: z.array(z.string().min(1)).min(1).optional(),
    /** Command lanes: outbound network for the program (default false: no network at all). */
    network: z.boolean().optional(),
    /** Command lanes: names of proofgate's environment variables passed through to the program (its provider key). */
    env: z.array(passThroughEnvName).optional(),
    openai: z
      .object({
        baseUrl: z.string().url(),
        model: z.string().min(1),
        /** Name of the environment variable that holds the API key (never the key itself). */
        apiKeyEnv: z
          .string()
          .regex(/^[A-Z_][A-Z0-9_]*$/)
          .optional(),
      })
      .strict()
      .optional(),
    timeoutSeconds: positiveInt(86_400).optional(),
  })
  .strict()
  .superRefine((lane, context) => {
    if ([lane.builtin, lane.command, lane.openai].filter((x) => x !== undefined).length !== 1) {
      context.addIssue({ code: 'custom', message: 'a lane needs exactly one of builtin, command or openai', path: [] });
    }
    if (lane.command === undefined) {
      for (const key of ['network', 'env'] as const) {
        if (lane[key] !== undefined) context.addIssue({ code: 'custom', message: 'only a command lane has this setting', path: [key] });
      }
    }
    lane.env?.forEach((name, index) => {
      const reason = reservedPassThroughEnv(name);
      if (reason !== undefined) context.addIssue({ code: 'custom', message: `${name} cannot be passed to a lane: ${reason}`, path: ['env', index] });
    });
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

/** How often a lane that failed in transport is dispatched again when the config does not say (`review.transportRetries`). */
export const DEFAULT_TRANSPORT_RETRIES = 2;
/** The most re-dispatches a config may ask for per lane. */
export const MAX_TRANSPORT_RETRIES = 10;
/** The longest review budget a config may set (`review.budgetSeconds`): one week. */
export const MAX_REVIEW_BUDGET_SECONDS = 7 * 86_400;

const retryCount = z
  .number({ error: `expected an integer from 0 to ${MAX_TRANSPORT_RETRIES}` })
  .int({ error: `expected an integer from 0 to ${MAX_TRANSPORT_RETRIES}` })
  .min(0, { error: `expected an integer from 0 to ${MAX_TRANSPORT_RETRIES}` })
  .max(MAX_TRANSPORT_RETRIES, { error: `expected an integer from 0 to ${MAX_TRANSPORT_RETRIES}` });

export const reviewConfigSchema = z
  .object({
    mode: z.enum(['fresh-context', 'multi-model']).default('fresh-context'),
    lanes: z.array(reviewLaneConfigSchema).min(1),
    /**
     * How many times a lane whose attempt ended without a valid judgment (a
     * transport failure or an answer that does not validate) is dispatched
     * again, each time with a fresh context (default DEFAULT_TRANSPORT_RETRIES).
     * A REFUTED answer is never asked again.
     */
    transportRetries: retryCount.optional(),
    /**
     * The review's overall time budget: a re-dispatch starts only if it can end
     * (the lane's timeout) within this many seconds of the review's start.
     * Default: (1 + transportRetries) times the longest lane timeout.
     */
    budgetSeconds: positiveInt(MAX_REVIEW_BUDGET_SECONDS).optional(),
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
