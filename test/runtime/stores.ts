import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe } from 'vitest';
import { defaultStoragePolicy, type RunStorage, type StoragePolicy } from '../../src/storage/index.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { createPostgresRunStorage } from '../../src/storage/postgres/index.js';
import { postgresTestUrl, uniqueNamespace } from '../support/postgres.js';

/** One isolated store (fresh namespace); `open` gives another connection to it. */
export interface TestStore {
  readonly kind: 'sqlite' | 'postgres';
  open(): Promise<RunStorage>;
}

export type NewStore = (options?: { policy?: StoragePolicy; knownSecrets?: readonly string[] }) => TestStore;

export const testPolicy: StoragePolicy = { ...defaultStoragePolicy, maxEventPayloadBytes: 4_000_000, maxAppendBatchBytes: 8_000_000 };

/**
 * Run `fn` once per storage adapter: SQLite always, PostgreSQL when
 * PROOFGATE_TEST_DATABASE_URL is set (skipped with a reason otherwise, and an
 * error under CI=true).
 */
export function describeEachStore(name: string, fn: (newStore: NewStore) => void): void {
  const url = postgresTestUrl();
  const kinds: ('sqlite' | 'postgres')[] = ['sqlite', 'postgres'];
  for (const kind of kinds) {
    if (kind === 'postgres' && url === undefined) {
      if (process.env.CI === 'true') throw new Error(`${name}: PROOFGATE_TEST_DATABASE_URL must be set when CI=true`);
      describe.skip(`${name} [postgres] (skipped: PROOFGATE_TEST_DATABASE_URL is not set)`, () =>
        fn(() => {
          throw new Error('unreachable');
        }));
      continue;
    }
    describe(`${name} [${kind}]`, () => {
      const opened: RunStorage[] = [];
      const dirs: string[] = [];
      afterEach(async () => {
        for (const storage of opened.splice(0)) await storage.close();
        for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
      });
      fn((options = {}) => {
        const namespace = uniqueNamespace('runtime');
        const policy = options.policy ?? testPolicy;
        const secrets = options.knownSecrets ? { knownSecrets: options.knownSecrets } : {};
        const directory = kind === 'sqlite' ? mkdtempSync(join(tmpdir(), 'proofgate-runtime-')) : '';
        if (directory) dirs.push(directory);
        return {
          kind,
          async open() {
            const storage =
              kind === 'sqlite'
                ? createLocalRunStorage({ directory, namespace, policy, ...secrets })
                : await createPostgresRunStorage({ connectionString: url ?? '', namespace, policy, maxConnections: 4, ...secrets });
            opened.push(storage);
            return storage;
          },
        };
      });
    });
  }
}
