import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultStoragePolicy, type StoragePolicy } from '../../src/storage/index.js';
import { DATABASE_FILE, createLocalRunStorage, openLocalStoreReader } from '../../src/storage/sqlite/index.js';
import { uniqueNamespace } from '../support/postgres.js';
import { expectCode } from './conformance.js';

const directories: string[] = [];
function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), 'proofgate-sqlite-inspect-'));
  directories.push(directory);
  return directory;
}
afterAll(() => {
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

const hashOf = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');
const otherPolicy: StoragePolicy = {
  ...defaultStoragePolicy,
  maxArtifactBytes: 4096,
  sensitiveContent: { marked: 'redact', exact: 'reject', freeText: 'allow' },
};

describe('SQLite read-only inspection (openLocalStoreReader)', () => {
  it('reads a namespace made with any policy, takes that policy as its record, and never changes the file', async () => {
    const directory = tempDir();
    const namespace = uniqueNamespace('inspect');
    const writer = createLocalRunStorage({ directory, namespace, policy: otherPolicy });
    await writer.eventStore.append('run/a', 0, [{ id: 'e1', type: 't', data: { n: 1 } }]);
    const ref = await writer.artifactStore.write({ namespace, runId: 'a' }, Buffer.from('kept'), { mediaType: 'text/plain', purpose: 'p' });
    await writer.close();
    const file = join(directory, DATABASE_FILE);
    const before = hashOf(file);

    const reader = openLocalStoreReader({ directory, namespace });
    expect(reader.record).toEqual(writer.record);
    expect(reader.record.policy).toEqual(otherPolicy);
    expect((await reader.eventStore.read('run/a')).map((event) => event.data)).toEqual([{ n: 1 }]);
    expect(await reader.eventStore.listStreams('run/')).toEqual([{ streamId: 'run/a', revision: 1 }]);
    expect(Buffer.from(await reader.artifactStore.read({ namespace, runId: 'a' }, ref)).toString()).toBe('kept');
    await expectCode(reader.eventStore.append('run/a', 1, [{ id: 'e2', type: 't', data: 2 }]), 'READ_ONLY');
    await expectCode(reader.artifactStore.write({ namespace, runId: 'a' }, Buffer.from('new'), { mediaType: 'text/plain', purpose: 'p' }), 'READ_ONLY');
    await reader.close();
    await expectCode(reader.eventStore.read('run/a'), 'CLOSED');
    expect(hashOf(file)).toBe(before);
  });

  it('a missing file, an empty file or an unknown namespace is NOT_FOUND, and nothing is created or registered', async () => {
    const missing = join(tempDir(), 'absent');
    expect(() => openLocalStoreReader({ directory: missing, namespace: 'default' })).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(() => statSync(missing)).toThrow();

    const empty = tempDir();
    writeFileSync(join(empty, DATABASE_FILE), '');
    expect(() => openLocalStoreReader({ directory: empty, namespace: 'default' })).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(statSync(join(empty, DATABASE_FILE)).size).toBe(0);

    const used = tempDir();
    await createLocalRunStorage({ directory: used, namespace: 'present', policy: defaultStoragePolicy }).close();
    const before = hashOf(join(used, DATABASE_FILE));
    expect(() => openLocalStoreReader({ directory: used, namespace: 'brandnew' })).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(hashOf(join(used, DATABASE_FILE))).toBe(before);
    const db = new Database(join(used, DATABASE_FILE), { readonly: true });
    expect(db.prepare('SELECT namespace FROM proofgate_namespaces').all()).toEqual([{ namespace: 'present' }]);
    db.close();
  });

  it('refuses a file that is not ours or not SQLite with the same typed errors as a normal open', () => {
    const garbage = tempDir();
    writeFileSync(join(garbage, DATABASE_FILE), 'not a database\n'.repeat(20));
    const foreign = tempDir();
    const db = new Database(join(foreign, DATABASE_FILE));
    db.exec('CREATE TABLE customers (id INTEGER PRIMARY KEY)');
    db.close();
    for (const [directory, code] of [
      [garbage, 'CORRUPT_DATABASE'],
      [foreign, 'NOT_OUR_DATABASE'],
    ] as const) {
      const before = hashOf(join(directory, DATABASE_FILE));
      expect(() => openLocalStoreReader({ directory, namespace: 'default' })).toThrow(expect.objectContaining({ code }));
      expect(hashOf(join(directory, DATABASE_FILE))).toBe(before);
    }
  });
});

/** Overwrite the middle third of a database file (never its header page) with 0xA5 bytes. */
function damageMiddle(file: string): void {
  const bytes = readFileSync(file);
  const start = Math.floor(bytes.length / 3);
  bytes.fill(0xa5, start, start * 2);
  writeFileSync(file, bytes);
}

describe('SQLite damage found after open', () => {
  it('a statement that reads a damaged page fails with CORRUPT_DATABASE naming the file, from the writer and the reader', async () => {
    const directory = tempDir();
    const namespace = uniqueNamespace('damage');
    const storage = createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });
    for (let batch = 0; batch < 20; batch += 1) {
      await storage.eventStore.append(
        'run/big',
        batch * 50,
        Array.from({ length: 50 }, (_, i) => ({
          id: `e-${batch}-${i}`,
          type: 't',
          data: { batch, i, text: 'x'.repeat(200) },
        })),
      );
    }
    await storage.close();
    const file = join(directory, DATABASE_FILE);
    expect(statSync(file).size).toBeGreaterThan(200_000);
    damageMiddle(file);

    const reopened = createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });
    const reader = openLocalStoreReader({ directory, namespace });
    for (const read of [() => reopened.eventStore.read('run/big'), () => reopened.eventStore.readAll(), () => reader.eventStore.read('run/big')]) {
      const error = await expectCode(read(), 'CORRUPT_DATABASE');
      expect(error.message).toContain(file);
      expect(error.message).not.toContain('\n');
    }
    await Promise.all([reopened.close(), reader.close()]);
  });
});
