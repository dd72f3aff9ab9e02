import { join } from 'node:path';
import { defaultStoragePolicy } from '../../storage/policy.js';
import type { RunStorage, StoragePolicy } from '../../storage/policy-types.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
import { checkDataDir, dataDirFailure, readDataDirSettings, writeDataDirSettings } from './data-dir.js';
import { LocalForge, type LocalForgeOptions } from './forge.js';
import { GitRepository } from './repository.js';

/** The storage namespace of the local forge's records. */
export const LOCAL_FORGE_NAMESPACE = 'local-forge';

export interface OpenLocalForgeOptions extends Omit<LocalForgeOptions, 'repo' | 'storage'> {
  /** A directory inside the repository (default: the current directory). */
  readonly repoDir?: string;
  /** Where the store lives (default: `<git common dir>/proofgate`, so the work tree stays clean). */
  readonly dataDir?: string;
  readonly policy?: StoragePolicy;
  readonly knownSecrets?: readonly string[];
}

export interface OpenedLocalForge {
  readonly forge: LocalForge;
  readonly dataDir: string;
  close(): Promise<void>;
}

/** The default data directory of a repository: `.git/proofgate/` of its common git dir. */
export function defaultLocalDataDir(repo: GitRepository): string {
  return join(repo.commonDir, 'proofgate');
}

/**
 * The trusted branch of a data directory: its setting, else `main` (or else
 * `master`) when that branch exists, which is then written down so a branch
 * created later cannot take its place; null when there is none yet.
 */
export async function settleTrustedBranch(repo: GitRepository, dataDir: string): Promise<string | null> {
  const set = readDataDirSettings(dataDir).trustedBranch;
  if (set !== undefined) return set;
  const found = (await repo.branchSha('main')) !== null ? 'main' : (await repo.branchSha('master')) !== null ? 'master' : null;
  if (found !== null) writeDataDirSettings(dataDir, { ...readDataDirSettings(dataDir), trustedBranch: found });
  return found;
}

/**
 * Open the repository and the embedded SQLite store, and return the local
 * forge on them. An unusable data directory is one `DATA_DIR` error.
 */
export async function openLocalForge(options: OpenLocalForgeOptions = {}): Promise<OpenedLocalForge> {
  const repo = await GitRepository.open(options.repoDir ?? process.cwd());
  const dataDir = options.dataDir ?? defaultLocalDataDir(repo);
  checkDataDir(dataDir);
  let storage: RunStorage;
  try {
    storage = createLocalRunStorage({
      directory: dataDir,
      namespace: LOCAL_FORGE_NAMESPACE,
      policy: options.policy ?? defaultStoragePolicy,
      knownSecrets: options.knownSecrets,
    });
  } catch (error) {
    throw dataDirFailure(dataDir, error);
  }
  let trustedBranch: string | undefined;
  try {
    trustedBranch = options.trustedBranch ?? (await settleTrustedBranch(repo, dataDir)) ?? undefined;
  } catch (error) {
    await storage.close();
    throw error;
  }
  const forge = new LocalForge({
    ...options,
    repo,
    trustedBranch,
    dataDir,
    storage: { namespace: storage.record.namespace, eventStore: storage.eventStore, artifactStore: storage.artifactStore },
  });
  return { forge, dataDir, close: () => storage.close() };
}
