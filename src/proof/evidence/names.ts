import { evidenceError, quoteName } from './reasons.js';

/** The manifest's entry name, at the top of every bundle. */
export const MANIFEST_NAME = 'manifest.json';

/** Longest entry name, and longest segment of one, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 1024;
const MAX_SEGMENT_BYTES = 255;

/** General purpose flag bit 11: the name (and comment) are UTF-8. */
export const FLAG_UTF8 = 0x0800;

/**
 * Characters no entry name may hold: controls (NUL included), invisible format
 * characters such as the bidi overrides (the zero-width joiners excepted, as
 * scripts and emoji need them), line and paragraph separators, lone surrogates.
 */
const UNSAFE_CHARS = /(?![\u200c\u200d])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;
/** Characters Windows cannot store in a name (`:` also names a drive or an alternate data stream). */
const NOT_PORTABLE = /[<>:"|?*]/;
/** Names Windows treats as devices (the console's CONIN$ and CONOUT$ included), with or without an extension. */
const WINDOWS_DEVICE = /^(con|conin\$|conout\$|prn|aux|nul|com[0-9\u00b9\u00b2\u00b3]|lpt[0-9\u00b9\u00b2\u00b3])(\.|$)/i;

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Why `name` may not name a file of a bundle, or null when it may. A name is
 * a relative path of `/`-separated segments, already in the form a reader
 * would write: no empty, `.` or `..` segment, no leading `/`, no backslash, no
 * drive letter or `:`, no control or invisible character, no segment that
 * Windows would change (a trailing dot or space) or treat as a device. Its
 * compatibility form (NFKC, which folds fullwidth `．．／` into `../`, as
 * Windows' best-fit mapping may when a name passes through an ANSI API) is
 * held to the same rules.
 */
export function entryNameProblem(name: string): string | null {
  const problem = plainNameProblem(name);
  if (problem !== null) return problem;
  const compatible = name.normalize('NFKC');
  if (compatible === name) return null;
  const folded = plainNameProblem(compatible);
  return folded === null ? null : `has a compatibility form (NFKC) that ${folded}`;
}

function plainNameProblem(name: string): string | null {
  if (name === '') return 'is empty';
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) return `is longer than ${MAX_NAME_BYTES} bytes`;
  if (name.includes('\0')) return 'contains NUL';
  if (UNSAFE_CHARS.test(name)) return 'contains a control or invisible character';
  if (name.includes('\\')) return 'contains a backslash';
  if (name.startsWith('/')) return 'is absolute';
  if (/^[A-Za-z]:/.test(name)) return 'starts with a drive letter';
  if (NOT_PORTABLE.test(name)) return 'contains one of < > : " | ? *';
  for (const segment of name.split('/')) {
    if (segment === '') return name.endsWith('/') ? 'names a directory' : 'has an empty segment';
    if (segment === '.' || segment === '..') return `has a "${segment}" segment`;
    if (segment.endsWith('.') || segment.endsWith(' ')) return 'has a segment ending in a dot or space';
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) return `has a segment longer than ${MAX_SEGMENT_BYTES} bytes`;
    if (WINDOWS_DEVICE.test(segment)) return 'has a segment Windows treats as a device';
  }
  return null;
}

/**
 * The form two names share when a file system could take them for the same
 * file: the compatibility form (NFKC, so fullwidth and other look-alike forms
 * meet their plain ones), case folded fully (lower, upper, then lower case
 * again, so `ẞ`, `ß` and `ss` meet, and the Kelvin sign and `k`; the Turkish
 * dotless `ı` meets `i` too, stricter than Unicode's folding), in NFKC again.
 */
export function nameKey(name: string): string {
  return name.normalize('NFKC').toLowerCase().toUpperCase().toLowerCase().normalize('NFKC');
}

/**
 * The names of one bundle, kept by `nameKey`: a name is refused when it is
 * already there by its key, or when it is a file where another name has a
 * folder, or the other way round (`chat` and `Chat/more.json`), which no file
 * system can hold both of. `add` returns the earlier name it conflicts with,
 * and how, or null after keeping it.
 */
export class NameKeys {
  private readonly files = new Map<string, string>();
  private readonly folders = new Map<string, string>();

  add(name: string): { readonly earlier: string; readonly how: 'same' | 'file-folder' } | null {
    const key = nameKey(name);
    const same = this.files.get(key);
    if (same !== undefined) return { earlier: same, how: 'same' };
    const folder = this.folders.get(key);
    if (folder !== undefined) return { earlier: folder, how: 'file-folder' };
    const prefixes: string[] = [];
    for (let slash = key.indexOf('/'); slash !== -1; slash = key.indexOf('/', slash + 1)) {
      const prefix = key.slice(0, slash);
      const file = this.files.get(prefix);
      if (file !== undefined) return { earlier: file, how: 'file-folder' };
      prefixes.push(prefix);
    }
    this.files.set(key, name);
    for (const prefix of prefixes) if (!this.folders.has(prefix)) this.folders.set(prefix, name);
    return null;
  }
}

/**
 * The name an entry's raw bytes spell: UTF-8 (strict) when flag bit 11 says
 * so, else only plain ASCII (the one subset CP437 and UTF-8 agree on). Then
 * the rules of `entryNameProblem`. Anything else is `UNSAFE_PATH`.
 */
export function decodeEntryName(raw: Uint8Array, flags: number): string {
  let name: string;
  if ((flags & FLAG_UTF8) === 0 && raw.some((byte) => byte >= 0x80)) {
    throw evidenceError('UNSAFE_PATH', `an entry name is not marked UTF-8 and is not plain ASCII (${quoteName(Buffer.from(raw).toString('latin1'))})`);
  }
  try {
    name = STRICT_UTF8.decode(raw);
  } catch {
    throw evidenceError('UNSAFE_PATH', `an entry name is not valid UTF-8 (${quoteName(Buffer.from(raw).toString('latin1'))})`);
  }
  const problem = entryNameProblem(name);
  if (problem !== null) throw evidenceError('UNSAFE_PATH', `entry name ${quoteName(name)} ${problem}`, { path: name });
  return name;
}
