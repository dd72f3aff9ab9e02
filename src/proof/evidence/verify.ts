import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import type yauzl from 'yauzl';
import { ProofgateError, errorMessage, isProofgateError, sha256Digest, type Sha256Digest } from '../../core/index.js';
import { resolveEvidenceLimits, type EvidenceLimits } from './limits.js';
import { parseManifest, type EvidenceManifest, type EvidenceObservation } from './manifest.js';
import { MANIFEST_NAME, NameKeys, decodeEntryName } from './names.js';
import { evidenceError, quoteName } from './reasons.js';
import { loadYauzl } from './zip-modules.js';
import { readEntryData, type EntryLocation } from './stream.js';
import {
  checkAttributes,
  checkCentralRecord,
  checkCoverage,
  checkLocalHeader,
  checkMethod,
  entrySpan,
  readEndRecord,
  type EndRecord,
  type Span,
} from './structure.js';

/** What the caller expects a bundle to be about; each given value must equal the manifest's (`SUBJECT_MISMATCH`). */
export interface EvidenceExpectation {
  readonly scenario?: string;
  readonly planDigest?: string;
  readonly headSha?: string;
  readonly limits?: Partial<EvidenceLimits>;
}

/** A bundle that passed every check. */
export interface VerifiedBundle {
  /** sha256 of the archive's exact bytes. */
  readonly digest: Sha256Digest;
  /** The archive's size in bytes. */
  readonly archiveBytes: number;
  readonly manifest: EvidenceManifest;
  /** The manifest's observations, each found in the archive with that sha256 and size. */
  readonly observations: readonly EvidenceObservation[];
  /**
   * The bytes of one verified observation, read again from the verified
   * archive and held against its sha256 once more. An observation larger than
   * `maxBytes` (default 16 MiB) is refused (`INVALID_INPUT`), an unknown path
   * is `NOT_FOUND`.
   */
  readObservation(path: string, options?: { readonly maxBytes?: number }): Promise<Buffer>;
}

/** Default bound of `readObservation`. */
export const DEFAULT_READ_OBSERVATION_BYTES = 16 * 1024 * 1024;

/** One entry as the central directory and its checks found it. */
interface CheckedEntry {
  readonly entry: yauzl.Entry;
  readonly name: string;
}

/** An entry whose local header has been read and checked too: where its data lies. */
interface LocatedEntry extends CheckedEntry {
  readonly location: EntryLocation;
}

/**
 * Verify an evidence bundle (a ZIP archive, as a path or as bytes) before
 * anything in it is extracted or trusted. In order: the size cap; the end
 * record and entry count; each central directory record (method, flags, name,
 * attributes, extra fields, duplicates, declared sizes against the expansion
 * caps); each local header against its record, and the layout (no overlaps,
 * no stray bytes); manifest.json (its own cap, schema, subject); the listed
 * files against the entries; then every observation expanded, never past its
 * declared size, and held to its CRC-32, size and sha256. The first failure is thrown as `EVIDENCE_INVALID`
 * with its reason (see `EVIDENCE_REASONS`); a path that cannot be read is `IO`.
 */
export async function verifyEvidenceBundle(source: string | Uint8Array, expect: EvidenceExpectation = {}): Promise<VerifiedBundle> {
  const limits = resolveEvidenceLimits(expect.limits);
  const bytes = await loadArchive(source, limits.maxArchiveBytes);
  const digest = sha256Digest(bytes);
  const end = readEndRecord(bytes, limits.maxEntries);
  const zip = await openZip(bytes);
  const entries = await readCentralDirectory(zip, bytes, end, limits);
  const located = await checkLayout(zip, bytes, end, entries);

  const byName = new Map(located.map((checked) => [checked.name, checked]));
  const manifestEntry = byName.get(MANIFEST_NAME);
  if (manifestEntry === undefined) throw evidenceError('MANIFEST_INVALID', `the archive has no ${MANIFEST_NAME}`);
  const manifestData = await readEntryData(bytes, manifestEntry.location, MANIFEST_NAME, true);
  const manifest = parseManifest(manifestData.kept as Buffer, limits.maxEntries - 1);
  checkSubject(manifest, expect);

  const listed = new Set(manifest.observations.map((observation) => observation.path));
  for (const { name } of located) {
    if (name !== MANIFEST_NAME && !listed.has(name)) throw evidenceError('UNLISTED_FILE', `entry ${quoteName(name)} is not listed in ${MANIFEST_NAME}`);
  }
  for (const observation of manifest.observations) {
    const found = byName.get(observation.path);
    if (found === undefined) throw evidenceError('MISSING_FILE', `${MANIFEST_NAME} lists ${quoteName(observation.path)}, which the archive does not hold`);
    if (found.entry.uncompressedSize !== observation.bytes) {
      throw evidenceError(
        'SIZE_MISMATCH',
        `${quoteName(observation.path)} is ${found.entry.uncompressedSize} bytes, ${MANIFEST_NAME} says ${observation.bytes}`,
      );
    }
  }
  await checkObservations(bytes, manifest.observations, byName);
  const locations = new Map<string, EntryLocation>();
  for (const { path } of manifest.observations) locations.set(path, (byName.get(path) as LocatedEntry).location);
  return verifiedBundle(digest, bytes, manifest, locations);
}

/**
 * The answer, built apart from the checks so that it holds only the archive's
 * bytes, the manifest and where each observation lies: nothing else of what
 * the headers held (yauzl's entries, their extra fields) stays referenced.
 */
function verifiedBundle(digest: Sha256Digest, bytes: Buffer, manifest: EvidenceManifest, locations: ReadonlyMap<string, EntryLocation>): VerifiedBundle {
  return {
    digest,
    archiveBytes: bytes.length,
    manifest,
    observations: manifest.observations,
    async readObservation(path, options = {}) {
      const maxBytes = options.maxBytes ?? DEFAULT_READ_OBSERVATION_BYTES;
      const observation = manifest.observations.find((candidate) => candidate.path === path);
      const location = locations.get(path);
      if (observation === undefined || location === undefined) throw new ProofgateError('NOT_FOUND', `the bundle has no observation ${quoteName(path)}`);
      if (observation.bytes > maxBytes) {
        throw new ProofgateError('INVALID_INPUT', `observation ${quoteName(path)} is ${observation.bytes} bytes, more than the ${maxBytes} asked for`);
      }
      const data = await readEntryData(bytes, location, path, true);
      if (data.sha256 !== observation.sha256) throw evidenceError('DIGEST_MISMATCH', `${quoteName(path)} no longer has ${observation.sha256}`);
      return data.kept as Buffer;
    },
  };
}

/** Observations read at once: a large one inflates on libuv's threads while this one hashes another. */
const CONCURRENT_READS = 2;

/**
 * Read every observation through its checks, in archive order, a few at a
 * time. The first failure in archive order is the one reported, whatever
 * finished first: no new entry starts after a failure, and every entry before
 * a failed one has been started and is waited for.
 */
async function checkObservations(bytes: Buffer, observations: readonly EvidenceObservation[], byName: ReadonlyMap<string, LocatedEntry>): Promise<void> {
  const offset = (observation: EvidenceObservation) => (byName.get(observation.path) as LocatedEntry).entry.relativeOffsetOfLocalHeader;
  const inOrder = [...observations].sort((a, b) => offset(a) - offset(b));
  const failures: Array<unknown> = [];
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < inOrder.length) {
      const index = next;
      next += 1;
      const observation = inOrder[index] as EvidenceObservation;
      try {
        const data = await readEntryData(bytes, (byName.get(observation.path) as LocatedEntry).location, observation.path, false);
        if (data.sha256 !== observation.sha256) {
          throw evidenceError('DIGEST_MISMATCH', `${quoteName(observation.path)} has ${data.sha256}, ${MANIFEST_NAME} says ${observation.sha256}`);
        }
      } catch (error) {
        failed = true;
        failures[index] = error;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT_READS }, worker));
  const first = failures.find((error) => error !== undefined);
  if (first !== undefined) throw first;
}

/**
 * The archive's bytes, read once into memory of our own (never more than
 * `maxBytes`), so that what is hashed, checked and later read is one
 * unchanging copy. Bytes given by the caller are copied for the same reason.
 */
async function loadArchive(source: string | Uint8Array, maxBytes: number): Promise<Buffer> {
  const tooLarge = (size: number) => evidenceError('ARCHIVE_TOO_LARGE', `the archive is ${size} bytes, more than the ${maxBytes} allowed`);
  if (typeof source !== 'string') {
    if (source.byteLength > maxBytes) throw tooLarge(source.byteLength);
    return Buffer.from(source);
  }
  let handle;
  try {
    // Without waiting: opening a FIFO for reading would otherwise block until something writes to it.
    handle = await open(source, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw new ProofgateError('IO', `cannot read ${source}: ${ioReason(error)}`);
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new ProofgateError('IO', `cannot read ${source}: not a regular file`);
    if (stat.size > maxBytes) throw tooLarge(stat.size);
    // One byte more than allowed tells a file that grew past the cap from one that did not.
    // Not zeroed first: only the bytes read are ever used.
    const buffer = Buffer.allocUnsafeSlow(Math.min(stat.size, maxBytes) + 1);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled === buffer.length) break;
    }
    if (filled > maxBytes) throw tooLarge(filled);
    if (filled !== stat.size) throw new ProofgateError('IO', `cannot read ${source}: it changed size while being read`);
    return buffer.subarray(0, filled);
  } catch (error) {
    if (isProofgateError(error)) throw error;
    throw new ProofgateError('IO', `cannot read ${source}: ${ioReason(error)}`);
  } finally {
    await handle.close();
  }
}

function ioReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : errorMessage(error);
}

/** yauzl's own refusals, as reasons: its name checks are `UNSAFE_PATH`, its size check `SIZE_MISMATCH`, the rest `CORRUPT`. */
function fromYauzl(error: unknown, context: string): ProofgateError {
  if (isProofgateError(error)) return error;
  const message = errorMessage(error);
  if (/invalid characters in fileName|absolute path|invalid relative path/.test(message)) return evidenceError('UNSAFE_PATH', `${context}: ${message}`);
  if (/encryption/.test(message)) return evidenceError('UNSUPPORTED_METHOD', `${context}: ${message}`);
  if (/size mismatch/.test(message)) return evidenceError('SIZE_MISMATCH', `${context}: ${message}`);
  return evidenceError('CORRUPT', `${context}: ${message}`);
}

function openZip(bytes: Buffer): Promise<yauzl.ZipFile> {
  // yauzl's own checks stay on: names decoded and validated strictly (no backslash rewriting), stored sizes checked.
  return loadYauzl()
    .fromBufferPromise(bytes, { decodeStrings: true, strictFileNames: true, validateEntrySizes: true, lazyEntries: true })
    .catch((error: unknown) => {
      throw fromYauzl(error, 'the archive cannot be opened');
    });
}

/**
 * Read every central directory record through yauzl and check it before any
 * data is touched: where it lies, method and flags, name, extra fields,
 * attributes, duplicates (exact, by case, by Unicode form), and the declared
 * sizes against the manifest cap, the ratio cap and the total expansion cap.
 */
async function readCentralDirectory(zip: yauzl.ZipFile, bytes: Buffer, end: EndRecord, limits: EvidenceLimits): Promise<CheckedEntry[]> {
  if (zip.entryCount !== end.entryCount) throw evidenceError('CORRUPT', 'the archive announces two different entry counts');
  const entries: CheckedEntry[] = [];
  const keys = new NameKeys();
  let position = end.centralOffset;
  let declaredTotal = 0;
  const iterator = zip.eachEntry();
  for (;;) {
    let next: IteratorResult<yauzl.Entry>;
    try {
      next = await iterator.next();
    } catch (error) {
      throw fromYauzl(error, `central directory record ${entries.length + 1}`);
    }
    if (next.done === true) break;
    const entry = next.value;
    const name = decodeEntryName(entry.fileNameRaw, entry.generalPurposeBitFlag);
    if (entry.fileName !== name) throw evidenceError('HEADER_MISMATCH', `entry ${quoteName(name)} is read as ${quoteName(entry.fileName)}`);
    position = checkCentralRecord(bytes, position, entry, name);
    checkMethod(entry.generalPurposeBitFlag, entry.compressionMethod, name);
    checkAttributes(entry.externalFileAttributes, name);
    const conflict = keys.add(name);
    if (conflict !== null) {
      const how =
        conflict.how === 'file-folder'
          ? `and ${quoteName(conflict.earlier)}: one names as a file what the other uses as a folder`
          : conflict.earlier === name
            ? 'twice'
            : `and as ${quoteName(conflict.earlier)}, a name that differs only in case or Unicode form`;
      throw evidenceError('DUPLICATE_ENTRY', `the archive holds ${quoteName(name)} ${how}`);
    }
    checkDeclaredSize(entry, name, limits);
    declaredTotal += entry.uncompressedSize;
    if (declaredTotal > limits.maxTotalBytes) {
      throw evidenceError(
        'EXPANSION_LIMIT',
        `the entries declare more than ${limits.maxTotalBytes} bytes in all (${declaredTotal} by entry ${quoteName(name)})`,
      );
    }
    entries.push({ entry, name });
  }
  if (position !== end.offset) throw evidenceError('CORRUPT', `bytes ${position}-${end.offset} of the central directory belong to no record`);
  return entries;
}

function checkDeclaredSize(entry: yauzl.Entry, name: string, limits: EvidenceLimits): void {
  const size = entry.uncompressedSize;
  if (name === MANIFEST_NAME && size > limits.maxManifestBytes) {
    throw evidenceError('MANIFEST_INVALID', `${MANIFEST_NAME} is ${size} bytes, more than the ${limits.maxManifestBytes} allowed`);
  }
  if (size > limits.ratioFreeBytes && size > entry.compressedSize * limits.maxRatio) {
    throw evidenceError(
      'EXPANSION_LIMIT',
      `entry ${quoteName(name)} declares ${size} bytes from ${entry.compressedSize} compressed, more than ${limits.maxRatio} times as many`,
    );
  }
}

/**
 * The layout of the whole archive (every entry's span from its local header;
 * no overlaps, no stray bytes), then every local header against its central
 * record. The layout comes first, so entries sharing bytes are named as such.
 * Returns each entry with where its data lies.
 */
async function checkLayout(zip: yauzl.ZipFile, bytes: Buffer, end: EndRecord, entries: readonly CheckedEntry[]): Promise<LocatedEntry[]> {
  const locals: yauzl.LocalFileHeader[] = [];
  const spans: Span[] = [];
  for (const { entry, name } of entries) {
    let local: yauzl.LocalFileHeader;
    try {
      local = await zip.readLocalFileHeaderPromise(entry);
    } catch (error) {
      throw fromYauzl(error, `entry ${quoteName(name)}: its local header cannot be read`);
    }
    locals.push(local);
    spans.push(entrySpan(bytes, entry, local, name));
  }
  checkCoverage(spans, end, bytes.length);
  return entries.map(({ entry, name }, index) => {
    const local = locals[index] as yauzl.LocalFileHeader;
    checkLocalHeader(entry, local, name);
    const location: EntryLocation = {
      dataStart: local.fileDataStart,
      method: entry.compressionMethod,
      compressedSize: entry.compressedSize,
      uncompressedSize: entry.uncompressedSize,
      crc32: entry.crc32,
    };
    return { entry, name, location };
  });
}

function checkSubject(manifest: EvidenceManifest, expect: EvidenceExpectation): void {
  const pairs: Array<[string, string | undefined, string]> = [
    ['scenario', expect.scenario, manifest.scenario],
    ['plan digest', expect.planDigest, manifest.planDigest],
    ['head', expect.headSha, manifest.headSha],
  ];
  for (const [what, wanted, found] of pairs) {
    if (wanted !== undefined && wanted !== found) {
      throw evidenceError('SUBJECT_MISMATCH', `the bundle is for ${what} ${quoteName(found)}, not the expected ${quoteName(wanted)}`);
    }
  }
}
