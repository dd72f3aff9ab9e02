/**
 * Leaving the queue (in process, real git and store): `/proofgate stop` takes
 * a waiting change out; a new head pushed while it waits takes it out too, and
 * the new head is reviewed and lands; the status comment says the position.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { QueueStore } from '../../../src/automerge/queue/store.js';
import { queuePosition } from '../../../src/automerge/queue/queue.js';
import { until } from '../../support/wait.js';
import { finished, loopFixture, MAINTAINER, type LoopFixture } from '../loop/local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

async function pausedQueue(f: LoopFixture): Promise<QueueStore> {
  const queues = new QueueStore(f.automerge.env.store.events);
  await queues.append('main', [{ type: 'queue-paused', data: { by: MAINTAINER, at: queues.now() } }]);
  return queues;
}

describe('leaving the merge queue', () => {
  it('/proofgate stop takes a waiting change out of the queue; the loop ends stopped; the status comment said its position', async () => {
    const f = (fixture = await loopFixture());
    const queues = await pausedQueue(f);
    const id = await f.openChange('one', { 'one.txt': '1\n' });
    const done = (await f.command(id, '/proofgate automerge')).dispatch?.done;
    await until(async () => queuePosition(await queues.load('main'), id).kind === 'waiting', 'the change is queued');
    await until(
      async () => (await f.forge.snapshot(id)).comments.some((c) => c.body.includes('in the merge queue of main: position 1 of 1 (the queue is paused')),
      'the status comment shows the position',
    );
    await f.command(id, '/proofgate stop');
    const outcome = await finished(done);
    expect(outcome.kind).toBe('stopped');
    expect(queuePosition(await queues.load('main'), id)).toMatchObject({ kind: 'left', outcome: { kind: 'removed', code: 'stopped' } });
    expect((await f.forge.snapshot(id)).state).toBe('open');
  });

  it('a new head pushed while the change waits takes it out; the new head is reviewed and lands', async () => {
    const f = (fixture = await loopFixture());
    const queues = await pausedQueue(f);
    const id = await f.openChange('two', { 'two.txt': '2\n' });
    const done = (await f.command(id, '/proofgate automerge')).dispatch?.done;
    await until(async () => queuePosition(await queues.load('main'), id).kind === 'waiting', 'the change is queued');
    const queued = f.repo.sha('two');
    const pushed = f.repo.commit('two', { 'two.txt': '2, again\n' }, 'second commit');
    await queues.append('main', [{ type: 'queue-resumed', data: { by: MAINTAINER, at: queues.now() } }]);
    const outcome = await finished(done);
    expect(outcome).toMatchObject({ kind: 'merged', head: pushed });
    const state = await queues.load('main');
    expect(state.outcomes[id]).toMatchObject({ kind: 'landed', head: pushed });
    expect(state.stats.landed).toBe(1);
    expect(queued).not.toBe(pushed);
    expect(f.repo.git(['show', 'main:two.txt'])).toBe('2, again');
  });
});
