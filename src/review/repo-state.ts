import { createHash } from 'node:crypto';
import { isAbsolute, relative } from 'node:path';
import { git, gitText } from './git.js';

/**
 * A digest of what a reviewer must never change in the repository: HEAD, every
 * ref, and the work tree status (tracked and untracked files). proofgate's own
 * data directory is left out when it lives inside the work tree.
 */
export async function repositoryFingerprint(repoDir: string, dataDir?: string): Promise<string> {
  const top = await gitText(repoDir, ['rev-parse', '--show-toplevel']).catch(() => repoDir);
  const pathspec: string[] = [];
  if (dataDir !== undefined) {
    const rel = relative(top, dataDir);
    if (rel !== '' && !rel.startsWith('..') && !isAbsolute(rel)) pathspec.push('--', '.', `:(exclude)${rel}`);
  }
  const [head, refs, status] = await Promise.all([
    git(repoDir, ['rev-parse', 'HEAD'], { allowFail: true }),
    git(repoDir, ['for-each-ref', '--format=%(refname) %(objectname)']),
    git(top, ['status', '--porcelain=v1', '-z', '--untracked-files=all', ...pathspec]),
  ]);
  return createHash('sha256').update(head).update('\0').update(refs).update('\0').update(status).digest('hex');
}
