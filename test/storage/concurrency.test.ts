import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { defaultStoragePolicy, type RunStorage, type StoredEvent } from '../../src/storage/index.js';
import { createPostgresRunStorage } from '../../src/storage/postgres/index.js';
import { DATABASE_FILE, createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { describePostgres, uniqueNamespace } from '../support/postgres.js';
import { childScript, compileStorage, type CompiledStorage } from './compiled.js';

let compiled: CompiledStorage;
const directories: string[] = [];
beforeAll(() => {
  compiled = compileStorage();
});
afterAll(() => {
  compiled.remove();
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});
function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), 'proofgate-race-'));
  directories.push(directory);
  return directory;
}

/** A child process spoken to in lines. */
class Child {
  readonly process: ChildProcessWithoutNullStreams;
  readonly #lines: string[] = [];
  readonly #waiters: ((line: string) => void)[] = [];
  #stderr = '';

  constructor(script: string, args: string[]) {
    this.process = spawn(process.execPath, [script, ...args], { stdio: 'pipe' });
    this.process.stderr.on('data', (chunk: Buffer) => {
      this.#stderr += chunk.toString();
    });
    createInterface({ input: this.process.stdout }).on('line', (line) => {
      const waiter = this.#waiters.shift();
      if (waiter) waiter(line);
      else this.#lines.push(line);
    });
  }

  next(): Promise<string> {
    const line = this.#lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`child did not answer; stderr: ${this.#stderr}`)), 20_000);
      this.#waiters.push((value) => {
        clearTimeout(timer);
        resolve(value);
      });
    });
  }

  send(line: string): void {
    this.process.stdin.write(`${line}\n`);
  }

  exited(): Promise<number | null> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return Promise.resolve(this.process.exitCode);
    return new Promise((resolve) => this.process.once('exit', (code) => resolve(code)));
  }
}

/** Checks shared by the race tests: revisions 1..n without gaps, each batch whole and from one writer. */
function expectWholeBatches(events: readonly StoredEvent[], size: number, winners: readonly string[]): void {
  expect(events.map((e) => e.revision)).toEqual(events.map((_, i) => i + 1));
  expect(events.length).toBe(winners.length * size);
  winners.forEach((winner, round) => {
    const block = events.slice(round * size, (round + 1) * size);
    expect(block.map((e) => e.id)).toEqual(Array.from({ length: size }, (_, i) => `${winner}-${round}-${i}`));
  });
  const positions = events.map((e) => e.position);
  expect([...positions].sort((a, b) => a - b)).toEqual(positions);
}

describe('SQLite under real concurrency', () => {
  it('two processes racing at the same revision: one winner per round, the other REVISION_CONFLICT', async () => {
    const directory = tempDir();
    const namespace = uniqueNamespace('race');
    const rounds = 40;
    const size = 5;
    const children = ['left', 'right'].map((role) => new Child(childScript('racer.mjs'), [compiled.sqlite, directory, namespace, role, String(size)]));
    for (const child of children) expect(JSON.parse(await child.next())).toEqual({ ready: true });
    const winners: string[] = [];
    const outcomes = new Map<string, number>();
    for (let round = 0; round < rounds; round += 1) {
      for (const child of children) child.send(`go ${round}`);
      const answers = await Promise.all(children.map(async (child) => JSON.parse(await child.next()) as { round: number; outcome: string }));
      for (const answer of answers) outcomes.set(answer.outcome, (outcomes.get(answer.outcome) ?? 0) + 1);
      expect(answers.map((a) => a.outcome).sort()).toEqual(['REVISION_CONFLICT', 'won']);
      winners.push(answers[0]!.outcome === 'won' ? 'left' : 'right');
    }
    for (const child of children) {
      child.send('exit');
      child.process.stdin.end();
    }
    await Promise.all(children.map((child) => child.exited()));
    expect(outcomes.get('won')).toBe(rounds);
    const storage = createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });
    expectWholeBatches(await storage.eventStore.read('race'), size, winners);
    await storage.close();
  });

  it('a process killed with SIGKILL in the middle of large batches leaves whole batches only', async () => {
    const directory = tempDir();
    const namespace = uniqueNamespace('crash');
    const size = 2000;
    for (let kill = 0; kill < 4; kill += 1) {
      const child = new Child(childScript('crasher.mjs'), [compiled.sqlite, 'sqlite', directory, namespace, String(size), '200']);
      expect(await child.next()).toBe('ready');
      expect(await child.next()).toMatch(/^done \d+$/);
      await sleep(5 + kill * 7);
      child.process.kill('SIGKILL');
      await child.exited();
      const storage = createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });
      const revision = await storage.eventStore.revision('crash');
      expect(revision % size).toBe(0);
      const events = await storage.eventStore.read('crash');
      expect(events.length).toBe(revision);
      expect(events.map((e) => e.id)).toEqual(events.map((_, i) => `crash-${i + 1}`));
      await storage.close();
    }
    const db = new Database(join(directory, DATABASE_FILE), { readonly: true });
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();
  });
});

describePostgres('PostgreSQL under real concurrency', (url) => {
  it('two pools racing at the same revision: one winner per round, no interleaving', async () => {
    const namespace = uniqueNamespace('pgrace');
    const rounds = 40;
    const size = 5;
    const storages: RunStorage[] = await Promise.all(
      ['left', 'right'].map(() => createPostgresRunStorage({ connectionString: url, namespace, policy: defaultStoragePolicy, maxConnections: 2 })),
    );
    const roles = ['left', 'right'];
    const winners: string[] = [];
    try {
      for (let round = 0; round < rounds; round += 1) {
        const results = await Promise.allSettled(
          storages.map((storage, i) =>
            storage.eventStore.append(
              'race',
              round * size,
              Array.from({ length: size }, (_, j) => ({ id: `${roles[i]}-${round}-${j}`, type: 'race', data: { round, j } })),
            ),
          ),
        );
        const won = results.flatMap((result, i) => (result.status === 'fulfilled' ? [roles[i]!] : []));
        const lost = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
        expect(won.length).toBe(1);
        expect(lost.every((reason) => isProofgateError(reason, 'REVISION_CONFLICT'))).toBe(true);
        winners.push(won[0]!);
      }
      expectWholeBatches(await storages[0]!.eventStore.read('race'), size, winners);
      const tail = await storages[1]!.eventStore.readAll();
      expect(tail.map((e) => e.position)).toEqual(tail.map((_, i) => i + 1));
    } finally {
      await Promise.all(storages.map((storage) => storage.close()));
    }
  });

  it('a follower tailing by position sees every event exactly once while writers race on many streams', async () => {
    const namespace = uniqueNamespace('pgtail');
    const writers = await Promise.all(
      [0, 1, 2].map(() => createPostgresRunStorage({ connectionString: url, namespace, policy: defaultStoragePolicy, maxConnections: 2 })),
    );
    const seen: number[] = [];
    let cursor = 0;
    let writing = true;
    const follower = (async () => {
      while (writing) {
        const batch = await writers[0]!.eventStore.readAll({ afterPosition: cursor });
        for (const event of batch) seen.push(event.position);
        cursor = batch.at(-1)?.position ?? cursor;
      }
    })();
    try {
      await Promise.all(
        writers.map(async (storage, w) => {
          for (let i = 0; i < 30; i += 1) {
            await storage.eventStore.append(`stream-${w}-${i % 3}`, Math.floor(i / 3) * 2, [
              { id: `w${w}-${i}-a`, type: 't', data: i },
              { id: `w${w}-${i}-b`, type: 't', data: i },
            ]);
          }
        }),
      );
    } finally {
      writing = false;
      await follower;
    }
    const rest = await writers[0]!.eventStore.readAll({ afterPosition: cursor });
    seen.push(...rest.map((e) => e.position));
    expect(seen).toEqual(Array.from({ length: 180 }, (_, i) => i + 1));
    await Promise.all(writers.map((storage) => storage.close()));
  });

  it('batches racing for one event id in different streams: one wins, the other is DUPLICATE_EVENT_ID', async () => {
    const namespace = uniqueNamespace('pgdupe');
    const storages = await Promise.all(
      [0, 1].map(() => createPostgresRunStorage({ connectionString: url, namespace, policy: defaultStoragePolicy, maxConnections: 1 })),
    );
    try {
      for (let round = 0; round < 10; round += 1) {
        const results = await Promise.allSettled(
          storages.map((storage, i) => storage.eventStore.append(`s-${i}-${round}`, 0, [{ id: `shared-${round}`, type: 't', data: i }])),
        );
        expect(results.filter((r) => r.status === 'fulfilled').length).toBe(1);
        const rejected = results.find((r) => r.status === 'rejected');
        expect(isProofgateError(rejected?.reason, 'DUPLICATE_EVENT_ID')).toBe(true);
      }
      expect((await storages[0]!.eventStore.readAll()).length).toBe(10);
    } finally {
      await Promise.all(storages.map((storage) => storage.close()));
    }
  });

  it('a client killed with SIGKILL in the middle of a large batch leaves whole batches only', async () => {
    const namespace = uniqueNamespace('pgcrash');
    const size = 2000;
    for (let kill = 0; kill < 3; kill += 1) {
      const child = new Child(childScript('crasher.mjs'), [compiled.postgres, 'postgres', url, namespace, String(size), '200']);
      expect(await child.next()).toBe('ready');
      expect(await child.next()).toMatch(/^done \d+$/);
      await sleep(5 + kill * 9);
      child.process.kill('SIGKILL');
      await child.exited();
      // The server notices the dropped connection and rolls its transaction back.
      const storage = await createPostgresRunStorage({ connectionString: url, namespace, policy: defaultStoragePolicy });
      let revision = -1;
      for (let attempt = 0; attempt < 50; attempt += 1) {
        revision = await storage.eventStore.revision('crash');
        const events = await storage.eventStore.read('crash');
        if (events.length === revision) break;
        await sleep(100);
      }
      expect(revision % size).toBe(0);
      const events = await storage.eventStore.read('crash');
      expect(events.map((e) => e.id)).toEqual(events.map((_, i) => `crash-${i + 1}`));
      await storage.close();
    }
  });
});

describe('append errors stay typed under concurrency', () => {
  it('a batch losing an id to a concurrent batch in another stream is DUPLICATE_EVENT_ID or a clean win', async () => {
    const directory = tempDir();
    const namespace = uniqueNamespace('dupe');
    const a = createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });
    const b = createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });
    const results = await Promise.allSettled([
      a.eventStore.append('one', 0, [{ id: 'shared', type: 't', data: 1 }]),
      b.eventStore.append('two', 0, [{ id: 'shared', type: 't', data: 2 }]),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled').length).toBe(1);
    const rejected = results.find((r) => r.status === 'rejected');
    expect(isProofgateError(rejected?.reason, 'DUPLICATE_EVENT_ID')).toBe(true);
    await Promise.all([a.close(), b.close()]);
  });
});
