import { ProofgateError } from '../../core/index.js';

const MiB = 1024 * 1024;

/** What a bundle may cost. Every limit is checked before the bytes it guards are read or inflated. */
export interface EvidenceLimits {
  /** Largest archive, in bytes (`ARCHIVE_TOO_LARGE`). */
  readonly maxArchiveBytes: number;
  /** Most entries, manifest.json included (`ENTRY_LIMIT`). */
  readonly maxEntries: number;
  /** Most bytes all entries together may expand to (`EXPANSION_LIMIT`). */
  readonly maxTotalBytes: number;
  /**
   * Most an entry may expand per compressed byte (`EXPANSION_LIMIT`); an entry
   * of at most `ratioFreeBytes` is not held to it.
   */
  readonly maxRatio: number;
  /** Size up to which an entry may expand at any ratio. */
  readonly ratioFreeBytes: number;
  /** Largest manifest.json, in bytes (`MANIFEST_INVALID`). */
  readonly maxManifestBytes: number;
}

export const DEFAULT_EVIDENCE_LIMITS: EvidenceLimits = Object.freeze({
  maxArchiveBytes: 64 * MiB,
  maxEntries: 1000,
  maxTotalBytes: 256 * MiB,
  maxRatio: 100,
  ratioFreeBytes: 1 * MiB,
  maxManifestBytes: 1 * MiB,
});

/** The defaults with `overrides` applied; each limit must be a positive whole number (`maxRatio` any positive number, `Infinity` for none). */
export function resolveEvidenceLimits(overrides: Partial<EvidenceLimits> = {}): EvidenceLimits {
  const limits: EvidenceLimits = { ...DEFAULT_EVIDENCE_LIMITS, ...overrides };
  for (const [key, value] of Object.entries(limits) as Array<[keyof EvidenceLimits, number]>) {
    const whole = key !== 'maxRatio';
    if (typeof value !== 'number' || !(value > 0) || (whole && !Number.isSafeInteger(value))) {
      throw new ProofgateError('INVALID_INPUT', `evidence limit ${key} must be a positive ${whole ? 'whole ' : ''}number, not ${String(value)}`);
    }
  }
  return Object.freeze(limits);
}
