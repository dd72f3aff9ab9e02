import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLocalForge, type LocalForge, type OpenLocalForgeOptions } from '../../src/forge/local/index.js';
import { makeChangeRepo, type TempRepo } from './git-fixture.js';

export interface LocalFixture {
  readonly repo: TempRepo & { baseSha: string; headSha: string };
  readonly forge: LocalForge;
  readonly dataDir: string;
  /** Another forge on the same repository and data directory (as a second process would see it). */
  reopen(options?: Omit<OpenLocalForgeOptions, 'repoDir' | 'dataDir'>): Promise<LocalForge>;
  cleanup(): Promise<void>;
}

/** A temp repo (main + feature, optional base config) and a local forge on a temp data dir. */
export async function localFixture(config?: string, options: Omit<OpenLocalForgeOptions, 'repoDir' | 'dataDir'> = {}): Promise<LocalFixture> {
  const repo = makeChangeRepo(config);
  const dataDir = mkdtempSync(join(tmpdir(), 'proofgate-forge-data-'));
  const closers: Array<() => Promise<void>> = [];
  const open = async (extra: Omit<OpenLocalForgeOptions, 'repoDir' | 'dataDir'>) => {
    const opened = await openLocalForge({ ...extra, repoDir: repo.dir, dataDir });
    closers.push(opened.close);
    return opened.forge;
  };
  const forge = await open(options);
  return {
    repo,
    forge,
    dataDir,
    reopen: (extra = {}) => open(extra),
    cleanup: async () => {
      for (const close of closers) await close();
      repo.cleanup();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The error a promise rejects with (fails the test when it resolves). */
export async function rejectionOf(promise: Promise<unknown>): Promise<{ code?: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    return error as { code?: string; message: string };
  }
  throw new Error('expected a rejection');
}
