import { join } from 'node:path';
import { defaultStoragePolicy } from '../../storage/policy.js';
import type { StoragePolicy } from '../../storage/policy-types.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
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

/** Open the repository and the embedded SQLite store, and return the local forge on them. */
export async function openLocalForge(options: OpenLocalForgeOptions = {}): Promise<OpenedLocalForge> {
  const repo = await GitRepository.open(options.repoDir ?? process.cwd());
  const dataDir = options.dataDir ?? defaultLocalDataDir(repo);
  const storage = createLocalRunStorage({
    directory: dataDir,
    namespace: LOCAL_FORGE_NAMESPACE,
    policy: options.policy ?? defaultStoragePolicy,
    knownSecrets: options.knownSecrets,
  });
  const forge = new LocalForge({
    ...options,
    repo,
    storage: { namespace: storage.record.namespace, eventStore: storage.eventStore, artifactStore: storage.artifactStore },
  });
  return { forge, dataDir, close: () => storage.close() };
}
