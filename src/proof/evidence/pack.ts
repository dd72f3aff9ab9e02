import { constants, type Stats } from 'node:fs';
import { lstat, open, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import type yazl from 'yazl';
import { loadZlib } from '../../host/index.js';
import { ProofgateError, canonicalJson, errorMessage, isProofgateError, isSha256Digest, randomHex, sha256Digest, type Sha256Digest } from '../../core/index.js';
import { resolveEvidenceLimits, type EvidenceLimits } from './limits.js';
import { EVIDENCE_MANIFEST_SCHEMA, SCENARIO_ID_PATTERN, type EvidenceManifest, type EvidenceObservation } from './manifest.js';
import { MANIFEST_NAME, MAX_NAME_BYTES, NameKeys, entryNameProblem } from './names.js';
import { evidenceError, quoteName } from './reasons.js';
import { loadYazl } from './zip-modules.js';

/** What `packEvidenceBundle` packs, and where it writes the bundle. */
export interface PackEvidenceOptions {
  /** The directory of observation files; every regular file under it becomes one observation. */
  readonly dir: string;
  readonly scenario: string;
  readonly planDigest: string;
  readonly headSha: string;
  /** The bundle to write (replaced if it exists); it may not lie inside `dir`. */
  readonly out: string;
  /** The same limits `verifyEvidenceBundle` applies: pack never writes a bundle verify would refuse for its size. */
  readonly limits?: Partial<EvidenceLimits>;
}

export interface PackedBundle {
  readonly out: string;
  /** sha256 of the bundle's bytes. */
  readonly digest: Sha256Digest;
  readonly archiveBytes: number;
  readonly manifest: EvidenceManifest;
}

/**
 * Every entry gets the same time and mode, so that the same files give the
 * same bytes. The time is written only in the DOS format, which stores local
 * date and time fields, and it is built from local fields when a bundle is
 * packed, so the bytes do not depend on the time zone either (2000-01-01
 * 00:00, far from the format's limits, which yazl clamps to).
 */
const FILE_MODE = 0o100644;

function entryOptions(compress: boolean): Partial<yazl.Options> {
  return { mtime: new Date(2000, 0, 1, 0, 0, 0), mode: FILE_MODE, compress, forceDosTimestamp: true };
}

/** Bytes of a file's start that decide whether it is deflated. */
const SAMPLE_BYTES = 64 * 1024;

/**
 * Deflate a file unless its start shows it does not compress (a screenshot, a
 * video, an archive): such files are stored, as zip tools do, which keeps the
 * bundle small and makes it cheaper to verify. The choice depends on the
 * bytes alone, so packing stays deterministic.
 */
function worthDeflating(data: Buffer): boolean {
  const sample = data.subarray(0, SAMPLE_BYTES);
  return sample.length < 64 || loadZlib().deflateRawSync(sample).length < sample.length * 0.9;
}

const GIT_SHA = /^[0-9a-f]{40}$/;
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** One regular file found under the directory. */
interface Found {
  readonly name: string;
  readonly path: Buffer;
  readonly stats: Stats;
}

/**
 * Pack the files under `dir` into an evidence bundle: `manifest.json`
 * (canonical JSON: scenario, plan digest, head, and each file's path, sha256
 * and size) and the files, in sorted order, with a fixed time and mode, so
 * the same inputs always give the same bytes. Symbolic links and special
 * files anywhere under `dir` are refused (`SYMLINK`, `SPECIAL_FILE`), never
 * followed; so are names a bundle may not hold (`UNSAFE_PATH`), two names one
 * file system could confuse, a file and a folder by one name (`DUPLICATE_ENTRY`), and more files or bytes than
 * the limits allow. `dir` must not change while it is packed.
 */
export async function packEvidenceBundle(options: PackEvidenceOptions): Promise<PackedBundle> {
  const limits = resolveEvidenceLimits(options.limits);
  checkSubject(options);
  const dir = resolve(options.dir);
  const out = resolve(options.out);
  const inside = relative(dir, out);
  if (inside === '' || (!inside.startsWith('..') && !isAbsolute(inside))) {
    throw new ProofgateError('INVALID_INPUT', `the bundle ${out} may not be written inside the directory it packs`);
  }
  let root: Stats;
  try {
    root = await stat(dir);
  } catch (error) {
    throw new ProofgateError('IO', `cannot read ${dir}: ${errorMessage(error)}`);
  }
  if (!root.isDirectory()) throw new ProofgateError('INVALID_INPUT', `${dir} is not a directory`);

  const found = await listFiles(dir, limits);
  const observations: EvidenceObservation[] = [];
  const contents: Buffer[] = [];
  let total = 0;
  for (const file of found) {
    const data = await readListedFile(file, limits.maxTotalBytes - total);
    total += data.length;
    observations.push({ path: file.name, sha256: sha256Digest(data), bytes: data.length });
    contents.push(data);
  }
  const manifest: EvidenceManifest = {
    schema: EVIDENCE_MANIFEST_SCHEMA,
    scenario: options.scenario,
    planDigest: options.planDigest as Sha256Digest,
    headSha: options.headSha,
    observations,
  };
  const manifestBytes = Buffer.from(canonicalJson(manifest));
  if (manifestBytes.length > limits.maxManifestBytes) {
    throw evidenceError('MANIFEST_INVALID', `${MANIFEST_NAME} would be ${manifestBytes.length} bytes, more than the ${limits.maxManifestBytes} allowed`);
  }

  const zip = new (loadYazl().ZipFile)();
  zip.addBuffer(manifestBytes, MANIFEST_NAME, entryOptions(true));
  found.forEach((file, index) => {
    const data = contents[index] as Buffer;
    zip.addBuffer(data, file.name, entryOptions(worthDeflating(data)));
  });
  zip.end();
  const archive = await collect(zip.outputStream, limits.maxArchiveBytes);
  await writeAtomically(out, archive);
  return { out, digest: sha256Digest(archive), archiveBytes: archive.length, manifest };
}

function checkSubject(options: PackEvidenceOptions): void {
  if (!SCENARIO_ID_PATTERN.test(options.scenario)) {
    throw new ProofgateError('INVALID_INPUT', `scenario ${quoteName(options.scenario)} is not a scenario id (a letter or digit, then letters, digits, . _ -)`);
  }
  if (!isSha256Digest(options.planDigest)) throw new ProofgateError('INVALID_INPUT', 'the plan digest must be sha256:<64 lowercase hex>');
  if (!GIT_SHA.test(options.headSha)) throw new ProofgateError('INVALID_INPUT', 'the head must be a full 40-character lowercase sha');
}

/**
 * The regular files under `dir`, sorted by the bytes of their names, each
 * checked as it is found (lstat: a link is refused, not followed).
 */
async function listFiles(dir: string, limits: EvidenceLimits): Promise<Found[]> {
  const files: Found[] = [];
  const keys = new NameKeys();
  keys.add(MANIFEST_NAME);
  let directories = 0;
  const pending: Array<{ readonly path: Buffer; readonly prefix: string }> = [{ path: Buffer.from(dir), prefix: '' }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const names = await readdir(next.path, { encoding: 'buffer' }).catch((error: unknown) => {
      throw new ProofgateError('IO', `cannot list ${quoteName(next.prefix || '.')}: ${errorMessage(error)}`);
    });
    for (const raw of names) {
      let segment: string;
      try {
        segment = STRICT_UTF8.decode(raw);
      } catch {
        throw evidenceError('UNSAFE_PATH', `${quoteName(`${next.prefix}${raw.toString('latin1')}`)} is not a valid UTF-8 name`);
      }
      const name = `${next.prefix}${segment}`;
      if (Buffer.byteLength(name) > MAX_NAME_BYTES) throw evidenceError('UNSAFE_PATH', `${quoteName(name)} is longer than ${MAX_NAME_BYTES} bytes`);
      const path = Buffer.concat([next.path, Buffer.from('/'), raw]);
      const stats = await lstat(path);
      if (stats.isSymbolicLink()) throw evidenceError('SYMLINK', `${quoteName(name)} is a symbolic link; a bundle holds regular files only`);
      if (stats.isDirectory()) {
        directories += 1;
        if (directories > limits.maxEntries) throw evidenceError('ENTRY_LIMIT', `the directory holds more than ${limits.maxEntries} directories`);
        pending.push({ path, prefix: `${name}/` });
        continue;
      }
      if (!stats.isFile()) throw evidenceError('SPECIAL_FILE', `${quoteName(name)} is not a regular file; a bundle holds regular files only`);
      const problem = entryNameProblem(name);
      if (problem !== null) throw evidenceError('UNSAFE_PATH', `${quoteName(name)} ${problem}`);
      const conflict = keys.add(name);
      if (conflict !== null) {
        const how = conflict.how === 'same' ? 'differ only in case or Unicode form' : 'name one path as a file and as a folder';
        throw evidenceError('DUPLICATE_ENTRY', `${quoteName(name)} and ${quoteName(conflict.earlier)} ${how}`);
      }
      files.push({ name, path, stats });
      if (files.length > limits.maxEntries - 1) throw evidenceError('ENTRY_LIMIT', `the directory holds more than ${limits.maxEntries - 1} files`);
    }
  }
  return files.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
}

/**
 * Read one listed file without following a link in its last component and
 * without waiting on a FIFO, and only if it is still the regular file that was
 * listed (same device and inode) with no other hard link to it.
 */
async function readListedFile(file: Found, budget: number): Promise<Buffer> {
  let handle;
  try {
    handle = await open(file.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw evidenceError('SYMLINK', `${quoteName(file.name)} became a symbolic link while being packed`);
    throw new ProofgateError('IO', `cannot read ${quoteName(file.name)}: ${errorMessage(error)}`);
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile() || stats.dev !== file.stats.dev || stats.ino !== file.stats.ino) {
      throw evidenceError('SPECIAL_FILE', `${quoteName(file.name)} changed while being packed`);
    }
    if (stats.nlink !== 1) throw evidenceError('SPECIAL_FILE', `${quoteName(file.name)} has ${stats.nlink} hard links; a bundle takes files with one`);
    if (stats.size > budget) throw evidenceError('EXPANSION_LIMIT', `the files come to more than the ${budget} bytes left of the total allowed`);
    const data = Buffer.alloc(stats.size);
    let filled = 0;
    while (filled < data.length) {
      const { bytesRead } = await handle.read(data, filled, data.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    if (filled !== stats.size) throw new ProofgateError('IO', `${quoteName(file.name)} changed size while being packed`);
    return data;
  } catch (error) {
    if (isProofgateError(error)) throw error;
    throw new ProofgateError('IO', `cannot read ${quoteName(file.name)}: ${errorMessage(error)}`);
  } finally {
    await handle.close();
  }
}

/** yazl's output, refused once it passes `maxBytes`. */
async function collect(stream: NodeJS.ReadableStream, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw evidenceError('ARCHIVE_TOO_LARGE', `the bundle would be more than the ${maxBytes} bytes allowed`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, size);
}

/** Write the bundle beside its destination, then rename it there: a reader sees the old file or the whole new one. */
async function writeAtomically(out: string, bytes: Buffer): Promise<void> {
  const temporary = resolve(dirname(out), `.${randomHex(8)}.evidence.tmp`);
  try {
    await writeFile(temporary, bytes, { flag: 'wx' });
    await rename(temporary, out);
  } catch (error) {
    await rm(temporary, { force: true });
    throw new ProofgateError('IO', `cannot write ${out}: ${errorMessage(error)}`);
  }
}
