/**
 * What the board records of a change comes from two sides at once: every
 * snapshot a job takes (`recordingForge`) and every delivery that says
 * something new (`recordDeliveredFacts`). A snapshot that was in flight while
 * a delivery recorded a new head must not then record the old head over it:
 * the board would show the change going back to a head it had left, with a
 * push that never happened in its timeline.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChangeSnapshot, Forge } from '../../src/forge/port.js';
import { CHANGES_NAMESPACE, factsStream, recordChangeFacts, recordingForge, type ChangeFactsRecord } from '../../src/service/github/changes.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import type { EventStore } from '../../src/storage/ports.js';

const REPOSITORY = 'Octo-Org/Widgets';
const OLD_HEAD = 'a'.repeat(40);
const NEW_HEAD = 'b'.repeat(40);

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function factsStore(): EventStore {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-facts-order-'));
  const storage = createLocalRunStorage({ directory: dir, namespace: CHANGES_NAMESPACE, policy: defaultStoragePolicy });
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => storage.close());
  return storage.eventStore;
}

function facts(headSha: string): ChangeFactsRecord {
  return {
    repository: REPOSITORY,
    number: 7,
    title: 'a change',
    author: 'dana',
    base: 'main',
    head: 'feature',
    headSha,
    state: 'open',
    mergeCommit: null,
    checks: [],
    verdicts: [],
  };
}

/** The head of every record of change 7, oldest first. */
async function recordedHeads(events: EventStore): Promise<string[]> {
  return (await events.read(factsStream(REPOSITORY, 7))).map((event) => (event.data as { headSha: string }).headSha);
}

/**
 * A forge whose snapshot of a change says `headSha` and waits for `release()`;
 * `started` resolves once the snapshot was asked for (after the facts stream's
 * revision was read).
 */
function gatedForge(headSha: string): { forge: Forge; started: Promise<void>; release: () => void } {
  let release!: () => void;
  let start!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const started = new Promise<void>((resolve) => (start = resolve));
  const forge = {
    async snapshot(changeId: string): Promise<ChangeSnapshot> {
      start();
      await gate;
      return { id: changeId, head: { ref: 'feature', sha: headSha } } as unknown as ChangeSnapshot;
    },
  } as unknown as Forge;
  return { forge, started, release };
}

const toFacts = (snapshot: ChangeSnapshot): ChangeFactsRecord => facts(snapshot.head.sha);

describe('the change facts the board shows', () => {
  it('a snapshot in flight while a delivery records a new head does not record the old head over it', async () => {
    const events = factsStore();
    await recordChangeFacts(events, facts(OLD_HEAD));
    const errors: unknown[] = [];
    const { forge, started, release } = gatedForge(OLD_HEAD);
    const recording = recordingForge(forge, events, REPOSITORY, toFacts, (_snapshot, error) => errors.push(error));
    const snapshot = recording.snapshot('7');
    await started;
    // The push's delivery is recorded while the job's snapshot (taken before the push) is in flight.
    expect(await recordChangeFacts(events, facts(NEW_HEAD))).toBe(true);
    release();
    expect((await snapshot).head.sha).toBe(OLD_HEAD);
    expect(await recordedHeads(events)).toEqual([OLD_HEAD, NEW_HEAD]);
    expect(errors).toEqual([]);
  });

  it('a snapshot with nothing recorded meanwhile is recorded, once, and a failing record never fails the snapshot', async () => {
    const events = factsStore();
    await recordChangeFacts(events, facts(OLD_HEAD));
    const first = gatedForge(NEW_HEAD);
    first.release();
    expect((await recordingForge(first.forge, events, REPOSITORY, toFacts, () => undefined).snapshot('7')).head.sha).toBe(NEW_HEAD);
    expect(await recordedHeads(events)).toEqual([OLD_HEAD, NEW_HEAD]);
    // The same facts again are no second record.
    expect((await recordingForge(first.forge, events, REPOSITORY, toFacts, () => undefined).snapshot('7')).head.sha).toBe(NEW_HEAD);
    expect(await recordedHeads(events)).toEqual([OLD_HEAD, NEW_HEAD]);
    const errors: unknown[] = [];
    const failing = recordingForge(
      first.forge,
      events,
      REPOSITORY,
      () => {
        throw new Error('cannot make facts');
      },
      (_snapshot, error) => errors.push(error),
    );
    expect((await failing.snapshot('7')).head.sha).toBe(NEW_HEAD);
    expect(errors.map((error) => (error as Error).message)).toEqual(['cannot make facts']);
  });

  it('facts read at an older revision than the stream holds are not recorded', async () => {
    const events = factsStore();
    expect(await recordChangeFacts(events, facts(OLD_HEAD), 0)).toBe(true);
    expect(await recordChangeFacts(events, facts(NEW_HEAD), 1)).toBe(true);
    expect(await recordChangeFacts(events, facts(OLD_HEAD), 1)).toBe(false);
    expect(await recordedHeads(events)).toEqual([OLD_HEAD, NEW_HEAD]);
  });
});
