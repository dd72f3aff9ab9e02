import { inspect } from 'node:util';
import { ProofgateError } from '../core/index.js';

/** Shortest known secret accepted at open: shorter values would match ordinary text. */
export const MIN_KNOWN_SECRET_LENGTH = 4;

/**
 * The secret values a storage was opened with. They live only in private
 * fields of this object (as strings for text search and as UTF-8 bytes for
 * artifact search); they are never stored, logged, serialized or put into an
 * error message. `inspect` and `JSON.stringify` show only how many there are.
 */
export class KnownSecrets {
  readonly #texts: readonly string[];
  readonly #bytes: readonly Buffer[];

  private constructor(texts: readonly string[]) {
    this.#texts = texts;
    this.#bytes = texts.map((text) => Buffer.from(text, 'utf8'));
  }

  static from(values: readonly string[] | undefined): KnownSecrets {
    if (values === undefined) return new KnownSecrets([]);
    if (!Array.isArray(values)) throw new ProofgateError('INVALID_INPUT', 'knownSecrets must be an array of strings');
    const unique = new Set<string>();
    values.forEach((value: unknown, index) => {
      if (typeof value !== 'string') {
        throw new ProofgateError('INVALID_INPUT', `knownSecrets[${index}] must be a string`);
      }
      if (value.length < MIN_KNOWN_SECRET_LENGTH) {
        throw new ProofgateError('INVALID_INPUT', `knownSecrets[${index}] is shorter than ${MIN_KNOWN_SECRET_LENGTH} characters`);
      }
      unique.add(value);
    });
    return new KnownSecrets([...unique]);
  }

  get count(): number {
    return this.#texts.length;
  }

  /** True when the text contains any known secret. */
  inText(text: string): boolean {
    for (const secret of this.#texts) if (text.includes(secret)) return true;
    return false;
  }

  /** True when the bytes contain the UTF-8 encoding of any known secret. */
  inBytes(bytes: Uint8Array): boolean {
    if (this.#bytes.length === 0) return false;
    const haystack = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (const secret of this.#bytes) if (haystack.indexOf(secret) !== -1) return true;
    return false;
  }

  /** Throw `KNOWN_SECRET` naming only `where` when the text holds a known secret. */
  assertNotIn(text: string, where: string): void {
    if (this.inText(text)) throw knownSecretError(where);
  }

  toJSON(): string {
    return `[${this.#texts.length} known secrets]`;
  }

  [inspect.custom](): string {
    return `KnownSecrets(${this.#texts.length})`;
  }
}

export function knownSecretError(where: string): ProofgateError {
  return new ProofgateError('KNOWN_SECRET', `${where} contains a configured known secret; nothing was stored`, { where });
}
