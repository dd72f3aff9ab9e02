/**
 * The trust rule, said once (pure): which paths of a change touch what
 * proofgate trusts, so that merging the change needs a maintainer's
 * `/proofgate approve` for its exact head besides its review.
 *
 * Read from the BASE's (trusted) config, a changed path is trusted when it is
 *
 * 1. `.proofgate.yml`, the trusted config itself;
 * 2. under `.github/workflows/`: the workflows that produce check results;
 * 3. the acceptance contract file the config names (`review.acceptanceContract`);
 * 4. a program a trusted command runs from: every token of a command lane
 *    (`review.lanes[].command`), a check (`checks[].run`, a shell line split
 *    at blanks and shell operators, or an argv array), the repair gate
 *    (`automerge.gate`) and agent-fix (`automerge.agentFix.command`) that is a
 *    repository path. A token is a repository path when, with a leading `./`
 *    and a `--flag=` prefix taken off, it is relative, has no `..` segment,
 *    holds only path characters, and holds a `/` or ends in a file extension
 *    (`tools/review.mjs`, `check.mjs`; not `node`, `npm`, `test`). The path
 *    itself is trusted, and when it sits in a directory, everything in that
 *    directory and below (the modules a script imports); a token ending in
 *    `/` names a whole directory;
 * 5. matched by a glob of the config's `trustedPaths` (picomatch, dot files
 *    included, a newline in a path matched like any other character), for
 *    whatever the rules above cannot see.
 */
import picomatch from 'picomatch';
import { REPO_CONFIG_PATH, type RepoConfig } from '../contracts/repo-config.js';

/** Producer workflows: they decide what a check result says. */
const WORKFLOW_DIR = '.github/workflows/';
/** Characters a token may hold to count as a repository path. */
const PATH_TOKEN = /^[A-Za-z0-9._@+-][A-Za-z0-9._@+/-]*$/;
const EXTENSION = /\.[A-Za-z0-9]{1,10}$/;
/** Where a shell line splits into words (quotes are dropped, not interpreted). */
const SHELL_SPLIT = /[\s;&|()<>`'"]+/;

/** What a trusted command names: exact files and whole directories (with a trailing `/`). */
export interface TrustedCommandPaths {
  readonly files: readonly string[];
  readonly directories: readonly string[];
}

/** The repository path a command token names, or null when it names none (rule 4). */
export function repositoryPathOf(token: string): string | null {
  let path = token.trim();
  const flag = /^--?[A-Za-z0-9][A-Za-z0-9-]*=(.*)$/.exec(path);
  if (flag?.[1] !== undefined) path = flag[1];
  while (path.startsWith('./')) path = path.slice(2);
  if (path === '' || path.startsWith('-') || !PATH_TOKEN.test(path)) return null;
  const segments = path.split('/');
  if (segments.some((segment) => segment === '..' || segment === '.')) return null;
  if (segments.slice(0, -1).some((segment) => segment === '')) return null;
  if (!path.includes('/') && !EXTENSION.test(path)) return null;
  return path;
}

function commandTokens(config: RepoConfig): string[] {
  const tokens: string[] = [];
  for (const lane of config.review?.lanes ?? []) tokens.push(...(lane.command ?? []));
  for (const check of config.checks) tokens.push(...(typeof check.run === 'string' ? check.run.split(SHELL_SPLIT) : check.run));
  tokens.push(...(config.automerge?.gate ?? []));
  tokens.push(...(config.automerge?.agentFix?.command ?? []));
  return tokens;
}

/** The files and directories the config's trusted commands run from (rule 4). */
export function trustedCommandPaths(config: RepoConfig): TrustedCommandPaths {
  const files = new Set<string>();
  const directories = new Set<string>();
  for (const token of commandTokens(config)) {
    const path = repositoryPathOf(token);
    if (path === null) continue;
    if (path.endsWith('/')) {
      directories.add(path);
      continue;
    }
    files.add(path);
    const slash = path.lastIndexOf('/');
    if (slash > 0) directories.add(path.slice(0, slash + 1));
  }
  return { files: [...files].sort(), directories: [...directories].sort() };
}

/** The changed paths that touch what proofgate trusts under `config` (the base's), sorted, each once. */
export function trustedPathsTouched(changedPaths: readonly string[], config: RepoConfig): string[] {
  const { files, directories } = trustedCommandPaths(config);
  const exact = new Set<string>([REPO_CONFIG_PATH, ...files]);
  const contract = config.review?.acceptanceContract;
  if (contract !== undefined) exact.add(contract.replace(/^(?:\.\/)+/, ''));
  const under = [WORKFLOW_DIR, ...directories];
  const globs = config.trustedPaths ?? [];
  const matches = globs.length === 0 ? null : picomatch(globs, { dot: true, flags: 's' });
  const touched = changedPaths.filter((path) => exact.has(path) || under.some((dir) => path.startsWith(dir)) || (matches !== null && matches(path)));
  return [...new Set(touched)].sort();
}
