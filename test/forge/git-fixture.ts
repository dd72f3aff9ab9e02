import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Real temporary git repositories for the tests. Commits are made with one
 * `git fast-import` per commit (no work tree, index or HEAD is touched, so
 * branches can be written from anywhere), and repositories are copied from
 * templates built once per test run (see `fromTemplate`) instead of being
 * initialised and filled again for every test.
 */
export interface TempRepo {
  readonly dir: string;
  git(args: readonly string[], env?: Record<string, string>): string;
  /** Commit `files` (null deletes) on top of `branch` (created from `from` when missing); returns the new sha. */
  commit(branch: string, files: Record<string, string | null>, message?: string, from?: string): string;
  sha(ref: string): string;
  cleanup(): void;
}

export interface CommitIdentity {
  readonly name: string;
  readonly email: string;
}

export const TEST_IDENTITY: CommitIdentity = { name: 'Tess Tester', email: 'tess@example.test' };

function runGit(dir: string, args: readonly string[], options: { env?: Record<string, string>; input?: string | Buffer } = {}): string {
  return execFileSync('git', ['-C', dir, ...args], {
    encoding: 'utf8',
    input: options.input,
    env: options.env === undefined ? process.env : { ...process.env, ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  }).trim();
}

/** A loose ref file's content: one full object id and its newline. */
const LOOSE_REF_CONTENT = /^(?:[0-9a-f]{40}|[0-9a-f]{64})\n$/;
/** A branch name whose file this reader may open: no `..`, no component starting with `.`, nothing git would read otherwise. */
const PLAIN_BRANCH = /^(?!.*\.\.)(?!.*\/\.)(?!\.)[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/;

/**
 * The commit a branch names, read from its loose ref file in `dir/.git`, as
 * git reads it first, without starting git: the tests ask this thousands of
 * times, and a start from a test worker costs about 10 ms of CPU on a small
 * machine. `absent` when `refs/heads/<name>`, asked by that full name, has no
 * file and no `packed-refs` file could hold it. `undefined` wherever git
 * could answer otherwise, and the caller asks git: a name that is not a
 * plain branch (`HEAD`, `main~1`, an object id), a repository without a
 * `.git` directory of loose refs (bare, a linked worktree, reftable), a short
 * name another ref could shadow (git prefers `.git/<name>`, `refs/<name>`
 * and `refs/tags/<name>` to `refs/heads/<name>`, and a `packed-refs` file
 * could hold any of them), a short name with no branch file (it could name a
 * remote-tracking branch), or a file that does not hold an object id (a
 * symbolic ref). A loose file under `refs/heads/` holds a commit whenever
 * git wrote it (git refuses to point a branch at anything else).
 */
function looseBranchTip(dir: string, ref: string): string | 'absent' | undefined {
  const gitDir = join(dir, '.git');
  const fullName = ref.startsWith('refs/heads/');
  const branch = fullName ? ref.slice('refs/heads/'.length) : ref;
  if (!PLAIN_BRANCH.test(branch) || branch.endsWith('.lock')) return undefined;
  if (!fullName && (/^[0-9a-f]{4,64}$/.test(ref) || /^[A-Z_]+$/.test(ref))) return undefined;
  let heads: Stats;
  try {
    heads = statSync(join(gitDir, 'refs', 'heads'));
  } catch {
    return undefined;
  }
  if (!heads.isDirectory()) return undefined;
  const packed = existsSync(join(gitDir, 'packed-refs'));
  if (!fullName && (packed || [ref, `refs/${ref}`, `refs/tags/${ref}`].some((shadow) => existsSync(join(gitDir, shadow))))) return undefined;
  let content: string;
  try {
    content = readFileSync(join(gitDir, 'refs', 'heads', branch), 'utf8');
  } catch (error) {
    return fullName && !packed && (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : undefined;
  }
  return LOOSE_REF_CONTENT.test(content) ? content.slice(0, -1) : undefined;
}

/** The commit `ref` names, or null. */
function resolveCommit(dir: string, ref: string): string | null {
  const loose = looseBranchTip(dir, ref);
  if (loose !== undefined) return loose === 'absent' ? null : loose;
  try {
    return runGit(dir, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
  } catch {
    return null;
  }
}

/** A path as fast-import reads it: C-style quoted. */
function quotePath(path: string): string {
  return `"${path.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`;
}

function data(content: string | Buffer): Buffer {
  const bytes = Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8');
  return Buffer.concat([Buffer.from(`data ${bytes.length}\n`), bytes, Buffer.from('\n')]);
}

/**
 * Commit `files` (null deletes a path) on top of `branch`, or of `from` when
 * the branch does not exist yet (no parent when neither exists), and move the
 * branch there only if nobody moved it meanwhile. One `git fast-import`
 * process writes blobs, tree, commit and ref; returns the new commit's sha.
 */
export function plumbingCommit(
  dir: string,
  identity: CommitIdentity,
  branch: string,
  files: Record<string, string | null>,
  message = 'change',
  from?: string,
): string {
  const old = resolveCommit(dir, `refs/heads/${branch}`);
  const parent = old ?? (from === undefined ? null : resolveCommit(dir, from));
  if (from !== undefined && old === null && parent === null) throw new Error(`plumbingCommit: ${from} is not a commit`);
  const stamp = `${identity.name} <${identity.email}> ${Math.floor(Date.now() / 1000)} +0000`;
  const parts: Buffer[] = [
    Buffer.from(`commit refs/heads/${branch}\nmark :1\nauthor ${stamp}\ncommitter ${stamp}\n`),
    // As `git commit-tree -m` writes it: the message ends with a newline.
    data(message.endsWith('\n') ? message : `${message}\n`),
  ];
  if (parent !== null) parts.push(Buffer.from(`from ${parent}\n`));
  for (const [path, content] of Object.entries(files)) {
    if (content === null) parts.push(Buffer.from(`D ${quotePath(path)}\n`));
    else parts.push(Buffer.from(`M 100644 inline ${quotePath(path)}\n`), data(content));
  }
  parts.push(Buffer.from('\nget-mark :1\n'));
  // fast-import refuses to move an existing branch to a commit that does not descend from it (no --force).
  return runGit(dir, ['fast-import', '--quiet', '--date-format=raw'], { input: Buffer.concat(parts) });
}

/** `git init -b main` with `identity` as the configured user and no commit signing. */
export function initRepo(dir: string, identity: CommitIdentity): void {
  execFileSync('git', ['init', '-q', '-b', 'main', dir]);
  runGit(dir, ['config', 'user.name', identity.name]);
  runGit(dir, ['config', 'user.email', identity.email]);
  runGit(dir, ['config', 'commit.gpgsign', 'false']);
}

/** A TempRepo on an existing repository at `root/repo`. */
function tempRepoAt(root: string): TempRepo {
  const dir = join(root, 'repo');
  const git = (args: readonly string[], env?: Record<string, string>): string => runGit(dir, args, { env });
  const sha = (ref: string): string => {
    const loose = looseBranchTip(dir, ref);
    return loose === undefined || loose === 'absent' ? git(['rev-parse', '--verify', `${ref}^{commit}`]) : loose;
  };
  const commit = (branch: string, files: Record<string, string | null>, message?: string, from?: string): string =>
    plumbingCommit(dir, TEST_IDENTITY, branch, files, message, from);
  return { dir, git, commit, sha, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

const builtTemplates = new Map<string, { path: string; meta: unknown }>();

/**
 * A copy of the repository `build` makes, built at most once per test run
 * (under the run's temporary folder, shared by every test file and worker)
 * and copied for each caller. `key` must name everything `build` depends on.
 * Returns the copy's root (the repository is `root/repo`) and what `build`
 * returned.
 */
export function fromTemplate<T>(prefix: string, key: string, build: (dir: string) => T): { root: string; meta: T } {
  const name = createHash('sha256').update(key).digest('hex').slice(0, 24);
  let template = builtTemplates.get(name);
  if (template === undefined) {
    const store = join(tmpdir(), 'proofgate-git-templates');
    const path = join(store, name);
    if (!existsSync(join(path, 'meta.json'))) {
      mkdirSync(store, { recursive: true });
      const scratch = mkdtempSync(join(store, `${name}.building-`));
      const meta = build(join(scratch, 'repo'));
      writeFileSync(join(scratch, 'meta.json'), JSON.stringify({ meta }));
      try {
        renameSync(scratch, path);
      } catch {
        // Another worker finished the same template first: use theirs.
        rmSync(scratch, { recursive: true, force: true });
      }
    }
    template = { path, meta: (JSON.parse(readFileSync(join(path, 'meta.json'), 'utf8')) as { meta: unknown }).meta };
    builtTemplates.set(name, template);
  }
  const root = mkdtempSync(join(tmpdir(), prefix));
  cpSync(join(template.path, 'repo'), join(root, 'repo'), { recursive: true });
  return { root, meta: template.meta as T };
}

/** An empty repository (`git init -b main`, the test identity configured). */
export function makeTempRepo(prefix = 'proofgate-forge-'): TempRepo {
  const { root } = fromTemplate(prefix, 'empty-v1', (dir) => initRepo(dir, TEST_IDENTITY));
  return tempRepoAt(root);
}

/** A repository whose `main` has one commit of `files`, checked out with a clean work tree. */
export function makeSeededRepo(prefix: string, files: Record<string, string>, message = 'initial'): TempRepo & { mainSha: string } {
  const { root, meta } = fromTemplate(prefix, JSON.stringify(['seeded-v1', files, message]), (dir) => {
    initRepo(dir, TEST_IDENTITY);
    const mainSha = plumbingCommit(dir, TEST_IDENTITY, 'main', files, message);
    runGit(dir, ['reset', '-q', '--hard', 'main']);
    return { mainSha };
  });
  return { ...tempRepoAt(root), mainSha: meta.mainSha };
}

/** A repo with `main` (README + optional .proofgate.yml) and a `feature` branch that changes a file. */
export function makeChangeRepo(config?: string): TempRepo & { baseSha: string; headSha: string } {
  const { root, meta } = fromTemplate('proofgate-forge-', JSON.stringify(['change-v1', config ?? null]), (dir) => {
    initRepo(dir, TEST_IDENTITY);
    const files: Record<string, string> = { 'README.md': 'hello\n', 'shared.txt': 'one\ntwo\nthree\n' };
    if (config !== undefined) files['.proofgate.yml'] = config;
    const baseSha = plumbingCommit(dir, TEST_IDENTITY, 'main', files, 'initial');
    const headSha = plumbingCommit(dir, TEST_IDENTITY, 'feature', { 'feature.txt': 'new feature\n' }, 'add feature', 'main');
    // Check main out so the work tree and index match HEAD (a clean repository, as a user has it).
    runGit(dir, ['reset', '-q', '--hard', 'main']);
    return { baseSha, headSha };
  });
  return { ...tempRepoAt(root), baseSha: meta.baseSha, headSha: meta.headSha };
}

/** Every file of commit `sha` as text (each with a final newline), as the GitHub test server's model stores a commit. */
export function treeFiles(repo: Pick<TempRepo, 'git'>, sha: string): Record<string, string> {
  const names = repo
    .git(['ls-tree', '-r', '--name-only', sha])
    .split('\n')
    .filter((n) => n !== '');
  return Object.fromEntries(names.map((name) => [name, repo.git(['show', `${sha}:${name}`]) + '\n']));
}
