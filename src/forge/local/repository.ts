import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { beginCheckoutMove, closeGitObjectReader, commitOf, gitText, objectInfo, readObject, runGit, type GitOptions } from '../../host/index.js';

/** The typed git operations the local forge needs, on one repository. */

/** The object id git uses for "no object" (a ref that did not exist). */
export const ZERO_OID = '0000000000000000000000000000000000000000';
const OID_PATTERN = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

export interface MergeTreeResult {
  /** True when the merge has no conflicts. */
  readonly clean: boolean;
  /** The merged tree (with conflict markers when not clean). */
  readonly tree: string;
  readonly conflictedPaths: readonly string[];
}

export interface CommitIdentity {
  readonly name: string;
  readonly email: string;
  readonly date?: string;
}

/** Answers kept per repository (oldest forgotten first): each depends only on its key, never on a ref. */
const MEMO_ENTRIES = 1024;
/** Blobs larger than this are read again each time rather than kept. */
const MEMO_BLOB_BYTES = 256 * 1024;

function remember<V>(memo: Map<string, V>, key: string, value: V): V {
  if (memo.size >= MEMO_ENTRIES) memo.delete(memo.keys().next().value as string);
  memo.set(key, value);
  return value;
}

/** `isValidBranchName` by name, for every repository: git's ref-name rules do not change while a process runs. */
const branchNames = new Map<string, boolean>();

/**
 * Names git's ref-name rules surely accept, answered without asking git: slash-separated parts of letters, digits,
 * `_`, `-` and `.`, each starting with a letter, digit or `_`, with no `..` and no part ending in `.` or `.lock`.
 * Anything else is asked of `git check-ref-format`.
 */
const PLAIN_BRANCH = /^(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_.-]*(\/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$/;

function plainBranchName(name: string): boolean {
  return PLAIN_BRANCH.test(name) && name.split('/').every((part) => !part.endsWith('.') && !part.endsWith('.lock'));
}

/**
 * A path `<commit>:<path>` names exactly as `git ls-tree --full-tree <commit> -- <path>` lists it: plain segments
 * (no empty, `.` or `..` one, which `<commit>:<path>` would resolve), no pathspec magic (a leading `:`) or wildcard.
 */
function plainPath(path: string): boolean {
  return !path.startsWith(':') && !/[*?[\\\n\r\0]/.test(path) && path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}

export class GitRepository {
  /** Directory git runs in: the work tree top level, or the git dir of a bare repository. */
  readonly root: string;
  /** The common git directory (shared by all worktrees). */
  readonly commonDir: string;
  /** `readBlob` of a commit named by its object id (never a ref): an object's content never changes. */
  readonly #blobs = new Map<string, Uint8Array | null>();

  private constructor(root: string, commonDir: string) {
    this.root = root;
    this.commonDir = commonDir;
  }

  /** Open the repository that contains `dir`; a path that is not in a git repository is one clear `GIT` error. */
  static async open(dir: string): Promise<GitRepository> {
    const absolute = resolve(dir);
    const info = await stat(absolute).catch(() => null);
    if (info === null || !info.isDirectory()) {
      throw new ProofgateError('GIT', `not a git repository: ${absolute} (no such directory)`, { path: absolute });
    }
    // One git for both: the common dir first, then the top level, which a bare repository (or a path inside the git
    // dir) lacks: git prints the common dir, fails on the top level (128), and runs in the git dir then.
    const found = await runGit(absolute, ['rev-parse', '--path-format=absolute', '--git-common-dir', '--show-toplevel'], { okExitCodes: [128] });
    const [commonDir = '', top = ''] = found.stdout.toString('utf8').split('\n');
    if (commonDir === '') throw new ProofgateError('GIT', `not a git repository: ${absolute}`, { path: absolute });
    const root = found.exitCode === 0 && top !== '' ? top : commonDir;
    return new GitRepository(root, commonDir);
  }

  /** Stop this repository's object reader (it also stops by itself when idle, and with the process). */
  close(): void {
    closeGitObjectReader(this.root);
  }

  git(args: readonly string[], options?: GitOptions) {
    return runGit(this.root, args, options);
  }

  text(args: readonly string[], options?: GitOptions): Promise<string> {
    return gitText(this.root, args, options);
  }

  /** True when `name` is a valid branch name. */
  async isValidBranchName(name: string): Promise<boolean> {
    if (name.startsWith('-')) return false;
    if (plainBranchName(name)) return true;
    const known = branchNames.get(name);
    if (known !== undefined) return known;
    const result = await this.git(['check-ref-format', `refs/heads/${name}`], { okExitCodes: [1] });
    return remember(branchNames, name, result.exitCode === 0);
  }

  /** The commit a branch points to, or null when the branch does not exist (read through the object reader). */
  async branchSha(branch: string): Promise<string | null> {
    if (!(await this.isValidBranchName(branch))) return null;
    // A git that fails outright (not a repository any more) is its GIT error, as from `git rev-parse` before.
    return commitOf(this.root, `refs/heads/${branch}`, { gitFailureIsNone: false });
  }

  /** The commit a branch points to; a missing branch is a `NOT_FOUND` error. */
  async requireBranch(branch: string): Promise<string> {
    const sha = await this.branchSha(branch);
    if (sha === null) throw new ProofgateError('NOT_FOUND', `no branch "${branch}" in ${this.root}`, { branch });
    return sha;
  }

  /** Resolve any revision (branch, tag, sha) to a commit, or null. */
  async resolveCommit(rev: string): Promise<string | null> {
    if (rev.startsWith('-')) return null;
    return commitOf(this.root, rev);
  }

  /** The best common ancestor, or null for unrelated histories. */
  async mergeBase(a: string, b: string): Promise<string | null> {
    const result = await this.git(['merge-base', a, b], { okExitCodes: [1] });
    return result.exitCode === 0 ? result.stdout.toString('utf8').trim() : null;
  }

  /** `git merge-tree --write-tree`: merge two commits without touching any work tree or ref. */
  async mergeTree(base: string, head: string): Promise<MergeTreeResult> {
    const result = await this.git(['merge-tree', '--write-tree', '--name-only', '--no-messages', base, head], { okExitCodes: [1] });
    const [tree = '', ...rest] = result.stdout.toString('utf8').split('\n');
    if (!OID_PATTERN.test(tree)) throw new ProofgateError('GIT', `git merge-tree gave no tree for ${base} and ${head}`);
    return { clean: result.exitCode === 0, tree, conflictedPaths: rest.filter((line) => line !== '') };
  }

  /** Create a commit object for `tree` with the given parents. */
  async commitTree(tree: string, parents: readonly string[], message: string, author: CommitIdentity, committer: CommitIdentity): Promise<string> {
    const env: Record<string, string> = {
      GIT_AUTHOR_NAME: author.name,
      GIT_AUTHOR_EMAIL: author.email,
      GIT_COMMITTER_NAME: committer.name,
      GIT_COMMITTER_EMAIL: committer.email,
    };
    if (author.date !== undefined) env.GIT_AUTHOR_DATE = author.date;
    if (committer.date !== undefined) env.GIT_COMMITTER_DATE = committer.date;
    const args = ['commit-tree', tree, ...parents.flatMap((parent) => ['-p', parent]), '-F', '-'];
    return this.text(args, { input: message, env });
  }

  /**
   * Compare-and-swap a ref: move `ref` to `newSha` only while it still points to
   * `expectedOld` (null: only while it does not exist). Returns false when the
   * ref was elsewhere; other failures are `GIT` errors.
   */
  async compareAndSwapRef(ref: string, newSha: string, expectedOld: string | null, reason: string): Promise<boolean> {
    const result = await this.git(['update-ref', '-m', reason, ref, newSha, expectedOld ?? ZERO_OID], { okExitCodes: [1, 128] });
    if (result.exitCode === 0) return true;
    const current = await this.git(['rev-parse', '--verify', '--quiet', ref], { okExitCodes: [1] });
    const now = current.exitCode === 0 ? current.stdout.toString('utf8').trim() : null;
    if (now !== expectedOld) return false;
    throw new ProofgateError('GIT', `git update-ref ${ref} failed: ${result.stderr.trim().split('\n')[0] ?? ''}`, { ref });
  }

  /**
   * Move `branch` to `after` by compare-and-swap from `before` (null: only
   * while it does not exist, see `compareAndSwapRef`) and bring along every
   * work tree that has it checked out, the way a fast-forward would
   * (`git read-tree -m -u before after`: index and files follow, local edits
   * to untouched files stay). Without this such a work tree would look as if
   * it reverted the change, and the next `git commit -a` would do so. A work
   * tree whose index is locked for a moment is tried again a few times; one
   * whose local edits conflict with the move is left as it is, and the paths
   * of those are returned.
   *
   * While the branch is checked out, the whole move (from before the ref
   * update until the last work tree followed) holds the checkout guard
   * (src/host/checkout-guard.ts): a review's repository fingerprint never
   * reads a work tree lagging the ref, and proofgate's moves of the branch,
   * from any process, follow one another.
   */
  async moveBranch(branch: string, after: string, before: string | null, reason: string): Promise<{ swapped: boolean; left: string[] }> {
    const ref = `refs/heads/${branch}`;
    // A branch made anew has no files in any work tree to bring along.
    if (before === null) return { swapped: await this.compareAndSwapRef(ref, after, null, reason), left: [] };
    const trees = await this.#checkedOut(ref);
    const move = trees.length === 0 ? null : await beginCheckoutMove(this.commonDir);
    try {
      if (!(await this.compareAndSwapRef(ref, after, before, reason))) return { swapped: false, left: [] };
      let left = trees;
      for (let attempt = 0; attempt < 5 && left.length > 0; attempt += 1) {
        if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
        left = await this.#follow(left, before, after);
      }
      return { swapped: true, left };
    } finally {
      await move?.end();
    }
  }

  /** The work trees that have `ref` checked out. */
  async #checkedOut(ref: string): Promise<string[]> {
    const listing = await this.text(['worktree', 'list', '--porcelain']);
    const paths: string[] = [];
    for (const block of listing.split(/\n\s*\n/)) {
      const path = /^worktree (.+)$/m.exec(block)?.[1];
      if (path !== undefined && /^branch (.+)$/m.exec(block)?.[1] === ref) paths.push(path);
    }
    return paths;
  }

  /** `git read-tree -m -u before after` in each work tree; the paths where it failed. */
  async #follow(trees: readonly string[], before: string, after: string): Promise<string[]> {
    const left: string[] = [];
    for (const path of trees) {
      const moved = await runGit(path, ['read-tree', '-m', '-u', before, after], { okExitCodes: [128] }).catch(() => null);
      if (moved === null || moved.exitCode !== 0) left.push(path);
    }
    return left;
  }

  /** Bytes of the file at `path` in `commit`, or null when there is no such file (or it is not a regular file). */
  async readBlob(commit: string, path: string): Promise<Uint8Array | null> {
    const clean = path.replace(/^\/+/, '');
    if (clean === '') return null;
    // A commit named by its id has fixed content: its answer is kept (a copy is handed out, so no caller can change it).
    const key = OID_PATTERN.test(commit) ? `${commit}\0${clean}` : null;
    const known = key === null ? undefined : this.#blobs.get(key);
    if (known !== undefined) return known === null ? null : known.slice();
    const bytes = await this.#readBlob(commit, clean);
    if (key !== null && (bytes === null || bytes.length <= MEMO_BLOB_BYTES)) remember(this.#blobs, key, bytes === null ? null : bytes.slice());
    return bytes;
  }

  async #readBlob(commit: string, clean: string): Promise<Uint8Array | null> {
    if (plainPath(clean) && commit !== '' && !commit.startsWith('-') && !commit.includes(':')) {
      // Both asked at once of the reader: a commit that is not there is git's error, as from ls-tree.
      const [tree, object] = await Promise.all([objectInfo(this.root, `${commit}^{tree}`), readObject(this.root, `${commit}:${clean}`)]);
      if (tree !== null) return object === null || object.type !== 'blob' ? null : new Uint8Array(object.bytes);
    }
    const listing = await this.git(['ls-tree', '--full-tree', '-z', commit, '--', clean]);
    const entry = listing.stdout.toString('utf8').split('\0')[0] ?? '';
    const match = /^(\d+) (\w+) ([0-9a-f]+)\t(.*)$/s.exec(entry);
    if (match === null || match[2] !== 'blob' || match[4] !== clean) return null;
    const blob = await this.git(['cat-file', 'blob', match[3] ?? '']);
    return new Uint8Array(blob.stdout);
  }

  /** The tree of a commit (a commit that is not there is git's `GIT` error). */
  async treeOf(commit: string): Promise<string> {
    const tree = commit === '' || commit.startsWith('-') ? null : await objectInfo(this.root, `${commit}^{tree}`);
    return tree?.oid ?? this.text(['rev-parse', '--verify', `${commit}^{tree}`]);
  }

  /** `git config --get key`, or null when unset. */
  async configValue(key: string): Promise<string | null> {
    const result = await this.git(['config', '--get', key], { okExitCodes: [1] });
    const value = result.stdout.toString('utf8').trim();
    return result.exitCode === 0 && value !== '' ? value : null;
  }

  /** Author name and email of a commit. */
  async commitAuthor(commit: string): Promise<CommitIdentity> {
    const text = await this.text(['log', '-1', '--format=%an%x00%ae', commit]);
    const [name = 'unknown', email = 'unknown@localhost'] = text.split('\0');
    return { name, email };
  }

  async addWorktree(path: string, commit: string): Promise<void> {
    await this.git(['worktree', 'add', '--detach', '--force', path, commit]);
  }

  /** Remove a worktree; never throws (a leftover is pruned on the next call). */
  async removeWorktree(path: string): Promise<void> {
    await this.git(['worktree', 'remove', '--force', '--force', path], { okExitCodes: [128] }).catch(() => undefined);
    await this.git(['worktree', 'prune']).catch(() => undefined);
  }
}
