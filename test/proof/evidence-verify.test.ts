import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as zlib from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyOutcome, type Outcome } from './evidence-outcome.js';
import { EVIDENCE_REASONS, evidenceReason, verifyEvidenceBundle, type EvidenceExpectation, type EvidenceReason } from '../../src/proof/index.js';
import { crc32ByTable } from '../../src/proof/evidence/crc32.js';
import {
  FILES,
  FLAG_DESCRIPTOR,
  HEAD,
  PLAN,
  SCENARIO,
  bundleEntries,
  dataDescriptor,
  extraField,
  forgeZip,
  manifestOf,
  sha256,
  unicodePathField,
  unixAttributes,
  type BundleFile,
  type ForgeEntry,
} from './zip-forge.js';

const MiB = 1024 * 1024;
const scratch = mkdtempSync(join(tmpdir(), 'pg-evidence-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Verify, and say how it ended: the reason of the refusal (checked to be well-formed), or ACCEPTED. */
function outcome(source: Buffer | string, expectation?: EvidenceExpectation): Promise<Outcome> {
  return verifyOutcome(source, expectation, /[\n\r]/);
}

/** A valid bundle's entries with `edit` applied to a copy. */
function edited(edit: (entries: ForgeEntry[]) => void, files: readonly BundleFile[] = FILES, manifest?: unknown): Buffer {
  const entries = bundleEntries(files, manifest ?? manifestOf(files));
  edit(entries);
  return forgeZip(entries);
}

/** A valid bundle whose one observation is named `name` (the manifest lists it under that name). */
function bundleNamed(name: string | Buffer, flags?: number): Buffer {
  const listed = typeof name === 'string' ? name : name.toString('utf8');
  const files = [{ path: listed, data: 'observed' }];
  const entries = bundleEntries(files);
  (entries[1] as ForgeEntry).name = name;
  if (flags !== undefined) (entries[1] as ForgeEntry).flags = flags;
  return forgeZip(entries);
}

/** `mebibytes` MiB of zeros as one raw deflate stream of about a KiB per MiB: a sync-flushed block repeated, then an empty final block. */
function zerosDeflated(mebibytes: number): Buffer {
  const block = zlib.deflateRawSync(Buffer.alloc(MiB), { level: 9, finishFlush: zlib.constants.Z_SYNC_FLUSH });
  return Buffer.concat([...Array.from({ length: mebibytes }, () => block), Buffer.from([0x03, 0x00])]);
}

/** A bundle whose observation `bomb.bin` is `mebibytes` MiB of zeros and declares `declared` bytes (its true size by default). */
function bomb(mebibytes: number, declared = mebibytes * MiB, crc = 0): Buffer {
  const files = [{ path: 'bomb.bin', data: Buffer.alloc(0) }];
  const manifest = manifestOf(files, { observations: [{ path: 'bomb.bin', sha256: sha256(''), bytes: declared }] });
  return forgeZip([
    { name: 'manifest.json', data: JSON.stringify(manifest) },
    { name: 'bomb.bin', fileData: zerosDeflated(mebibytes), uncompressedSize: declared, crc32: crc },
  ]);
}

describe('evidence bundles that are what they claim', () => {
  it('a well-formed bundle verifies: manifest, digest of the exact bytes, observations, readable bytes', async () => {
    const bytes = forgeZip(bundleEntries(FILES));
    const verified = await verifyEvidenceBundle(bytes, { scenario: SCENARIO, planDigest: PLAN, headSha: HEAD });
    expect(verified.digest).toBe(sha256(bytes));
    expect(verified.archiveBytes).toBe(bytes.length);
    expect(verified.manifest).toMatchObject({ scenario: SCENARIO, planDigest: PLAN, headSha: HEAD });
    expect(verified.observations.map((o) => o.path)).toEqual(FILES.map((f) => f.path));
    for (const file of FILES) expect((await verified.readObservation(file.path)).toString()).toBe(file.data);
  });

  it('stored entries, data descriptors (with and without signature), UTF-8 names and a Unicode path field that repeats the name verify', async () => {
    const files = [
      { path: 'stored.txt', data: 'kept as is' },
      { path: 'résumé/日本.txt', data: 'unicode name' },
      { path: 'signed.txt', data: 'descriptor with signature' },
      { path: 'unsigned.txt', data: 'descriptor without signature' },
    ];
    const bytes = edited((entries) => {
      Object.assign(entries[1] as ForgeEntry, { method: 0 });
      Object.assign(entries[2] as ForgeEntry, { extra: unicodePathField('résumé/日本.txt', 'résumé/日本.txt') });
      for (const [index, signed] of [
        [3, true],
        [4, false],
      ] as const) {
        const entry = entries[index] as ForgeEntry;
        const data = Buffer.from(entry.data as string);
        const compressed = zlib.deflateRawSync(data);
        Object.assign(entry, {
          flags: 0x0800 | FLAG_DESCRIPTOR,
          local: { crc32: 0, compressedSize: 0, uncompressedSize: 0 },
          descriptor: dataDescriptor(zlib.crc32(data), compressed.length, data.length, signed),
        });
      }
    }, files);
    expect(await outcome(bytes)).toBe('ACCEPTED');
  });

  it('the table CRC-32 agrees with zlib', () => {
    const data = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 31) & 0xff));
    expect(crc32ByTable(data)).toBe(zlib.crc32(data));
    expect(crc32ByTable(data.subarray(100), crc32ByTable(data.subarray(0, 100)))).toBe(zlib.crc32(data));
  });

  it('the bytes handed in are copied: changing them after verification changes nothing read', async () => {
    const files = [{ path: 'reply.txt', data: 'x'.repeat(200) }];
    const bytes = forgeZip(bundleEntries(files).map((entry) => ({ ...entry, method: 0 })));
    const verified = await verifyEvidenceBundle(bytes);
    bytes.fill(0x41);
    expect((await verified.readObservation('reply.txt')).toString()).toBe('x'.repeat(200));
  });

  it('readObservation is bounded and names only listed observations', async () => {
    const verified = await verifyEvidenceBundle(forgeZip(bundleEntries(FILES)));
    await expect(verified.readObservation('screenshot.txt', { maxBytes: 10 })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(verified.readObservation('manifest.json')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(verified.readObservation('nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('UNSAFE_PATH: names that could land outside the extraction directory or mean something else', () => {
  it.each([
    ['parent', '../x'],
    ['parent inside', 'a/../../x'],
    ['absolute', '/etc/passwd'],
    ['drive letter with backslash', 'C:\\x'],
    ['drive letter', 'C:/x'],
    ['backslash', 'a\\b'],
    ['NUL', 'a\0b.txt'],
    ['dot segment', './a'],
    ['dot segment inside', 'a/./b'],
    ['empty segment', 'a//b'],
    ['directory entry', 'dir/'],
    ['newline', 'a\nb'],
    ['escape sequence', 'a\x1b[2Jb'],
    ['bidi override', 'txt.\u202eexe'],
    ['trailing dot (Windows drops it)', 'a/b.'],
    ['dot dot space (Windows reads ..)', '.. /x'],
    ['trailing space', 'a '],
    ['alternate data stream', 'a.txt:hidden'],
    ['Windows device', 'aux.txt'],
    ['Windows device in a folder', 'logs/COM1'],
    ['pipe character', 'a|b'],
    ['too long', `${'a'.repeat(200)}/`.repeat(6).slice(0, -1)],
    ['byte order mark', '\ufeffmanifest.json'],
  ])('%s: %j', async (_label, name) => {
    expect(await outcome(bundleNamed(name))).toBe('UNSAFE_PATH');
  });

  it('an empty name', async () => {
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).name = '')))).toBe('UNSAFE_PATH');
  });

  it('bytes that are not UTF-8 while flag bit 11 says they are', async () => {
    expect(await outcome(bundleNamed(Buffer.from([0x61, 0xff, 0xfe, 0x2e, 0x74])))).toBe('UNSAFE_PATH');
    // An overlong encoding of "/" and a lone surrogate, both invalid UTF-8.
    expect(await outcome(bundleNamed(Buffer.from([0x61, 0xc0, 0xaf, 0x62])))).toBe('UNSAFE_PATH');
    expect(await outcome(bundleNamed(Buffer.from([0x61, 0xed, 0xa0, 0x80])))).toBe('UNSAFE_PATH');
  });

  it('non-ASCII bytes without the UTF-8 flag (CP437 to yauzl, something else to other readers)', async () => {
    expect(await outcome(bundleNamed(Buffer.from('résumé.txt'), 0))).toBe('UNSAFE_PATH');
  });

  it('a Unicode path field that renames a safe raw name to a traversal', async () => {
    const bytes = edited((entries) => Object.assign(entries[1] as ForgeEntry, { extra: unicodePathField('observations/chat.json', '../../evil') }));
    expect(await outcome(bytes)).toBe('UNSAFE_PATH');
  });
});

describe('DUPLICATE_ENTRY: two entries one file system could take for one file', () => {
  it.each([
    ['exact', 'observations/chat.json', 'observations/chat.json'],
    ['case', 'observations/chat.json', 'Observations/Chat.JSON'],
    ['Unicode form (NFC and NFD)', 'caf\u00e9.txt', 'cafe\u0301.txt'],
    ['Kelvin sign', 'k.txt', '\u212a.txt'],
    ['sharp s', 'stra\u00dfe.txt', 'STRASSE.txt'],
    ['manifest by case', 'manifest.json', 'MANIFEST.json'],
  ])('%s', async (_label, first, second) => {
    const files = first === 'manifest.json' ? [{ path: 'a.txt', data: 'a' }] : [{ path: first, data: 'one' }];
    const bytes = edited((entries) => entries.push({ name: second, data: 'two' }), files);
    expect(await outcome(bytes)).toBe('DUPLICATE_ENTRY');
  });
});

describe('SYMLINK and SPECIAL_FILE: entries that are not plain files', () => {
  it.each([
    ['a Unix symlink', unixAttributes(0o120777), 'SYMLINK'],
    ['a Unix symlink in an archive made by DOS', unixAttributes(0o120777), 'SYMLINK', 0],
    ['a Windows reparse point', 0x400 | 0x20, 'SYMLINK', 0x0a14],
    ['a FIFO', unixAttributes(0o010644), 'SPECIAL_FILE'],
    ['a character device', unixAttributes(0o020666), 'SPECIAL_FILE'],
    ['a block device', unixAttributes(0o060660), 'SPECIAL_FILE'],
    ['a socket', unixAttributes(0o140755), 'SPECIAL_FILE'],
    ['a Unix directory', unixAttributes(0o040755), 'SPECIAL_FILE'],
    ['a DOS directory', 0x10, 'SPECIAL_FILE', 0x0014],
    ['a DOS volume label', 0x08, 'SPECIAL_FILE', 0x0014],
  ] as const)('%s', async (_label, attributes, reason, versionMadeBy?: number) => {
    const bytes = edited((entries) =>
      Object.assign(entries[1] as ForgeEntry, {
        externalAttributes: attributes,
        ...(versionMadeBy === undefined ? {} : { versionMadeBy }),
        data: '/etc/passwd',
      }),
    );
    expect(await outcome(bytes)).toBe(reason);
  });
});

describe('UNSUPPORTED_METHOD', () => {
  it.each([
    ['bzip2 (12)', { method: 12 }],
    ['AES (99)', { method: 99 }],
    ['LZMA (14)', { method: 14 }],
    ['implode (6)', { method: 6 }],
    ['traditional encryption', { flags: 0x0801 }],
    ['strong encryption', { flags: 0x0841 }],
    ['an encrypted central directory bit', { flags: 0x2800 }],
    ['compressed patched data', { flags: 0x0820 }],
  ])('%s', async (_label, fields) => {
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, fields)))).toBe('UNSUPPORTED_METHOD');
  });
});

describe('CRC_MISMATCH and SIZE_MISMATCH: data that is not what the headers say', () => {
  it('a wrong CRC-32 in both headers, deflated or stored, observation or manifest', async () => {
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { crc32: 0xdeadbeef })))).toBe('CRC_MISMATCH');
    expect(await outcome(edited((entries) => Object.assign(entries[2] as ForgeEntry, { method: 0, crc32: 1 })))).toBe('CRC_MISMATCH');
    expect(await outcome(edited((entries) => Object.assign(entries[0] as ForgeEntry, { crc32: 7 })))).toBe('CRC_MISMATCH');
  });

  it('one flipped byte inside stored data, headers untouched (caught by the CRC before the digest)', async () => {
    const data = 'the observed reply';
    const stored = Buffer.from(data);
    stored[4] = (stored[4] as number) ^ 0x20;
    const bytes = edited((entries) => Object.assign(entries[1] as ForgeEntry, { method: 0, data, fileData: stored }), [{ path: 'reply.txt', data }]);
    expect(await outcome(bytes)).toBe('CRC_MISMATCH');
  });

  it('a declared size smaller than the data (deflate): refused as soon as it is passed', async () => {
    const data = 'x'.repeat(5000);
    const files = [{ path: 'big.txt', data }];
    const manifest = manifestOf(files, { observations: [{ path: 'big.txt', sha256: sha256(data), bytes: 100 }] });
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { uncompressedSize: 100 }), files, manifest))).toBe('SIZE_MISMATCH');
  });

  it('a declared size larger than the data (deflate)', async () => {
    const data = 'short';
    const files = [{ path: 'short.txt', data }];
    const manifest = manifestOf(files, { observations: [{ path: 'short.txt', sha256: sha256(data), bytes: 500 }] });
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { uncompressedSize: 500 }), files, manifest))).toBe('SIZE_MISMATCH');
  });

  it('a stored entry whose two sizes differ', async () => {
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { method: 0, uncompressedSize: 3 })))).toBe('SIZE_MISMATCH');
  });

  it('an entry whose size is not the one the manifest lists', async () => {
    const manifest = manifestOf(FILES);
    (manifest.observations as Array<{ bytes: number }>)[0]!.bytes += 1;
    expect(await outcome(forgeZip(bundleEntries(FILES, manifest)))).toBe('SIZE_MISMATCH');
  });
});

describe('EXPANSION_LIMIT, ENTRY_LIMIT, ARCHIVE_TOO_LARGE: bombs and floods die before they cost anything', () => {
  it('a 42 KiB deflate stream of zeros declaring its true 42 MiB: refused on the ratio, from the central directory alone', async () => {
    const bytes = bomb(42);
    expect(bytes.length).toBeLessThan(48 * 1024);
    expect(await outcome(bytes)).toBe('EXPANSION_LIMIT');
  });

  it('the same bomb with the ratio cap off: refused on the total expansion cap', async () => {
    expect(await outcome(bomb(42), { limits: { maxRatio: Number.POSITIVE_INFINITY, maxTotalBytes: 8 * MiB } })).toBe('EXPANSION_LIMIT');
  });

  it('many entries that are each fine but together expand past the total cap', async () => {
    const files = Array.from({ length: 5 }, (_, i) => ({ path: `part-${i}.txt`, data: 'y'.repeat(300_000) }));
    expect(await outcome(forgeZip(bundleEntries(files)), { limits: { maxTotalBytes: MiB } })).toBe('EXPANSION_LIMIT');
  });

  it('a 1 GiB bomb that lies about its size (declares 1 MiB): stopped at the first chunk past it, memory stays small', async () => {
    const bytes = bomb(1024, MiB);
    const before = process.memoryUsage();
    expect(await outcome(bytes)).toBe('SIZE_MISMATCH');
    const after = process.memoryUsage();
    // Inflating the whole stream would have produced 1 GiB; nothing of it is kept.
    expect(after.arrayBuffers - before.arrayBuffers).toBeLessThan(64 * MiB);
    expect(after.rss - before.rss).toBeLessThan(256 * MiB);
  });

  it('a manifest.json that is a bomb: its own cap, from the central directory', async () => {
    const bytes = forgeZip([{ name: 'manifest.json', fileData: zerosDeflated(4), uncompressedSize: 4 * MiB, crc32: 0 }]);
    expect(await outcome(bytes, { limits: { maxRatio: Number.POSITIVE_INFINITY } })).toBe('MANIFEST_INVALID');
  });

  it('a manifest.json that is a bomb declaring a small size: stopped past the declared size, nothing kept', async () => {
    const bytes = forgeZip([{ name: 'manifest.json', fileData: zerosDeflated(512), uncompressedSize: 1000, crc32: 0 }]);
    expect(await outcome(bytes)).toBe('SIZE_MISMATCH');
  });

  it('more entries than allowed, announced honestly or not', async () => {
    const files = Array.from({ length: 1000 }, (_, i) => ({ path: `f${i}`, data: '' }));
    expect(await outcome(forgeZip(bundleEntries(files)))).toBe('ENTRY_LIMIT');
    expect(await outcome(forgeZip(bundleEntries(FILES)), { limits: { maxEntries: 3 } })).toBe('ENTRY_LIMIT');
    // An end record announcing 60000 entries is refused before any record is read.
    expect(await outcome(forgeZip(bundleEntries(FILES), { entryCount: 60000 }))).toBe('ENTRY_LIMIT');
  });

  it('an archive over the size cap, as bytes or as a file (a sparse 65 MiB file is refused unread)', async () => {
    const bytes = forgeZip(bundleEntries(FILES));
    expect(await outcome(bytes, { limits: { maxArchiveBytes: bytes.length - 1 } })).toBe('ARCHIVE_TOO_LARGE');
    const file = join(scratch, 'sparse.zip');
    writeFileSync(file, '');
    truncateSync(file, 65 * MiB);
    expect(await outcome(file)).toBe('ARCHIVE_TOO_LARGE');
  });
});

describe('OVERLAPPING_ENTRIES: one stretch of bytes read as two entries', () => {
  it('two central records pointing at the same local header (the non-recursive bomb shape)', async () => {
    const bytes = edited(
      (entries) => entries.push({ name: 'copy.json', data: FILES[0]!.data, sameLocalAs: 1 }),
      FILES,
      manifestOf([...FILES, { path: 'copy.json', data: FILES[0]!.data }]),
    );
    expect(await outcome(bytes)).toBe('OVERLAPPING_ENTRIES');
  });

  it('a stored entry whose data holds a whole second entry (quine-style overlap, every header consistent)', async () => {
    const inner: ForgeEntry = { name: 'inner.txt', data: 'inner data', method: 0 };
    // The inner entry's local header and data, as they start its own archive.
    const innerBytes = forgeZip([inner]).subarray(0, 30 + 'inner.txt'.length + 'inner data'.length);
    const manifest = JSON.stringify(
      manifestOf([
        { path: 'outer.bin', data: innerBytes },
        { path: 'inner.txt', data: 'inner data' },
      ]),
    );
    const outerDataStart = 30 + 'manifest.json'.length + manifest.length + 30 + 'outer.bin'.length;
    const bytes = forgeZip([
      { name: 'manifest.json', data: manifest, method: 0 },
      { name: 'outer.bin', data: innerBytes, method: 0 },
      { ...inner, omitLocal: true, localOffset: outerDataStart },
    ]);
    expect(await outcome(bytes)).toBe('OVERLAPPING_ENTRIES');
  });

  it('an entry whose data runs into the central directory', async () => {
    const bytes = edited(
      (entries) =>
        Object.assign(entries[3] as ForgeEntry, {
          method: 0,
          data: 'tail',
          fileData: Buffer.from('tail'),
          compressedSize: 40,
          uncompressedSize: 40,
          local: {},
        }),
      [...FILES.slice(0, 2), { path: 'tail.txt', data: 'tail' }],
    );
    expect(await outcome(bytes)).toBe('OVERLAPPING_ENTRIES');
  });
});

describe('HEADER_MISMATCH: a local header that tells a streaming reader something else', () => {
  it.each([
    ['name', { name: 'observations/chat.jsom' }],
    ['compression method', { method: 0 }],
    ['CRC-32', { crc32: 0x12345678 }],
    ['compressed size', { compressedSize: 3 }],
    ['uncompressed size', { uncompressedSize: 3 }],
    ['flags', { flags: 0 }],
    ['a Unicode path field naming another file', { extra: unicodePathField('observations/chat.json', 'observations/other.json') }],
  ])('local %s differs', async (_label, local) => {
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { local })))).toBe('HEADER_MISMATCH');
  });

  it('a central Unicode path field naming another safe file', async () => {
    expect(
      await outcome(
        edited((entries) => Object.assign(entries[1] as ForgeEntry, { extra: unicodePathField('observations/chat.json', 'observations/gateway.json') })),
      ),
    ).toBe('HEADER_MISMATCH');
  });

  it('a data descriptor that disagrees with the central directory', async () => {
    const bytes = edited((entries) => {
      const entry = entries[1] as ForgeEntry;
      const data = Buffer.from(entry.data as string);
      Object.assign(entry, {
        flags: 0x0800 | FLAG_DESCRIPTOR,
        local: { crc32: 0, compressedSize: 0, uncompressedSize: 0 },
        descriptor: dataDescriptor(zlib.crc32(data) ^ 1, zlib.deflateRawSync(data).length, data.length),
      });
    });
    expect(await outcome(bytes)).toBe('HEADER_MISMATCH');
  });
});

describe('CORRUPT: archives that are not well-formed, or hide bytes', () => {
  const valid = forgeZip(bundleEntries(FILES));

  it.each([
    ['empty', Buffer.alloc(0)],
    ['not a ZIP archive', Buffer.from('just some text, long enough to hold an end record maybe')],
    ['truncated by one byte', valid.subarray(0, valid.length - 1)],
    ['truncated in the middle', valid.subarray(0, Math.floor(valid.length / 2))],
    ['followed by trailing bytes', Buffer.concat([valid, Buffer.from('PK\x05\x06')])],
    ['an archive comment', forgeZip(bundleEntries(FILES), { comment: Buffer.from('hello') })],
    ['bytes before the first entry (a prefix, or a self-extractor stub)', edited((entries) => ((entries[0] as ForgeEntry).before = Buffer.from('MZ stub')))],
  ])('%s', async (_label, bytes) => {
    expect(await outcome(bytes)).toBe('CORRUPT');
  });

  it('a hidden entry in a gap that only a reader scanning local headers would find', async () => {
    const hidden = forgeZip([{ name: 'observations/chat.json', data: '{"reply":"forged"}' }]);
    const hiddenLocal = hidden.subarray(0, hidden.indexOf(Buffer.from('PK\x01\x02')));
    expect(await outcome(edited((entries) => ((entries[2] as ForgeEntry).before = hiddenLocal)))).toBe('CORRUPT');
    expect(await outcome(forgeZip(bundleEntries(FILES), { beforeCentral: hiddenLocal }))).toBe('CORRUPT');
  });

  it('a central record the end record does not count (seen by some readers, not others)', async () => {
    const entries = [...bundleEntries(FILES), { name: 'extra.txt', data: 'seen by some' }];
    expect(await outcome(forgeZip(entries, { entryCount: entries.length - 1 }))).toBe('CORRUPT');
  });

  it('bytes in the central directory that belong to no record', async () => {
    expect(await outcome(forgeZip(bundleEntries(FILES), { centralTail: Buffer.alloc(46) }))).toBe('CORRUPT');
  });

  it('a central directory offset that does not match the end record', async () => {
    const valid2 = forgeZip(bundleEntries(FILES));
    const end = valid2.length - 22;
    const offset = valid2.readUInt32LE(end + 16);
    expect(await outcome(forgeZip(bundleEntries(FILES), { centralOffset: offset + 1 }))).toBe('CORRUPT');
  });

  it('ZIP64 markers: in the end record, as a locator, as an extra field', async () => {
    expect(await outcome(forgeZip(bundleEntries(FILES), { entryCount: 0xffff }))).toBe('CORRUPT');
    const locator = Buffer.alloc(20);
    locator.writeUInt32LE(0x07064b50, 0);
    // The locator sits right before the end record, inside the last central record's comment.
    expect(await outcome(edited((entries) => ((entries[3] as ForgeEntry).comment = locator)))).toBe('CORRUPT');
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).extra = extraField(0x0001, Buffer.alloc(8)))))).toBe('CORRUPT');
  });

  it('an unknown extra field (one that could carry a link target or a mode), and a malformed local extra', async () => {
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).extra = extraField(0x756e, Buffer.alloc(14)))))).toBe('CORRUPT');
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).local = { extra: Buffer.from([0x55, 0x54, 0xff, 0x00]) })))).toBe('CORRUPT');
  });

  it('an accepted kind of extra field grown long enough to hide bytes in', async () => {
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).extra = extraField(0x5455, Buffer.alloc(5000)))))).toBe('CORRUPT');
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).local = { extra: extraField(0x7875, Buffer.alloc(300)) })))).toBe('CORRUPT');
    // The ordinary sizes pass.
    const ut = Buffer.alloc(5);
    ut[0] = 1;
    const ux = Buffer.from([1, 4, 0, 0, 0, 0, 4, 0, 0, 0, 0]);
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).extra = Buffer.concat([extraField(0x5455, ut), extraField(0x7875, ux)]))))).toBe(
      'ACCEPTED',
    );
  });

  it('an entry comment', async () => {
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).comment = Buffer.from('note'))))).toBe('CORRUPT');
  });

  it('deflate data that does not inflate, or that is cut short', async () => {
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).fileData = Buffer.from([0xff, 0xff, 0xff, 0xff]))))).toBe('CORRUPT');
    const data = Buffer.from(FILES[0]!.data);
    const cut = zlib.deflateRawSync(data).subarray(0, 5);
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { fileData: cut })))).toBe('CORRUPT');
  });

  it('bytes hidden after the end of a deflate stream but inside the entry', async () => {
    const data = Buffer.from(FILES[0]!.data);
    const padded = Buffer.concat([zlib.deflateRawSync(data), Buffer.from('PK\x03\x04 hidden')]);
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { fileData: padded })))).toBe('CORRUPT');
  });

  it('a central record pointing past the end of the archive', async () => {
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).localOffset = 0x7fffffff)))).toBe('CORRUPT');
  });
});

describe('the manifest and the files it lists', () => {
  it('MISSING_FILE: the manifest lists a file the archive lacks', async () => {
    const manifest = manifestOf([...FILES, { path: 'video.mp4', data: 'frames' }]);
    expect(await outcome(forgeZip(bundleEntries(FILES, manifest)))).toBe('MISSING_FILE');
  });

  it('UNLISTED_FILE: the archive holds a file the manifest does not list (also one named like the manifest in a folder)', async () => {
    expect(await outcome(edited((entries) => entries.push({ name: 'extra.sh', data: 'rm -rf /' })))).toBe('UNLISTED_FILE');
    expect(await outcome(edited((entries) => entries.push({ name: 'nested/manifest.json', data: '{}' })))).toBe('UNLISTED_FILE');
  });

  it('DIGEST_MISMATCH: an observation replaced with consistent headers but other bytes than the manifest names', async () => {
    const forged = FILES.map((file, index) => (index === 0 ? { ...file, data: '{"reply":"forged","rendered":true}' } : file));
    const manifest = manifestOf(FILES);
    (manifest.observations as Array<{ bytes: number }>)[0]!.bytes = Buffer.byteLength(forged[0]!.data);
    expect(await outcome(forgeZip(bundleEntries(forged, manifest)))).toBe('DIGEST_MISMATCH');
  });

  it.each([
    ['no manifest.json', () => forgeZip(bundleEntries(FILES).slice(1))],
    ['manifest.json in another case only', () => forgeZip(bundleEntries(FILES).map((e, i) => (i === 0 ? { ...e, name: 'Manifest.json' } : e)))],
    ['not JSON', () => edited((entries) => ((entries[0] as ForgeEntry).data = '{"schema":'))],
    ['not UTF-8', () => edited((entries) => ((entries[0] as ForgeEntry).data = Buffer.from([0x7b, 0xff, 0x7d])))],
    [
      'a member name twice (two parsers, two answers)',
      () => edited((entries) => ((entries[0] as ForgeEntry).data = `{"headSha":"${'0'.repeat(40)}",${JSON.stringify(manifestOf(FILES)).slice(1)}`)),
    ],
    ['an unknown member', () => forgeZip(bundleEntries(FILES, manifestOf(FILES, { trusted: true })))],
    ['another schema version', () => forgeZip(bundleEntries(FILES, manifestOf(FILES, { schema: 'evidence-manifest.v2' })))],
    ['a plan digest that is not one', () => forgeZip(bundleEntries(FILES, manifestOf(FILES, { planDigest: 'sha256:abc' })))],
    ['a short head sha', () => forgeZip(bundleEntries(FILES, manifestOf(FILES, { headSha: 'c0ffee' })))],
    [
      'a digest in another form',
      () =>
        forgeZip(
          bundleEntries(FILES, manifestOf(FILES, { observations: [{ path: 'observations/chat.json', sha256: sha256(FILES[0]!.data).slice(7), bytes: 1 }] })),
        ),
    ],
    ['a negative size', () => forgeZip(bundleEntries(FILES, manifestOf(FILES, { observations: [{ path: 'a', sha256: sha256(''), bytes: -1 }] })))],
    ['listing itself', () => forgeZip(bundleEntries(FILES, manifestOf([...FILES, { path: 'manifest.json', data: '' }])))],
    ['listing an unsafe path', () => forgeZip(bundleEntries(FILES, manifestOf([...FILES, { path: '../x', data: '' }])))],
    ['listing one path twice by case', () => forgeZip(bundleEntries(FILES, manifestOf([...FILES, { path: 'SCREENSHOT.txt', data: '' }])))],
    ['deeply nested JSON', () => edited((entries) => ((entries[0] as ForgeEntry).data = `${'['.repeat(200_000)}${']'.repeat(200_000)}`))],
    [
      'more observations than entries may be',
      () => forgeZip(bundleEntries([], manifestOf(Array.from({ length: 1000 }, (_, i) => ({ path: `f${i}`, data: '' }))))),
    ],
  ])('MANIFEST_INVALID: %s', async (_label, make) => {
    expect(await outcome(make())).toBe('MANIFEST_INVALID');
  });

  it('SUBJECT_MISMATCH: the manifest names another head, plan or scenario than the one asked about', async () => {
    const bytes = forgeZip(bundleEntries(FILES));
    expect(await outcome(bytes, { headSha: 'f'.repeat(40) })).toBe('SUBJECT_MISMATCH');
    expect(await outcome(bytes, { planDigest: `sha256:${'0'.repeat(64)}` })).toBe('SUBJECT_MISMATCH');
    expect(await outcome(bytes, { scenario: 'telegram-bot-e2e-proof' })).toBe('SUBJECT_MISMATCH');
    expect(await outcome(bytes, { scenario: SCENARIO, planDigest: PLAN, headSha: HEAD })).toBe('ACCEPTED');
  });
});

describe('entries larger than one piece (1 MiB), which are streamed', () => {
  const text = Buffer.from(Array.from({ length: 60_000 }, (_, i) => `line ${i} of a long log, value ${(i * 7919) % 10007}\n`).join(''));
  const files = [{ path: 'big.log', data: text }];

  it('a large deflated entry and a large stored one verify', async () => {
    expect(text.length).toBeGreaterThan(2 * MiB);
    expect(await outcome(forgeZip(bundleEntries(files)))).toBe('ACCEPTED');
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).method = 0), files))).toBe('ACCEPTED');
  });

  it('a wrong CRC-32, deflated or stored', async () => {
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).crc32 = 5), files))).toBe('CRC_MISMATCH');
    expect(await outcome(edited((entries) => Object.assign(entries[1] as ForgeEntry, { method: 0, crc32: 5 }), files))).toBe('CRC_MISMATCH');
  });

  it('declared sizes that lie, smaller or larger', async () => {
    for (const declared of [text.length - 1, 2 * MiB, text.length + 1]) {
      const manifest = manifestOf(files, { observations: [{ path: 'big.log', sha256: sha256(text), bytes: declared }] });
      expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).uncompressedSize = declared), files, manifest))).toBe('SIZE_MISMATCH');
    }
  });

  it('a 256 MiB bomb declaring 4 MiB stops at the first piece past it', async () => {
    expect(await outcome(bomb(256, 4 * MiB))).toBe('SIZE_MISMATCH');
  });

  it('a deflate stream cut short, or followed by hidden bytes inside the entry', async () => {
    const deflated = zlib.deflateRawSync(text);
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).fileData = deflated.subarray(0, deflated.length - 100)), files))).toBe('CORRUPT');
    const padded = Buffer.concat([deflated, Buffer.from('PK\x03\x04 hidden entry')]);
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).fileData = padded), files))).toBe('CORRUPT');
  });

  it('readObservation gives the large entry back, checked again', async () => {
    const verified = await verifyEvidenceBundle(forgeZip(bundleEntries(files)));
    expect((await verified.readObservation('big.log')).equals(text)).toBe(true);
  });
});

describe('a producer that controls every byte of the bundle', () => {
  it('a non-recursive bomb: 100 central records sharing one 40 KiB kernel that inflates to 40 MiB (4 GiB in all), refused from the central directory', async () => {
    const kernel = zerosDeflated(40);
    const records: ForgeEntry[] = [
      { name: 'manifest.json', data: JSON.stringify(manifestOf([])) },
      { name: 'k0', fileData: kernel, uncompressedSize: 40 * MiB, crc32: 0 },
    ];
    for (let i = 1; i < 100; i += 1) records.push({ name: `k${i}`, fileData: kernel, uncompressedSize: 40 * MiB, crc32: 0, sameLocalAs: 1 });
    const bytes = forgeZip(records);
    expect(bytes.length).toBeLessThan(48 * 1024);
    expect(await outcome(bytes, { limits: { maxRatio: Number.POSITIVE_INFINITY } })).toBe('EXPANSION_LIMIT');
    expect(await outcome(bytes, { limits: { maxRatio: Number.POSITIVE_INFINITY, maxTotalBytes: 2 ** 40 } })).toBe('OVERLAPPING_ENTRIES');
  });

  it('a stored entry whose sizes swallow the next entry (two readers, two file lists)', async () => {
    const files = [
      { path: 'a.txt', data: 'first' },
      { path: 'b.txt', data: 'second' },
    ];
    const swallowed = 30 + 'b.txt'.length + 'second'.length;
    const bytes = edited(
      (entries) => Object.assign(entries[1] as ForgeEntry, { method: 0, compressedSize: 5 + swallowed, uncompressedSize: 5 + swallowed }),
      files,
    );
    expect(await outcome(bytes)).toBe('OVERLAPPING_ENTRIES');
  });

  it('a name in another Unicode form than the manifest lists is not the listed file', async () => {
    const bytes = edited((entries) => ((entries[1] as ForgeEntry).name = 'cafe\u0301.txt'), [{ path: 'caf\u00e9.txt', data: 'x' }]);
    expect(await outcome(bytes)).toBe('UNLISTED_FILE');
  });

  it('a __proto__ member in the manifest', async () => {
    const text = JSON.stringify(manifestOf(FILES)).replace('{', '{"__proto__":{"scenario":"other"},');
    expect(await outcome(edited((entries) => ((entries[0] as ForgeEntry).data = text)))).toBe('MANIFEST_INVALID');
  });

  it('a data descriptor written without flag bit 3 (bytes no header accounts for)', async () => {
    const data = Buffer.from(FILES[0]!.data);
    const descriptor = dataDescriptor(zlib.crc32(data), zlib.deflateRawSync(data).length, data.length);
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).descriptor = descriptor)))).toBe('CORRUPT');
  });

  it('a local header offset that points into the central directory', async () => {
    const valid = forgeZip(bundleEntries(FILES));
    const centralOffset = valid.readUInt32LE(valid.length - 22 + 16);
    expect(await outcome(edited((entries) => ((entries[1] as ForgeEntry).localOffset = centralOffset)))).toBe('CORRUPT');
  });

  it('an end record announcing a comment that is not there', async () => {
    const bytes = forgeZip(bundleEntries(FILES));
    bytes.writeUInt16LE(5, bytes.length - 2);
    expect(await outcome(bytes)).toBe('CORRUPT');
  });

  it('a manifest that points at one head while the caller asked for another is refused before any observation is read', async () => {
    // The observation's CRC is wrong too: the subject is checked first, so the answer names the subject.
    const bytes = edited((entries) => Object.assign(entries[1] as ForgeEntry, { crc32: 1 }), FILES, manifestOf(FILES, { headSha: 'e'.repeat(40) }));
    expect(await outcome(bytes, { headSha: HEAD })).toBe('SUBJECT_MISMATCH');
  });
});

describe('a path to verify', () => {
  it('reads a regular file; a directory, a FIFO or a device is an IO error (never a hang or an endless read)', async () => {
    const file = join(scratch, 'ok.zip');
    writeFileSync(file, forgeZip(bundleEntries(FILES)));
    expect(await outcome(file)).toBe('ACCEPTED');
    await expect(verifyEvidenceBundle(scratch)).rejects.toMatchObject({ code: 'IO' });
    await expect(verifyEvidenceBundle('/dev/zero')).rejects.toMatchObject({ code: 'IO' });
    const fifo = join(scratch, 'fifo.zip');
    execFileSync('mkfifo', [fifo]);
    await expect(verifyEvidenceBundle(fifo)).rejects.toMatchObject({ code: 'IO' });
    await expect(verifyEvidenceBundle(join(scratch, 'missing.zip'))).rejects.toMatchObject({ code: 'IO', message: expect.stringMatching(/no such file/) });
  });
});

describe('every byte and every length of a bundle', () => {
  const files = [
    { path: 'a.txt', data: 'first observation' },
    { path: 'b/c.json', data: '{"ok":true}' },
  ];
  const valid = forgeZip(bundleEntries(files).map((entry, index) => (index === 2 ? { ...entry, method: 0 } : entry)));
  const originals = new Map(files.map((file) => [file.path, Buffer.from(file.data)]));

  it('no single flipped byte gets other bytes accepted: each flip is refused, or leaves every observation as it was', async () => {
    const seen = new Set<Outcome>();
    for (let at = 0; at < valid.length; at += 1) {
      for (const mask of [0x01, 0x80]) {
        const copy = Buffer.from(valid);
        copy[at] = (copy[at] as number) ^ mask;
        let verified;
        try {
          verified = await verifyEvidenceBundle(copy);
        } catch (error) {
          const reason = evidenceReason(error);
          expect(reason, `byte ${at} ^ ${mask}: ${String(error)}`).not.toBeNull();
          seen.add(reason as EvidenceReason);
          continue;
        }
        seen.add('ACCEPTED');
        for (const observation of verified.observations) {
          expect((await verified.readObservation(observation.path)).equals(originals.get(observation.path) as Buffer), `byte ${at} ^ ${mask}`).toBe(true);
        }
        expect(verified.observations.map((o) => o.path).sort()).toEqual([...originals.keys()].sort());
      }
    }
    // The sweep reaches the CRC, the headers and the layout, not one check only.
    for (const reason of ['CRC_MISMATCH', 'HEADER_MISMATCH', 'CORRUPT', 'MANIFEST_INVALID'] as const) expect(seen).toContain(reason);
  });

  it('every truncation is refused with a reason', async () => {
    for (let length = 0; length < valid.length; length += 1) {
      const reason = await outcome(valid.subarray(0, length));
      expect(reason, `length ${length}`).not.toBe('ACCEPTED');
    }
  });

  it('every reason has a test above', () => {
    expect(EVIDENCE_REASONS).toHaveLength(18);
  });
});
