import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openLocalForge, parseOutputUrl, type LocalForge } from '../../../src/forge/local/index.js';
import type { ChangeSnapshot, PushRequest } from '../../../src/forge/port.js';
import { repairConfigFrom, type RepairConfig, type RepairContext } from '../../../src/automerge/repair/index.js';
import { fromTemplate, initRepo, plumbingCommit } from '../../forge/git-fixture.js';

/**
 * A real temporary git repository with `main` checked out (clean work tree),
 * branches written with plumbing, and the real local forge on a temp data dir.
 */
export interface RepairFixture {
  readonly root: string;
  readonly dir: string;
  readonly forge: LocalForge;
  /** Every publish of a repair (each still goes to the local forge's workspace). */
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

const REPO_IDENTITY = { name: 'Rita Repo', email: 'rita@example.test' };

export async function repairFixture(files: Record<string, string>): Promise<RepairFixture> {
  // main holds `files` and is checked out clean; copied from a template built once per run.
  const { root } = fromTemplate('proofgate-repair-test-', JSON.stringify(['repair-v1', files]), (dir) => {
    initRepo(dir, REPO_IDENTITY);
    plumbingCommit(dir, REPO_IDENTITY, 'main', files, 'initial');
    execFileSync('git', ['-C', dir, 'reset', '-q', '--hard', 'main']);
  });
  const dir = join(root, 'repo');
  const git = (args: readonly string[], input?: string): string =>
    execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] }).trim();
  const sha = (ref: string) => git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const commit = (branch: string, changes: Record<string, string | null>, message = 'change', from?: string): string => {
    const next = plumbingCommit(dir, REPO_IDENTITY, branch, changes, message, from);
    // main is checked out: keep the user's work tree in step, as a commit there would.
    if (branch === 'main') git(['reset', '-q', '--hard', 'main']);
    return next;
  };
  const dataDir = join(root, 'data');
  const opened = await openLocalForge({ repoDir: dir, dataDir });
  const pushes: PushRequest[] = [];
  const forge = opened.forge;
  return {
    root,
    dir,
    forge,
    pushes,
    git: (args) => git(args),
    sha,
    commit,
    refs: () =>
      git(['for-each-ref', '--format=%(refname) %(objectname)'])
        .split('\n')
        .filter((line) => line !== '')
        .sort(),
    status: () => git(['status', '--porcelain']),
    worktrees: () =>
      git(['worktree', 'list', '--porcelain'])
        .split('\n')
        .filter((line) => line.startsWith('worktree ')).length,
    show: (ref, path) => git(['show', `${ref}:${path}`]),
    checkLog: async (outputUrl) => {
      if (outputUrl === null) return null;
      const parsed = parseOutputUrl(outputUrl);
      const bytes = await forge.store.storage.artifactStore.read({ namespace: parsed.namespace, runId: parsed.runId }, parsed.digest);
      return Buffer.from(bytes).toString('utf8');
    },
    context: (snapshot, overrides = {}) => ({
      repoDir: dir,
      publish: (request) => {
        pushes.push(request);
        return forge.workspace.publish(dir, request);
      },
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
