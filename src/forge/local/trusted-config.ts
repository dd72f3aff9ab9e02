import { REPO_CONFIG_PATH, emptyRepoConfig, parseRepoConfigYaml, type RepoConfig } from '../../contracts/repo-config.js';
import type { GitRepository } from './repository.js';

export const CONFIG_PATH = REPO_CONFIG_PATH;

/**
 * The configuration at one commit of a protected branch (the trusted branch,
 * or a change's base once it passed the protected-branch rule). A change never
 * configures itself: callers pass the base sha, never the head. A commit
 * without `.proofgate.yml` gets the empty configuration (no checks, no
 * maintainers); a malformed file is one `CONFIG` error naming the key path.
 */
export async function loadTrustedConfig(repo: GitRepository, baseRef: string, baseSha: string): Promise<RepoConfig> {
  const bytes = await repo.readBlob(baseSha, CONFIG_PATH);
  if (bytes === null) return emptyRepoConfig();
  return parseRepoConfigYaml(Buffer.from(bytes).toString('utf8'), `${baseRef}:${CONFIG_PATH}`);
}
