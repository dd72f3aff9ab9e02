/**
 * The hostile change author's toolkit: real git repositories in temp dirs, the
 * built CLI, and the checks that say "nothing changed" after an attack (main
 * unmoved, .git/config and hooks untouched, no canary outside the job's dir,
 * no planted secret in any byte of the data dir or .git, no process left).
 *
 * Run `npm run build` first: the CLI is dist/cli/main.cjs.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { CLI, runCli } from '../cli/helpers.js';
import { makeTempRepo, type TempRepo } from '../forge/git-fixture.js';

export { CLI, runCli };
export const NODE = process.execPath;
export const MAINTAINER = 'Tess Tester';

/** One entry of a crafted commit: any path bytes git accepts, any mode. */
export interface Entry {
  readonly path: string;
  /** 100644 (default), 100755, 120000 (symlink: content is the target), 160000 (gitlink: content is a sha). */
  readonly mode?: '100644' | '100755' | '120000' | '160000';
  readonly content: string | Buffer;
}

export interface Fixture {
  readonly repo: TempRepo;
  /** The temp root (holds repo/): canaries live beside the repository, outside any job dir. */
  readonly root: string;
  readonly gitDir: string;
  /** The default data dir of the local forge: `.git/proofgate`. */
  readonly dataDir: string;
  /** A unique token for this test (process markers, canary names). */
  readonly token: string;
  /** A path outside every job dir that an attack tries to create. */
  canary(name: string): string;
  /** Commit crafted entries on `branch` (created from `from`); returns the sha. */
  commit(branch: string, entries: readonly Entry[], message?: string, from?: string): string;
  /** Run the built CLI against this repository (`--repo` added), as the maintainer would. */
  cli(args: readonly string[], env?: NodeJS.ProcessEnv): ReturnType<typeof runCli>;
}

const fixtures: Array<{ root: string; token: string }> = [];

function randomToken(): string {
  return `pgatk${process.pid}x${Math.random().toString(36).slice(2, 10)}`;
}

/** A repository whose `main` holds `mainFiles` (the trusted config among them), checked out and clean. */
export function attackFixture(mainFiles: Record<string, string>): Fixture {
  const repo = makeTempRepo('proofgate-attack-');
  const root = join(repo.dir, '..');
  // Like a usual checkout: the jailed uid can traverse to the review files proofgate mounts for a lane (mkdtemp makes 0700).
  chmodSync(root, 0o755);
  const token = randomToken();
  fixtures.push({ root, token });
  repo.commit('main', mainFiles, 'trusted main');
  repo.git(['reset', '-q', '--hard', 'main']);
  let counter = 0;
  const commit = (branch: string, entries: readonly Entry[], message = 'change', from = 'main'): string => {
    counter += 1;
    const index = join(root, `attack-index-${counter}`);
    const env = { ...process.env, GIT_INDEX_FILE: index };
    const git = (args: readonly string[], input?: string | Buffer): string =>
      execFileSync('git', ['-C', repo.dir, ...args], { env, input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] }).trim();
    let parent: string;
    let old: string | null = null;
    try {
      old = repo.sha(`refs/heads/${branch}`);
      parent = old;
    } catch {
      parent = repo.sha(from);
    }
    try {
      git(['read-tree', parent]);
      const lines: Buffer[] = [];
      for (const entry of entries) {
        const mode = entry.mode ?? '100644';
        const sha = mode === '160000' ? String(entry.content) : git(['hash-object', '-w', '--stdin'], entry.content);
        lines.push(Buffer.concat([Buffer.from(`${mode} ${sha}\t`), Buffer.from(entry.path), Buffer.from([0])]));
      }
      git(['update-index', '-z', '--index-info'], Buffer.concat(lines));
      const tree = git(['write-tree']);
      const next = git(['commit-tree', tree, '-p', parent, '-m', message]);
      git(['update-ref', `refs/heads/${branch}`, next, old ?? '0'.repeat(40)]);
      return next;
    } finally {
      rmSync(index, { force: true });
    }
  };
  return {
    repo,
    root,
    gitDir: join(repo.dir, '.git'),
    dataDir: join(repo.dir, '.git', 'proofgate'),
    token,
    canary: (name) => join(root, `canary-${token}-${name}`),
    commit,
    cli: (args, env) => runCli([...args, '--repo', repo.dir], env === undefined ? {} : { env }),
  };
}

/** Kill what an attack left behind (by pid, found by its unique token), then remove every fixture. */
export function cleanupFixtures(): void {
  for (const { root, token } of fixtures.splice(0)) {
    for (const pid of survivors(token)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    rmSync(root, { recursive: true, force: true });
    for (const name of readdirSync(tmpdir())) if (name.includes(token)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

/** Pids of live processes whose command line holds `token` (zombies count as dead). */
export function survivors(token: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`);
      if (!cmdline.includes(token)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && state !== 'X') found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

export { alive } from '../support/wait.js';

/** What an attack must not change: every ref, the git dir's config, hooks and info files. */
export interface RepoState {
  readonly main: string;
  readonly refs: string;
  readonly gitFiles: Record<string, string>;
}

function gitFiles(gitDir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const visit = (path: string, rel: string): void => {
    if (!existsSync(path)) return;
    const info = lstatSync(path);
    if (info.isSymbolicLink()) files[rel] = `link:${readlinkSync(path)}`;
    else if (info.isDirectory()) for (const name of readdirSync(path).sort()) visit(join(path, name), `${rel}/${name}`);
    else files[rel] = `${(info.mode & 0o7777).toString(8)}:${readFileSync(path).toString('base64')}`;
  };
  for (const name of ['config', 'config.worktree', 'hooks', 'info', 'HEAD', 'modules', 'worktrees']) visit(join(gitDir, name), name);
  return files;
}

export function repoState(fx: Fixture): RepoState {
  return { main: fx.repo.sha('main'), refs: fx.repo.git(['for-each-ref', '--format=%(refname) %(objectname)']), gitFiles: gitFiles(fx.gitDir) };
}

/** Main unmoved, no ref created or moved, .git/config, hooks and info byte-identical. */
export function expectRepoUnchanged(fx: Fixture, before: RepoState): void {
  const after = repoState(fx);
  expect(after.main, 'main moved').toBe(before.main);
  expect(after.refs, 'refs changed').toBe(before.refs);
  expect(after.gitFiles, '.git config/hooks/info changed').toEqual(before.gitFiles);
}

/** Every file under `dirs` whose bytes contain `needle` (also as UTF-16 and base64, the shapes a store might keep). */
export function filesContaining(dirs: readonly string[], needle: string): string[] {
  const shapes = [Buffer.from(needle, 'utf8'), Buffer.from(needle, 'utf16le'), Buffer.from(Buffer.from(needle).toString('base64').slice(0, -4))];
  const hits: string[] = [];
  const visit = (path: string): void => {
    let info;
    try {
      info = lstatSync(path);
    } catch {
      return;
    }
    if (info.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
    else if (info.isFile()) {
      const bytes = readFileSync(path);
      if (shapes.some((shape) => shape.length > 0 && bytes.includes(shape))) hits.push(path);
    }
  };
  for (const dir of dirs) visit(dir);
  return hits;
}

/** No byte under the data dir or the repository's .git holds `secret`. */
export function expectNoSecretStored(fx: Fixture, secret: string, extraDirs: readonly string[] = []): void {
  const hits = [...new Set(filesContaining([fx.gitDir, fx.dataDir, ...extraDirs], secret))].map((path) => path.replace(fx.root, ''));
  expect(hits.length, `secret ${secret.slice(0, 4)}… stored in ${hits.join(', ')}`).toBe(0);
}

/** Which of `secrets` (name -> value) are stored under the data dir or .git, as `name: files`. */
export function storedSecrets(fx: Fixture, secrets: Record<string, string>): string[] {
  return Object.entries(secrets).flatMap(([name, value]) => {
    const hits = [...new Set(filesContaining([fx.gitDir, fx.dataDir], value))].map((path) => path.replace(fx.root, ''));
    return hits.length === 0 ? [] : [`${name}: ${hits.join(', ')}`];
  });
}

/** The CLI failed with one `proofgate:` line on stderr (ending with `[code]` when given). */
export function expectOneLineFailure(result: ReturnType<typeof runCli>, code?: string): string {
  expect(result.status, `${result.stdout}\n${result.stderr}`).not.toBe(0);
  expect(result.status).not.toBeNull();
  const lines = result.stderr.split('\n').filter((line) => line !== '');
  expect(lines, result.stderr).toHaveLength(1);
  const line = lines[0] ?? '';
  expect(line).toMatch(/^proofgate: /);
  expect(line).not.toContain('internal error');
  if (code !== undefined) expect(line).toMatch(new RegExp(`\\[${code}\\]$`));
  return line;
}

/** The jail helper's skip rule: a one-line reason when bubblewrap does not work here, never under CI=true. */
export { jailSkipReason } from '../support/jail.js';

/** The comments of a change, as `change show --json` prints them. */
export function commentsOf(fx: Fixture, id: string): Array<{ author: string; body: string; authorType: string }> {
  const shown = fx.cli(['change', 'show', id, '--json']);
  expect(shown.status, shown.stderr).toBe(0);
  return (JSON.parse(shown.stdout) as { comments: Array<{ author: string; body: string; authorType: string }> }).comments;
}

/** A fresh temp dir removed with the fixtures. */
export function scratchDir(fx: Fixture, name: string): string {
  return mkdtempSync(join(fx.root, `${name}-`));
}

/** The standard trusted config: one check running `node check.mjs`, the rules lane forbidding `secrets/**`. */
export function trustedConfig(options: { checks?: string; lanes?: string; extra?: string; forbidden?: readonly string[] } = {}): string {
  return [
    'maintainers:',
    `  - login: ${MAINTAINER}`,
    '    permission: admin',
    options.checks ?? ['checks:', '  - name: test', '    run: node check.mjs'].join('\n'),
    'review:',
    `  rules: { forbiddenPaths: ${JSON.stringify(options.forbidden ?? ['secrets/**'])} }`,
    '  lanes:',
    options.lanes ?? '    - { id: rules, builtin: rules }',
    options.extra ?? '',
    '',
  ].join('\n');
}

export const HONEST_CHECK = "console.log('ok');\n";

/** The built CLI without blocking this process (a server in the test can answer meanwhile); killed after 120 s. */
export function runCliAsync(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
