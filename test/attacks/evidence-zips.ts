/**
 * Hostile evidence bundles, written byte by byte. The writer follows the ZIP
 * layout only as far as it is told to: every header field, both copies of
 * every field (local header and central record), descriptors, extra fields,
 * stray bytes and the end record can be set to anything. Based on the shape of
 * test/proof/zip-forge.ts, with the extra knobs the attacks need (disk fields,
 * bytes before the first entry, raw deflate blocks, a streaming reader).
 */
import { createHash } from 'node:crypto';
import { crc32, deflateRawSync } from 'node:zlib';

export const FLAG_ENCRYPTED = 0x0001;
export const FLAG_DESCRIPTOR = 0x0008;
export const FLAG_STRONG = 0x0040;
export const FLAG_UTF8 = 0x0800;
export const MADE_BY_UNIX = (3 << 8) | 20;
export const MADE_BY_DOS = 20;

export const HEAD = 'c0ffee'.padEnd(40, '0');
export const PLAN = `sha256:${'cd'.repeat(32)}`;
export const SCENARIO = 'hostile-producer';

export function unixMode(mode: number): number {
  return (mode << 16) >>> 0;
}

export function sha256(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export interface LocalFields {
  name?: string | Buffer;
  flags?: number;
  method?: number;
  crc32?: number;
  compressedSize?: number;
  uncompressedSize?: number;
  extra?: Buffer;
}

export interface Entry {
  name: string | Buffer;
  data?: Buffer | string;
  /** 0 stored, 8 deflated (default); others write `data` as it is. */
  method?: number;
  /** The bytes written as file data, instead of `data` encoded. */
  fileData?: Buffer;
  crc32?: number;
  compressedSize?: number;
  uncompressedSize?: number;
  flags?: number;
  versionMadeBy?: number;
  externalAttributes?: number;
  /** Central extra field (and the local one, unless `local.extra`). */
  extra?: Buffer;
  comment?: Buffer;
  diskStart?: number;
  local?: LocalFields;
  /** Bytes right after the file data. */
  descriptor?: Buffer;
  /** Write nothing for this entry; its record points at entry `sameLocalAs`'s local header. */
  sameLocalAs?: number;
  /** The local header offset in the central record, whatever was written. */
  localOffset?: number;
  /** Write no local header or data (with `localOffset`). */
  omitLocal?: boolean;
  /** Bytes before this entry's local header. */
  before?: Buffer;
}

export interface Layout {
  /** Bytes before the first entry. */
  prefix?: Buffer;
  beforeCentral?: Buffer;
  centralTail?: Buffer;
  trailing?: Buffer;
  comment?: Buffer;
  /** The comment length field, whatever comment is written. */
  commentLength?: number;
  entryCount?: number;
  entriesOnDisk?: number;
  disk?: number;
  centralDisk?: number;
  centralOffset?: number;
  centralSize?: number;
  /** Bytes between the central directory and the end record, outside the central size (a ZIP64 locator). */
  beforeEnd?: Buffer;
}

const bytesOf = (value: string | Buffer): Buffer => (typeof value === 'string' ? Buffer.from(value, 'utf8') : value);

interface Encoded {
  fileData: Buffer;
  crc32: number;
  compressedSize: number;
  uncompressedSize: number;
}

function encode(entry: Entry): Encoded {
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
export function localHeader(entry: Entry, encoded: Encoded = encode(entry)): Buffer {
  const local = entry.local ?? {};
  const name = bytesOf(local.name ?? entry.name);
  const extra = local.extra ?? entry.extra ?? Buffer.alloc(0);
  const header = Buffer.alloc(30);
  header.writeUInt32LE(0x04034b50, 0);
  header.writeUInt16LE(20, 4);
  header.writeUInt16LE(local.flags ?? entry.flags ?? FLAG_UTF8, 6);
  header.writeUInt16LE(local.method ?? entry.method ?? 8, 8);
  header.writeUInt16LE(0x21, 12);
  header.writeUInt32LE((local.crc32 ?? encoded.crc32) >>> 0, 14);
  header.writeUInt32LE(local.compressedSize ?? encoded.compressedSize, 18);
  header.writeUInt32LE(local.uncompressedSize ?? encoded.uncompressedSize, 22);
  header.writeUInt16LE(name.length, 26);
  header.writeUInt16LE(extra.length, 28);
  return Buffer.concat([header, name, extra]);
}

function centralRecord(entry: Entry, encoded: Encoded, offset: number): Buffer {
  const name = bytesOf(entry.name);
  const extra = entry.extra ?? Buffer.alloc(0);
  const comment = entry.comment ?? Buffer.alloc(0);
  const record = Buffer.alloc(46);
  record.writeUInt32LE(0x02014b50, 0);
  record.writeUInt16LE(entry.versionMadeBy ?? MADE_BY_UNIX, 4);
  record.writeUInt16LE(20, 6);
  record.writeUInt16LE(entry.flags ?? FLAG_UTF8, 8);
  record.writeUInt16LE(entry.method ?? 8, 10);
  record.writeUInt16LE(0x21, 14);
  record.writeUInt32LE(encoded.crc32 >>> 0, 16);
  record.writeUInt32LE(encoded.compressedSize, 20);
  record.writeUInt32LE(encoded.uncompressedSize, 24);
  record.writeUInt16LE(name.length, 28);
  record.writeUInt16LE(extra.length, 30);
  record.writeUInt16LE(comment.length, 32);
  record.writeUInt16LE(entry.diskStart ?? 0, 34);
  record.writeUInt32LE(entry.externalAttributes ?? unixMode(0o100644), 38);
  record.writeUInt32LE(offset, 42);
  return Buffer.concat([record, name, extra, comment]);
}

/** The archive `entries` and `layout` describe, exactly. */
export function writeZip(entries: readonly Entry[], layout: Layout = {}): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  const push = (bytes: Buffer) => {
    parts.push(bytes);
    at += bytes.length;
  };
  if (layout.prefix) push(layout.prefix);
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
  if (layout.beforeCentral) push(layout.beforeCentral);
  const centralOffset = at;
  entries.forEach((entry, index) => push(centralRecord(entry, encoded[index] as Encoded, entry.localOffset ?? (offsets[index] as number))));
  if (layout.centralTail) push(layout.centralTail);
  const centralSize = at - centralOffset;
  if (layout.beforeEnd) push(layout.beforeEnd);
  const comment = layout.comment ?? Buffer.alloc(0);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(layout.disk ?? 0, 4);
  end.writeUInt16LE(layout.centralDisk ?? 0, 6);
  end.writeUInt16LE(layout.entriesOnDisk ?? layout.entryCount ?? entries.length, 8);
  end.writeUInt16LE(layout.entryCount ?? entries.length, 10);
  end.writeUInt32LE(layout.centralSize ?? centralSize, 12);
  end.writeUInt32LE(layout.centralOffset ?? centralOffset, 16);
  end.writeUInt16LE(layout.commentLength ?? comment.length, 20);
  push(end);
  push(comment);
  if (layout.trailing) push(layout.trailing);
  return Buffer.concat(parts);
}

/** An end of central directory record for an empty archive, or with the given fields. */
export function endRecord(fields: { entries?: number; centralSize?: number; centralOffset?: number; commentLength?: number } = {}): Buffer {
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(fields.entries ?? 0, 8);
  end.writeUInt16LE(fields.entries ?? 0, 10);
  end.writeUInt32LE(fields.centralSize ?? 0, 12);
  end.writeUInt32LE(fields.centralOffset ?? 0, 16);
  end.writeUInt16LE(fields.commentLength ?? 0, 20);
  return end;
}

export function extraField(id: number, data: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt16LE(id, 0);
  head.writeUInt16LE(data.length, 2);
  return Buffer.concat([head, data]);
}

/** Info-ZIP Unicode path field (0x7075) for `rawName`, naming `unicodeName`. */
export function unicodePath(rawName: string | Buffer, unicodeName: string): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(1, 0);
  head.writeUInt32LE(crc32(bytesOf(rawName)), 1);
  return extraField(0x7075, Buffer.concat([head, Buffer.from(unicodeName, 'utf8')]));
}

/** ZIP64 extended information field with the given 8-byte values. */
export function zip64Field(...values: number[]): Buffer {
  const data = Buffer.alloc(values.length * 8);
  values.forEach((value, index) => data.writeBigUInt64LE(BigInt(value), index * 8));
  return extraField(0x0001, data);
}

export function descriptor(crc: number, compressedSize: number, uncompressedSize: number, signed = true): Buffer {
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

export interface File {
  readonly path: string;
  readonly data: Buffer | string;
}

export function manifestFor(files: readonly File[], overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schema: 'evidence-manifest.v1',
    scenario: SCENARIO,
    planDigest: PLAN,
    headSha: HEAD,
    observations: files.map((file) => ({ path: file.path, sha256: sha256(file.data), bytes: Buffer.byteLength(file.data) })),
    ...overrides,
  };
}

/** manifest.json (deflated, from `manifest` or the text given) and one entry per file. */
export function entriesFor(files: readonly File[], manifest: unknown = manifestFor(files)): Entry[] {
  const text = typeof manifest === 'string' ? manifest : JSON.stringify(manifest);
  return [{ name: 'manifest.json', data: text }, ...files.map((file) => ({ name: file.path, data: file.data }))];
}

export const FILES: readonly File[] = [
  { path: 'chat.json', data: '{"reply":"hello","rendered":true}' },
  { path: 'gateway/requests.json', data: '[{"path":"/v1/chat","status":200}]' },
  { path: 'log.txt', data: 'request served in 12 ms\n'.repeat(40) },
];

/** A valid bundle of `files`, edited by `edit` before it is written. */
export function bundle(edit: (entries: Entry[]) => void = () => {}, files: readonly File[] = FILES, manifest?: unknown, layout?: Layout): Buffer {
  const entries = entriesFor(files, manifest ?? manifestFor(files));
  edit(entries);
  return writeZip(entries, layout);
}

/**
 * The file names a streaming reader sees: it walks local headers from the
 * first byte and never looks at the central directory. A stored entry with a
 * data descriptor ends at the first descriptor signature whose sizes match
 * the bytes read so far (the only way such a reader can find its end); any
 * other entry ends after the compressed size its local header gives.
 */
export function streamingNames(archive: Buffer): string[] {
  const names: string[] = [];
  let at = 0;
  while (at + 30 <= archive.length && archive.readUInt32LE(at) === 0x04034b50) {
    const flags = archive.readUInt16LE(at + 6);
    const method = archive.readUInt16LE(at + 8);
    const nameLength = archive.readUInt16LE(at + 26);
    const extraLength = archive.readUInt16LE(at + 28);
    names.push(archive.subarray(at + 30, at + 30 + nameLength).toString('utf8'));
    const dataStart = at + 30 + nameLength + extraLength;
    if ((flags & FLAG_DESCRIPTOR) !== 0 && method === 0) {
      let scan = dataStart;
      for (;;) {
        scan = archive.indexOf(Buffer.from([0x50, 0x4b, 0x07, 0x08]), scan);
        if (scan < 0) return names;
        if (archive.readUInt32LE(scan + 8) === scan - dataStart) break;
        scan += 1;
      }
      at = scan + 16;
    } else {
      at = dataStart + archive.readUInt32LE(at + 18) + ((flags & FLAG_DESCRIPTOR) !== 0 ? 16 : 0);
    }
  }
  return names;
}
