import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import { ProofgateError, errorMessage } from '../core/index.js';
import { passThroughEnvName, reservedPassThroughEnv, reviewConfigSchema } from './review-config.js';

/**
 * The trusted repository configuration, `.proofgate.yml`. proofgate reads it
 * from the BASE branch of a change (never from the change itself) and validates
 * it here. Unknown keys and bad values fail with one `CONFIG` error that names
 * the key path, e.g. `automerge.maxRepairsPerHead: expected an integer >= 0`.
 */

/** Where a repository's configuration lives, on the trusted branch and on every protected branch. */
export const REPO_CONFIG_PATH = '.proofgate.yml';

const checkNamePattern = /^[A-Za-z0-9][A-Za-z0-9 ._:/-]*$/;

/** One configured check: a command run jailed on an export of the exact head. */
export const repoCheckSchema = z
  .object({
    name: z.string().min(1).max(100).regex(checkNamePattern, 'check name: letters, digits, space . _ : / -'),
    /** A shell command line (run with /bin/sh -c) or an argv array (run without a shell). */
    run: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    timeoutSeconds: z.number().int().positive().max(86_400).default(600),
    /** Outbound network for this check (through slirp4netns, never the host's loopback); default none at all. */
    network: z.boolean().default(false),
    /** Give the check a standalone git clone of the head instead of a plain tree export. */
    git: z.boolean().default(false),
  })
  .strict();

/** Limits on every jailed job (rlimits and tmpfs sizes; see docs/forge.md). Unset ones keep proofgate's defaults. */
export const jailLimitsSchema = z
  .object({
    memoryBytes: z.number().int().positive().optional(),
    processes: z.number().int().positive().optional(),
    cpuSeconds: z.number().int().positive().optional(),
    fileBytes: z.number().int().positive().optional(),
    tmpBytes: z.number().int().positive().optional(),
  })
  .strict();

export const repoPermissionSchema = z.enum(['admin', 'maintain', 'write', 'triage', 'read']);

/** A maintainer: a plain login (permission `write`) or `{ login, permission }`. */
export const maintainerSchema = z.union([
  z.string().min(1).max(100),
  z
    .object({
      login: z.string().min(1).max(100),
      permission: repoPermissionSchema.default('write'),
    })
    .strict(),
]);

const nonNegativeInt = z.number().int().min(0);
const positiveInt = z.number().int().positive();
const commandArgv = z.array(z.string().min(1)).min(1);

/** How a change lands on its base (the forge port's `MergeMethod`). */
export const MERGE_METHODS = ['squash', 'merge', 'rebase'] as const;
export const mergeMethodSchema = z.enum(MERGE_METHODS);

/** The `automerge:` section. Kept open for the automerge loop: every field is optional here. */
export const automergeConfigSchema = z
  .object({
    ignoredChecks: z.array(z.string().min(1)).optional(),
    /** Whether a head with no check reported yet waits for checks (default: see the automerge loop's policy). */
    expectChecks: z.boolean().optional(),
    maxRepairsPerChange: nonNegativeInt.optional(),
    maxRepairsPerHead: nonNegativeInt.optional(),
    shepherdWaitMs: nonNegativeInt.optional(),
    shepherdPollMs: positiveInt.optional(),
    transientWaitMs: nonNegativeInt.optional(),
    transientPollMs: positiveInt.optional(),
    /** Window while a change waits for required approvals (`requiredApprovals`) before the loop ends blocked. */
    reviewWaitMs: nonNegativeInt.optional(),
    reviewPollMs: positiveInt.optional(),
    gate: commandArgv.optional(),
    gateTimeoutSeconds: positiveInt.optional(),
    /** How a change lands on its base: `squash` (the default), `merge` (a merge commit) or `rebase`. */
    mergeMethod: mergeMethodSchema.optional(),
    /** Delete the head branch after the merge (never a protected branch, never a fork's). Default false. */
    deleteHeadBranch: z.boolean().optional(),
    repairOutputBytes: positiveInt.optional(),
    /**
     * proofgate's merge queue of the base. `enabled`: a ready change is merged through the queue
     * (default true on the local forge; on GitHub only an explicit true turns it on, see
     * `queueSettings`); `batchSize` (default 4, 1 turns batching off): how many queued changes one
     * candidate holds at most.
     */
    queue: z.object({ enabled: z.boolean().optional(), batchSize: positiveInt.optional() }).strict().optional(),
    agentFix: z
      .object({
        command: commandArgv,
        timeoutSeconds: positiveInt.optional(),
        /** Outbound network for the agent (through slirp4netns, never the host's loopback); default none at all. */
        network: z.boolean().optional(),
        /** Names of proofgate's environment variables passed through to the agent (its provider key): the rule lanes use. */
        env: z.array(passThroughEnvName).optional(),
      })
      .strict()
      .superRefine((agent, context) => {
        agent.env?.forEach((name, index) => {
          const reason = reservedPassThroughEnv(name);
          if (reason !== undefined) context.addIssue({ code: 'custom', message: `${name} cannot be passed to agent-fix: ${reason}`, path: ['env', index] });
        });
      })
      .optional(),
  })
  .strict();

/**
 * The `proof:` section: behavioural scenarios a reviewer may ask to run
 * during its review turn (see src/proof/), the one ceiling all of a review's
 * proof plans share, and the part of the review's budget kept for its final
 * decision.
 */

/** The ceiling every proof plan of one review shares, from its first request, when the config does not say. */
export const DEFAULT_PROOF_CEILING_SECONDS = 1200;
/** The part of the review's budget kept for its final decision, when the config does not say. */
export const DEFAULT_PROOF_RESERVE_SECONDS = 90;
/** The longest ceiling a config may set: one day. */
export const MAX_PROOF_CEILING_SECONDS = 86_400;
/** The largest reserve a config may set: one hour. */
export const MAX_PROOF_RESERVE_SECONDS = 3600;
/** The most scenarios one config may list. */
export const MAX_PROOF_SCENARIOS = 32;
/** Evidence limits: what a scenario gets when it does not say, and the most it may ask for. */
export const DEFAULT_EVIDENCE_MAX_BYTES = 64 * 1024 * 1024;
export const MAX_EVIDENCE_BYTES = 1024 * 1024 * 1024;
export const DEFAULT_EVIDENCE_MAX_ENTRIES = 256;
export const MAX_EVIDENCE_ENTRIES = 10_000;
/** The most files a scenario may require in its evidence. */
export const MAX_REQUIRED_EVIDENCE_FILES = 256;
/** The bundle's own index: always present, never an observation. */
export const EVIDENCE_MANIFEST_NAME = 'manifest.json';

/**
 * A scenario id: a lowercase slug of at most 48 characters (letters, digits,
 * `_`, `-`; no dots or slashes), so it is safe as a file name, in a tool name
 * (`proof_<id>` stays within the 64 characters tool-calling APIs allow) and
 * in the `@proofgate proof` command.
 */
export const PROOF_SCENARIO_ID = /^[a-z0-9][a-z0-9_-]{0,47}$/;

/** An integer in [min, max]; a missing one is reported as required (the formatter's wording). */
const boundedInt = (min: number, max: number, what: string) =>
  z
    .number({ error: (issue) => (issue.input === undefined ? undefined : `expected ${what}`) })
    .int({ error: `expected ${what}` })
    .min(min, { error: `expected ${what}` })
    .max(max, { error: `expected ${what}` });

/**
 * Whether `name` is a branch name git would take (the rules of
 * `git check-ref-format` that matter for a name written in a config):
 * no `..`, `@{`, control characters, spaces or `~^:?*[\`, no component
 * starting with `.` or ending with `.lock`, no leading `-` or `/`, no
 * trailing `/` or `.`, no `//`.
 */
export function isBranchName(name: string): boolean {
  if (name.length === 0 || name.length > 255 || name === '@') return false;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f~^:?*[\\]/.test(name) || name.includes('..') || name.includes('@{') || name.includes('//')) return false;
  if (name.startsWith('-') || name.startsWith('/') || name.endsWith('/') || name.endsWith('.')) return false;
  return name.split('/').every((part) => !part.startsWith('.') && !part.endsWith('.lock'));
}

/**
 * Whether `path` is a safe relative file name inside an evidence bundle:
 * `/`-separated, normalized (no empty, `.` or `..` component), no leading
 * `/`, no backslash, drive letter, NUL or other control character.
 */
export function isSafeEvidencePath(path: string): boolean {
  if (path.length === 0 || path.length > 255) return false;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(path) || /^[A-Za-z]:/.test(path)) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

const argvEntry = z
  .string()
  .min(1)
  .max(4096)
  .refine((arg) => !arg.includes('\0'), 'must not hold a NUL character');

/** A local producer: a program from the trusted base, run jailed on an export of the exact head; it reads the plan and writes observations. */
export const localProofProducerSchema = z
  .object({
    kind: z.literal('local'),
    command: z.array(argvEntry).min(1).max(64),
  })
  .strict();

/** A GitHub producer: a workflow on a protected branch, dispatched with the plan digest; its artifact is the evidence bundle. */
export const githubWorkflowProofProducerSchema = z
  .object({
    kind: z.literal('github-workflow'),
    workflow: z.string().regex(/^\.github\/workflows\/[A-Za-z0-9_.-]+\.ya?ml$/, 'expected a file .github/workflows/<name>.yml'),
    /** The branch the workflow runs from (default: the trusted branch); it must be a protected branch. */
    ref: z.string().refine(isBranchName, 'expected a branch name').optional(),
    artifact: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'expected an artifact name: letters, digits, . _ - (at most 100)'),
  })
  .strict();

export const proofProducerSchema = z.discriminatedUnion('kind', [localProofProducerSchema, githubWorkflowProofProducerSchema], {
  error: 'expected kind local or github-workflow',
});

/** What a scenario's evidence bundle must hold, and how large it may be. */
export const proofEvidenceSchema = z
  .object({
    /** Observation files the bundle must hold (relative paths; `manifest.json` is always there and is not listed). */
    requiredFiles: z
      .array(
        z
          .string()
          .refine(isSafeEvidencePath, 'expected a relative path without . or .. parts, backslashes or control characters')
          .refine((path) => path.toLowerCase() !== EVIDENCE_MANIFEST_NAME, `${EVIDENCE_MANIFEST_NAME} is the bundle's index, not an observation`),
      )
      .max(MAX_REQUIRED_EVIDENCE_FILES)
      .default([]),
    /** The most bytes the bundle may expand to. */
    maxBytes: boundedInt(1, MAX_EVIDENCE_BYTES, `an integer from 1 to ${MAX_EVIDENCE_BYTES}`).default(DEFAULT_EVIDENCE_MAX_BYTES),
    /** The most entries the bundle may hold, the manifest included. */
    maxEntries: boundedInt(1, MAX_EVIDENCE_ENTRIES, `an integer from 1 to ${MAX_EVIDENCE_ENTRIES}`).default(DEFAULT_EVIDENCE_MAX_ENTRIES),
  })
  .strict()
  .superRefine((evidence, context) => {
    const seen = new Set<string>();
    evidence.requiredFiles.forEach((path, index) => {
      // Bundles refuse names that differ only by case, so required names must not either.
      const key = path.toLowerCase();
      if (seen.has(key))
        context.addIssue({ code: 'custom', path: ['requiredFiles', index], message: `duplicate file "${path}" (names compare case-insensitively)` });
      seen.add(key);
    });
    if (evidence.requiredFiles.length + 1 > evidence.maxEntries) {
      context.addIssue({ code: 'custom', path: ['maxEntries'], message: `expected room for the manifest and ${evidence.requiredFiles.length} required files` });
    }
  });

export const proofScenarioSchema = z
  .object({
    id: z.string().regex(PROOF_SCENARIO_ID, 'expected a scenario id: lowercase letters, digits, _ -, at most 48 characters'),
    /** What the scenario exercises: shown to the reviewer with its tool. */
    description: z.string().trim().min(1).max(1000),
    producer: proofProducerSchema,
    /** The longest one plan of this scenario may run; at most `ceilingSeconds`. */
    timeoutSeconds: boundedInt(1, MAX_PROOF_CEILING_SECONDS, `an integer from 1 to ${MAX_PROOF_CEILING_SECONDS}`),
    evidence: proofEvidenceSchema.prefault({}),
  })
  .strict();

export const proofConfigSchema = z
  .object({
    scenarios: z.array(proofScenarioSchema).max(MAX_PROOF_SCENARIOS).default([]),
    /** One ceiling for all of a review's proof plans, starting at its first request. */
    ceilingSeconds: boundedInt(1, MAX_PROOF_CEILING_SECONDS, `an integer from 1 to ${MAX_PROOF_CEILING_SECONDS}`).default(DEFAULT_PROOF_CEILING_SECONDS),
    /** The part of the review's budget proof never spends: kept for the final decision. */
    reserveSeconds: boundedInt(0, MAX_PROOF_RESERVE_SECONDS, `an integer from 0 to ${MAX_PROOF_RESERVE_SECONDS}`).default(DEFAULT_PROOF_RESERVE_SECONDS),
  })
  .strict()
  .superRefine((proof, context) => {
    const ids = new Set<string>();
    proof.scenarios.forEach((scenario, index) => {
      if (ids.has(scenario.id)) context.addIssue({ code: 'custom', path: ['scenarios', index, 'id'], message: `duplicate scenario id "${scenario.id}"` });
      ids.add(scenario.id);
      if (scenario.timeoutSeconds > proof.ceilingSeconds) {
        context.addIssue({
          code: 'custom',
          path: ['scenarios', index, 'timeoutSeconds'],
          message: `${scenario.timeoutSeconds} is more than proof.ceilingSeconds (${proof.ceilingSeconds})`,
        });
      }
    });
  });

export type ProofProducerConfig = z.infer<typeof proofProducerSchema>;
export type ProofEvidenceConfig = z.infer<typeof proofEvidenceSchema>;
export type ProofScenarioConfig = z.infer<typeof proofScenarioSchema>;
export type ProofConfig = z.infer<typeof proofConfigSchema>;

/** The proof rule that spans sections: the reserve must leave the review's own budget (when set) some time for proof. */
function checkProofAgainstReview(
  config: { readonly proof?: ProofConfig | undefined; readonly review?: { readonly budgetSeconds?: number | undefined } | undefined },
  context: z.core.$RefinementCtx,
): void {
  const budget = config.review?.budgetSeconds;
  if (config.proof === undefined || budget === undefined || config.proof.scenarios.length === 0) return;
  if (config.proof.reserveSeconds >= budget) {
    context.addIssue({
      code: 'custom',
      path: ['proof', 'reserveSeconds'],
      message: `${config.proof.reserveSeconds} leaves no time for proof within review.budgetSeconds (${budget})`,
    });
  }
}

export const repoConfigSchema = z
  .object({
    checks: z.array(repoCheckSchema).default([]),
    maintainers: z.array(maintainerSchema).default([]),
    requireUpToDate: z.boolean().default(false),
    /**
     * Approvals a change needs before it merges: `/proofgate approve` for its
     * current head from this many maintainers (write permission or more)
     * other than its author (0: none; the local forge counts them, GitHub
     * says it with its review decision). Unset is 0.
     */
    requiredApprovals: z.number().int().min(0).max(10).optional(),
    /**
     * Path globs (picomatch, dot files included) of files proofgate trusts
     * beyond the ones it finds itself: a change touching one needs a
     * maintainer's `/proofgate approve` for its head (see automerge's trust rule).
     */
    trustedPaths: z.array(z.string().min(1).max(500)).max(200).optional(),
    /**
     * Branches a change may target (read from the TRUSTED branch's config only;
     * default: the trusted branch). A change's base must be one, its head never.
     */
    protectedBranches: z.array(z.string().min(1).max(255)).min(1).optional(),
    review: reviewConfigSchema.optional(),
    automerge: automergeConfigSchema.optional(),
    /** Behavioural proof a reviewer may ask for (src/proof/): scenarios, the shared ceiling and the reserve. */
    proof: proofConfigSchema.optional(),
    /** How code proofgate did not write runs: `jail` (bubblewrap) or `none` (plainly; every result says so). */
    sandbox: z.enum(['jail', 'none']).default('jail'),
    /** A directory jobs share for package caches: absolute, never inside .git or proofgate's data dir (checked at use). */
    cacheDir: z
      .string()
      .min(1)
      .refine((path) => path.startsWith('/') && !path.includes('\0'), 'must be an absolute path')
      .optional(),
    limits: jailLimitsSchema.optional(),
  })
  .strict()
  .superRefine((config, context) => {
    const seen = new Set<string>();
    config.checks.forEach((check, index) => {
      if (seen.has(check.name)) {
        context.addIssue({ code: 'custom', path: ['checks', index, 'name'], message: `duplicate check name "${check.name}"` });
      }
      seen.add(check.name);
    });
    const logins = new Set<string>();
    config.maintainers.forEach((entry, index) => {
      const login = typeof entry === 'string' ? entry : entry.login;
      if (logins.has(login.toLowerCase())) {
        context.addIssue({ code: 'custom', path: ['maintainers', index], message: `duplicate maintainer "${login}" (logins compare case-insensitively)` });
      }
      logins.add(login.toLowerCase());
    });
    checkProofAgainstReview(config, context);
  });

export type RepoCheck = z.infer<typeof repoCheckSchema>;
export type JailLimitsConfig = z.infer<typeof jailLimitsSchema>;
export type MaintainerEntry = z.infer<typeof maintainerSchema>;
export type AutomergeConfig = z.infer<typeof automergeConfigSchema>;
export type RepoConfig = z.infer<typeof repoConfigSchema>;

/** The configuration that applies when the base branch has no `.proofgate.yml`. */
export function emptyRepoConfig(): RepoConfig {
  return repoConfigSchema.parse({});
}

type Issue = z.core.$ZodIssue;

/** At most this many issues are spelled out in one error; the rest are counted. */
const ISSUES_SHOWN = 5;

/** A key path as the docs write it (`review.lanes[2].timeoutSeconds`); a key that is not a plain word is quoted. */
export function formatKeyPath(path: readonly PropertyKey[]): string {
  let text = '';
  for (const part of path) {
    if (typeof part === 'number') text += `[${part}]`;
    else if (typeof part === 'string' && /^[A-Za-z0-9_-]+$/.test(part)) text += text === '' ? part : `.${part}`;
    else text += `[${JSON.stringify(String(part))}]`;
  }
  return text === '' ? '(top level)' : text;
}

/** The most specific issue: inside a union, the branch that got furthest into the value. */
function mostSpecific(issue: Issue): Issue {
  if (issue.code !== 'invalid_union' || issue.errors.length === 0) return issue;
  let best: Issue | undefined;
  for (const branch of issue.errors) {
    const first = branch[0];
    if (first !== undefined && (best === undefined || first.path.length > best.path.length)) best = first;
  }
  if (best === undefined) return issue;
  const inner = mostSpecific(best);
  return { ...inner, path: [...issue.path, ...inner.path] } as Issue;
}

/** One schema issue in words: `checks[0].run: is required`, `unknown key automerge.maxRepairs`. */
export function describeSchemaIssue(raw: Issue): string {
  const issue = mostSpecific(raw);
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys.map((key) => formatKeyPath([...issue.path, key]));
    return `unknown key ${keys.join(', ')}`;
  }
  if (issue.code === 'invalid_type' && /received undefined$/.test(issue.message)) return `${formatKeyPath(issue.path)}: is required`;
  return `${formatKeyPath(issue.path)}: ${issue.message.replace(/^Invalid (?:input|option): /, '').replace(/\s+/g, ' ')}`;
}

/**
 * The one formatter of schema errors: every issue on one line, `; `
 * between them (the first ISSUES_SHOWN, then how many more), each naming its
 * key path, e.g. `review.transportRetries: expected an integer from 0 to 10`.
 */
export function formatSchemaIssues(issues: readonly Issue[]): string {
  if (issues.length === 0) return 'invalid configuration';
  const shown = issues.slice(0, ISSUES_SHOWN).map(describeSchemaIssue).join('; ');
  return issues.length > ISSUES_SHOWN ? `${shown} (and ${issues.length - ISSUES_SHOWN} more)` : shown;
}

/** Validate a parsed configuration value; `source` names it in the error (e.g. `main:.proofgate.yml`). */
export function parseRepoConfig(value: unknown, source: string): RepoConfig {
  const result = repoConfigSchema.safeParse(value ?? {});
  if (result.success) return result.data;
  throw new ProofgateError('CONFIG', `${source}: ${formatSchemaIssues(result.error.issues)}`, { source });
}

/** Parse the YAML text of `.proofgate.yml` and validate it. */
export function parseRepoConfigYaml(text: string, source: string): RepoConfig {
  let value: unknown;
  try {
    value = parseYaml(text, { uniqueKeys: true, maxAliasCount: 100 });
  } catch (error) {
    const where = error instanceof YAMLParseError && error.linePos ? ` (line ${error.linePos[0].line})` : '';
    throw new ProofgateError('CONFIG', `${source}: not valid YAML${where}: ${errorMessage(error).split(' at line')[0]}`, { source });
  }
  if (value !== null && value !== undefined && (typeof value !== 'object' || Array.isArray(value))) {
    throw new ProofgateError('CONFIG', `${source}: the top level must be a mapping`, { source });
  }
  return parseRepoConfig(value, source);
}

/**
 * Reads one file as committed at `ref` (a branch ref or a commit id): its
 * bytes, or null when that tree has no such file. The forge port's
 * `readFile`, the local repository's `readBlob` and review's git reader all
 * have this shape.
 */
export type ReadFileAtRef = (ref: string, path: string) => Promise<Uint8Array | null>;

export interface LoadedRepoConfig {
  readonly config: RepoConfig;
  /** `<label>:.proofgate.yml`, or null when the ref has no `.proofgate.yml` (the empty configuration applies). */
  readonly source: string | null;
}

/**
 * The one loader of the trusted configuration: `.proofgate.yml` as committed
 * at `ref`, read through `read` and validated by `parseRepoConfigYaml`.
 * Callers pass the trusted branch or a protected base, never a change's head.
 * A ref without the file gets the empty configuration; a malformed file is
 * one `CONFIG` error naming `<label>:.proofgate.yml` and the key path.
 */
export async function loadRepoConfigAt(read: ReadFileAtRef, ref: string, label: string = ref): Promise<LoadedRepoConfig> {
  const bytes = await read(ref, REPO_CONFIG_PATH);
  if (bytes === null) return { config: emptyRepoConfig(), source: null };
  const source = `${label}:${REPO_CONFIG_PATH}`;
  return { config: parseRepoConfigYaml(Buffer.from(bytes).toString('utf8'), source), source };
}

/** Whether two logins name the same account: logins compare case-insensitively everywhere (as GitHub's do). */
export function sameLogin(a: string, b: string): boolean {
  return a.trim().toLowerCase() === b.trim().toLowerCase();
}

/** The permission a maintainers entry grants to `login` (case-insensitively), or null when the login is not listed. */
export function maintainerPermission(config: RepoConfig, login: string): z.infer<typeof repoPermissionSchema> | null {
  for (const entry of config.maintainers) {
    if (typeof entry === 'string') {
      if (sameLogin(entry, login)) return 'write';
    } else if (sameLogin(entry.login, login)) {
      return entry.permission;
    }
  }
  return null;
}

/**
 * The branches changes may target under the trusted branch's config: its
 * `protectedBranches`, and always the trusted branch itself.
 */
export function protectedBranchNames(trustedBranch: string, trustedConfig: RepoConfig): string[] {
  return [...new Set([trustedBranch, ...(trustedConfig.protectedBranches ?? [])])];
}

/**
 * The protected-branch rule, said once: a change's base must be a protected
 * branch (its config supplies the checks and lanes), and its head must not be
 * one (a repair pushes to the head; case-insensitively, since a
 * case-insensitive file system keeps `Main` and `main` in one ref file).
 * Returns why the pair is refused, or null.
 */
export function protectedBranchRefusal(input: {
  readonly trustedBranch: string;
  readonly trustedConfig: RepoConfig;
  readonly base: string;
  readonly head: string;
}): string | null {
  const names = protectedBranchNames(input.trustedBranch, input.trustedConfig);
  const list = names.join(', ');
  if (names.some((name) => name.toLowerCase() === input.head.toLowerCase())) {
    return `head "${input.head}" is a protected branch (${list}); a change's head must be a branch of its own`;
  }
  if (!names.includes(input.base)) {
    return `base "${input.base}" is not a protected branch (${list}, from ${input.trustedBranch}:${REPO_CONFIG_PATH})`;
  }
  return null;
}
