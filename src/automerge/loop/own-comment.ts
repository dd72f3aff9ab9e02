/**
 * proofgate's own comments that it keeps one of and edits in place (the
 * status comment, the review comment). Finding one is pure: a comment counts
 * only when proofgate's own identity wrote it AND it holds a marker that
 * verifies for this change and is of the kind asked for; a comment by anyone
 * else (the change's author, say) that copies a marker, even byte for byte,
 * is never found, so it is never read as ours nor edited. Writing edits the
 * found comment, and creates a fresh one when there is none or the forge
 * refuses the edit (the comment was deleted, or it is not proofgate's).
 */
import { isProofgateError, type ErrorCode } from '../../core/index.js';
import type { Forge, ForgeComment } from '../../forge/port.js';
import { readMarkers, type MarkerFields, type MarkerSecret, type TrustedMarker } from '../markers.js';

export interface OwnCommentQuery {
  readonly selfLogin: string;
  readonly secret: MarkerSecret;
  readonly changeId: string;
}

export interface OwnComment<F extends MarkerFields = MarkerFields> {
  readonly comment: ForgeComment;
  /** The comment's last trusted marker that `accepts` took. */
  readonly marker: TrustedMarker<F>;
}

function sameLogin(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/**
 * The last comment (in forge order) written by `selfLogin` (any letter case)
 * that holds a trusted marker for `changeId` which `accepts`, with that
 * marker; null when there is none.
 */
export function findOwnComment<F extends MarkerFields>(
  comments: readonly ForgeComment[],
  query: OwnCommentQuery,
  accepts: (marker: TrustedMarker) => marker is TrustedMarker<F>,
): OwnComment<F> | null;
export function findOwnComment(comments: readonly ForgeComment[], query: OwnCommentQuery, accepts: (marker: TrustedMarker) => boolean): OwnComment | null;
export function findOwnComment(comments: readonly ForgeComment[], query: OwnCommentQuery, accepts: (marker: TrustedMarker) => boolean): OwnComment | null {
  let found: OwnComment | null = null;
  for (const comment of comments) {
    if (!sameLogin(comment.author, query.selfLogin)) continue;
    const marker = readMarkers(comment, query).trusted.filter(accepts).pop();
    if (marker !== undefined) found = { comment, marker };
  }
  return found;
}

/** How a forge refuses to edit a comment that is gone or not proofgate's: a fresh comment is written instead. */
export const NOT_OUR_COMMENT: readonly ErrorCode[] = ['INVALID_INPUT', 'NOT_FOUND', 'FORGE_AUTH'];

/**
 * Put `body` into `existing` (edited in place), or into a new comment when
 * `existing` is null or the forge refuses the edit with one of
 * `NOT_OUR_COMMENT`. Any other failure is thrown as it is.
 */
export async function writeOwnComment(
  forge: Pick<Forge, 'createComment' | 'editComment'>,
  changeId: string,
  existing: Pick<ForgeComment, 'id'> | null,
  body: string,
): Promise<{ readonly comment: ForgeComment; readonly created: boolean }> {
  if (existing !== null) {
    try {
      return { comment: await forge.editComment(changeId, existing.id, body), created: false };
    } catch (error) {
      if (!isProofgateError(error) || !NOT_OUR_COMMENT.includes(error.code)) throw error;
    }
  }
  return { comment: await forge.createComment(changeId, body), created: true };
}
