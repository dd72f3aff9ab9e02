import { singleInsertion, splitLines, type Insertion } from './lines.js';

/**
 * The CHANGELOG.md resolver. It handles the one conflict that is mechanical:
 * while the change was open, the base branch added entries near the top of the
 * changelog, and the change added its own entries in the same section. The
 * result keeps both: the base's new entries first, then the change's.
 *
 * It refuses (returns null) as soon as either side edited or removed a line
 * that existed before, added lines in more than one place, or added them in
 * different sections or below the first sections of the file.
 */

/** Sections are opened by level-1 and level-2 headings; deeper headings stay inside their section. */
const SECTION_HEADING = /^#{1,2}[ \t]/;
/** "Near the top": the preamble, the first and the second section (e.g. the title and `## Unreleased`). */
const TOP_SECTIONS = 2;

function sectionOf(lines: readonly string[], index: number): number {
  let section = 0;
  for (let i = 0; i < index; i += 1) if (SECTION_HEADING.test(lines[i] ?? '')) section += 1;
  return section;
}

function withTerminators(lines: readonly string[]): string {
  return lines.map((line, i) => (i < lines.length - 1 && !line.endsWith('\n') ? `${line}\n` : line)).join('');
}

/** The change's added lines minus those the base added too (a cherry-picked entry is kept once). */
function withoutDuplicates(change: readonly string[], base: readonly string[]): string[] {
  const seen = new Set(base.filter((line) => line.trim() !== ''));
  const kept = change.filter((line) => line.trim() === '' || !seen.has(line));
  return kept.every((line) => line.trim() === '') ? [] : kept;
}

/**
 * Merge three versions of a changelog: `base` (the common ancestor), `ours`
 * (the base branch now) and `theirs` (the change). Returns the merged text, or
 * null when the conflict is not an isolated pair of additions.
 */
export function resolveChangelog(base: string, ours: string, theirs: string): string | null {
  const baseLines = splitLines(base);
  const oursAdded = singleInsertion(baseLines, splitLines(ours));
  const theirsAdded = singleInsertion(baseLines, splitLines(theirs));
  if (oursAdded === null || theirsAdded === null) return null;
  if (oursAdded.lines.length === 0) return theirs;
  if (theirsAdded.lines.length === 0) return ours;
  const section = sectionOf(baseLines, oursAdded.index);
  if (section !== sectionOf(baseLines, theirsAdded.index) || section > TOP_SECTIONS) return null;
  const changeLines = withoutDuplicates(theirsAdded.lines, oursAdded.lines);
  const inserts: Insertion[] = [oursAdded, { index: theirsAdded.index, lines: changeLines }];
  const merged: string[] = [];
  for (let i = 0; i <= baseLines.length; i += 1) {
    // At the same index the base's block comes first: inserts are in that order.
    for (const insert of inserts) if (insert.index === i) merged.push(...insert.lines);
    const line = baseLines[i];
    if (line !== undefined) merged.push(line);
  }
  return withTerminators(merged);
}
