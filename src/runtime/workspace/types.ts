import type { Sha256Digest } from '../../core/index.js';

/** One file's state in a captured workspace. */
export type WorkspaceFileState = {
  readonly path: string;
  readonly state: 'clean' | 'modified' | 'added' | 'deleted' | 'untracked';
  /** sha256 of the file's bytes in the worktree, null when deleted. */
  readonly digest: Sha256Digest | null;
};

/**
 * The exact workspace a record was made on: repository, HEAD and a content
 * fingerprint over the files in scope (a null scope is the whole worktree).
 */
export type WorkspaceAnchor = {
  readonly schemaVersion: 1;
  readonly root: string;
  readonly repositoryId: string;
  readonly head: string;
  /** 64 lowercase hex: sha256 of the canonical file-state list. */
  readonly fingerprint: string;
  readonly scope: readonly string[] | null;
  readonly files: readonly WorkspaceFileState[];
};
