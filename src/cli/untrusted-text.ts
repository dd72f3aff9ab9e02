/**
 * Text that came from a change (titles, commit subjects, branch and file
 * names, comment bodies, check output, reviewer findings, reasons quoting any
 * of them) is untrusted: printed raw it could drive the terminal (escape
 * sequences, bidi overrides) or forge lines of proofgate's own output (a
 * newline, a tab in a tab-separated row). Human output shows it through
 * `untrustedText`; `--json` output keeps the exact value (`jsonForTerminal`).
 */

/**
 * The characters never printed as they are: C0 controls (with \n, \r, \t),
 * DEL and the C1 controls (`\p{Cc}`); invisible format characters such as the
 * bidi embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069,
 * U+200E/U+200F, U+061C, U+FEFF and the tag characters (`\p{Cf}`), except the
 * zero-width (non-)joiners U+200C/U+200D that scripts and emoji need; the line
 * and paragraph separators U+2028/U+2029; and lone surrogates.
 */
const UNSAFE = /(?![\u200c\u200d])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, '0');
}

/** The visible form of one unsafe character: `\n`, `\x1b`, `\u202e`, `\u{e0041}`. */
function escapeChar(char: string): string {
  const named = NAMED[char];
  if (named !== undefined) return named;
  const code = char.codePointAt(0) ?? 0;
  if (code < 0x100) return `\\x${hex(code, 2)}`;
  if (code <= 0xffff) return `\\u${hex(code, 4)}`;
  return `\\u{${hex(code, 0)}}`;
}

/** How a multi-line body is shown: each of its lines after `prefix`. */
export interface UntrustedBlock {
  /** Put before every line so a body line cannot pass for one of proofgate's own (e.g. `'    | '`). */
  readonly prefix: string;
}

/**
 * Show untrusted text in human output. Every unsafe character (see `UNSAFE`)
 * is replaced by a visible escape (`\n`, `\t`, `\x1b`, `\x9b`, `\u202e`), so a
 * single-line field (title, ref, file name, login, reason) stays one line that
 * cannot move the cursor, recolour, retitle or reorder the terminal. With
 * `block`, the text is a body (a comment, check output): its newlines are kept
 * and each line, escaped the same way, follows `block.prefix`; one trailing
 * newline is dropped and an empty body is no lines (`''`). Backslashes are
 * printed as they are, so `--json` is the way to the exact text.
 */
export function untrustedText(text: string, block?: UntrustedBlock): string {
  if (block === undefined) return text.replace(UNSAFE, escapeChar);
  if (text === '') return '';
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  return body
    .split('\n')
    .map((line) => `${block.prefix}${line.replace(UNSAFE, escapeChar)}`)
    .join('\n');
}

/**
 * One JSON line for `--json`: the exact value (parsing it gives back every
 * string unchanged), with the unsafe characters JSON.stringify leaves raw
 * (DEL, C1 controls, bidi and other format characters, U+2028/U+2029) written
 * as `\uXXXX` escapes, so printing the JSON on a terminal is harmless too.
 */
export function jsonForTerminal(value: unknown): string {
  // JSON.stringify answers undefined for a value JSON has no form for (undefined, a function).
  const json = JSON.stringify(value) as string | undefined;
  return (json ?? 'null').replace(UNSAFE, (char) => {
    const code = char.codePointAt(0) ?? 0;
    if (code <= 0xffff) return `\\u${hex(code, 4)}`;
    // An astral format character (a tag character): its UTF-16 pair.
    return char
      .split('')
      .map((unit) => `\\u${hex(unit.charCodeAt(0), 4)}`)
      .join('');
  });
}
