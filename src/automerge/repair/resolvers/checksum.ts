import { splitLines } from './lines.js';

/**
 * The generated-checksum resolver. A checksum file lists one `<digest> <path>`
 * entry a line (`sha256sum` style, `sha256:<hex> <path>`, or, in a file named
 * like `checksums` / `SHA256SUMS`, also `<path> <digest>`). When the base
 * branch and the change both regenerated some entries, the merge is
 * mechanical: take the base branch's version and re-apply only the entries
 * the change touched, matched by path.
 *
 * It refuses (returns null) when the change touched anything but entries, when
 * any other line differs between the versions, when a path is listed twice,
 * or when both sides set the same path to different values.
 */

export interface ChecksumEntry {
  readonly path: string;
  readonly digest: string;
}

const HEX = '[0-9a-fA-F]{32,128}';
const ALGO = '(?:md5|sha1|sha224|sha256|sha384|sha512|blake2b|blake2s|blake3)';
const DIGEST_FIRST = new RegExp(`^(${HEX})[ \\t]+\\*?(\\S(?:.*\\S)?)$`);
const ALGO_FIRST = new RegExp(`^(${ALGO}:${HEX})[ \\t]+(\\S(?:.*\\S)?)$`, 'i');
const PATH_FIRST = new RegExp(`^(\\S(?:.*?\\S)?):?[ \\t]+((?:${ALGO}:)?${HEX})$`, 'i');
const CHECKSUM_NAME = /^(?:.*[._-])?(?:checksums|(?:sha(?:1|224|256|384|512)|md5|b2)sums)(?:\.(?:txt|lst|list))?$/i;
const COMMENT = /^\s*(?:#|\/\/|$)/;

/** True for file names that announce a checksum list (`checksums.txt`, `SHA256SUMS`, `config.checksums`). */
export function isChecksumFileName(path: string): boolean {
  const name = path.split('/').pop() ?? path;
  return CHECKSUM_NAME.test(name);
}

function stripTerminator(line: string): string {
  return line.replace(/\r?\n$/, '');
}

/** Parse one line as a checksum entry; `pathFirst` also accepts `<path> <digest>`. */
export function parseChecksumLine(line: string, pathFirst = false): ChecksumEntry | null {
  const text = stripTerminator(line);
  const digestFirst = DIGEST_FIRST.exec(text) ?? ALGO_FIRST.exec(text);
  if (digestFirst !== null) return { digest: digestFirst[1] ?? '', path: digestFirst[2] ?? '' };
  if (!pathFirst) return null;
  const byPath = PATH_FIRST.exec(text);
  return byPath === null ? null : { path: byPath[1] ?? '', digest: byPath[2] ?? '' };
}

interface ParsedFile {
  readonly lines: readonly string[];
  /** Entry of each line (null for other lines). */
  readonly entries: readonly (ChecksumEntry | null)[];
  /** Entry line text (without terminator) by path. */
  readonly byPath: ReadonlyMap<string, string>;
  /** The non-entry lines, in order. */
  readonly other: readonly string[];
}

function parseFile(text: string, named: boolean): ParsedFile | null {
  const lines = splitLines(text);
  const entries = lines.map((line) => parseChecksumLine(line, named));
  const byPath = new Map<string, string>();
  const other: string[] = [];
  for (const [i, entry] of entries.entries()) {
    const line = lines[i] ?? '';
    if (entry === null) {
      // A file that is not named as a checksum list may hold nothing but entries, blank lines and comments.
      if (!named && !COMMENT.test(line)) return null;
      other.push(stripTerminator(line));
    } else {
      if (byPath.has(entry.path)) return null;
      byPath.set(entry.path, stripTerminator(line));
    }
  }
  return { lines, entries, byPath, other };
}

/** Entry lines that differ from `base`, by path (null: the entry was removed). */
function changedEntries(base: ParsedFile, side: ParsedFile): Map<string, string | null> {
  const changes = new Map<string, string | null>();
  for (const [path, line] of side.byPath) if (base.byPath.get(path) !== line) changes.set(path, line);
  for (const path of base.byPath.keys()) if (!side.byPath.has(path)) changes.set(path, null);
  return changes;
}

function sameSequence(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((line, i) => line === b[i]);
}

function terminatorOf(lines: readonly string[]): string {
  return lines.some((line) => line.endsWith('\r\n')) ? '\r\n' : '\n';
}

/**
 * Merge three versions of a checksum file: `base` (the common ancestor),
 * `ours` (the base branch now) and `theirs` (the change). `path` is the file's
 * path; it decides whether `<path> <digest>` lines count as entries.
 */
export function resolveChecksums(path: string, base: string, ours: string, theirs: string): string | null {
  const named = isChecksumFileName(path);
  const b = parseFile(base, named);
  const o = parseFile(ours, named);
  const t = parseFile(theirs, named);
  if (b === null || o === null || t === null) return null;
  if (b.byPath.size === 0 && o.byPath.size === 0 && t.byPath.size === 0) return null;
  if (!sameSequence(b.other, t.other) || !sameSequence(b.other, o.other)) return null;
  const theirsChanges = changedEntries(b, t);
  const oursChanges = changedEntries(b, o);
  for (const [entryPath, value] of theirsChanges) {
    if (oursChanges.has(entryPath) && oursChanges.get(entryPath) !== value) return null;
  }
  const eol = terminatorOf(o.lines);
  const result: { line: string; entry: ChecksumEntry | null }[] = [];
  for (const [i, line] of o.lines.entries()) {
    const entry = o.entries[i] ?? null;
    if (entry === null || !theirsChanges.has(entry.path)) {
      result.push({ line, entry });
      continue;
    }
    const replacement = theirsChanges.get(entry.path);
    if (replacement === null || replacement === undefined) continue;
    const ending = line.endsWith('\n') ? (line.endsWith('\r\n') ? '\r\n' : '\n') : '';
    result.push({ line: replacement + ending, entry: parseChecksumLine(replacement, named) });
  }
  const added = [...theirsChanges]
    .filter(([entryPath, value]) => value !== null && !o.byPath.has(entryPath))
    .sort(([a], [b2]) => (a < b2 ? -1 : a > b2 ? 1 : 0));
  const entryPaths = o.entries.filter((entry): entry is ChecksumEntry => entry !== null).map((entry) => entry.path);
  const sorted = entryPaths.every((entryPath, i) => i === 0 || (entryPaths[i - 1] ?? '') < entryPath);
  for (const [entryPath, line] of added) {
    const item = { line: `${line ?? ''}${eol}`, entry: { path: entryPath, digest: '' } };
    let at = -1;
    for (const [i, existing] of result.entries()) {
      if (existing.entry === null) continue;
      if (sorted && existing.entry.path > entryPath) {
        at = i;
        break;
      }
      at = i + 1;
    }
    if (at === -1) at = result.length;
    const before = result[at - 1];
    if (before !== undefined && !before.line.endsWith('\n')) result[at - 1] = { ...before, line: before.line + eol };
    result.splice(at, 0, item);
  }
  return result.map((item) => item.line).join('');
}
