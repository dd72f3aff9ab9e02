import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultStoragePolicy } from '../../src/storage/index.js';
import { DATABASE_FILE, createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { uniqueNamespace } from '../support/postgres.js';
import { expectCode, storageConformance, type StorageHarness } from './conformance.js';

const directories: string[] = [];
function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), 'proofgate-sqlite-'));
  directories.push(directory);
  return directory;
}
afterAll(() => {
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

function sqliteHarness(directory: string): StorageHarness {
  return {
    async open({ namespace, policy, knownSecrets }) {
      return createLocalRunStorage({ directory, namespace, policy: policy ?? defaultStoragePolicy, ...(knownSecrets ? { knownSecrets } : {}) });
    },
    async dump() {
      return Buffer.concat(readdirSync(directory).map((name) => readFileSync(join(directory, name))));
    },
    async corruptArtifact(namespace, runId, digest) {
      const db = new Database(join(directory, DATABASE_FILE));
      try {
        db.prepare('UPDATE proofgate_artifacts SET bytes = ? WHERE namespace = ? AND run_id = ? AND digest = ?').run(
          Buffer.alloc(800, 0x41),
          namespace,
          runId,
          digest,
        );
      } finally {
        db.close();
      }
    },
  };
}

describe('SQLite storage conformance', () => {
  const directory = tempDir();
  storageConformance(() => sqliteHarness(directory));
});

describe('SQLite storage file handling', () => {
  const open = (directory: string, namespace = uniqueNamespace('file')) => createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });

  it('opens synchronously, creating the directory and one WAL database file', async () => {
    const directory = join(tempDir(), 'nested', 'storage');
    const storage = open(directory);
    expect(storage).not.toBeInstanceOf(Promise);
    expect(storage.record.provider).toBe('sqlite');
    await storage.eventStore.append('s', 0, [{ id: 'a', type: 't', data: 1 }]);
    const db = new Database(join(directory, DATABASE_FILE), { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
    await storage.close();
  });

  it('keeps several namespaces apart in one file, and allows two open bindings of one namespace', async () => {
    const directory = tempDir();
    const a = open(directory, 'ns-a');
    const b = open(directory, 'ns-b');
    const a2 = open(directory, 'ns-a');
    await a.eventStore.append('s', 0, [{ id: 'same-id', type: 't', data: 'a' }]);
    await b.eventStore.append('s', 0, [{ id: 'same-id', type: 't', data: 'b' }]);
    expect((await a2.eventStore.read('s')).map((e) => e.data)).toEqual(['a']);
    expect((await b.eventStore.readAll()).map((e) => e.data)).toEqual(['b']);
    await expectCode(a2.eventStore.append('s', 0, [{ id: 'x', type: 't', data: 0 }]), 'REVISION_CONFLICT');
    await Promise.all([a.close(), b.close(), a2.close()]);
  });

  it('refuses a file that is not SQLite, a foreign database and a newer schema, and leaves each untouched', () => {
    const garbage = tempDir();
    writeFileSync(join(garbage, DATABASE_FILE), Buffer.from('this is not a database at all, just text\n'.repeat(20)));
    const truncated = tempDir();
    {
      const storage = open(truncated);
      storage.close();
      const bytes = readFileSync(join(truncated, DATABASE_FILE));
      writeFileSync(join(truncated, DATABASE_FILE), Buffer.concat([bytes.subarray(0, 100), Buffer.alloc(bytes.length - 100, 0xff)]));
    }
    const foreign = tempDir();
    {
      const db = new Database(join(foreign, DATABASE_FILE));
      db.exec('CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)');
      db.prepare('INSERT INTO customers (name) VALUES (?)').run('Ada');
      db.close();
    }
    const newer = tempDir();
    {
      const storage = open(newer);
      storage.close();
      const db = new Database(join(newer, DATABASE_FILE));
      db.pragma('user_version = 99');
      db.close();
    }
    const cases: [string, 'CORRUPT_DATABASE' | 'NOT_OUR_DATABASE' | 'UNSUPPORTED_SCHEMA_VERSION'][] = [
      [garbage, 'CORRUPT_DATABASE'],
      [truncated, 'CORRUPT_DATABASE'],
      [foreign, 'NOT_OUR_DATABASE'],
      [newer, 'UNSUPPORTED_SCHEMA_VERSION'],
    ];
    for (const [directory, code] of cases) {
      const before = readFileSync(join(directory, DATABASE_FILE));
      expect(() => open(directory)).toThrow(expect.objectContaining({ code }));
      expect(readFileSync(join(directory, DATABASE_FILE)).equals(before)).toBe(true);
    }
  });

  it('a directory path that is a file, or lies under a file, is one typed IO error naming the path', () => {
    const file = join(tempDir(), 'regular');
    writeFileSync(file, 'not a directory\n');
    for (const [directory, why] of [
      [file, 'it is a file'],
      [join(file, 'sub'), 'a parent of it is a file'],
    ] as const) {
      expect(() => open(directory)).toThrow(
        expect.objectContaining({ code: 'IO', message: `cannot use ${directory} as a data directory: ${why}, not a directory` }),
      );
    }
    expect(readFileSync(file, 'utf8')).toBe('not a directory\n');
  });

  it('records the schema version and the namespace policy inside the file', async () => {
    const directory = tempDir();
    const storage = open(directory, 'meta-ns');
    await storage.close();
    const db = new Database(join(directory, DATABASE_FILE), { readonly: true });
    expect(db.prepare('SELECT value FROM proofgate_meta WHERE key = ?').get('schema_version')).toEqual({ value: '1' });
    expect(db.prepare('SELECT provider, policy_digest FROM proofgate_namespaces WHERE namespace = ?').get('meta-ns')).toEqual({
      provider: 'sqlite',
      policy_digest: storage.record.policyDigest,
    });
    db.close();
  });

  it('reports a stored row that is not JSON as INVALID_STORED_VALUE', async () => {
    const directory = tempDir();
    const storage = open(directory, 'broken-row');
    await storage.eventStore.append('s', 0, [{ id: 'a', type: 't', data: { ok: true } }]);
    const db = new Database(join(directory, DATABASE_FILE));
    db.prepare('UPDATE proofgate_events SET data = ? WHERE event_id = ?').run('{not json', 'a');
    db.close();
    await expectCode(storage.eventStore.read('s'), 'INVALID_STORED_VALUE');
    await storage.close();
  });
});
