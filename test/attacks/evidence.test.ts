/**
 * A hostile producer writes the evidence bundle. Each test hands
 * `verifyEvidenceBundle`, `packEvidenceBundle` or the `proofgate evidence`
 * command something crafted and asserts the safe outcome. A test whose comment
 * says "Was a defect" covers a hole found this way and since closed.
 *
 * CLI tests run the built binary (dist/cli/main.cjs).
 */
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32, deflateRawSync, constants as zlibConstants } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { verifyOutcome, type Outcome } from '../proof/evidence-outcome.js';
import { evidenceReason, packEvidenceBundle, verifyEvidenceBundle, type EvidenceExpectation, type EvidenceReason } from '../../src/proof/index.js';
import { runCliAsync } from '../cli/helpers.js';
import { FILES, PLAN, SCENARIO, bundle, entriesFor, manifestFor, streamingNames } from './evidence-zips.js';
import {
  FLAG_DESCRIPTOR,
  FLAG_ENCRYPTED,
  FLAG_STRONG,
  FLAG_UTF8,
  HEAD,
  MADE_BY_DOS,
  dataDescriptor,
  endRecord,
  extraField,
  forgeZip,
  localHeader,
  sha256,
  storedBlock,
  unicodePathField,
  unixAttributes,
  zip64Field,
  type BundleFile,
  type ForgeEntry,
} from '../proof/zip-forge.js';

const MiB = 1024 * 1024;
const scratch = mkdtempSync(join(tmpdir(), 'pg-evidence-attacks-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let scratchCount = 0;
function scratchPath(name: string): string {
  scratchCount += 1;
  return join(scratch, `${scratchCount}-${name}`);
}

/** Invisible or line-breaking characters that must never reach a terminal raw. */
const RAW_CONTROL = /[\p{Cc}\p{Zl}\p{Zp}]/u;
const RAW_FORMAT = /(?![\u200c\u200d])\p{Cf}/u;

/** How verification ended: the refusal's reason (its message checked to be one well-formed line) or ACCEPTED. */
function outcome(source: Buffer | string, expectation?: EvidenceExpectation): Promise<Outcome> {
  return verifyOutcome(source, expectation, RAW_CONTROL);
}

/** The error verification throws (it must throw). */
async function refusal(source: Buffer | string, expectation?: EvidenceExpectation): Promise<Error> {
  try {
    await verifyEvidenceBundle(source, expectation);
  } catch (error) {
    return error as Error;
  }
  throw new Error('the bundle was accepted');
}

/** A bundle whose only observation has the raw name `name` (listed in the manifest by its UTF-8 reading). */
function bundleNamed(name: string | Buffer, flags = FLAG_UTF8): Buffer {
  const listed = typeof name === 'string' ? name : name.toString('utf8');
  return bundle(
    (entries) => {
      const entry = entries[1] as ForgeEntry;
      entry.name = name;
      entry.flags = flags;
    },
    [{ path: listed, data: 'observed' }],
  );
}

/** A bundle of the files named, each holding its own name as data. */
function bundleOf(...names: string[]): Buffer {
  return bundle(
    undefined,
    names.map((path) => ({ path, data: `data of ${path}` })),
  );
}

/** The second entry of the default bundle, edited. */
function editSecond(edit: (entry: ForgeEntry) => void): Buffer {
  return bundle((entries) => edit(entries[1] as ForgeEntry));
}

describe('local header against central directory', () => {
  it('a well-formed forged bundle verifies (the baseline every attack edits)', async () => {
    const bytes = bundle();
    const verified = await verifyEvidenceBundle(bytes, { scenario: SCENARIO, planDigest: PLAN, headSha: HEAD });
    expect(verified.digest).toBe(sha256(bytes));
    expect(verified.observations.map((o) => o.path)).toEqual(FILES.map((f) => f.path));
  });

  const data = Buffer.from(FILES[0]?.data as string);
  const cases: Array<[string, (entry: ForgeEntry) => void]> = [
    ['name (other file)', (e) => (e.local = { name: 'evil.json' })],
    ['name (same bytes, other case)', (e) => (e.local = { name: 'CHAT.json' })],
    ['name (traversal only locally)', (e) => (e.local = { name: '../chat.json' })],
    ['flags: UTF-8 bit only in central', (e) => (e.local = { flags: 0 })],
    ['flags: data descriptor bit only locally', (e) => (e.local = { flags: FLAG_UTF8 | FLAG_DESCRIPTOR })],
    ['flags: encryption bit only locally', (e) => (e.local = { flags: FLAG_UTF8 | FLAG_ENCRYPTED })],
    ['method: stored locally, deflate centrally', (e) => (e.local = { method: 0 })],
    ['CRC-32', (e) => (e.local = { crc32: crc32(data) ^ 1 })],
    ['CRC-32 zero without a descriptor', (e) => (e.local = { crc32: 0 })],
    ['compressed size larger', (e) => (e.local = { compressedSize: deflateRawSync(data).length + 8 })],
    ['compressed size zero without a descriptor', (e) => (e.local = { compressedSize: 0 })],
    ['uncompressed size', (e) => (e.local = { uncompressedSize: data.length * 2 })],
  ];
  for (const [what, edit] of cases) {
    it(`refuses a local header that disagrees in ${what}`, async () => {
      const result = await outcome(editSecond(edit));
      expect(result).not.toBe('ACCEPTED');
      expect(['HEADER_MISMATCH', 'OVERLAPPING_ENTRIES', 'CORRUPT', 'UNSUPPORTED_METHOD']).toContain(result);
    });
  }

  it("a central record that points at no local header, or at another entry's local header, is refused", async () => {
    expect(await outcome(editSecond((e) => (e.localOffset = 7)))).not.toBe('ACCEPTED');
    const pointingIntoCentral = bundle((entries) => {
      const last = entries[3] as ForgeEntry;
      last.omitLocal = true;
    });
    // Record 3 points at offset 0 (the manifest's local header): the manifest's bytes are claimed twice.
    expect(await outcome(pointingIntoCentral)).not.toBe('ACCEPTED');
    const plain = bundle();
    const centralOffset = plain.readUInt32LE(plain.length - 6);
    expect(await outcome(editSecond((e) => (e.localOffset = centralOffset)))).not.toBe('ACCEPTED');
  });
});

describe('flags, methods, encryption', () => {
  const cases: Array<[string, (entry: ForgeEntry) => void, EvidenceReason]> = [
    ['encryption bit 0 in both headers', (e) => (e.flags = FLAG_UTF8 | FLAG_ENCRYPTED), 'UNSUPPORTED_METHOD'],
    ['strong encryption bit 6', (e) => (e.flags = FLAG_UTF8 | FLAG_STRONG | FLAG_ENCRYPTED), 'UNSUPPORTED_METHOD'],
    ['masked local header bit 13', (e) => (e.flags = FLAG_UTF8 | 0x2000), 'UNSUPPORTED_METHOD'],
    ['patched data bit 5', (e) => (e.flags = FLAG_UTF8 | 0x0020), 'UNSUPPORTED_METHOD'],
    ['method 12 (bzip2)', (e) => (e.method = 12), 'UNSUPPORTED_METHOD'],
    ['method 14 (LZMA)', (e) => (e.method = 14), 'UNSUPPORTED_METHOD'],
    ['method 99 (AES)', (e) => (e.method = 99), 'UNSUPPORTED_METHOD'],
    ['method 9 (deflate64)', (e) => (e.method = 9), 'UNSUPPORTED_METHOD'],
  ];
  for (const [what, edit, reason] of cases) {
    it(`refuses ${what}`, async () => {
      expect(await outcome(editSecond(edit))).toBe(reason);
    });
  }

  it('a stored entry whose two sizes differ is refused (a reader may copy either count of bytes)', async () => {
    const data = Buffer.from('stored data');
    const bytes = editSecond((e) => {
      e.method = 0;
      e.data = data;
      e.fileData = Buffer.concat([data, Buffer.from('hidden tail')]);
      e.uncompressedSize = data.length;
    });
    expect(['SIZE_MISMATCH', 'CORRUPT']).toContain(await outcome(bytes));
  });
});

describe('data descriptors', () => {
  const data = Buffer.from(FILES[0]?.data as string);
  const compressed = deflateRawSync(data);
  const zeroLocal = { crc32: 0, compressedSize: 0, uncompressedSize: 0 };

  it('signed and unsigned descriptors that repeat the central record verify', async () => {
    for (const signed of [true, false]) {
      const bytes = editSecond((e) => {
        e.flags = FLAG_UTF8 | FLAG_DESCRIPTOR;
        e.local = zeroLocal;
        e.descriptor = dataDescriptor(crc32(data), compressed.length, data.length, signed);
      });
      expect(await outcome(bytes)).toBe('ACCEPTED');
    }
  });

  it('a descriptor that disagrees, is missing, is ZIP64-sized or comes without flag bit 3 is refused', async () => {
    const withDescriptor = (bytes: Buffer | undefined, flags = FLAG_UTF8 | FLAG_DESCRIPTOR) =>
      editSecond((e) => {
        e.flags = flags;
        e.local = flags & FLAG_DESCRIPTOR ? zeroLocal : {};
        if (bytes) e.descriptor = bytes;
      });
    expect(await outcome(withDescriptor(dataDescriptor(crc32(data), compressed.length, data.length + 1)))).toBe('HEADER_MISMATCH');
    expect(await outcome(withDescriptor(dataDescriptor(crc32(data) ^ 1, compressed.length, data.length, false)))).toBe('HEADER_MISMATCH');
    expect(await outcome(withDescriptor(undefined))).not.toBe('ACCEPTED');
    const zip64Descriptor = Buffer.alloc(24);
    zip64Descriptor.writeUInt32LE(0x08074b50, 0);
    zip64Descriptor.writeUInt32LE(crc32(data), 4);
    zip64Descriptor.writeBigUInt64LE(BigInt(compressed.length), 8);
    zip64Descriptor.writeBigUInt64LE(BigInt(data.length), 16);
    expect(await outcome(withDescriptor(zip64Descriptor))).not.toBe('ACCEPTED');
    expect(await outcome(withDescriptor(dataDescriptor(crc32(data), compressed.length, data.length), FLAG_UTF8))).toBe('CORRUPT');
  });

  /**
   * A stored entry with flag bit 3 and zero sizes in its local header: a
   * streaming reader can only find its end by looking for a descriptor
   * signature. The data carries a fake descriptor and then a whole local
   * header of another file, `evil.json`.
   */
  function smuggled(): { archive: Buffer; real: Buffer } {
    const part = Buffer.from('{"reply":"hello"}');
    const evil = Buffer.from('{"reply":"a different answer"}');
    const evilEntry: ForgeEntry = { name: 'evil.json', data: evil, method: 0 };
    const real = Buffer.concat([part, dataDescriptor(crc32(part), part.length, part.length), localHeader(evilEntry), evil]);
    const files: BundleFile[] = [{ path: 'chat.json', data: real }];
    const archive = bundle((entries) => {
      const entry = entries[1] as ForgeEntry;
      entry.method = 0;
      entry.flags = FLAG_UTF8 | FLAG_DESCRIPTOR;
      entry.local = zeroLocal;
      entry.descriptor = dataDescriptor(crc32(real), real.length, real.length);
    }, files);
    return { archive, real };
  }

  it('premise: a streaming reader of the smuggling archive sees evil.json, which the central directory does not hold', () => {
    const { archive } = smuggled();
    expect(streamingNames(archive)).toEqual(['manifest.json', 'chat.json', 'evil.json']);
  });

  // Was a defect: a stored entry with a data descriptor could hide a local header a streaming reader sees; stored + flag bit 3 is now UNSUPPORTED_METHOD.
  it('refuses a stored entry with a data descriptor that hides a second local header', async () => {
    expect(await outcome(smuggled().archive)).toBe('UNSUPPORTED_METHOD');
  });
});

describe('ZIP64, end record, central directory placement', () => {
  it('ZIP64 fields anywhere are refused', async () => {
    expect(await outcome(editSecond((e) => (e.extra = zip64Field(33, 33))))).toBe('CORRUPT');
    expect(await outcome(editSecond((e) => (e.local = { extra: zip64Field(33, 33) })))).toBe('CORRUPT');
    // Sizes 0xffffffff that only a ZIP64 field could explain.
    expect(
      await outcome(
        editSecond((e) => {
          e.compressedSize = 0xffffffff;
          e.extra = zip64Field(deflateRawSync(Buffer.from(FILES[0]?.data as string)).length);
        }),
      ),
    ).not.toBe('ACCEPTED');
    expect(await outcome(bundle(undefined, FILES, undefined, { entryCount: 0xffff }))).toBe('CORRUPT');
    expect(await outcome(bundle(undefined, FILES, undefined, { centralOffset: 0xffffffff }))).toBe('CORRUPT');
    const locator = Buffer.alloc(20);
    locator.writeUInt32LE(0x07064b50, 0);
    expect(await outcome(bundle(undefined, FILES, undefined, { beforeEnd: locator }))).toBe('CORRUPT');
  });

  it('an archive comment that holds another end record, two end records, and bytes after the end are refused', async () => {
    const inner = endRecord();
    expect(await outcome(bundle(undefined, FILES, undefined, { comment: inner }))).toBe('CORRUPT');
    // The comment length points past a second, complete end record at the very end.
    expect(await outcome(bundle(undefined, FILES, undefined, { comment: inner, commentLength: 0 }))).not.toBe('ACCEPTED');
    expect(await outcome(bundle(undefined, FILES, undefined, { trailing: Buffer.from('tail') }))).toBe('CORRUPT');
    // A complete bundle followed by the end record of an empty archive: the last 22 bytes say "no entries".
    const doubled = Buffer.concat([bundle(), endRecord()]);
    expect(await outcome(doubled)).not.toBe('ACCEPTED');
    // The end record's comment length announces a comment that is not there.
    expect(await outcome(bundle(undefined, FILES, undefined, { commentLength: 4 }))).toBe('CORRUPT');
  });

  it('bytes before the first entry, between entries or before the central directory are refused', async () => {
    const hiddenLocal = localHeader({ name: 'evil.json', data: 'x', method: 0 });
    expect(await outcome(bundle(undefined, FILES, undefined, { prefix: Buffer.from('#!/bin/sh\nexit 0\n') }))).toBe('CORRUPT');
    expect(await outcome(editSecond((e) => (e.before = Buffer.concat([hiddenLocal, Buffer.from('x')]))))).toBe('CORRUPT');
    expect(await outcome(bundle(undefined, FILES, undefined, { beforeCentral: Buffer.concat([hiddenLocal, Buffer.from('x')]) }))).toBe('CORRUPT');
  });

  it('a central directory offset or size that lies is refused', async () => {
    const base = bundle();
    const centralOffset = base.readUInt32LE(base.length - 6);
    const centralSize = base.readUInt32LE(base.length - 10);
    for (const layout of [
      { centralOffset: centralOffset - 1 },
      { centralOffset: centralOffset + 1 },
      { centralOffset: 10 },
      { centralSize: centralSize - 1 },
      { centralSize: centralSize + 1 },
      { centralOffset: 0, centralSize: centralOffset + centralSize },
    ]) {
      expect(await outcome(bundle(undefined, FILES, undefined, layout)), JSON.stringify(layout)).not.toBe('ACCEPTED');
    }
  });

  it('a central directory that starts inside file data (a second directory in a stored entry) is refused', async () => {
    // Build a bundle, then store a copy of its own central directory as the data of a last entry and point the end record at it.
    const plain = bundle();
    const centralOffset = plain.readUInt32LE(plain.length - 6);
    const centralSize = plain.readUInt32LE(plain.length - 10);
    const copy = plain.subarray(centralOffset, centralOffset + centralSize);
    const entries = entriesFor(FILES);
    entries.push({ name: 'padding.bin', data: copy, method: 0 });
    const archive = forgeZip(entries);
    const realCentral = archive.readUInt32LE(archive.length - 6);
    const copyAt = archive.indexOf(copy);
    expect(copyAt).toBeGreaterThan(0);
    const forged = Buffer.concat([
      archive.subarray(0, archive.length - 22),
      endRecord({ entries: 3, centralSize: realCentral - copyAt, centralOffset: copyAt }),
    ]);
    expect(await outcome(forged)).not.toBe('ACCEPTED');
  });

  it('an entry whose data runs into the central directory, and two records sharing a local header, are refused', async () => {
    const intoCentral = editSecond((e) => {
      e.compressedSize = 4000;
      e.local = { compressedSize: 4000 };
    });
    expect(await outcome(intoCentral)).not.toBe('ACCEPTED');
    const shared = bundle(
      (entries) => {
        (entries[2] as ForgeEntry).sameLocalAs = 1;
        (entries[2] as ForgeEntry).data = entries[1]?.data as string;
      },
      [
        { path: 'a.json', data: 'same' },
        { path: 'b.json', data: 'same' },
      ],
    );
    expect(await outcome(shared)).toBe('OVERLAPPING_ENTRIES');
  });

  it('records on another disk, a split archive, a record count that disagrees are refused', async () => {
    expect(await outcome(editSecond((e) => (e.diskStart = 1)))).toBe('CORRUPT');
    expect(await outcome(bundle(undefined, FILES, undefined, { disk: 1 }))).toBe('CORRUPT');
    expect(await outcome(bundle(undefined, FILES, undefined, { centralDisk: 1 }))).toBe('CORRUPT');
    expect(await outcome(bundle(undefined, FILES, undefined, { entriesOnDisk: 3, entryCount: 4 }))).toBe('CORRUPT');
    expect(await outcome(bundle(undefined, FILES, undefined, { entryCount: 3 }))).not.toBe('ACCEPTED');
    expect(await outcome(bundle(undefined, FILES, undefined, { entryCount: 5 }))).not.toBe('ACCEPTED');
  });

  it('an entry comment, an empty file, 21 bytes, and a lone end record are refused', async () => {
    expect(await outcome(editSecond((e) => (e.comment = Buffer.from('look here'))))).toBe('CORRUPT');
    expect(await outcome(Buffer.alloc(0))).toBe('CORRUPT');
    expect(await outcome(Buffer.alloc(21))).toBe('CORRUPT');
    expect(await outcome(endRecord())).toBe('MANIFEST_INVALID');
  });
});

describe('deflate streams', () => {
  const text = Buffer.from('a line of an observed log\n'.repeat(200));
  const big = Buffer.alloc(3 * MiB);
  for (let at = 0; at < big.length; at += 4) big.writeUInt32LE((at * 2654435761) >>> 0, at);

  function withData(data: Buffer, fileData: Buffer, declared = data.length): Buffer {
    return bundle(
      (entries) => {
        const entry = entries[1] as ForgeEntry;
        entry.fileData = fileData;
        entry.uncompressedSize = declared;
      },
      [{ path: 'obs.bin', data }],
    );
  }

  it('a stream followed by hidden bytes or a second stream is refused (small and streamed entries)', async () => {
    for (const data of [text, big]) {
      expect(await outcome(withData(data, Buffer.concat([deflateRawSync(data), Buffer.from('HIDDEN')])))).toBe('CORRUPT');
      expect(await outcome(withData(data, Buffer.concat([deflateRawSync(data), deflateRawSync(Buffer.from('second'))])))).toBe('CORRUPT');
    }
  });

  it('a stream cut short, or without a final block, is refused', async () => {
    for (const data of [text, big]) {
      expect(await outcome(withData(data, deflateRawSync(data).subarray(0, -4)))).toBe('CORRUPT');
      const flushed = deflateRawSync(data, { finishFlush: zlibConstants.Z_SYNC_FLUSH });
      expect(await outcome(withData(data, flushed))).toBe('CORRUPT');
    }
  });

  it('stored deflate blocks whose length lies are refused', async () => {
    const data = Buffer.from('abc');
    expect(await outcome(withData(data, storedBlock(data, true, 3, 0x1234)))).toBe('CORRUPT');
    expect(await outcome(withData(data, storedBlock(data, true, 10)))).toBe('CORRUPT');
    expect(await outcome(withData(data, storedBlock(data, false)))).toBe('CORRUPT');
    // Length 2 of 3 bytes: the third byte is read as the next block header.
    expect(await outcome(withData(data, storedBlock(data, true, 2)))).not.toBe('ACCEPTED');
  });

  it('a stream that expands past, or stops short of, its declared size is refused without expanding it all', async () => {
    const zeros = deflateRawSync(Buffer.alloc(64 * MiB), { level: 9 });
    // 64 MiB of zeros declaring 1 MiB (ratio-free) and 2 MiB (streamed: within the ratio, as 64 KiB compressed * 100 > 2 MiB).
    for (const declared of [1000, MiB, 2 * MiB]) {
      expect(await outcome(withData(Buffer.alloc(declared), zeros, declared))).toBe('SIZE_MISMATCH');
    }
    expect(await outcome(withData(text, deflateRawSync(text.subarray(0, 100)), text.length))).toBe('SIZE_MISMATCH');
  });

  it('a CRC-32 that does not match its data is refused even when the sha256 in the manifest does', async () => {
    const bytes = bundle((entries) => ((entries[1] as ForgeEntry).crc32 = crc32(FILES[0]?.data as string) ^ 0x80));
    expect(await outcome(bytes)).toBe('CRC_MISMATCH');
  });
});

describe('limits and resource use', () => {
  it('a sparse 8 GiB file is refused from its size, without being read', async () => {
    const path = scratchPath('sparse.zip');
    writeFileSync(path, '');
    truncateSync(path, 8 * 1024 * MiB);
    expect(await outcome(path)).toBe('ARCHIVE_TOO_LARGE');
  });

  it('an end record announcing 65534 entries is refused before any record is read', async () => {
    expect(await outcome(bundle(undefined, FILES, undefined, { entryCount: 65534 }))).toBe('ENTRY_LIMIT');
  });

  it('1000 tiny entries verify, 1001 are refused', async () => {
    const files = (count: number): BundleFile[] => Array.from({ length: count }, (_, index) => ({ path: `o/${index}`, data: String(index) }));
    expect(await outcome(bundle(undefined, files(999)))).toBe('ACCEPTED');
    expect(await outcome(bundle(undefined, files(1000)))).toBe('ENTRY_LIMIT');
  });

  it('entries declaring more than the total cap, or more than the ratio allows, are refused before inflating', async () => {
    const kernel = deflateRawSync(Buffer.alloc(MiB));
    const huge = (declared: number) =>
      bundle(
        (entries) => {
          const entry = entries[1] as ForgeEntry;
          entry.fileData = kernel;
          entry.uncompressedSize = declared;
        },
        [{ path: 'bomb.bin', data: Buffer.alloc(0) }],
        manifestFor([], { observations: [{ path: 'bomb.bin', sha256: sha256(''), bytes: declared }] }),
      );
    expect(await outcome(huge(300 * MiB))).toBe('EXPANSION_LIMIT');
    expect(await outcome(huge(0xfffffffe))).toBe('EXPANSION_LIMIT');
  });

  it('a manifest that declares more than the manifest cap is refused before it is inflated', async () => {
    const bytes = bundle((entries) => {
      const manifest = entries[0] as ForgeEntry;
      manifest.uncompressedSize = 2 * MiB;
      manifest.fileData = deflateRawSync(Buffer.alloc(2 * MiB, 0x20));
    });
    expect(await outcome(bytes)).toBe('MANIFEST_INVALID');
  });

  it('a manifest that declares a small size and inflates to a large one stops one byte past it', async () => {
    const bytes = bundle((entries) => {
      const manifest = entries[0] as ForgeEntry;
      manifest.uncompressedSize = 100;
      manifest.fileData = deflateRawSync(Buffer.alloc(64 * MiB, 0x20));
    });
    expect(await outcome(bytes)).toBe('SIZE_MISMATCH');
  });

  /** Extra fields made of one accepted kind (an empty timestamp field) repeated to fill `bytes`. */
  function repeatedTimestamps(bytes: number): Buffer {
    return Buffer.concat(Array.from({ length: Math.floor(bytes / 4) }, () => extraField(0x5455, Buffer.alloc(0))));
  }

  // Was a defect: extra fields could repeat thousands of times (20 s, 2.6 GB); now each id once per header, the area capped and read record by record, nothing of it kept.
  it('refuses headers whose extra fields repeat an accepted kind thousands of times', async () => {
    const bytes = bundle((entries) => {
      for (const entry of entries) entry.extra = repeatedTimestamps(65532);
    });
    expect(await outcome(bytes)).toBe('CORRUPT');
    // Each id once, however short the area: two empty timestamp fields are refused too, locally as centrally.
    expect(await outcome(editSecond((e) => (e.extra = repeatedTimestamps(8))))).toBe('CORRUPT');
    expect(await outcome(editSecond((e) => (e.local = { extra: repeatedTimestamps(8) })))).toBe('CORRUPT');
  });

  it('one extra field of an accepted kind repeated twice with different values is refused', async () => {
    // Two timestamp fields that disagree (two readers may restore different times).
    const one = extraField(0x5455, Buffer.from([1, 0, 0, 0, 0]));
    const two = extraField(0x5455, Buffer.from([1, 0xff, 0xff, 0xff, 0x7f]));
    expect(await outcome(editSecond((e) => (e.extra = Buffer.concat([one, two]))))).toBe('CORRUPT');
  });

  it('unknown, oversized or malformed extra fields are refused', async () => {
    expect(await outcome(editSecond((e) => (e.extra = extraField(0x9901, Buffer.alloc(7)))))).toBe('CORRUPT');
    expect(await outcome(editSecond((e) => (e.extra = extraField(0x5455, Buffer.alloc(4000)))))).toBe('CORRUPT');
    expect(await outcome(editSecond((e) => (e.extra = Buffer.from([0x55, 0x54, 0x20, 0x00, 0x01]))))).not.toBe('ACCEPTED');
    expect(await outcome(editSecond((e) => (e.local = { extra: Buffer.from([0x55, 0x54, 0x20, 0x00, 0x01]) })))).not.toBe('ACCEPTED');
  });

  // Was a defect: 1 to 3 bytes after the last extra field were ignored; extra fields are now parsed from the header bytes and such bytes are CORRUPT.
  it('refuses extra field bytes that are no field', async () => {
    expect(await outcome(editSecond((e) => (e.local = { extra: Buffer.from([0x55, 0x54, 0x20]) })))).toBe('CORRUPT');
    expect(await outcome(editSecond((e) => (e.extra = Buffer.from([0x01, 0x00, 0x08]))))).toBe('CORRUPT');
    const stamp = extraField(0x5455, Buffer.from([1, 0, 0, 0, 0]));
    expect(await outcome(editSecond((e) => (e.extra = Buffer.concat([stamp, Buffer.from([0x55])]))))).toBe('CORRUPT');
  });
});

describe('entry names', () => {
  const unsafe: Array<[string, string | Buffer, number?]> = [
    ['a parent segment', '../chat.json'],
    ['a nested parent segment', 'a/../../chat.json'],
    ['an absolute path', '/etc/passwd'],
    ['a drive letter', 'C:chat.json'],
    ['a backslash', 'a\\..\\chat.json'],
    ['a dot segment', 'a/./chat.json'],
    ['an empty segment', 'a//chat.json'],
    ['a trailing slash', 'dir/'],
    ['a Windows device', 'aux.txt'],
    ['a Windows device in a folder', 'logs/NUL'],
    ['a trailing dot', 'chat.json.'],
    ['a trailing space', 'chat.json '],
    ['NUL', 'chat\0.json'],
    ['ESC (a terminal escape)', 'chat\u001b[2J.json'],
    ['a newline', 'chat\n.json'],
    ['DEL', 'chat\u007f.json'],
    ['a C1 control (CSI)', 'chat\u009b2J.json'],
    ['a bidi override', 'chat\u202enosj.exe'],
    ['a byte order mark', '\ufeffchat.json'],
    ['a line separator', 'chat\u2028.json'],
    ['an alternate data stream', 'chat.json:evil'],
    ['a pipe', 'chat|json'],
    ['an overlong "/"', Buffer.from([0x61, 0xc0, 0xaf, 0x62])],
    ['an encoded surrogate', Buffer.from([0x61, 0xed, 0xa0, 0x80])],
    ['invalid UTF-8', Buffer.from([0x61, 0xff, 0x62])],
    ['non-ASCII without the UTF-8 flag', Buffer.from('caf\u00e9.json', 'utf8'), 0],
    ['CP437 bytes without the UTF-8 flag', Buffer.from([0x63, 0x82, 0x2e, 0x6a]), 0],
    ['a segment over 255 bytes', `${'a'.repeat(256)}/x`],
    ['a name over 1024 bytes', `${'a/'.repeat(600)}x`],
  ];
  for (const [what, name, flags] of unsafe) {
    it(`refuses a name with ${what}`, async () => {
      const bytes = bundleNamed(name, flags ?? FLAG_UTF8);
      const result = await outcome(bytes);
      expect(result).toBe('UNSAFE_PATH');
      const message = (await refusal(bytes)).message;
      expect(message).not.toMatch(RAW_CONTROL);
    });
  }

  it('accepts ordinary UTF-8 names, ZWJ emoji and ASCII names without the UTF-8 flag', async () => {
    expect(await outcome(bundleNamed('résumé/überblick.json'))).toBe('ACCEPTED');
    expect(await outcome(bundleNamed('family-\u{1f468}\u200d\u{1f469}\u200d\u{1f467}.txt'))).toBe('ACCEPTED');
    expect(await outcome(bundleNamed('plain.json', 0))).toBe('ACCEPTED');
  });

  it('a Unicode path field that renames an entry (to another name, a traversal, an absolute path) is refused', async () => {
    const named = (target: string, where: 'central' | 'local') =>
      editSecond((e) => {
        const field = unicodePathField(e.name, target);
        if (where === 'central') e.extra = field;
        else e.local = { extra: field };
      });
    for (const where of ['central', 'local'] as const) {
      expect(await outcome(named('evil.json', where))).not.toBe('ACCEPTED');
      expect(await outcome(named('../../evil.json', where))).not.toBe('ACCEPTED');
      expect(await outcome(named('/etc/evil', where))).not.toBe('ACCEPTED');
    }
    // One that repeats the name exactly is fine.
    expect(await outcome(editSecond((e) => (e.extra = unicodePathField(e.name, e.name as string))))).toBe('ACCEPTED');
  });

  const duplicates: Array<[string, string, string]> = [
    ['exactly', 'chat.json', 'chat.json'],
    ['by ASCII case', 'Chat.json', 'chat.JSON'],
    ['NFC against NFD', 'caf\u00e9.json', 'cafe\u0301.json'],
    ['by the title-case digraph ǅ', '\u01c5.txt', '\u01c6.txt'],
    ['the Kelvin sign against k', '\u212a.txt', 'k.txt'],
    ['ß against ss', 'stra\u00dfe.txt', 'strasse.txt'],
    ['a folder by case', 'Logs/a.txt', 'logs/a.txt'],
    ['manifest.json by case', 'MANIFEST.JSON', 'other.txt'],
  ];
  for (const [what, first, second] of duplicates) {
    it(`refuses two names equal ${what}`, async () => {
      const bytes = first === 'MANIFEST.JSON' ? bundle((entries) => entries.push({ name: first, data: '{}' })) : bundleOf(first, second);
      expect(await outcome(bytes)).toBe('DUPLICATE_ENTRY');
    });
  }

  it('two entries with the very same name (the manifest listing it once) are refused', async () => {
    const bytes = bundle((entries) => entries.push({ name: 'chat.json', data: 'another chat' }));
    expect(await outcome(bytes)).toBe('DUPLICATE_ENTRY');
  });

  it('Turkish dotless ı against i: refused as duplicates (stricter than Unicode case folding, which keeps them apart; safe)', async () => {
    expect(await outcome(bundleOf('f\u0131le.txt', 'file.txt'))).toBe('DUPLICATE_ENTRY');
    expect(await outcome(bundleOf('F\u0130LE.txt', 'file.txt'))).toBe('ACCEPTED');
  });

  // Was a defect: nameKey missed ẞ/ß/ss; it now folds case fully (lower, upper, lower, NFKC).
  it('refuses ẞ against ß and ẞ against ss', async () => {
    expect(await outcome(bundleOf('stra\u1e9ee.txt', 'stra\u00dfe.txt'))).toBe('DUPLICATE_ENTRY');
    expect(await outcome(bundleOf('stra\u1e9ee.txt', 'strasse.txt'))).toBe('DUPLICATE_ENTRY');
  });

  // Was a defect: a file and a folder of one name were accepted; NameKeys now refuses them as DUPLICATE_ENTRY.
  it('refuses a file whose name is also a folder of another entry', async () => {
    expect(await outcome(bundleOf('chat', 'chat/more.json'))).toBe('DUPLICATE_ENTRY');
    expect(await outcome(bundleOf('Chat', 'chat/more.json'))).toBe('DUPLICATE_ENTRY');
    expect(await outcome(bundleOf('logs/a/b.txt', 'LOGS/A'))).toBe('DUPLICATE_ENTRY');
    expect(await outcome(bundle((entries) => entries.push({ name: 'Manifest.json/x', data: '{}' })))).toBe('DUPLICATE_ENTRY');
    expect(await outcome(bundleOf('chat.json', 'chat/more.json'))).toBe('ACCEPTED');
  });

  // Was a defect: fullwidth look-alikes of ../, \ and C: were accepted; the name rules now apply to the NFKC form too.
  it('refuses names whose NFKC form is a traversal, a backslash path or a drive path', async () => {
    for (const name of ['\uff0e\uff0e\uff0fevil.txt', 'a\uff3c..\uff3cevil.txt', '\uff23\uff1a\uff3cevil', '\uff0fetc/x', 'logs/\uff21\uff35\uff38.txt']) {
      expect(await outcome(bundleNamed(name)), name).toBe('UNSAFE_PATH');
    }
  });

  // Was a defect: CONIN$ and CONOUT$ were missing from the Windows device names; they are listed now.
  it('refuses the console device names CONIN$ and CONOUT$', async () => {
    expect(await outcome(bundleNamed('CONOUT$'))).toBe('UNSAFE_PATH');
    expect(await outcome(bundleNamed('logs/conin$'))).toBe('UNSAFE_PATH');
  });
});

describe('attributes', () => {
  const cases: Array<[string, Partial<ForgeEntry>, EvidenceReason]> = [
    ['a Unix symlink', { externalAttributes: unixAttributes(0o120777) }, 'SYMLINK'],
    ['a symlink mode on an archive that claims to come from DOS', { externalAttributes: unixAttributes(0o120777), versionMadeBy: MADE_BY_DOS }, 'SYMLINK'],
    ['a Windows reparse point', { externalAttributes: 0x400, versionMadeBy: MADE_BY_DOS }, 'SYMLINK'],
    ['a Unix directory', { externalAttributes: unixAttributes(0o040755) }, 'SPECIAL_FILE'],
    ['a DOS directory', { externalAttributes: 0x10, versionMadeBy: MADE_BY_DOS }, 'SPECIAL_FILE'],
    ['a FIFO', { externalAttributes: unixAttributes(0o010644) }, 'SPECIAL_FILE'],
    ['a block device', { externalAttributes: unixAttributes(0o060644) }, 'SPECIAL_FILE'],
    ['a socket', { externalAttributes: unixAttributes(0o140644) }, 'SPECIAL_FILE'],
    ['an undefined file type', { externalAttributes: unixAttributes(0o170644) }, 'SPECIAL_FILE'],
    ['a DOS volume label', { externalAttributes: 0x08, versionMadeBy: MADE_BY_DOS }, 'SPECIAL_FILE'],
  ];
  for (const [what, fields, reason] of cases) {
    it(`refuses ${what}`, async () => {
      expect(await outcome(editSecond((e) => Object.assign(e, fields)))).toBe(reason);
    });
  }
});

describe('manifest.json', () => {
  const file: BundleFile = { path: 'chat.json', data: 'hello' };
  const text = JSON.stringify(manifestFor([file]));
  const withText = (manifest: string | Buffer) =>
    forgeZip([
      { name: 'manifest.json', data: manifest },
      { name: file.path, data: file.data },
    ]);

  it('a manifest at another case only, or missing, is refused', async () => {
    expect(
      await outcome(
        forgeZip([
          { name: 'Manifest.json', data: text },
          { name: file.path, data: file.data },
        ]),
      ),
    ).toBe('MANIFEST_INVALID');
    expect(
      await outcome(
        forgeZip([
          { name: 'sub/manifest.json', data: text },
          { name: file.path, data: file.data },
        ]),
      ),
    ).toBe('MANIFEST_INVALID');
  });

  it('a byte order mark before the JSON is refused (strict UTF-8 JSON: the parser would skip it)', async () => {
    expect(await outcome(withText(text))).toBe('ACCEPTED');
    expect(await outcome(withText(`\ufeff${text}`))).toBe('MANIFEST_INVALID');
  });

  const invalid: Array<[string, string | Buffer]> = [
    ['not UTF-8', Buffer.from(text.replace('chat.json', 'ch\u00e9t.json'), 'latin1')],
    ['UTF-16', Buffer.from(`\ufeff${text}`, 'utf16le')],
    ['not JSON', '{"schema":'],
    ['an array', `[${text}]`],
    ['__proto__ at the top', text.replace(/^\{/, '{"__proto__":{"scenario":"other"},')],
    ['constructor in an observation', text.replace('{"path"', '{"constructor":{},"path"')],
    ['prototype in an observation', text.replace('{"path"', '{"prototype":1,"path"')],
    ['an extra key', text.replace(/^\{/, '{"note":"trust me",')],
    ['a repeated member', text.replace('"scenario":', '"scenario":"other","scenario":')],
    ['a repeated member spelled with an escape', text.replace('"scenario":', '"scenario":"other","sc\\u0065nario":')],
    ['a repeated member inside an observation', text.replace('{"path":"chat.json"', '{"path":"other.json","path":"chat.json"')],
    ['another schema', text.replace('evidence-manifest.v1', 'evidence-manifest.v2')],
    [
      'an uppercase sha256',
      text.replace(
        sha256(file.data),
        sha256(file.data).replace(/[a-f]/g, (c) => c.toUpperCase()),
      ),
    ],
    ['an uppercase prefix', text.replace(sha256(file.data), sha256(file.data).replace('sha256', 'SHA256'))],
    ['an uppercase head', text.replace(HEAD, HEAD.toUpperCase())],
    ['a short head', text.replace(HEAD, HEAD.slice(0, 12))],
    ['bytes as a string', text.replace('"bytes":5', '"bytes":"5"')],
    ['negative bytes', text.replace('"bytes":5', '"bytes":-5')],
    ['fractional bytes', text.replace('"bytes":5', '"bytes":5.5')],
    ['huge bytes', text.replace('"bytes":5', '"bytes":1e300')],
    ['bytes beyond the safe integers', text.replace('"bytes":5', '"bytes":9007199254740993')],
    ['infinite bytes', text.replace('"bytes":5', '"bytes":1e400')],
    ['null bytes', text.replace('"bytes":5', '"bytes":null')],
    ['a scenario that is not an id', text.replace(SCENARIO, '../scenario')],
    ['a scenario with an escape sequence', text.replace(SCENARIO, 'a\\u001b[31m')],
  ];
  for (const [what, manifest] of invalid) {
    it(`refuses a manifest with ${what}`, async () => {
      expect(await outcome(withText(manifest))).toBe('MANIFEST_INVALID');
    });
  }

  it('numbers JSON reads as the same integer (5.0, 5e0) are the same size (recorded)', async () => {
    expect(await outcome(withText(text.replace('"bytes":5', '"bytes":5.0')))).toBe('ACCEPTED');
    expect(await outcome(withText(text.replace('"bytes":5', '"bytes":5e0')))).toBe('ACCEPTED');
  });

  it('listed paths: the same path twice (also by case or Unicode form), itself, unsafe ones', async () => {
    const listing = (paths: string[]) =>
      forgeZip([
        {
          name: 'manifest.json',
          data: JSON.stringify(manifestFor([], { observations: paths.map((path) => ({ path, sha256: sha256(file.data), bytes: 5 })) })),
        },
        { name: file.path, data: file.data },
      ]);
    for (const paths of [
      ['chat.json', 'chat.json'],
      ['chat.json', 'CHAT.json'],
      ['chat.json', 'manifest.json'],
      ['chat.json', 'Manifest.JSON'],
      ['chat.json', '../chat.json'],
      ['chat.json', '/chat.json'],
      ['chat.json', 'a\\chat.json'],
      ['chat.json', ''],
      ['chat.json', '__proto__/x\u202e'],
    ]) {
      expect(await outcome(listing(paths)), JSON.stringify(paths)).toBe('MANIFEST_INVALID');
    }
    expect(await outcome(listing(['chat.json', '__proto__']))).toBe('MISSING_FILE');
    expect(await outcome(listing(['Chat.json']))).not.toBe('ACCEPTED');
  });

  it('files against the manifest: unlisted, missing, another size, another digest', async () => {
    expect(await outcome(bundle((entries) => entries.push({ name: 'extra.json', data: '1' })))).toBe('UNLISTED_FILE');
    expect(await outcome(bundle((entries) => entries.pop()))).toBe('MISSING_FILE');
    const other: BundleFile = { path: 'chat.json', data: 'HELLO' };
    const lying = (observation: Record<string, unknown>) =>
      forgeZip([
        { name: 'manifest.json', data: JSON.stringify(manifestFor([], { observations: [observation] })) },
        { name: other.path, data: other.data },
      ]);
    expect(await outcome(lying({ path: 'chat.json', sha256: sha256(other.data), bytes: 6 }))).toBe('SIZE_MISMATCH');
    expect(await outcome(lying({ path: 'chat.json', sha256: sha256('hello'), bytes: 5 }))).toBe('DIGEST_MISMATCH');
  });

  it('a deeply nested manifest is refused with a typed error, not a stack overflow', async () => {
    const depth = 200_000;
    expect(await outcome(withText(`${'['.repeat(depth)}${']'.repeat(depth)}`))).toBe('MANIFEST_INVALID');
    expect(await outcome(withText(text.replace(/^\{/, `{"deep":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)},`)))).toBe('MANIFEST_INVALID');
  });

  it('more observations than entries may be is refused', async () => {
    const observations = Array.from({ length: 1000 }, (_, index) => ({ path: `o/${index}`, sha256: sha256(''), bytes: 0 }));
    expect(await outcome(withText(JSON.stringify(manifestFor([], { observations }))))).toBe('MANIFEST_INVALID');
  });

  it('the subject: another scenario, plan or head than expected', async () => {
    const bytes = bundle();
    expect(await outcome(bytes, { scenario: 'other-scenario' })).toBe('SUBJECT_MISMATCH');
    expect(await outcome(bytes, { planDigest: `sha256:${'00'.repeat(32)}` })).toBe('SUBJECT_MISMATCH');
    expect(await outcome(bytes, { headSha: HEAD.replace('c', 'd') })).toBe('SUBJECT_MISMATCH');
  });
});

describe('refusal messages', () => {
  const hostileKey = '\u202e\u001b]0;owned\u0007\n\u2028';
  const longKeys: Record<string, number> = {};
  for (let index = 0; index < 20_000; index += 1) longKeys[`key-${index}-${'x'.repeat(20)}`] = 0;
  const messages: Array<[string, Buffer]> = [
    ['an unsafe entry name', bundleNamed(`chat${hostileKey}.json`)],
    ['a non-UTF-8 name', bundleNamed(Buffer.from([0x61, 0x1b, 0x9b, 0xff]))],
    ['unknown manifest keys', bundle(undefined, FILES, manifestFor(FILES, { [hostileKey]: 1 }))],
    [
      'a repeated manifest member',
      bundle(undefined, FILES, JSON.stringify(manifestFor(FILES)).replace(/^\{/, `{${JSON.stringify(hostileKey)}:1,${JSON.stringify(hostileKey)}:2,`)),
    ],
    ['manifest text that is not JSON', bundle(undefined, FILES, `${hostileKey}{`)],
    ['a listed path', bundle(undefined, FILES, manifestFor(FILES, { observations: [{ path: `x${hostileKey}`, sha256: sha256(''), bytes: 0 }] }))],
    ['20000 unknown manifest keys', bundle(undefined, FILES, manifestFor(FILES, longKeys))],
    [
      'a 100000-character repeated member name',
      bundle(undefined, FILES, JSON.stringify(manifestFor(FILES)).replace(/^\{/, `{"${'y'.repeat(100_000)}":1,"${'y'.repeat(100_000)}":2,`)),
    ],
  ];

  for (const [what, bytes] of messages) {
    it(`quoting ${what}: one line, no raw control character`, async () => {
      const error = await refusal(bytes);
      expect(isProofgateError(error, 'EVIDENCE_INVALID')).toBe(true);
      expect(error.message).not.toMatch(RAW_CONTROL);
    });
  }

  // Was a defect: format characters (U+202E …) reached messages raw; evidenceError and quoteName now escape every Cf character.
  it('library messages carry no raw bidi or other invisible format character', async () => {
    for (const [, bytes] of messages.slice(0, 6)) expect((await refusal(bytes)).message).not.toMatch(RAW_FORMAT);
  });

  // Was a defect: messages were unbounded; names are cut to 200 characters, schema issues to the first, messages to 1000 characters.
  it('refusal messages stay short whatever the manifest holds', async () => {
    for (const [, bytes] of messages.slice(6)) expect((await refusal(bytes)).message.length).toBeLessThanOrEqual(1001);
    expect((await refusal(bundleNamed(`${'\u202e'.repeat(5000)}.txt`))).message.length).toBeLessThanOrEqual(1001);
  });
});

describe('the source: copied once, paths that are not archives', () => {
  it('bytes handed in are copied at the call: changing them afterwards changes nothing verified or read', async () => {
    const stored = (entries: ForgeEntry[]) => entries.forEach((entry) => (entry.method = 0));
    const original = bundle(stored);
    const source = Buffer.from(original);
    const pending = verifyEvidenceBundle(source);
    // Overwrite the caller's buffer with another bundle of the same size before verification runs.
    const other = bundle(
      stored,
      FILES.map((file) => ({ path: file.path, data: String(file.data).toUpperCase() })),
    );
    expect(other.length).toBe(source.length);
    other.copy(source);
    const verified = await pending;
    expect(verified.digest).toBe(sha256(original));
    expect((await verified.readObservation('chat.json')).toString()).toBe(FILES[0]?.data);
  });

  it('a file replaced after verification: readObservation still reads the verified copy', async () => {
    const path = scratchPath('bundle.zip');
    writeFileSync(path, bundle());
    const verified = await verifyEvidenceBundle(path);
    writeFileSync(
      path,
      bundle(
        undefined,
        FILES.map((file) => ({ path: file.path, data: `changed ${String(file.data)}` })),
      ),
    );
    expect((await verified.readObservation('chat.json')).toString()).toBe(FILES[0]?.data);
  });

  it('a FIFO, a symlink to a FIFO, a directory, /dev/zero and a /proc file are refused as IO without waiting', async () => {
    const fifo = scratchPath('pipe.zip');
    execFileSync('mkfifo', [fifo]);
    const link = scratchPath('link-to-pipe.zip');
    symlinkSync(fifo, link);
    for (const path of [fifo, link, scratch, '/dev/zero', '/dev/null', '/proc/self/status']) {
      try {
        await verifyEvidenceBundle(path);
        throw new Error(`${path} was accepted`);
      } catch (error) {
        expect(isProofgateError(error, 'IO') || evidenceReason(error) === 'CORRUPT', `${path}: ${String(error)}`).toBe(true);
      }
    }
  });

  it('a symlink to a valid bundle is followed (recorded: the caller names the bundle)', async () => {
    const path = scratchPath('real.zip');
    writeFileSync(path, bundle());
    const link = scratchPath('link.zip');
    symlinkSync(path, link);
    expect(await outcome(link)).toBe('ACCEPTED');
  });

  it('readObservation: unlisted, traversal, manifest, prototype names and other case are NOT_FOUND; a small maxBytes is INVALID_INPUT', async () => {
    const verified = await verifyEvidenceBundle(bundle());
    for (const path of ['evil.json', '../chat.json', './chat.json', 'manifest.json', '__proto__', 'constructor', 'CHAT.json', '', 'gateway/../chat.json']) {
      await expect(verified.readObservation(path)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    }
    await expect(verified.readObservation('chat.json', { maxBytes: 3 })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect((await verified.readObservation('gateway/requests.json')).toString()).toBe(FILES[1]?.data);
  });
});

describe('packEvidenceBundle on a directory the producer wrote', () => {
  const subject = { scenario: SCENARIO, planDigest: PLAN, headSha: HEAD };
  function observations(): string {
    const dir = scratchPath('obs');
    mkdirSync(join(dir, 'gateway'), { recursive: true });
    writeFileSync(join(dir, 'chat.json'), 'hello');
    return dir;
  }
  async function packReason(dir: string): Promise<string> {
    try {
      await packEvidenceBundle({ dir, out: scratchPath('out.zip'), ...subject });
      return 'ACCEPTED';
    } catch (error) {
      const message = (error as Error).message;
      expect(message).not.toMatch(RAW_CONTROL);
      return evidenceReason(error) ?? (isProofgateError(error) ? error.code : String(error));
    }
  }

  it('a symlink (to a file outside, to a folder), a FIFO and a second hard link are refused, never followed or waited on', async () => {
    const outside = scratchPath('secret.txt');
    writeFileSync(outside, 'secret');
    const withLink = observations();
    symlinkSync(outside, join(withLink, 'gateway', 'secret.txt'));
    expect(await packReason(withLink)).toBe('SYMLINK');
    const withDirLink = observations();
    symlinkSync(scratch, join(withDirLink, 'up'));
    expect(await packReason(withDirLink)).toBe('SYMLINK');
    const withFifo = observations();
    execFileSync('mkfifo', [join(withFifo, 'pipe')]);
    expect(await packReason(withFifo)).toBe('SPECIAL_FILE');
    const withHardLink = observations();
    linkSync(outside, join(withHardLink, 'hard.txt'));
    expect(await packReason(withHardLink)).toBe('SPECIAL_FILE');
  });

  it('a sparse 8 GiB file is refused from its size, without being read', async () => {
    const dir = observations();
    const path = join(dir, 'sparse.bin');
    writeFileSync(path, '');
    truncateSync(path, 8 * 1024 * MiB);
    expect(await packReason(dir)).toBe('EXPANSION_LIMIT');
  });

  it('names verify would refuse, and a top-level manifest.json in any case, are refused with escaped messages', async () => {
    for (const name of ['chat\u001b[2J\n.json', 'aux.txt', 'x.', 'a\\b', 'MANIFEST.JSON', 'bidi\u202e.txt']) {
      const dir = observations();
      writeFileSync(join(dir, name), 'x');
      expect(['UNSAFE_PATH', 'DUPLICATE_ENTRY']).toContain(await packReason(dir));
    }
  });

  it('more folders than entries may be is refused', async () => {
    const dir = observations();
    for (let index = 0; index < 1001; index += 1) mkdirSync(join(dir, `d${index}`));
    expect(await packReason(dir)).toBe('ENTRY_LIMIT');
  });

  // Was a defect: pack let ẞ and ss side by side through; it shares the full case fold of nameKey now.
  it('refuses to pack ẞ and ss side by side', async () => {
    const dir = observations();
    writeFileSync(join(dir, 'stra\u1e9ee.txt'), 'one');
    writeFileSync(join(dir, 'strasse.txt'), 'two');
    expect(await packReason(dir)).toBe('DUPLICATE_ENTRY');
  });

  it('refuses to pack a file and a folder whose names differ only in case', async () => {
    const dir = observations();
    writeFileSync(join(dir, 'logs'), 'a file');
    mkdirSync(join(dir, 'LOGS'));
    writeFileSync(join(dir, 'LOGS', 'a.txt'), 'in the folder');
    expect(await packReason(dir)).toBe('DUPLICATE_ENTRY');
  });

  it('what pack writes verifies and reads back byte for byte', async () => {
    const dir = observations();
    writeFileSync(join(dir, 'gateway', 'requests.json'), '[1,2,3]');
    const out = scratchPath('packed.zip');
    const packed = await packEvidenceBundle({ dir, out, ...subject });
    const verified = await verifyEvidenceBundle(out, subject);
    expect(verified.digest).toBe(packed.digest);
    expect((await verified.readObservation('gateway/requests.json')).toString()).toBe('[1,2,3]');
    expect(streamingNames(readFileSync(out))).toEqual(['manifest.json', 'chat.json', 'gateway/requests.json']);
  });
});

describe('proofgate evidence (the built CLI)', () => {
  const hostile = bundleNamed('chat\u001b]0;owned\u0007\u001b[2J\u202e\nproofgate: verified OK.json');

  it('a refusal quoting a hostile name: exit 1, one stderr line, no raw escape, bidi or newline; --json parses back', async () => {
    const path = scratchPath('hostile.zip');
    writeFileSync(path, hostile);
    const human = await runCliAsync(['evidence', 'verify', path]);
    expect(human.status).toBe(1);
    expect(human.stdout).toBe('');
    expect(human.stderr.endsWith('\n')).toBe(true);
    expect(human.stderr.slice(0, -1)).not.toMatch(RAW_CONTROL);
    expect(human.stderr).not.toMatch(RAW_FORMAT);
    expect(human.stderr).toMatch(/^proofgate: UNSAFE_PATH: .*\[EVIDENCE_INVALID\]\n$/);

    const json = await runCliAsync(['evidence', 'verify', path, '--json']);
    expect(json.status).toBe(1);
    expect(json.stdout.slice(0, -1)).not.toMatch(RAW_CONTROL);
    expect(json.stdout).not.toMatch(RAW_FORMAT);
    const document = JSON.parse(json.stdout) as { valid: boolean; error: { reason: string; message: string } };
    expect(document).toMatchObject({ valid: false, error: { code: 'EVIDENCE_INVALID', reason: 'UNSAFE_PATH' } });
  });

  it('a refusal quoting hostile manifest keys: one stderr line, escaped', async () => {
    const path = scratchPath('keys.zip');
    writeFileSync(path, bundle(undefined, FILES, manifestFor(FILES, { '\u202e\u001b[31mred\u009b': 1 })));
    const result = await runCliAsync(['evidence', 'verify', path]);
    expect(result.status).toBe(1);
    expect(result.stderr.slice(0, -1)).not.toMatch(RAW_CONTROL);
    expect(result.stderr).not.toMatch(RAW_FORMAT);
    expect(result.stderr).toContain('MANIFEST_INVALID');
  });

  it('malformed --head, --scenario and --plan-digest values are usage errors, echoed nowhere raw', async () => {
    const path = scratchPath('valid.zip');
    writeFileSync(path, bundle());
    for (const flags of [
      ['--head', ''],
      ['--head', 'HEAD'],
      ['--head', HEAD.toUpperCase()],
      ['--head', `${HEAD}\n`],
      ['--head', HEAD.slice(1)],
      ['--head=--json'],
      ['--scenario', '../x'],
      ['--scenario', 'a\u001b[2J'],
      ['--plan-digest', PLAN.toUpperCase()],
      ['--plan-digest', `${PLAN} `],
    ]) {
      const result = await runCliAsync(['evidence', 'verify', path, ...flags]);
      expect(result.status, `${JSON.stringify(flags)}: ${result.stderr}`).toBe(2);
      expect(result.stderr.slice(0, -1)).not.toMatch(RAW_CONTROL);
    }
    const good = await runCliAsync(['evidence', 'verify', path, '--head', HEAD, '--scenario', SCENARIO, '--plan-digest', PLAN]);
    expect(good.status, good.stderr).toBe(0);
  });

  it('a bundle path that starts with "-" is an option, not a file, unless after --', async () => {
    const dir = scratchPath('dash');
    mkdirSync(dir);
    writeFileSync(join(dir, '-evil.zip'), bundle());
    const asOption = await runCliAsync(['evidence', 'verify', '-evil.zip'], { cwd: dir });
    expect(asOption.status).toBe(2);
    const asFile = await runCliAsync(['evidence', 'verify', '--', '-evil.zip'], { cwd: dir });
    expect(asFile.status, asFile.stderr).toBe(0);
  });

  it('a FIFO given as the bundle: exit 1 (IO) without hanging', async () => {
    const fifo = scratchPath('cli-pipe.zip');
    execFileSync('mkfifo', [fifo]);
    const result = await runCliAsync(['evidence', 'verify', fifo]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/\[IO\]\n$/);
  });

  it('a bundle path holding escape sequences is shown escaped in human output', async () => {
    const dir = scratchPath('esc');
    mkdirSync(dir);
    const name = 'b\u001b[2J\u202e.zip';
    writeFileSync(join(dir, name), bundle());
    const ok = await runCliAsync(['evidence', 'verify', name], { cwd: dir });
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).not.toContain('\u001b');
    expect(ok.stdout).not.toContain('\u202e');
    const missing = await runCliAsync(['evidence', 'verify', `missing${name}`], { cwd: dir });
    expect(missing.status).toBe(1);
    expect(missing.stderr).not.toContain('\u001b');
    expect(missing.stderr).not.toContain('\u202e');
  });
});
