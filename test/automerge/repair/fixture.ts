import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLocalForge, parseOutputUrl, type LocalForge } from '../../../src/forge/local/index.js';
import type { ChangeSnapshot, Forge, PushRequest } from '../../../src/forge/port.js';
import { repairConfigFrom, type RepairConfig, type RepairContext } from '../../../src/automerge/repair/index.js';

/**
 * A real temporary git repository with `main` checked out (clean work tree),
 * branches written with plumbing, and the real local forge on a temp data dir.
 */
export interface RepairFixture {
  readonly root: string;
  readonly dir: string;
  readonly forge: LocalForge;
  /** The forge wrapped to count pushBranch calls (every call still goes to the real forge). */
  readonly counted: Forge;
  readonly pushes: PushRequest[];
  git(args: readonly string[]): string;
  sha(ref: string): string;
  commit(branch: string, files: Record<string, string | null>, message?: string, from?: string): string;
  /** `refname sha` of every ref, sorted. */
  refs(): string[];
  status(): string;
  worktrees(): number;
  show(ref: string, path: string): string;
  /** The output a check run printed, from the forge's artifact store. */
  checkLog(outputUrl: string | null): Promise<string | null>;
  context(snapshot: ChangeSnapshot, overrides?: Partial<RepairContext>): RepairContext;
  cleanup(): Promise<void>;
}

export const IDENTITY = { name: 'proofgate-repair', email: 'repair@proofgate.test' };

export const NO_COMMANDS: RepairConfig = repairConfigFrom({});

export async function repairFixture(files: Record<string, string>): Promise<RepairFixture> {
  const root = mkdtempSync(join(tmpdir(), 'proofgate-repair-test-'));
  const dir = join(root, 'repo');
  const git = (args: readonly string[], input?: string): string =>
    execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] }).trim();
  execFileSync('git', ['init', '-q', '-b', 'main', dir]);
  git(['config', 'user.name', 'Rita Repo']);
  git(['config', 'user.email', 'rita@example.test']);
  git(['config', 'commit.gpgsign', 'false']);
  let counter = 0;
  const sha = (ref: string) => git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const branchSha = (branch: string): string | null => {
    try {
      return sha(`refs/heads/${branch}`);
    } catch {
      return null;
    }
  };
  const commit = (branch: string, changes: Record<string, string | null>, message = 'change', from?: string): string => {
    counter += 1;
    const index = join(root, `index-${counter}`);
    const old = branchSha(branch);
    const parent = old ?? (from === undefined ? null : sha(from));
    const withIndex = (args: readonly string[], input?: string) =>
      execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', input, env: { ...process.env, GIT_INDEX_FILE: index } }).trim();
    try {
      withIndex(parent === null ? ['read-tree', '--empty'] : ['read-tree', parent]);
      for (const [path, content] of Object.entries(changes)) {
        if (content === null) withIndex(['update-index', '--force-remove', '--', path]);
        else withIndex(['update-index', '--add', '--cacheinfo', `100644,${git(['hash-object', '-w', '--stdin'], content)},${path}`]);
      }
      const tree = withIndex(['write-tree']);
      const next = git(['commit-tree', tree, ...(parent === null ? [] : ['-p', parent]), '-m', message]);
      git(['update-ref', `refs/heads/${branch}`, next, old ?? '0'.repeat(40)]);
      // main is checked out: keep the user's work tree in step, as a commit there would.
      if (branch === 'main' && old !== null) git(['reset', '-q', '--hard', 'main']);
      return next;
    } finally {
      try {
        unlinkSync(index);
      } catch {
        // nothing was written
      }
    }
  };
  commit('main', files, 'initial');
  git(['reset', '-q', '--hard', 'main']);
  const dataDir = join(root, 'data');
  const opened = await openLocalForge({ repoDir: dir, dataDir });
  const pushes: PushRequest[] = [];
  const forge = opened.forge;
  const counted: Forge = {
    kind: forge.kind,
    selfLogin: forge.selfLogin,
    snapshot: (id) => forge.snapshot(id),
    createComment: (id, body) => forge.createComment(id, body),
    editComment: (id, commentId, body) => forge.editComment(id, commentId, body),
    addLabels: (id, labels) => forge.addLabels(id, labels),
    removeLabel: (id, label) => forge.removeLabel(id, label),
    merge: (id, request) => forge.merge(id, request),
    pushBranch: (request) => {
      pushes.push(request);
      return forge.pushBranch(request);
    },
    readFile: (ref, path) => forge.readFile(ref, path),
    permission: (login) => forge.permission(login),
  };
  return {
    root,
    dir,
    forge,
    counted,
    pushes,
    git: (args) => git(args),
    sha,
    commit,
    refs: () => git(['for-each-ref', '--format=%(refname) %(objectname)']).split('\n').filter((line) => line !== '').sort(),
    status: () => git(['status', '--porcelain']),
    worktrees: () => git(['worktree', 'list', '--porcelain']).split('\n').filter((line) => line.startsWith('worktree ')).length,
    show: (ref, path) => git(['show', `${ref}:${path}`]),
    checkLog: async (outputUrl) => {
      if (outputUrl === null) return null;
      const parsed = parseOutputUrl(outputUrl);
      const bytes = await forge.store.storage.artifactStore.read({ namespace: parsed.namespace, runId: parsed.runId }, parsed.digest);
      return Buffer.from(bytes).toString('utf8');
    },
    context: (snapshot, overrides = {}) => ({
      repoDir: dir,
      forge: counted,
      snapshot,
      repair: 'rebase',
      reason: 'test repair',
      failingChecks: [],
      findings: [],
      config: NO_COMMANDS,
      identity: IDENTITY,
      ...overrides,
    }),
    cleanup: async () => {
      await opened.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Write a small node script into the fixture's root (outside the repository) and return its path. */
export function writeScript(fixture: RepairFixture, name: string, source: string): string {
  const path = join(fixture.root, name);
  writeFileSync(path, source);
  return path;
}
