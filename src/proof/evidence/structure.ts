/**
 * The checks of an archive's layout that yauzl leaves to its caller: the end
 * record sits at the very end and names a central directory that ends where it
 * starts; local headers repeat what the central directory says; every byte of
 * the archive belongs to exactly one entry, the central directory or the end
 * record (no overlaps, no gaps where a second reader could find other data).
 */
import type yauzl from 'yauzl';
import { crc32 } from './crc32.js';
import { FLAG_UTF8 } from './names.js';
import { evidenceError, quoteName } from './reasons.js';

const END_SIGNATURE = 0x06054b50;
const END_SIZE = 22;
const ZIP64_LOCATOR_SIGNATURE = 0x07064b50;
const ZIP64_LOCATOR_SIZE = 20;
const CENTRAL_SIGNATURE = 0x02014b50;
const CENTRAL_FIXED_SIZE = 46;
const DESCRIPTOR_SIGNATURE = 0x08074b50;

const FLAG_ENCRYPTED = 0x0001;
const FLAG_DESCRIPTOR = 0x0008;
const FLAG_STRONG_ENCRYPTION = 0x0040;
/** Flag bits a bundle may set: deflate's speed hints (1, 2), a data descriptor (3), UTF-8 names (11). */
const ACCEPTED_FLAGS = 0x0002 | 0x0004 | FLAG_DESCRIPTOR | FLAG_UTF8;

const METHOD_STORED = 0;
export const METHOD_DEFLATE = 8;

const EXTRA_ZIP64 = 0x0001;
const EXTRA_UNICODE_PATH = 0x7075;
/** An extra field's header: its id and the length of its data, two bytes each. */
const EXTRA_HEADER = 4;
/** A Unicode path field's data before the name it repeats: a version byte and the CRC-32 of the raw name. */
const UNICODE_PATH_PREFIX = 5;
/**
 * Extra fields a bundle may carry, with the most data each can need:
 * timestamps (Info-ZIP `UT`: flags and three times; NTFS: one fixed record),
 * Unix owner (`ux`: version and two ids of up to 8 bytes), and a Unicode path
 * that repeats the name (checked on its own, its length follows the name's).
 * A longer field could only be hiding bytes.
 */
const ACCEPTED_EXTRA: ReadonlyMap<number, number> = new Map([
  [0x5455, 13],
  [0x000a, 32],
  [0x7875, 19],
]);
/** The most extra field bytes a header can need: each accepted kind once, at its longest, without the Unicode path field. */
const FIXED_EXTRA_BYTES = [...ACCEPTED_EXTRA.values()].reduce((sum, longest) => sum + EXTRA_HEADER + longest, 0);

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const FILE_TYPES: Readonly<Record<number, string>> = {
  0o010000: 'a FIFO',
  0o020000: 'a character device',
  0o040000: 'a directory',
  0o060000: 'a block device',
  0o140000: 'a socket',
};
const DOS_DIRECTORY = 0x10;
const DOS_VOLUME_LABEL = 0x08;
const DOS_REPARSE_POINT = 0x400;

/** The end of central directory record, at the archive's last 22 bytes. */
export interface EndRecord {
  readonly offset: number;
  readonly entryCount: number;
  readonly centralOffset: number;
  readonly centralSize: number;
}

/**
 * Read the end record. A bundle has it as its last 22 bytes (no archive
 * comment, nothing after it), on one disk, without ZIP64, and its central
 * directory ends exactly where the record starts. `CORRUPT` otherwise;
 * `ENTRY_LIMIT` when it announces more than `maxEntries` entries.
 */
export function readEndRecord(bytes: Buffer, maxEntries: number): EndRecord {
  if (bytes.length < END_SIZE) throw evidenceError('CORRUPT', `the archive is ${bytes.length} bytes, too short to be a ZIP archive`);
  const offset = bytes.length - END_SIZE;
  if (bytes.readUInt32LE(offset) !== END_SIGNATURE) {
    throw evidenceError(
      'CORRUPT',
      'no end of central directory record in the last 22 bytes (not a ZIP archive, truncated, or followed by a comment or other bytes)',
    );
  }
  const disk = bytes.readUInt16LE(offset + 4);
  const centralDisk = bytes.readUInt16LE(offset + 6);
  const onDisk = bytes.readUInt16LE(offset + 8);
  const entryCount = bytes.readUInt16LE(offset + 10);
  const centralSize = bytes.readUInt32LE(offset + 12);
  const centralOffset = bytes.readUInt32LE(offset + 16);
  if (bytes.readUInt16LE(offset + 20) !== 0) throw evidenceError('CORRUPT', 'the end record announces an archive comment that is not there');
  if (entryCount === 0xffff || centralSize === 0xffffffff || centralOffset === 0xffffffff) {
    throw evidenceError('CORRUPT', 'the archive uses ZIP64, which evidence bundles never need');
  }
  if (offset >= ZIP64_LOCATOR_SIZE && bytes.readUInt32LE(offset - ZIP64_LOCATOR_SIZE) === ZIP64_LOCATOR_SIGNATURE) {
    throw evidenceError('CORRUPT', 'the archive has a ZIP64 end of central directory locator, which evidence bundles never need');
  }
  if (disk !== 0 || centralDisk !== 0 || onDisk !== entryCount) throw evidenceError('CORRUPT', 'the archive spans several disks');
  if (entryCount > maxEntries) throw evidenceError('ENTRY_LIMIT', `the archive has ${entryCount} entries, more than the ${maxEntries} allowed`);
  if (centralOffset + centralSize !== offset) {
    throw evidenceError('CORRUPT', `the central directory (${centralSize} bytes at ${centralOffset}) does not end where the end record starts (${offset})`);
  }
  return { offset, entryCount, centralOffset, centralSize };
}

/**
 * Check the central directory record of `entry`, which starts at `position`:
 * its signature is there, it starts on disk 0, it has no comment, and its
 * extra fields are what bundles carry (`checkExtraFields`, on the record's own
 * bytes). Returns where the next record starts.
 */
export function checkCentralRecord(bytes: Buffer, position: number, entry: yauzl.Entry, name: string): number {
  const next = position + CENTRAL_FIXED_SIZE + entry.fileNameLength + entry.extraFieldLength + entry.fileCommentLength;
  if (
    next > bytes.length ||
    bytes.readUInt32LE(position) !== CENTRAL_SIGNATURE ||
    !bytes
      .subarray(position + CENTRAL_FIXED_SIZE)
      .subarray(0, entry.fileNameLength)
      .equals(entry.fileNameRaw)
  ) {
    throw evidenceError('CORRUPT', `the central directory record of ${quoteName(name)} is not where the records before it end`);
  }
  if (bytes.readUInt16LE(position + 34) !== 0) throw evidenceError('CORRUPT', `entry ${quoteName(name)} starts on another disk`);
  if (entry.fileCommentLength !== 0) throw evidenceError('CORRUPT', `entry ${quoteName(name)} has a file comment, which evidence bundles never carry`);
  const extraStart = position + CENTRAL_FIXED_SIZE + entry.fileNameLength;
  checkExtraFields(bytes.subarray(extraStart, extraStart + entry.extraFieldLength), entry.fileNameRaw, name, 'central');
  return next;
}

/**
 * Flags and method: no encryption, no flag bit a bundle does not use, stored
 * or deflate only, and no data descriptor after stored data, whose end a
 * reader that scans local headers could only guess (and be shown a second,
 * hidden entry inside it) (`UNSUPPORTED_METHOD`).
 */
export function checkMethod(flags: number, method: number, name: string): void {
  if ((flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION)) !== 0) throw evidenceError('UNSUPPORTED_METHOD', `entry ${quoteName(name)} is encrypted`);
  if ((flags & ~ACCEPTED_FLAGS) !== 0) {
    throw evidenceError(
      'UNSUPPORTED_METHOD',
      `entry ${quoteName(name)} sets general purpose flags 0x${(flags & ~ACCEPTED_FLAGS).toString(16)}, which bundles never use`,
    );
  }
  if (method !== METHOD_STORED && method !== METHOD_DEFLATE) {
    throw evidenceError('UNSUPPORTED_METHOD', `entry ${quoteName(name)} uses compression method ${method}; only stored (0) and deflate (8) are read`);
  }
  if (method === METHOD_STORED && (flags & FLAG_DESCRIPTOR) !== 0) {
    throw evidenceError('UNSUPPORTED_METHOD', `entry ${quoteName(name)} is stored with a data descriptor (flag bit 3), which bundles never use`);
  }
}

/**
 * The external attributes describe a plain file: a Unix file type, when one
 * is given, is a regular file (`SYMLINK` for a link, `SPECIAL_FILE` for a
 * directory, device, FIFO or socket), and the DOS bits mark no directory,
 * volume label or reparse point (a Windows link).
 */
export function checkAttributes(attributes: number, name: string): void {
  const type = (attributes >>> 16) & S_IFMT;
  if (type === S_IFLNK) throw evidenceError('SYMLINK', `entry ${quoteName(name)} is a symbolic link`);
  if ((attributes & DOS_REPARSE_POINT) !== 0) throw evidenceError('SYMLINK', `entry ${quoteName(name)} is a reparse point (a Windows link)`);
  if (type !== 0 && type !== S_IFREG)
    throw evidenceError('SPECIAL_FILE', `entry ${quoteName(name)} is ${FILE_TYPES[type] ?? `file type 0o${type.toString(8)}`}`);
  if ((attributes & DOS_DIRECTORY) !== 0) throw evidenceError('SPECIAL_FILE', `entry ${quoteName(name)} is marked a directory`);
  if ((attributes & DOS_VOLUME_LABEL) !== 0) throw evidenceError('SPECIAL_FILE', `entry ${quoteName(name)} is marked a volume label`);
}

/**
 * An extra field area, read straight from a header's bytes, field by field:
 * at most the bytes the accepted fields can need (checked before any field is
 * read), each field whole (no bytes left over that are no field), each kind at
 * most once, only the accepted kinds at no more than their longest (`CORRUPT`
 * for ZIP64 or any other), and a Unicode path field that repeats the raw name
 * exactly, so that no reader takes the entry for another file
 * (`HEADER_MISMATCH`). Nothing of it is kept.
 */
export function checkExtraFields(extra: Buffer, rawName: Buffer, name: string, where: 'central' | 'local'): void {
  const longestArea = FIXED_EXTRA_BYTES + EXTRA_HEADER + UNICODE_PATH_PREFIX + rawName.length;
  if (extra.length > longestArea) {
    throw evidenceError('CORRUPT', `entry ${quoteName(name)} has ${extra.length} bytes of extra fields in its ${where} header, more than bundles can need`);
  }
  const seen = new Set<number>();
  for (let at = 0; at < extra.length;) {
    if (at + EXTRA_HEADER > extra.length) {
      throw evidenceError('CORRUPT', `entry ${quoteName(name)} has ${extra.length - at} bytes after the last extra field in its ${where} header`);
    }
    const fieldId = extra.readUInt16LE(at);
    const dataStart = at + EXTRA_HEADER;
    const dataEnd = dataStart + extra.readUInt16LE(at + 2);
    if (dataEnd > extra.length) throw evidenceError('CORRUPT', `entry ${quoteName(name)} has a malformed extra field in its ${where} header`);
    const data = extra.subarray(dataStart, dataEnd);
    at = dataEnd;
    const id = `0x${fieldId.toString(16).padStart(4, '0')}`;
    if (fieldId === EXTRA_ZIP64) throw evidenceError('CORRUPT', `entry ${quoteName(name)} has a ZIP64 field in its ${where} header, which bundles never need`);
    if (seen.has(fieldId)) throw evidenceError('CORRUPT', `entry ${quoteName(name)} has extra field ${id} twice in its ${where} header`);
    seen.add(fieldId);
    if (fieldId === EXTRA_UNICODE_PATH) {
      const repeats =
        data.length >= UNICODE_PATH_PREFIX && data[0] === 1 && data.readUInt32LE(1) === crc32(rawName) && data.subarray(UNICODE_PATH_PREFIX).equals(rawName);
      if (!repeats) throw evidenceError('HEADER_MISMATCH', `entry ${quoteName(name)} has a Unicode path field in its ${where} header that names another file`);
      continue;
    }
    const longest = ACCEPTED_EXTRA.get(fieldId);
    if (longest === undefined)
      throw evidenceError('CORRUPT', `entry ${quoteName(name)} has extra field ${id} in its ${where} header, which bundles do not carry`);
    if (data.length > longest) {
      throw evidenceError(
        'CORRUPT',
        `entry ${quoteName(name)} has a ${data.length}-byte extra field ${id} in its ${where} header, longer than that field can need`,
      );
    }
  }
}

/** The bytes one part of the archive occupies, `[start, end)`. */
export interface Span {
  readonly start: number;
  readonly end: number;
  /** What occupies it, for messages: `entry "a.txt"`, `the central directory`. */
  readonly what: string;
  readonly entry: boolean;
}

/**
 * The bytes an entry occupies: local header, name, extra field, data and,
 * with flag bit 3, the data descriptor after the data, which must carry the
 * central directory's CRC-32 and sizes (`HEADER_MISMATCH` otherwise).
 */
export function entrySpan(bytes: Buffer, entry: yauzl.Entry, local: yauzl.LocalFileHeader, name: string): Span {
  const dataEnd = local.fileDataStart + entry.compressedSize;
  let end = dataEnd;
  if ((entry.generalPurposeBitFlag & FLAG_DESCRIPTOR) !== 0) {
    const matches = (at: number) =>
      at + 12 <= bytes.length &&
      bytes.readUInt32LE(at) === entry.crc32 &&
      bytes.readUInt32LE(at + 4) === entry.compressedSize &&
      bytes.readUInt32LE(at + 8) === entry.uncompressedSize;
    if (dataEnd + 4 <= bytes.length && bytes.readUInt32LE(dataEnd) === DESCRIPTOR_SIGNATURE && matches(dataEnd + 4)) end = dataEnd + 16;
    else if (matches(dataEnd)) end = dataEnd + 12;
    else throw evidenceError('HEADER_MISMATCH', `entry ${quoteName(name)}: the data descriptor after its data differs from the central directory`);
  }
  return { start: entry.relativeOffsetOfLocalHeader, end, what: `entry ${quoteName(name)}`, entry: true };
}

/**
 * Hold an entry's local header against its central record: the same name
 * bytes, flags and method; the same CRC-32 and sizes (with a data descriptor,
 * the local values may also be zero); accepted extra fields only.
 * `HEADER_MISMATCH` on any disagreement.
 */
export function checkLocalHeader(entry: yauzl.Entry, local: yauzl.LocalFileHeader, name: string): void {
  const mismatch = (what: string) =>
    evidenceError('HEADER_MISMATCH', `entry ${quoteName(name)}: the local header's ${what} differs from the central directory's`);
  if (!local.fileName.equals(entry.fileNameRaw)) throw mismatch('name');
  if (local.generalPurposeBitFlag !== entry.generalPurposeBitFlag) throw mismatch('flags');
  if (local.compressionMethod !== entry.compressionMethod) throw mismatch('compression method');
  const descriptor = (entry.generalPurposeBitFlag & FLAG_DESCRIPTOR) !== 0;
  const agrees = (localValue: number, centralValue: number) => localValue === centralValue || (descriptor && localValue === 0);
  if (!agrees(local.crc32, entry.crc32)) throw mismatch('CRC-32');
  if (!agrees(local.compressedSize, entry.compressedSize)) throw mismatch('compressed size');
  if (!agrees(local.uncompressedSize, entry.uncompressedSize)) throw mismatch('uncompressed size');
  checkExtraFields(local.extraField, entry.fileNameRaw, name, 'local');
}

/**
 * Every byte of the archive belongs to exactly one span: the entries, the
 * central directory, the end record. Two spans that share a byte are
 * `OVERLAPPING_ENTRIES` (one entry's data read as another's, the way
 * non-recursive ZIP bombs multiply a small kernel); bytes that belong to no
 * span are `CORRUPT` (data a reader that scans local headers would find).
 */
export function checkCoverage(spans: readonly Span[], end: EndRecord, size: number): void {
  const all: Span[] = [
    ...spans,
    { start: end.centralOffset, end: end.offset, what: 'the central directory', entry: false },
    { start: end.offset, end: size, what: 'the end record', entry: false },
  ].sort((a, b) => a.start - b.start || a.end - b.end);
  let covered = 0;
  let last: Span | null = null;
  for (const span of all) {
    if (span.start < covered && last !== null) {
      throw evidenceError('OVERLAPPING_ENTRIES', `${span.what} (bytes ${span.start}-${span.end}) overlaps ${last.what} (bytes ${last.start}-${last.end})`);
    }
    if (span.start > covered) throw evidenceError('CORRUPT', `bytes ${covered}-${span.start} of the archive belong to no entry`);
    covered = span.end;
    last = span;
  }
  if (covered !== size) throw evidenceError('CORRUPT', `bytes ${covered}-${size} of the archive belong to no entry`);
}
