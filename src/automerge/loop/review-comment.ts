/**
 * The review comment of a change (pure): one comment per change, edited in
 * place after every review. Its top section is the verdict for the current
 * head, and the comment's one `review-verdict` marker signs exactly that
 * verdict (head, diff, contract and config digests, review id, time). Below
 * it, a history of the earlier reviews (head, verdict, when, review id),
 * newest first, at most `REVIEW_HISTORY_LIMIT` lines and a count of the older
 * ones left out. History lines are plain text, never markers: nothing reads a
 * verdict from them, so an old pass in the history never counts for any head.
 *
 * The history of the next edit is read back from the comment itself, only
 * from a comment `findReviewComment` found (written by proofgate, its marker
 * verified, so its whole visible text is as proofgate signed it), and only
 * from lines in the exact form proofgate writes them. Text from outside
 * (reasons, findings) goes through `escapeText`, which leaves no `<`, no
 * backtick and no line break, so it can neither open the history section nor
 * pass for a history line or a marker.
 */
import type { ForgeComment } from '../../forge/port.js';
import { findOwnComment, isTrustedVerdict, type OwnComment, type OwnCommentQuery, type ReviewVerdictFields, type Verdict } from '../markers.js';
import { escapeText } from '../status-comment.js';
import type { ReviewResult } from './types.js';

/** Earlier reviews listed in the comment; older ones are counted, not listed. */
export const REVIEW_HISTORY_LIMIT = 20;
/** Findings shown in the comment (the rest are counted). */
export const REVIEW_FINDINGS_SHOWN = 20;

/** One earlier review, as the history lists it. */
export interface ReviewHistoryEntry {
  readonly head: string;
  readonly verdict: Verdict;
  /** When the verdict was made (the signed `at` of its marker). */
  readonly at: string;
  /** The review dispatch id. */
  readonly review: string;
}

export interface ReviewHistory {
  /** Newest first, at most `REVIEW_HISTORY_LIMIT`. */
  readonly entries: readonly ReviewHistoryEntry[];
  /** Earlier reviews no longer listed. */
  readonly dropped: number;
}

export const EMPTY_REVIEW_HISTORY: ReviewHistory = { entries: [], dropped: 0 };

const HISTORY_OPEN = '<details><summary>Earlier reviews</summary>';
const HISTORY_CLOSE = '</details>';
const ENTRY_LINE =
  /^- head `([0-9a-f]{40}|[0-9a-f]{64})`: (CONFIRMED|REFUTED|HOLD), (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z) \(review ([A-Za-z0-9._:-]{1,128})\)$/;
const DROPPED_LINE = /^- (\d{1,9}) older reviews? not shown$/;

/** A commit id as inline code (only letters and digits survive). */
function code(sha: string): string {
  return `\`${sha.replace(/[^0-9A-Za-z]/g, '')}\``;
}

function entryLine(entry: ReviewHistoryEntry): string {
  return `- head ${code(entry.head)}: ${entry.verdict}, ${escapeText(entry.at)} (review ${escapeText(entry.review)})`;
}

function historyLines(history: ReviewHistory): string[] {
  if (history.entries.length === 0 && history.dropped === 0) return [];
  const lines = ['', HISTORY_OPEN, '', ...history.entries.map(entryLine)];
  if (history.dropped > 0) lines.push(`- ${history.dropped} older review${history.dropped === 1 ? '' : 's'} not shown`);
  lines.push('', HISTORY_CLOSE);
  return lines;
}

/** What the top section says about the verdict that the marker signs. */
export interface CurrentReview {
  readonly changeId: string;
  readonly head: string;
  /** The review dispatch id (the marker's `review`). */
  readonly review: string;
  /** When the verdict was made (the marker's `at`). */
  readonly at: string;
  readonly result: Pick<ReviewResult, 'verdict' | 'reasons' | 'findings' | 'reviewRef'>;
}

/** The visible text of the review comment: the current verdict (outside text escaped), then the history. */
export function renderReviewComment(current: CurrentReview, history: ReviewHistory): string {
  const { result } = current;
  const lines = [
    `### proofgate review: ${result.verdict}`,
    '',
    `Change ${escapeText(current.changeId)}, head ${code(current.head)}: review ${escapeText(current.review)} (${escapeText(result.reviewRef)}), ${escapeText(current.at)}.`,
    '',
  ];
  for (const reason of result.reasons) lines.push(`- ${escapeText(reason)}`);
  if (result.findings.length > 0) {
    lines.push('', '**Findings**', '');
    for (const finding of result.findings.slice(0, REVIEW_FINDINGS_SHOWN)) {
      const where = finding.path === undefined ? '' : ` (${escapeText(finding.path)}${finding.line === undefined ? '' : `:${finding.line}`})`;
      lines.push(`- ${escapeText(finding.title)}${where}: ${escapeText(finding.evidence)}`);
    }
    if (result.findings.length > REVIEW_FINDINGS_SHOWN) lines.push(`- and ${result.findings.length - REVIEW_FINDINGS_SHOWN} more`);
  }
  lines.push(...historyLines(history));
  return lines.join('\n');
}

/**
 * The history section of a review comment's body, as proofgate wrote it:
 * entry lines in their exact form, between the section's opening and closing
 * lines; anything else is skipped. Call it only on a comment
 * `findReviewComment` returned.
 */
export function readReviewHistory(body: string): ReviewHistory {
  const lines = body.replace(/\r\n?/g, '\n').split('\n');
  const open = lines.indexOf(HISTORY_OPEN);
  if (open === -1) return EMPTY_REVIEW_HISTORY;
  const entries: ReviewHistoryEntry[] = [];
  let dropped = 0;
  for (const line of lines.slice(open + 1)) {
    if (line === HISTORY_CLOSE) break;
    const entry = ENTRY_LINE.exec(line);
    if (entry !== null) {
      const [, head = '', verdict = '', at = '', review = ''] = entry;
      entries.push({ head, verdict: verdict as Verdict, at, review });
      continue;
    }
    const gone = DROPPED_LINE.exec(line);
    if (gone?.[1] !== undefined) dropped += Number(gone[1]);
  }
  return {
    entries: entries.slice(0, REVIEW_HISTORY_LIMIT),
    dropped: dropped + Math.max(0, entries.length - REVIEW_HISTORY_LIMIT),
  };
}

/**
 * The history the next edit of `previous` shows: the verdict `previous` holds
 * now (from its signed marker) on top of the history it lists, bounded to
 * `REVIEW_HISTORY_LIMIT` with the rest counted. No comment: no history.
 */
export function nextReviewHistory(previous: OwnComment<ReviewVerdictFields> | null): ReviewHistory {
  if (previous === null) return EMPTY_REVIEW_HISTORY;
  const earlier = readReviewHistory(previous.comment.body);
  const { head, verdict, at, review } = previous.marker.fields;
  const all = [{ head, verdict, at, review }, ...earlier.entries];
  return { entries: all.slice(0, REVIEW_HISTORY_LIMIT), dropped: earlier.dropped + Math.max(0, all.length - REVIEW_HISTORY_LIMIT) };
}

/**
 * The change's review comment: the last comment written by proofgate's own
 * identity that holds a trusted `review-verdict` marker for this change (a
 * verdict comment from before comments were edited in place counts too: the
 * newest is taken over). A copy of the marker in anyone else's comment, or a
 * proofgate comment someone edited, is not it.
 */
export function findReviewComment(comments: readonly ForgeComment[], query: OwnCommentQuery): OwnComment<ReviewVerdictFields> | null {
  return findOwnComment(comments, query, isTrustedVerdict);
}
