import { createHash, type Hash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { errorMessage, isProofgateError, type Sha256Digest } from '../../core/index.js';
import { loadZlib } from '../../host/index.js';
import { crc32 } from './crc32.js';
import { evidenceError, quoteName } from './reasons.js';
import { METHOD_DEFLATE } from './structure.js';

/**
 * The most of one entry's expanded bytes held at once: an entry that declares
 * at most this is inflated in one step (bounded to one byte past what it
 * declares); a larger one is streamed in pieces of this size.
 */
export const PIECE_BYTES = 1024 * 1024;

/** Where an entry's data lies in the archive and what its central record declares about it. */
export interface EntryLocation {
  readonly dataStart: number;
  readonly method: number;
  readonly compressedSize: number;
  readonly uncompressedSize: number;
  readonly crc32: number;
}

/** What an entry's data turned out to be, once read to its end. */
export interface EntryData {
  readonly sha256: Sha256Digest;
  readonly bytes: number;
  /** The data itself, when asked for with `keep`. */
  readonly kept: Buffer | null;
}

/** Running checks over the expanded bytes of one entry. */
class Tally {
  readonly hash: Hash = createHash('sha256');
  readonly pieces: Buffer[] = [];
  bytes = 0;
  crc = 0;

  constructor(
    private readonly name: string,
    private readonly declared: number,
    private readonly keep: boolean,
  ) {}

  /** Count one piece; past the declared size it stops everything (`SIZE_MISMATCH`). */
  add(piece: Buffer): void {
    this.bytes += piece.length;
    if (this.bytes > this.declared) throw this.tooLong();
    this.crc = crc32(piece, this.crc);
    this.hash.update(piece);
    if (this.keep) this.pieces.push(piece);
  }

  tooLong() {
    return evidenceError('SIZE_MISMATCH', `entry ${quoteName(this.name)} expands past the ${this.declared} bytes its headers declare`);
  }
}

/**
 * Read one entry's data from the archive's bytes (`location` comes from yauzl's
 * reading of the local header) and check it: never more than the declared
 * size is expanded, so a bomb that lies about its size stops one piece past
 * it (`SIZE_MISMATCH`); at the end the declared size is reached
 * (`SIZE_MISMATCH`), the deflate stream used exactly the compressed bytes
 * (`CORRUPT` if it is cut short or data follows it inside the entry), and the
 * CRC-32 is the declared one (`CRC_MISMATCH`). With `keep` the bytes are
 * returned too (the caller bounds the declared size first).
 */
export async function readEntryData(archive: Buffer, location: EntryLocation, name: string, keep: boolean): Promise<EntryData> {
  // Each entry starts on a fresh turn of the event loop: a bundle of many entries never holds it for long.
  await yieldToLoop();
  const raw = archive.subarray(location.dataStart, location.dataStart + location.compressedSize);
  const tally = new Tally(name, location.uncompressedSize, keep);
  let consumed: number;
  try {
    if (location.method !== METHOD_DEFLATE) {
      // Stored: the bytes are the data. Large ones are taken a piece at a time, letting other work run between.
      for (let at = 0; at < raw.length; at += PIECE_BYTES) {
        if (at > 0) await yieldToLoop();
        tally.add(raw.subarray(at, at + PIECE_BYTES));
      }
      consumed = raw.length;
    } else if (location.uncompressedSize <= PIECE_BYTES) {
      consumed = inflateSmall(raw, tally, location.uncompressedSize);
    } else {
      consumed = await inflateStreaming(raw, tally);
    }
  } catch (error) {
    if (isProofgateError(error)) throw error;
    throw evidenceError('CORRUPT', `entry ${quoteName(name)}: its data cannot be inflated: ${errorMessage(error)}`);
  }
  if (tally.bytes !== location.uncompressedSize) {
    throw evidenceError('SIZE_MISMATCH', `entry ${quoteName(name)} is ${tally.bytes} bytes, its headers declare ${location.uncompressedSize}`);
  }
  if (consumed !== location.compressedSize) {
    throw evidenceError('CORRUPT', `entry ${quoteName(name)}: its deflate stream ends after ${consumed} of its ${location.compressedSize} compressed bytes`);
  }
  if (tally.crc !== location.crc32) {
    throw evidenceError('CRC_MISMATCH', `entry ${quoteName(name)} has CRC-32 ${hex(tally.crc)}, its headers declare ${hex(location.crc32)}`);
  }
  return { sha256: `sha256:${tally.hash.digest('hex')}`, bytes: tally.bytes, kept: keep ? Buffer.concat(tally.pieces, tally.bytes) : null };
}

/** Inflate a small entry in one step, refusing to produce a byte more than one past its declared size. Returns the input used. */
function inflateSmall(raw: Buffer, tally: Tally, declared: number): number {
  let result: { buffer: Buffer; engine: { bytesWritten: number } };
  try {
    // One output buffer of the declared size plus one byte: nothing to join afterwards, and a byte more is a lie.
    const limit = declared + 1;
    result = loadZlib().inflateRawSync(raw, { info: true, maxOutputLength: limit, chunkSize: Math.max(limit, 64) }) as unknown as typeof result;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tally.tooLong();
    throw error;
  }
  tally.add(result.buffer);
  return result.engine.bytesWritten;
}

/** Inflate a large entry as a stream of pieces; the tally stops it at the first piece past the declared size. Returns the input used. */
async function inflateStreaming(raw: Buffer, tally: Tally): Promise<number> {
  const inflate = loadZlib().createInflateRaw({ chunkSize: PIECE_BYTES });
  const sink = new Writable({
    highWaterMark: PIECE_BYTES,
    write(piece: Buffer, _encoding, callback) {
      try {
        tally.add(piece);
        callback();
      } catch (error) {
        callback(error as Error);
      }
    },
  });
  await pipeline(Readable.from([raw], { objectMode: false }), inflate, sink);
  return inflate.bytesWritten;
}

function hex(value: number): string {
  return `0x${value.toString(16).padStart(8, '0')}`;
}
