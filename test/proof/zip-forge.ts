/**
 * A ZIP writer for tests that writes whatever it is told: any name bytes,
 * method, flags, CRC-32, sizes, attributes and extra fields, local headers
 * that disagree with the central directory, entries that share bytes, stray
 * bytes anywhere. Writers made for real archives (yazl) cannot make hostile
 * ones; this one makes nothing else unless told.
 */
import { createHash } from 'node:crypto';
import { crc32, deflateRawSync } from 'node:zlib';

export const FLAG_ENCRYPTED = 0x0001;
export const FLAG_DESCRIPTOR = 0x0008;
export const FLAG_STRONG = 0x0040;
export const FLAG_UTF8 = 0x0800;
/** Made by Unix, spec version 2.0. */
export const MADE_BY_UNIX = (3 << 8) | 20;
/** Made by MS-DOS (FAT), spec version 2.0. */
export const MADE_BY_DOS = 20;

/** External attributes of a Unix file of `mode` (type and permission bits). */
export function unixAttributes(mode: number): number {
  return (mode << 16) >>> 0;
}

export interface LocalOverrides {
  name?: string | Buffer;
  flags?: number;
  method?: number;
  crc32?: number;
  compressedSize?: number;
  uncompressedSize?: number;
  extra?: Buffer;
}

export interface ForgeEntry {
  /** The name in the central directory (and the local header, unless `local.name`). */
  name: string | Buffer;
  /** The entry's content before compression. */
  data?: Buffer | string;
  /** 0 stores `data`, 8 deflates it; another method writes `data` as it is. Default 8. */
  method?: number;
  /** Bytes written as the entry's file data instead of the encoded `data`. */
  fileData?: Buffer;
  crc32?: number;
  compressedSize?: number;
  uncompressedSize?: number;
  /** General purpose flags in both headers; default UTF-8 (bit 11). */
  flags?: number;
  versionMadeBy?: number;
  /** Default: a Unix regular file, mode 0644. */
  externalAttributes?: number;
  /** Central extra field (and the local one, unless `local.extra`). */
  extra?: Buffer;
  comment?: Buffer;
  /** The disk number the entry starts on. Default 0. */
  diskStart?: number;
  /** Local header fields that differ from the central record's. */
  local?: LocalOverrides;
  /** Bytes written right after the file data (a data descriptor). */
  descriptor?: Buffer;
  /** Write no local header or data; the central record points at entry `sameLocalAs`'s local header. */
  sameLocalAs?: number;
  /** The central record's local header offset, whatever was written. */
  localOffset?: number;
  /** Write no local header or data for this entry (its record points elsewhere, with `localOffset`). */
  omitLocal?: boolean;
  /** Bytes written before this entry's local header. */
  before?: Buffer;
}

export interface ForgeOptions {
  /** Bytes before the first entry. */
  prefix?: Buffer;
  /** Bytes after the last entry's data, before the central directory. */
  beforeCentral?: Buffer;
  /** Bytes after the central records, counted in the central directory's size. */
  centralTail?: Buffer;
  /** Bytes after the end record (outside any structure). */
  trailing?: Buffer;
  comment?: Buffer;
  /** The comment length field, whatever comment is written. */
  commentLength?: number;
  /** Entry count written in the end record (both fields, unless `entriesOnDisk`). */
  entryCount?: number;
  /** The end record's count of entries on this disk. */
  entriesOnDisk?: number;
  /** The end record's disk number. */
  disk?: number;
  /** The end record's disk where the central directory starts. */
  centralDisk?: number;
  centralOffset?: number;
  centralSize?: number;
  /** Bytes between the central directory and the end record, outside the central size (a ZIP64 locator). */
  beforeEnd?: Buffer;
}

function bytesOf(value: string | Buffer): Buffer {
  return typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
}

interface Encoded {
  readonly fileData: Buffer;
  readonly crc32: number;
  readonly compressedSize: number;
  readonly uncompressedSize: number;
}

function encode(entry: ForgeEntry): Encoded {
  const data = bytesOf(entry.data ?? '');
  const method = entry.method ?? 8;
  const fileData = entry.fileData ?? (method === 8 ? deflateRawSync(data) : data);
  return {
    fileData,
    crc32: entry.crc32 ?? crc32(data),
    compressedSize: entry.compressedSize ?? fileData.length,
    uncompressedSize: entry.uncompressedSize ?? data.length,
  };
}

/** A local file header (signature to extra field) as `entry` describes it. */
export function localHeader(entry: ForgeEntry, encoded: Encoded = encode(entry)): Buffer {
  const local = entry.local ?? {};
  const name = bytesOf(local.name ?? entry.name);
  const extra = local.extra ?? entry.extra ?? Buffer.alloc(0);
  const header = Buffer.alloc(30);
  header.writeUInt32LE(0x04034b50, 0);
  header.writeUInt16LE(20, 4);
  header.writeUInt16LE(local.flags ?? entry.flags ?? FLAG_UTF8, 6);
  header.writeUInt16LE(local.method ?? entry.method ?? 8, 8);
  header.writeUInt16LE(0, 10);
  header.writeUInt16LE(0x21, 12); // 1980-01-01
  header.writeUInt32LE((local.crc32 ?? encoded.crc32) >>> 0, 14);
  header.writeUInt32LE(local.compressedSize ?? encoded.compressedSize, 18);
  header.writeUInt32LE(local.uncompressedSize ?? encoded.uncompressedSize, 22);
  header.writeUInt16LE(name.length, 26);
  header.writeUInt16LE(extra.length, 28);
  return Buffer.concat([header, name, extra]);
}

function centralRecord(entry: ForgeEntry, encoded: Encoded, offset: number): Buffer {
  const name = bytesOf(entry.name);
  const extra = entry.extra ?? Buffer.alloc(0);
  const comment = entry.comment ?? Buffer.alloc(0);
  const record = Buffer.alloc(46);
  record.writeUInt32LE(0x02014b50, 0);
  record.writeUInt16LE(entry.versionMadeBy ?? MADE_BY_UNIX, 4);
  record.writeUInt16LE(20, 6);
  record.writeUInt16LE(entry.flags ?? FLAG_UTF8, 8);
  record.writeUInt16LE(entry.method ?? 8, 10);
  record.writeUInt16LE(0, 12);
  record.writeUInt16LE(0x21, 14);
  record.writeUInt32LE(encoded.crc32 >>> 0, 16);
  record.writeUInt32LE(encoded.compressedSize, 20);
  record.writeUInt32LE(encoded.uncompressedSize, 24);
  record.writeUInt16LE(name.length, 28);
  record.writeUInt16LE(extra.length, 30);
  record.writeUInt16LE(comment.length, 32);
  record.writeUInt16LE(entry.diskStart ?? 0, 34);
  record.writeUInt16LE(0, 36);
  record.writeUInt32LE(entry.externalAttributes ?? unixAttributes(0o100644), 38);
  record.writeUInt32LE(offset, 42);
  return Buffer.concat([record, name, extra, comment]);
}

/** Write an archive of `entries` exactly as described. */
export function forgeZip(entries: readonly ForgeEntry[], options: ForgeOptions = {}): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  const push = (bytes: Buffer) => {
    parts.push(bytes);
    at += bytes.length;
  };
  if (options.prefix) push(options.prefix);
  const encoded = entries.map(encode);
  const offsets: number[] = [];
  entries.forEach((entry, index) => {
    const mine = encoded[index] as Encoded;
    if (entry.sameLocalAs !== undefined || entry.omitLocal === true) {
      offsets.push(entry.sameLocalAs === undefined ? 0 : (offsets[entry.sameLocalAs] as number));
      return;
    }
    if (entry.before) push(entry.before);
    offsets.push(at);
    push(localHeader(entry, mine));
    push(mine.fileData);
    if (entry.descriptor) push(entry.descriptor);
  });
  if (options.beforeCentral) push(options.beforeCentral);
  const centralOffset = at;
  entries.forEach((entry, index) => push(centralRecord(entry, encoded[index] as Encoded, entry.localOffset ?? (offsets[index] as number))));
  if (options.centralTail) push(options.centralTail);
  const centralSize = at - centralOffset;
  if (options.beforeEnd) push(options.beforeEnd);
  const comment = options.comment ?? Buffer.alloc(0);
  const entryCount = options.entryCount ?? entries.length;
  push(
    endRecord({
      disk: options.disk,
      centralDisk: options.centralDisk,
      entriesOnDisk: options.entriesOnDisk ?? entryCount,
      entries: entryCount,
      centralSize: options.centralSize ?? centralSize,
      centralOffset: options.centralOffset ?? centralOffset,
      commentLength: options.commentLength ?? comment.length,
    }),
  );
  push(comment);
  if (options.trailing) push(options.trailing);
  return Buffer.concat(parts);
}

export interface EndRecordFields {
  disk?: number;
  centralDisk?: number;
  /** Entries on this disk; default `entries`. */
  entriesOnDisk?: number;
  entries?: number;
  centralSize?: number;
  centralOffset?: number;
  commentLength?: number;
}

/** An end of central directory record (no comment) with the given fields; every field defaults to 0, as for an empty archive. */
export function endRecord(fields: EndRecordFields = {}): Buffer {
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(fields.disk ?? 0, 4);
  end.writeUInt16LE(fields.centralDisk ?? 0, 6);
  end.writeUInt16LE(fields.entriesOnDisk ?? fields.entries ?? 0, 8);
  end.writeUInt16LE(fields.entries ?? 0, 10);
  end.writeUInt32LE(fields.centralSize ?? 0, 12);
  end.writeUInt32LE(fields.centralOffset ?? 0, 16);
  end.writeUInt16LE(fields.commentLength ?? 0, 20);
  return end;
}

/** One extra field: id, length, data. */
export function extraField(id: number, data: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt16LE(id, 0);
  head.writeUInt16LE(data.length, 2);
  return Buffer.concat([head, data]);
}

/** An Info-ZIP Unicode path field (0x7075) naming `unicodeName`, bound to the raw name `rawName` by its CRC-32. */
export function unicodePathField(rawName: string | Buffer, unicodeName: string): Buffer {
  const data = Buffer.alloc(5);
  data.writeUInt8(1, 0);
  data.writeUInt32LE(crc32(bytesOf(rawName)), 1);
  return extraField(0x7075, Buffer.concat([data, Buffer.from(unicodeName, 'utf8')]));
}

/** A ZIP64 extended information field (0x0001) holding the given 8-byte values. */
export function zip64Field(...values: number[]): Buffer {
  const data = Buffer.alloc(values.length * 8);
  values.forEach((value, index) => data.writeBigUInt64LE(BigInt(value), index * 8));
  return extraField(0x0001, data);
}

/** A data descriptor (with its signature unless `signed` is false). */
export function dataDescriptor(crc: number, compressedSize: number, uncompressedSize: number, signed = true): Buffer {
  const body = Buffer.alloc(12);
  body.writeUInt32LE(crc >>> 0, 0);
  body.writeUInt32LE(compressedSize, 4);
  body.writeUInt32LE(uncompressedSize, 8);
  if (!signed) return body;
  const signature = Buffer.alloc(4);
  signature.writeUInt32LE(0x08074b50, 0);
  return Buffer.concat([signature, body]);
}

/** One raw deflate stored block: BFINAL, LEN and NLEN as given (NLEN defaults to ~LEN). */
export function storedBlock(data: Buffer, final: boolean, len = data.length, nlen = ~len & 0xffff): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(final ? 1 : 0, 0);
  head.writeUInt16LE(len, 1);
  head.writeUInt16LE(nlen, 3);
  return Buffer.concat([head, data]);
}

export const HEAD = 'c0ffee'.padEnd(40, '0');
export const PLAN = `sha256:${'ab'.repeat(32)}`;
export const SCENARIO = 'web-ui-chat-proof';

export function sha256(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export interface BundleFile {
  readonly path: string;
  readonly data: Buffer | string;
}

/** The manifest value a bundle of `files` has, with `overrides` applied on top. */
export function manifestOf(files: readonly BundleFile[], overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schema: 'evidence-manifest.v1',
    scenario: SCENARIO,
    planDigest: PLAN,
    headSha: HEAD,
    observations: files.map((file) => ({ path: file.path, sha256: sha256(file.data), bytes: Buffer.byteLength(file.data) })),
    ...overrides,
  };
}

/**
 * The entries of a valid bundle: manifest.json (`manifest` as JSON, or the
 * text given), then each file; edit them to make an attack.
 */
export function bundleEntries(files: readonly BundleFile[], manifest: unknown = manifestOf(files)): ForgeEntry[] {
  const text = typeof manifest === 'string' ? manifest : JSON.stringify(manifest);
  return [{ name: 'manifest.json', data: text }, ...files.map((file) => ({ name: file.path, data: file.data }))];
}

export const FILES: readonly BundleFile[] = [
  { path: 'observations/chat.json', data: JSON.stringify({ reply: 'hello', rendered: true }) },
  { path: 'observations/gateway.json', data: JSON.stringify({ requests: 3 }) },
  { path: 'screenshot.txt', data: 'a 1280x720 screenshot, 48213 bytes\n'.repeat(20) },
];
