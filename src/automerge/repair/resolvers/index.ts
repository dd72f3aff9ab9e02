import { resolveChangelog } from './changelog.js';
import { isChecksumFileName, resolveChecksums } from './checksum.js';
import { isPlainText } from './lines.js';

export { resolveChangelog } from './changelog.js';
export { resolveChecksums, parseChecksumLine, isChecksumFileName, type ChecksumEntry } from './checksum.js';
export { splitLines, singleInsertion, type Insertion } from './lines.js';

/**
 * Picks the mechanical resolver for one conflicted file. Pure: three versions
 * in, the merged bytes (and which resolver made them) or the reason for
 * refusing out.
 */

export type ResolverName = 'changelog' | 'checksums';

export type ConflictResolution =
  { readonly kind: 'resolved'; readonly resolver: ResolverName; readonly content: string } | { readonly kind: 'refused'; readonly reason: string };

export interface ConflictVersions {
  readonly path: string;
  /** The common ancestor (the replayed commit's parent). */
  readonly base: Uint8Array;
  /** The base branch as it is now (where the commit is replayed). */
  readonly ours: Uint8Array;
  /** The change's commit being replayed. */
  readonly theirs: Uint8Array;
}

function isChangelog(path: string): boolean {
  return (path.split('/').pop() ?? path).toLowerCase() === 'changelog.md';
}

export function resolveConflict(versions: ConflictVersions): ConflictResolution {
  const { path } = versions;
  if (![versions.base, versions.ours, versions.theirs].every(isPlainText)) {
    return { kind: 'refused', reason: `${path}: not a text file` };
  }
  const [base, ours, theirs] = [versions.base, versions.ours, versions.theirs].map((bytes) => Buffer.from(bytes).toString('utf8')) as [string, string, string];
  if (isChangelog(path)) {
    const content = resolveChangelog(base, ours, theirs);
    return content === null
      ? { kind: 'refused', reason: `${path}: not an isolated addition of entries on both sides` }
      : { kind: 'resolved', resolver: 'changelog', content };
  }
  const content = resolveChecksums(path, base, ours, theirs);
  if (content !== null) return { kind: 'resolved', resolver: 'checksums', content };
  return {
    kind: 'refused',
    reason: isChecksumFileName(path)
      ? `${path}: the change touched more than checksum entries, or both sides changed the same entry`
      : `${path}: no mechanical resolver applies`,
  };
}
