import { REPO_CONFIG_PATH, loadRepoConfigAt, type RepoConfig } from '../../contracts/repo-config.js';
import type { GitRepository } from './repository.js';

/** The same path as `REPO_CONFIG_PATH`, under the name the local forge has exported. */
export const CONFIG_PATH = REPO_CONFIG_PATH;

/**
 * The configuration at one commit of a protected branch (the trusted branch,
 * or a change's base once it passed the protected-branch rule), read with the
 * one trusted-config loader (`loadRepoConfigAt`) from the repository's object
 * store. A change never configures itself: callers pass the base sha, never
 * the head. A commit without `.proofgate.yml` gets the empty configuration;
 * a malformed file is one `CONFIG` error naming `<baseRef>:.proofgate.yml`
 * and the key path.
 */
export async function loadTrustedConfig(repo: GitRepository, baseRef: string, baseSha: string): Promise<RepoConfig> {
  return (await loadRepoConfigAt((ref, path) => repo.readBlob(ref, path), baseSha, baseRef)).config;
}
