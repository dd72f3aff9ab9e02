import { lstat, readFile, readlink, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { ProofgateError, canonicalJson, errorMessage, sha256Digest, sha256Hex } from '../../core/index.js';
import { commitOf, runGit } from '../../host/index.js';
import type { WorkspaceAnchor, WorkspaceFileState } from './types.js';

/** git's stdout as text, untrimmed (`-z` listings end in NUL); a failure is the git runner's one `GIT` error. */
async function git(cwd: string, args: readonly string[]): Promise<string> {
  return (await runGit(cwd, args)).stdout.toString('utf8');
}

function splitZ(text: string): string[] {
  return text.split('\0').filter((entry) => entry.length > 0);
}

/** Porcelain v1 -z: `XY path` entries; renames carry a second (source) path. */
function statusStates(text: string): Map<string, WorkspaceFileState['state']> {
  const states = new Map<string, WorkspaceFileState['state']>();
  const entries = text.split('\0');
  for (let i = 0; i < entries.length; i += 1) {
    const entry = entries[i] ?? '';
    if (entry.length < 4) continue;
    const x = entry[0];
    const y = entry[1];
    const path = entry.slice(3);
    if (x === 'R' || x === 'C') i += 1;
    if (x === '?' && y === '?') states.set(path, 'untracked');
    else if (x === 'D' || y === 'D') states.set(path, 'deleted');
    else if (x === 'A' || x === 'R' || x === 'C') states.set(path, 'added');
    else states.set(path, 'modified');
  }
  return states;
}

async function fileDigest(root: string, path: string): Promise<WorkspaceFileState['digest']> {
  const full = join(root, path);
  try {
    const info = await lstat(full);
    if (info.isSymbolicLink()) return sha256Digest(`symlink:${await readlink(full)}`);
    if (!info.isFile()) return null;
    return sha256Digest(await readFile(full));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ProofgateError('IO', `cannot read ${full}: ${errorMessage(error)}`);
  }
}

function checkScope(scope: unknown): readonly string[] | null {
  if (scope === null) return null;
  if (
    !Array.isArray(scope) ||
    scope.length === 0 ||
    !scope.every((entry) => typeof entry === 'string' && entry.length > 0 && !entry.startsWith('/') && !entry.split('/').includes('..'))
  ) {
    throw new ProofgateError('INVALID_INPUT', 'scope must be null or a nonempty list of relative paths inside the repository');
  }
  return [...scope].sort();
}

/**
 * Capture the workspace a record is made on: the repository root and
 * identity, HEAD, and each tracked or untracked (not ignored) file in scope
 * with its state and the sha256 of its bytes. The fingerprint is the sha256 of
 * the canonical head + file list, so any changed byte in scope changes it.
 */
export async function captureWorkspaceAnchor(directory: string, options: { readonly scope: readonly string[] | null }): Promise<WorkspaceAnchor> {
  const scope = checkScope(options.scope);
  // One git for the top level and the common git dir (a directory with no work tree is git's GIT error).
  const [top = '', common = ''] = (await git(directory, ['rev-parse', '--show-toplevel', '--path-format=absolute', '--git-common-dir'])).split('\n');
  const root = await realpath(top);
  const repositoryId = await realpath(common);
  // HEAD through the repository's object reader: what `git rev-parse --verify --quiet HEAD^{commit}` prints.
  const head = (await commitOf(root, 'HEAD').catch(() => null)) ?? '';
  if (!/^[0-9a-f]{40,64}$/.test(head)) throw new ProofgateError('GIT', `${root} has no commit at HEAD`);
  const pathspec = scope === null ? [] : ['--', ...scope];
  const listed = splitZ(await git(root, ['ls-files', '-z', '--cached', '--others', '--exclude-standard', ...pathspec]));
  const states = statusStates(await git(root, ['status', '--porcelain=v1', '-z', '--untracked-files=all', ...pathspec]));
  const paths = [...new Set([...listed, ...states.keys()])].sort();
  const files: WorkspaceFileState[] = [];
  for (const path of paths) {
    const digest = await fileDigest(root, path);
    const state = states.get(path) ?? (digest === null ? 'deleted' : 'clean');
    files.push({ path, state, digest });
  }
  const fingerprint = sha256Hex(canonicalJson({ head, files }));
  return { schemaVersion: 1, root, repositoryId, head, fingerprint, scope, files };
}

export type WorkspaceVerification =
  { readonly kind: 'verified'; readonly anchor: WorkspaceAnchor } | { readonly kind: 'changed'; readonly reason: string; readonly paths: readonly string[] };

/** Re-read the repository and say whether it still is exactly the anchored workspace. */
export async function verifyWorkspaceAnchor(anchor: WorkspaceAnchor): Promise<WorkspaceVerification> {
  let now: WorkspaceAnchor;
  try {
    now = await captureWorkspaceAnchor(anchor.root, { scope: anchor.scope });
  } catch (error) {
    return { kind: 'changed', reason: `the workspace cannot be read: ${errorMessage(error)}`, paths: [] };
  }
  if (now.repositoryId !== anchor.repositoryId) return { kind: 'changed', reason: 'another repository', paths: [] };
  if (now.head !== anchor.head) return { kind: 'changed', reason: `HEAD moved from ${anchor.head} to ${now.head}`, paths: [] };
  if (now.fingerprint === anchor.fingerprint) return { kind: 'verified', anchor: now };
  const before = new Map(anchor.files.map((file) => [file.path, canonicalJson(file)]));
  const after = new Map(now.files.map((file) => [file.path, canonicalJson(file)]));
  const paths = [...new Set([...before.keys(), ...after.keys()])].filter((path) => before.get(path) !== after.get(path)).sort();
  return { kind: 'changed', reason: `${paths.length} file(s) changed`, paths };
}
