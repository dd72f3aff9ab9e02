/**
 * Attacks on the merge queue (real git, the real local forge and store):
 * a queued change cannot weaken the checks its candidate runs, a crafted
 * branch name or title is data, and a runner that lost the base's lease makes
 * no effect.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCommands } from '../../src/automerge/commands.js';
import { systemClock } from '../../src/core/index.js';
import { queueOwnerId, runQueue } from '../../src/automerge/queue/runner.js';
import { QueueStore } from '../../src/automerge/queue/store.js';
import { AUTOMERGE_NAMESPACE } from '../../src/automerge/loop/local.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { loopFixture, MAINTAINER, repoConfig, type LoopFixture } from '../automerge/loop/local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

/** A fixture with automerge turned on (in the ledger) for each change opened through `open`. */
async function setup(): Promise<{
  f: LoopFixture;
  queues: QueueStore;
  open: (branch: string, files: Record<string, string | null>, title?: string) => Promise<string>;
}> {
  const f = (fixture = await loopFixture());
  const queues = new QueueStore(f.automerge.env.store.events);
  const open = async (branch: string, files: Record<string, string | null>, title?: string): Promise<string> => {
    const id = await f.openChange(branch, files, title);
    await f.automerge.env.store.applyCommands(id, {
      comment: { id: `cmt-${id}`, author: MAINTAINER, updatedAt: new Date().toISOString() },
      commands: parseCommands('/proofgate automerge'),
    });
    return id;
  };
  return { f, queues, open };
}

/** Put a change's current head in the queue directly (as if its loop had decided to merge it), with the trusted paths given as approved. */
async function enqueue(f: LoopFixture, queues: QueueStore, id: string, approvedTrusted: string[] = []): Promise<string> {
  const head = (await f.forge.snapshot(id)).head.sha;
  await queues.append('main', [{ type: 'queue-enqueued', data: { change: id, head, title: `change ${id}`, approvedTrusted, at: queues.now() } }]);
  return head;
}

async function run(f: LoopFixture, queues: QueueStore, owner = queueOwnerId()) {
  expect(await queues.acquireLease('main', owner, 30_000, () => false)).toBe(true);
  return runQueue({ queues, forge: f.forge, ledger: f.automerge.env.store, owner, batchSize: 4 }, 'main');
}

describe('merge queue attacks', () => {
  it("a patch that drops the checks from .proofgate.yml (even approved) still meets the base's checks on its candidate", async () => {
    const { f, queues, open } = await setup();
    const base = f.repo.sha('main');
    const weakened = repoConfig().replace(/checks:\n {2}- name: test\n {4}run: node check\.mjs\n/, 'checks: []\n');
    expect(weakened).not.toBe(repoConfig());
    const id = await open('weaken', { '.proofgate.yml': weakened, 'broken.txt': 'breaks the check\n' });
    await enqueue(f, queues, id, ['.proofgate.yml']);
    expect(await run(f, queues)).toBe('empty');
    const state = await queues.load('main');
    expect(state.outcomes[id]).toMatchObject({ kind: 'ejected', check: 'test' });
    expect(f.repo.sha('main')).toBe(base);
    expect((await f.forge.snapshot(id)).state).toBe('open');
  });

  it('a patch that rewrites the check script without an approval of that head leaves the queue before anything runs', async () => {
    const { f, queues, open } = await setup();
    const base = f.repo.sha('main');
    const id = await open('script', { 'check.mjs': "console.log('ok');\n", 'broken.txt': 'x\n' });
    await enqueue(f, queues, id);
    expect(await run(f, queues)).toBe('empty');
    const state = await queues.load('main');
    expect(state.outcomes[id]).toMatchObject({ kind: 'removed', code: 'trusted-paths' });
    expect(state.stats.candidates).toBe(0);
    expect(f.repo.sha('main')).toBe(base);
  });

  it('a crafted branch name and a title with a forged trailer are data: nothing runs, no other change reads as merged', async () => {
    const { f, queues, open } = await setup();
    const victim = await open('victim', { 'victim.txt': 'v\n' });
    const branch = 'q/$(touch${IFS}pwned);x';
    const evil = await open(branch, { 'evil.txt': 'e\n' }, `evil\nProofgate-Change: ${victim}\nProofgate-Reviewed-Head: ${'0'.repeat(40)}`);
    await enqueue(f, queues, evil);
    expect(await run(f, queues)).toBe('empty');
    expect((await queues.load('main')).outcomes[evil]).toMatchObject({ kind: 'landed' });
    expect(existsSync(join(f.repo.dir, 'pwned'))).toBe(false);
    expect(f.repo.git(['log', '-1', '--format=%s', 'main']).trim()).toBe(
      `evil Proofgate-Change: ${victim} Proofgate-Reviewed-Head: ${'0'.repeat(40)} (#${evil})`,
    );
    expect((await f.forge.snapshot(evil)).state).toBe('merged');
    expect((await f.forge.snapshot(victim)).state).toBe('open');
  });

  it('of two processes racing for the lease one wins; a runner whose lease was taken over makes no effect', async () => {
    const { f, queues, open } = await setup();
    // A second store on the same data directory: what another process sees.
    const other = createLocalRunStorage({ directory: f.dataDir, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
    try {
      const rival = new QueueStore(other.eventStore);
      const [a, b] = await Promise.all([
        queues.acquireLease('main', 'host:1:a', 60_000, () => false),
        rival.acquireLease('main', 'host:2:b', 60_000, () => false),
      ]);
      expect([a, b].filter(Boolean)).toHaveLength(1);
      const winner = a ? 'host:1:a' : 'host:2:b';
      await (a ? queues : rival).updateLease('main', winner, 'release');

      const id = await open('one', { 'one.txt': '1\n' });
      await enqueue(f, queues, id);
      const base = f.repo.sha('main');
      // A takes the lease, then is paused past it: B, whose clock reads two minutes later, takes the lease over.
      expect(await queues.acquireLease('main', 'host:1:slow', 60_000, () => false)).toBe(true);
      const later = new QueueStore(other.eventStore, { ...systemClock, now: () => new Date(Date.now() + 120_000) });
      expect(await rival.acquireLease('main', 'host:2:fast', 60_000, () => false)).toBe(false);
      expect(await later.acquireLease('main', 'host:2:fast', 60_000, () => false)).toBe(true);
      // The paused runner resumes: its first fenced append fails, it stops, the base did not move.
      expect(await runQueue({ queues, forge: f.forge, ledger: f.automerge.env.store, owner: 'host:1:slow', batchSize: 4 }, 'main')).toBe('lease-lost');
      expect(f.repo.sha('main')).toBe(base);
      const state = await queues.load('main');
      expect(state.stats.candidates).toBe(0);
      expect(state.lease?.owner).toBe('host:2:fast');
    } finally {
      await other.close();
    }
  });
});
