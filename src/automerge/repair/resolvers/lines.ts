/**
 * Line helpers shared by the mechanical conflict resolvers. Lines keep their
 * terminator, so joining them gives back the exact text.
 */

/** Split text into lines, each with its trailing `\n` (the last one may lack it). */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** One contiguous block of lines added to a base version at `index` (before base line `index`). */
export interface Insertion {
  readonly index: number;
  readonly lines: readonly string[];
}

/**
 * How `side` differs from `base` when the only change is ONE contiguous block
 * of added lines: that block, an empty insertion when they are equal, or null
 * when `side` edited or removed any base line (or added in two places).
 */
export function singleInsertion(base: readonly string[], side: readonly string[]): Insertion | null {
  if (side.length < base.length) return null;
  let prefix = 0;
  while (prefix < base.length && base[prefix] === side[prefix]) prefix += 1;
  let suffix = 0;
  const room = Math.min(base.length, side.length) - prefix;
  while (suffix < room && base[base.length - 1 - suffix] === side[side.length - 1 - suffix]) suffix += 1;
  if (prefix + suffix !== base.length) return null;
  return { index: prefix, lines: side.slice(prefix, side.length - suffix) };
}

/** True when the text can be handled as lines: valid UTF-8 without NUL bytes. */
export function isPlainText(bytes: Uint8Array): boolean {
  if (bytes.includes(0)) return false;
  const text = Buffer.from(bytes).toString('utf8');
  return Buffer.from(text, 'utf8').equals(Buffer.from(bytes));
}
