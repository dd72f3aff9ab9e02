/**
 * What the attacks on evidence bundles add to the byte-level writer in
 * test/proof/zip-forge.ts: their own scenario, plan and files, a one-call
 * bundle with an edit hook, and a model of a streaming reader.
 */
import { FLAG_DESCRIPTOR, bundleEntries, forgeZip, manifestOf, type BundleFile, type ForgeEntry, type ForgeOptions } from '../proof/zip-forge.js';

export const PLAN = `sha256:${'cd'.repeat(32)}`;
export const SCENARIO = 'hostile-producer';

/** The manifest value a bundle of `files` for this scenario and plan has, with `overrides` applied on top. */
export function manifestFor(files: readonly BundleFile[], overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return manifestOf(files, { scenario: SCENARIO, planDigest: PLAN, ...overrides });
}

/** manifest.json (deflated, from `manifest` or the text given) and one entry per file. */
export function entriesFor(files: readonly BundleFile[], manifest: unknown = manifestFor(files)): ForgeEntry[] {
  return bundleEntries(files, manifest);
}

export const FILES: readonly BundleFile[] = [
  { path: 'chat.json', data: '{"reply":"hello","rendered":true}' },
  { path: 'gateway/requests.json', data: '[{"path":"/v1/chat","status":200}]' },
  { path: 'log.txt', data: 'request served in 12 ms\n'.repeat(40) },
];

/** A valid bundle of `files`, edited by `edit` before it is written. */
export function bundle(
  edit: (entries: ForgeEntry[]) => void = () => {},
  files: readonly BundleFile[] = FILES,
  manifest?: unknown,
  options?: ForgeOptions,
): Buffer {
  const entries = entriesFor(files, manifest ?? manifestFor(files));
  edit(entries);
  return forgeZip(entries, options);
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
