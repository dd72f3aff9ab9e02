import { ProofgateError, redactSecrets } from '../core/index.js';

/**
 * What a change does to each file, read from git's NUL-separated machine
 * output (`git diff --raw -z` and `git diff --numstat -z`), never from the
 * headers of a unified diff. In `-z` output a path is a run of bytes ended by
 * NUL, written as it is: no quoting, and no name (a space, a tab, a newline,
 * `" b/"`, `" => "`, `dev/null`, a line that looks like a diff header or a raw
 * record) can be mistaken for another field.
 */

/** git's status letters: Added, Copied, Deleted, Modified, Renamed, Type changed (file, symlink, gitlink), Unmerged, unknown (X). */
export type ChangeStatus = 'A' | 'C' | 'D' | 'M' | 'R' | 'T' | 'U' | 'X';

/** One file a change touches, as git reports it. */
export interface ChangedFile {
  readonly status: ChangeStatus;
  /** Similarity of a rename or copy (0..100); null for every other status. */
  readonly score: number | null;
  /** The path before the change; null for an added file. */
  readonly oldPath: string | null;
  /** The path after the change; null for a deleted file. */
  readonly newPath: string | null;
  /** Octal modes (`100644`, `100755`, `120000` symlink, `160000` gitlink); null on the side where the file does not exist. */
  readonly oldMode: string | null;
  readonly newMode: string | null;
  /** Object ids of the bytes before and after (full length); null on the side where the file does not exist. */
  readonly oldBlob: string | null;
  readonly newBlob: string | null;
  /** git shows no lines for it (binary by content or by attributes: numstat's `-`). */
  readonly binary: boolean;
  /** Lines added and deleted as git counts them; null for a binary file. */
  readonly linesAdded: number | null;
  readonly linesDeleted: number | null;
}

/** One line a change adds, with its line number in the new file. */
export interface AddedLine {
  readonly line: number;
  readonly text: string;
}

export const SYMLINK_MODE = '120000';
export const GITLINK_MODE = '160000';

const NULL_OID = /^0+$/;
const RAW_META = /^:([0-7]{6}) ([0-7]{6}) ([0-9a-f]{40}|[0-9a-f]{64}) ([0-9a-f]{40}|[0-9a-f]{64}) ([ACDMRTUX])([0-9]{0,3})$/;
const NUMSTAT = /^(\d+|-)\t(\d+|-)\t/;

function malformed(what: string, detail: string): ProofgateError {
  return new ProofgateError('GIT', `unexpected git ${what} output: ${redactSecrets(detail).slice(0, 120)}`);
}

/** The NUL-ended fields of `-z` output, as byte ranges decoded to text; output that does not end in NUL is malformed. */
function fields(out: Buffer, what: string): string[] {
  const parts: string[] = [];
  let start = 0;
  for (let end = out.indexOf(0, start); end !== -1; end = out.indexOf(0, start)) {
    parts.push(out.subarray(start, end).toString('utf8'));
    start = end + 1;
  }
  if (start !== out.length) throw malformed(what, 'the last field is not ended by NUL');
  return parts;
}

interface RawEntry {
  readonly status: ChangeStatus;
  readonly score: number | null;
  readonly oldMode: string | null;
  readonly newMode: string | null;
  readonly oldBlob: string | null;
  readonly newBlob: string | null;
  readonly paths: readonly string[];
}

/**
 * Parse `git diff --raw -z`: per file `:<old mode> <new mode> <old oid> <new
 * oid> <status>[score]` NUL, the path NUL, and for a rename or copy the new path
 * NUL. Fields are taken by position, never by what they look like, so a path
 * that starts with `:` or spells a whole raw record is a path.
 */
export function parseRawZ(out: Buffer): RawEntry[] {
  const parts = fields(out, '--raw -z');
  const entries: RawEntry[] = [];
  let i = 0;
  while (i < parts.length) {
    const meta = RAW_META.exec(parts[i] as string);
    if (meta === null) throw malformed('--raw -z', parts[i] as string);
    const status = meta[5] as ChangeStatus;
    const count = status === 'R' || status === 'C' ? 2 : 1;
    const paths = parts.slice(i + 1, i + 1 + count);
    if (paths.length !== count || paths.some((path) => path === '')) throw malformed('--raw -z', `a record without its ${count} path(s)`);
    const side = (mode: string, oid: string) => (mode === '000000' ? { mode: null, oid: null } : { mode, oid: NULL_OID.test(oid) ? null : oid });
    const before = side(meta[1] as string, meta[3] as string);
    const after = side(meta[2] as string, meta[4] as string);
    entries.push({
      status,
      score: meta[6] === '' ? null : Number(meta[6]),
      oldMode: before.mode,
      newMode: after.mode,
      oldBlob: before.oid,
      newBlob: after.oid,
      paths,
    });
    i += 1 + count;
  }
  return entries;
}

interface NumstatEntry {
  readonly added: number | null;
  readonly deleted: number | null;
  readonly paths: readonly string[];
}

/**
 * Parse `git diff --numstat -z`: `<added> TAB <deleted> TAB <path>` NUL, or for
 * a rename or copy `<added> TAB <deleted> TAB` NUL `<old>` NUL `<new>` NUL. A
 * binary file counts `-` for both. The path is everything after the second tab
 * (tabs in it included).
 */
export function parseNumstatZ(out: Buffer): NumstatEntry[] {
  const parts = fields(out, '--numstat -z');
  const entries: NumstatEntry[] = [];
  let i = 0;
  while (i < parts.length) {
    const part = parts[i] as string;
    const counts = NUMSTAT.exec(part);
    if (counts === null || (counts[1] === '-') !== (counts[2] === '-')) throw malformed('--numstat -z', part);
    const rest = part.slice(counts[0].length);
    const paths = rest === '' ? parts.slice(i + 1, i + 3) : [rest];
    if (paths.length === 0 || paths.some((path) => path === '') || (rest === '' && paths.length !== 2))
      throw malformed('--numstat -z', 'a record without its path(s)');
    entries.push({
      added: counts[1] === '-' ? null : Number(counts[1]),
      deleted: counts[2] === '-' ? null : Number(counts[2]),
      paths,
    });
    i += rest === '' ? 3 : 1;
  }
  return entries;
}

/**
 * Join the two listings of one diff (same options, same commits): git writes
 * them in the same order, one record per file. Any disagreement in count or
 * paths is an error, never a guess.
 */
export function changedFilesOf(raw: readonly RawEntry[], numstat: readonly NumstatEntry[]): ChangedFile[] {
  if (raw.length !== numstat.length) throw new ProofgateError('GIT', `git's --raw and --numstat disagree: ${raw.length} and ${numstat.length} files`);
  return raw.map((entry, index) => {
    const counts = numstat[index] as NumstatEntry;
    if (counts.paths.length !== entry.paths.length || counts.paths.some((path, i) => path !== entry.paths[i])) {
      throw new ProofgateError('GIT', `git's --raw and --numstat disagree on file ${index + 1}`);
    }
    const [first, second] = entry.paths as [string, string | undefined];
    const renamed = second !== undefined;
    return {
      status: entry.status,
      score: entry.score,
      oldPath: entry.status === 'A' ? null : first,
      newPath: entry.status === 'D' ? null : renamed ? second : first,
      oldMode: entry.oldMode,
      newMode: entry.newMode,
      oldBlob: entry.oldBlob,
      newBlob: entry.newBlob,
      binary: counts.added === null,
      linesAdded: counts.added,
      linesDeleted: counts.deleted,
    };
  });
}

/** Every line of a file's new bytes, as added lines (an added file, or a new side of another type). */
export function linesOfText(text: string): AddedLine[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.map((line, i) => ({ line: i + 1, text: line }));
}

const HUNK = /^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/**
 * The added lines of the patch between two blobs (`git diff <old oid> <new
 * oid>`). This is the one piece of unified-diff text proofgate still reads:
 * git has no machine format for line content. It is kept safe by what is
 * asked: one pair of blobs, whose header names object ids, never a path, and
 * every hunk is read by the line counts of its `@@ -a,b +c,d @@` header, so no
 * content line is ever taken for a header. Lines before the first hunk are
 * git's header and skipped; anything that breaks the counts is an error.
 */
export function addedLinesOfPatch(patch: string): AddedLine[] {
  const lines = patch.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const added: AddedLine[] = [];
  let i = lines.findIndex((line) => line.startsWith('@@ '));
  if (i === -1) return added;
  while (i < lines.length) {
    const hunk = HUNK.exec(lines[i] as string);
    if (hunk === null) throw malformed('diff', `expected a hunk header, found ${JSON.stringify((lines[i] as string).slice(0, 40))}`);
    let oldLeft = hunk[1] === undefined ? 1 : Number(hunk[1]);
    let newLeft = hunk[3] === undefined ? 1 : Number(hunk[3]);
    let newLine = Number(hunk[2]);
    i += 1;
    while (oldLeft > 0 || newLeft > 0) {
      const line = lines[i];
      i += 1;
      if (line === undefined) throw malformed('diff', 'a hunk ends before its counts');
      const tag = line.charAt(0);
      if (tag === '\\') continue;
      if (tag === '+' && newLeft > 0) {
        added.push({ line: newLine, text: line.slice(1) });
        newLine += 1;
        newLeft -= 1;
      } else if (tag === '-' && oldLeft > 0) {
        oldLeft -= 1;
      } else if ((tag === ' ' || line === '') && oldLeft > 0 && newLeft > 0) {
        // '' is an empty context line under diff.suppressBlankEmpty.
        newLine += 1;
        oldLeft -= 1;
        newLeft -= 1;
      } else {
        throw malformed('diff', 'a hunk line does not fit its counts');
      }
    }
    while ((lines[i] ?? '').startsWith('\\')) i += 1;
  }
  return added;
}
