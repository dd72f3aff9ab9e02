/**
 * Pure rendering of the automerge status comment (one per change and intent,
 * found again through its signed marker and edited in place) and of the final
 * comment after a merge. Text that came from outside proofgate (check names,
 * logins, command lines, reasons) is escaped so it can neither inject markup or
 * markers nor mention anyone.
 */
import type { ForgeComment } from '../forge/port.js';
import type { AutomergeDecision } from './decide.js';
import type { RepairRecord, TimelineEntry } from './ledger.js';
import { composeMarkedBody, findOwnComment, type MarkerSecret, type StatusFields } from './markers.js';

export const DEFAULT_STATUS_INTENT = 'automerge';
/** Timeline entries shown; older ones are summarized in one line. */
export const TIMELINE_LIMIT = 30;

export interface StatusCommentInput {
  readonly changeId: string;
  readonly intent: string;
  /** The head the status describes. */
  readonly head: string;
  readonly decision: AutomergeDecision;
  readonly timeline: readonly TimelineEntry[];
}

export interface FinalCommentInput {
  readonly changeId: string;
  readonly intent: string;
  /** The reviewed head that was merged. */
  readonly mergedHead: string;
  readonly mergeCommit: string;
  /** Link to the merge commit, when the forge has one. */
  readonly mergeCommitUrl: string | null;
  readonly repairs: readonly RepairRecord[];
  readonly timeline: readonly TimelineEntry[];
  /** The change's title (outside text, escaped). */
  readonly title?: string | null;
  /** The change's head branch. */
  readonly headRef?: string | null;
  /** The base branch the change merged into. */
  readonly baseRef?: string | null;
}

/** Escape outside text for a markdown line: no HTML, no markers, no mentions, no links or images, no line breaks. */
export function escapeText(text: string): string {
  return text
    .replace(/[\r\n]+/g, ' ')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/@/g, '&#64;')
    .replace(/`/g, '&#96;')
    .replace(/\[/g, '&#91;')
    .replace(/\]/g, '&#93;');
}

/** A branch name as inline HTML code: escaped, so it can carry no markup, marker or mention. */
function branch(ref: string): string {
  return `<code>${escapeText(ref)}</code>`;
}

function code(sha: string): string {
  return `\`${sha.replace(/[^0-9A-Za-z]/g, '')}\``;
}

/** A link target that cannot close the markdown link or break the line. */
function linkTarget(url: string): string {
  return encodeURI(url.replace(/\s+/g, '')).replace(/\(/g, '%28').replace(/\)/g, '%29');
}

const HEADLINES: Record<AutomergeDecision['kind'], string> = {
  wait: 'waiting',
  review: 'reviewing',
  repair: 'repairing',
  merge: 'merging',
  block: 'blocked: needs a human',
  stop: 'stopped',
};

function timelineLines(timeline: readonly TimelineEntry[]): string[] {
  const shown = timeline.slice(-TIMELINE_LIMIT);
  const lines: string[] = [];
  if (timeline.length > shown.length) lines.push(`- (${timeline.length - shown.length} earlier entries not shown)`);
  for (const entry of shown) lines.push(`- ${escapeText(entry.at)}: ${escapeText(entry.text)}`);
  if (lines.length === 0) lines.push('- (nothing yet)');
  return lines;
}

function statusFields(changeId: string, intent: string, head: string): StatusFields {
  return { kind: 'automerge-status', change: changeId, head, intent };
}

/** The body of the status comment for a change and intent. */
export function renderStatusComment(input: StatusCommentInput, secret: MarkerSecret): string {
  const { decision } = input;
  const lines = [
    `### proofgate ${escapeText(input.intent)}: ${HEADLINES[decision.kind]}`,
    '',
    `Head ${code(input.head)}: **${decision.kind}**, ${escapeText(decision.reason)} (\`${decision.code.replace(/[^a-z-]/g, '')}\`)`,
    '',
    '<details><summary>Timeline</summary>',
    '',
    ...timelineLines(input.timeline),
    '',
    '</details>',
  ];
  return composeMarkedBody(lines.join('\n'), [statusFields(input.changeId, input.intent, input.head)], secret);
}

/** The change line of the final comment: title and head branch, whichever are known. */
function changeLine(input: FinalCommentInput): string[] {
  const title = input.title === undefined || input.title === null || input.title.trim() === '' ? null : `**${escapeText(input.title.trim())}**`;
  const head = input.headRef === undefined || input.headRef === null || input.headRef === '' ? null : `branch ${branch(input.headRef)}`;
  if (title === null && head === null) return [];
  return [title === null ? `Change: ${head ?? ''}` : `Change: ${title}${head === null ? '' : ` (${head})`}`, ''];
}

/**
 * The body of the final status comment after a merge: what merged (title, head
 * branch, the reviewed head sha, the base it merged into), the merge commit
 * (a link when the forge gave one), the repair commits and the timeline.
 */
export function renderFinalComment(input: FinalCommentInput, secret: MarkerSecret): string {
  const mergeCommit = input.mergeCommitUrl === null ? code(input.mergeCommit) : `[${code(input.mergeCommit)}](${linkTarget(input.mergeCommitUrl)})`;
  const pushed = input.repairs.filter((r) => r.status === 'pushed');
  const repairLines =
    pushed.length === 0
      ? ['- none: the reviewed head merged as it was']
      : pushed.map((r) => {
          const commits = r.commits.length === 0 ? 'no new commits listed' : r.commits.map(code).join(', ');
          return `- ${r.repair} from ${code(r.head)}${r.newHead === null ? '' : ` to ${code(r.newHead)}`}: ${commits} (${escapeText(r.reason)})`;
        });
  const lines = [
    `### proofgate ${escapeText(input.intent)}: merged`,
    '',
    ...changeLine(input),
    `Merged the reviewed head ${code(input.mergedHead)}${input.baseRef === undefined || input.baseRef === null || input.baseRef === '' ? '' : ` into ${branch(input.baseRef)}`} as ${mergeCommit}.`,
    '',
    '**Repairs**',
    '',
    ...repairLines,
    '',
    '**Timeline**',
    '',
    ...timelineLines(input.timeline),
  ];
  return composeMarkedBody(lines.join('\n'), [statusFields(input.changeId, input.intent, input.mergedHead)], secret);
}

/**
 * The status comment to edit in place: the last comment (in forge order) by
 * proofgate's own identity holding a trusted status marker for this change and
 * intent, or null. A status comment someone else edited no longer verifies, so
 * the router then writes a fresh one.
 */
export function findStatusComment(
  comments: readonly ForgeComment[],
  options: { readonly selfLogin: string; readonly secret: MarkerSecret; readonly changeId: string; readonly intent: string },
): ForgeComment | null {
  return findOwnComment(comments, options, (m) => m.fields.kind === 'automerge-status' && m.fields.intent === options.intent)?.comment ?? null;
}
