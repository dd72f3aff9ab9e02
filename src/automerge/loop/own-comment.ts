/**
 * Writing proofgate's own comments that it keeps one of and edits in place
 * (the status comment, the review comment; finding one is the pure
 * `findOwnComment` of ../markers.ts). Writing edits the found comment, and
 * creates a fresh one when there is none or the forge refuses the edit (the
 * comment was deleted, or it is not proofgate's).
 */
import { isProofgateError, type ErrorCode } from '../../core/index.js';
import type { Forge, ForgeComment } from '../../forge/port.js';

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
