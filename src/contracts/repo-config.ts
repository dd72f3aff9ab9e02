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
