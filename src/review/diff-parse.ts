/** One file of a unified git diff, with the lines it adds. */
export interface DiffFile {
  readonly oldPath: string | null;
  readonly newPath: string | null;
  readonly binary: boolean;
  /**
   * The object id of the file's bytes at the head, from the `index <old>..<new>`
   * line (full with `--full-index`); null for a deletion or a change without one.
   */
  readonly newBlob: string | null;
  readonly added: { readonly line: number; readonly text: string }[];
}

const NULL_OID = /^0+$/;

/** The path a change is about: the new path, or the old one for a deletion. */
export function filePath(file: DiffFile): string {
  return file.newPath ?? file.oldPath ?? '';
}

const C_ESCAPES: Record<string, string> = { n: '\n', t: '\t', '"': '"', '\\': '\\', a: '\x07', b: '\b', f: '\f', r: '\r', v: '\v' };

/** Undo git's C-style quoting of a path (`"a\tb"`, octal bytes for non-ASCII). */
export function unquotePath(text: string): string {
  if (!text.startsWith('"') || !text.endsWith('"')) return text;
  const bytes: number[] = [];
  const body = text.slice(1, -1);
  for (let i = 0; i < body.length; i += 1) {
    const char = body[i] as string;
    if (char !== '\\') {
      bytes.push(...Buffer.from(char, 'utf8'));
      continue;
    }
    const next = body[i + 1] ?? '';
    if (/[0-7]/.test(next)) {
      bytes.push(parseInt(body.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(...Buffer.from(C_ESCAPES[next] ?? next, 'utf8'));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

function sidePath(raw: string, prefix: 'a/' | 'b/'): string | null {
  const path = unquotePath(raw.replace(/\t$/, ''));
  if (path === '/dev/null') return null;
  return path.startsWith(prefix) ? path.slice(prefix.length) : path;
}

function headerPaths(line: string): { oldPath: string | null; newPath: string | null } {
  // "diff --git a/x b/x": split in the middle when both halves match.
  const rest = line.slice('diff --git '.length);
  const quoted = rest.match(/^("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$/);
  if (quoted) return { oldPath: sidePath(quoted[1] as string, 'a/'), newPath: sidePath(quoted[2] as string, 'b/') };
  const half = (rest.length - 1) / 2;
  return { oldPath: sidePath(rest.slice(0, half), 'a/'), newPath: sidePath(rest.slice(half + 1), 'b/') };
}

/** Parse `git diff` output (with `a/` and `b/` prefixes) into files and added lines. */
export function parseUnifiedDiff(text: string): DiffFile[] {
  const files: { oldPath: string | null; newPath: string | null; binary: boolean; newBlob: string | null; added: { line: number; text: string }[] }[] = [];
  let current: (typeof files)[number] | undefined;
  let newLine = 0;
  let inHunk = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('diff --git ')) {
      current = { ...headerPaths(line), binary: false, newBlob: null, added: [] };
      files.push(current);
      inHunk = false;
      continue;
    }
    if (current === undefined) continue;
    if (!inHunk) {
      if (line.startsWith('--- ')) current.oldPath = sidePath(line.slice(4), 'a/');
      else if (line.startsWith('+++ ')) current.newPath = sidePath(line.slice(4), 'b/');
      else if (line.startsWith('new file mode')) current.oldPath = null;
      else if (line.startsWith('deleted file mode')) current.newPath = null;
      else if (line === 'GIT binary patch' || line.startsWith('Binary files ')) current.binary = true;
      else {
        const index = line.match(/^index [0-9a-f]+\.\.([0-9a-f]+)(?: \d+)?$/);
        if (index) current.newBlob = NULL_OID.test(index[1] as string) ? null : (index[1] as string);
      }
    }
    const hunk = line.match(/^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/);
    if (hunk) {
      newLine = Number(hunk[1]);
      inHunk = true;
      continue;
    }
    if (!inHunk) continue;
    if (line.startsWith('+')) {
      current.added.push({ line: newLine, text: line.slice(1) });
      newLine += 1;
    } else if (line.startsWith(' ')) {
      newLine += 1;
    }
  }
  return files;
}
