import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { evidenceReason, packEvidenceBundle, verifyEvidenceBundle, type EvidenceReason, type PackEvidenceOptions } from '../../src/proof/index.js';
import { HEAD, PLAN, SCENARIO, sha256 } from './zip-forge.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** A scratch folder with `obs/` (the directory to pack) and room for bundles beside it. */
function scratch(files: Record<string, string | Buffer> = {}): { root: string; obs: string; out: (name?: string) => string } {
  const root = mkdtempSync(join(tmpdir(), 'pg-pack-'));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const obs = join(root, 'obs');
  mkdirSync(obs);
  for (const [path, data] of Object.entries(files)) {
    mkdirSync(join(obs, path, '..'), { recursive: true });
    writeFileSync(join(obs, path), data);
  }
  return { root, obs, out: (name = 'bundle.zip') => join(root, name) };
}

function options(dir: string, out: string, extra: Partial<PackEvidenceOptions> = {}): PackEvidenceOptions {
  return { dir, out, scenario: SCENARIO, planDigest: PLAN, headSha: HEAD, ...extra };
}

async function packRefusal(dir: string, out: string, extra: Partial<PackEvidenceOptions> = {}): Promise<EvidenceReason | string> {
  try {
    await packEvidenceBundle(options(dir, out, extra));
  } catch (error) {
    expect(isProofgateError(error), String(error)).toBe(true);
    expect((error as Error).message).not.toMatch(/\n/);
    expect(existsSync(out)).toBe(false);
    return evidenceReason(error) ?? (error as { code: string }).code;
  }
  return 'PACKED';
}

const FILES = {
  'chat.json': '{"reply":"hello"}',
  'gateway/requests.json': '[1,2,3]',
  'empty.txt': '',
  'résumé/日本.txt': 'unicode names',
  'big.log': 'a log line that repeats\n'.repeat(20_000),
};

describe('packEvidenceBundle', () => {
  it('packs every regular file with a manifest, and what it writes verifies against the same subject', async () => {
    const { obs, out } = scratch(FILES);
    const packed = await packEvidenceBundle(options(obs, out()));
    expect(packed.digest).toBe(sha256(readFileSync(out())));
    const verified = await verifyEvidenceBundle(out(), { scenario: SCENARIO, planDigest: PLAN, headSha: HEAD });
    expect(verified.digest).toBe(packed.digest);
    expect(verified.manifest).toEqual(packed.manifest);
    expect(verified.observations.map((o) => o.path)).toEqual(Object.keys(FILES).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
    for (const [path, data] of Object.entries(FILES)) {
      expect((await verified.readObservation(path)).toString()).toBe(data);
      expect(verified.observations.find((o) => o.path === path)).toEqual({ path, sha256: sha256(data), bytes: Buffer.byteLength(data) });
    }
  });

  it('an empty directory gives a bundle of the manifest alone', async () => {
    const { obs, out } = scratch();
    await packEvidenceBundle(options(obs, out()));
    expect((await verifyEvidenceBundle(out())).observations).toEqual([]);
  });

  it('is deterministic: the same files give the same bytes, whatever their times, the time zone or the order they were made in', async () => {
    const first = scratch(FILES);
    const second = scratch(Object.fromEntries(Object.entries(FILES).reverse()));
    utimesSync(join(second.obs, 'chat.json'), new Date('2031-05-06T07:08:09Z'), new Date('2031-05-06T07:08:09Z'));
    const zone = process.env.TZ;
    try {
      process.env.TZ = 'America/New_York';
      await packEvidenceBundle(options(first.obs, first.out()));
      process.env.TZ = 'Asia/Tokyo';
      await packEvidenceBundle(options(second.obs, second.out()));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(readFileSync(first.out()).equals(readFileSync(second.out()))).toBe(true);
  });

  it('refuses a symbolic link anywhere under the directory, and never follows it', async () => {
    const secret = scratch({ id_rsa: 'PRIVATE KEY' });
    for (const [where, target] of [
      ['leak', join(secret.obs, 'id_rsa')],
      ['nested/leak', join(secret.obs, 'id_rsa')],
      ['dir-link', secret.obs],
      ['dangling', join(secret.root, 'nothing-here')],
    ] as const) {
      const { obs, out } = scratch({ 'chat.json': '{}' });
      mkdirSync(join(obs, 'nested'), { recursive: true });
      symlinkSync(target, join(obs, where));
      expect(await packRefusal(obs, out())).toBe('SYMLINK');
    }
  });

  it('refuses special files (a FIFO, a socket) and a file with a second hard link', async () => {
    const fifo = scratch({ 'chat.json': '{}' });
    execFileSync('mkfifo', [join(fifo.obs, 'pipe')]);
    expect(await packRefusal(fifo.obs, fifo.out())).toBe('SPECIAL_FILE');

    const socket = scratch({ 'chat.json': '{}' });
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(join(socket.obs, 'sock'), resolve));
    try {
      expect(await packRefusal(socket.obs, socket.out())).toBe('SPECIAL_FILE');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }

    const linked = scratch({ 'chat.json': '{}' });
    linkSync(join(linked.obs, 'chat.json'), join(linked.root, 'outside-link'));
    expect(await packRefusal(linked.obs, linked.out())).toBe('SPECIAL_FILE');
  });

  it.each([
    ['a backslash', 'a\\b.txt'],
    ['a newline', 'a\nb.txt'],
    ['a Windows device name', 'aux.txt'],
    ['a trailing dot', 'notes.'],
    ['a colon', 'a:b'],
  ])('refuses a file name with %s', async (_label, name) => {
    const { obs, out } = scratch({ [name]: 'x' });
    expect(await packRefusal(obs, out())).toBe('UNSAFE_PATH');
  });

  it('refuses a file name that is not UTF-8', async () => {
    const { obs, out } = scratch();
    writeFileSync(Buffer.concat([Buffer.from(`${obs}/`), Buffer.from([0x61, 0xff, 0x62])]), 'x');
    expect(await packRefusal(obs, out())).toBe('UNSAFE_PATH');
  });

  it('refuses names one file system could confuse, and a file that would shadow the manifest', async () => {
    const cases = scratch({ 'Chat.json': '1', 'chat.JSON': '2' });
    expect(await packRefusal(cases.obs, cases.out())).toBe('DUPLICATE_ENTRY');
    const forms = scratch({ 'caf\u00e9.txt': '1', 'cafe\u0301.txt': '2' });
    expect(await packRefusal(forms.obs, forms.out())).toBe('DUPLICATE_ENTRY');
    for (const name of ['manifest.json', 'Manifest.JSON']) {
      const shadow = scratch({ [name]: '{}' });
      expect(await packRefusal(shadow.obs, shadow.out())).toBe('DUPLICATE_ENTRY');
    }
    // In a folder it is just a file.
    const nested = scratch({ 'sub/manifest.json': '{}' });
    expect(await packRefusal(nested.obs, nested.out())).toBe('PACKED');
  });

  it('keeps to the limits verify applies', async () => {
    const many = scratch({ a: '1', b: '2', c: '3' });
    expect(await packRefusal(many.obs, many.out(), { limits: { maxEntries: 3 } })).toBe('ENTRY_LIMIT');
    const large = scratch({ a: 'x'.repeat(600), b: 'y'.repeat(600) });
    expect(await packRefusal(large.obs, large.out(), { limits: { maxTotalBytes: 1000 } })).toBe('EXPANSION_LIMIT');
    const random = scratch({ noise: randomBytes(5000) });
    expect(await packRefusal(random.obs, random.out(), { limits: { maxArchiveBytes: 2000 } })).toBe('ARCHIVE_TOO_LARGE');
  });

  it('refuses a subject that is not one, and a bundle written inside the directory it packs', async () => {
    const { obs, out } = scratch({ a: '1' });
    expect(await packRefusal(obs, out(), { scenario: '../x' })).toBe('INVALID_INPUT');
    expect(await packRefusal(obs, out(), { planDigest: 'sha256:abc' })).toBe('INVALID_INPUT');
    expect(await packRefusal(obs, out(), { headSha: 'ABC' })).toBe('INVALID_INPUT');
    expect(await packRefusal(obs, join(obs, 'bundle.zip'))).toBe('INVALID_INPUT');
    expect(await packRefusal(obs, join(obs, 'sub', 'bundle.zip'))).toBe('INVALID_INPUT');
  });

  it('replaces an existing bundle whole', async () => {
    const { obs, out } = scratch({ a: '1' });
    writeFileSync(out(), 'old bytes');
    await packEvidenceBundle(options(obs, out()));
    expect((await verifyEvidenceBundle(out())).observations).toHaveLength(1);
  });
});
