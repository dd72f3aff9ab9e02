/**
 * A real merge queue for the observability tests (projection, metrics, CLI,
 * dashboard): a local repository whose check fails only while both `a.flag`
 * and `b.flag` are in the tree, three changes (the first adds `a.flag`, the
 * third `b.flag`, the second has a hostile title) queued by their own
 * automerge loops while the queue is paused, then let go: the candidate of
 * all three fails, is bisected, the first two land together and the third
 * is ejected. Everything runs in this process on real git and the store.
 */
import { QueueStore } from '../../src/automerge/queue/store.js';
import { queuePosition, type QueueState } from '../../src/automerge/queue/queue.js';
import type { JobResult } from '../../src/automerge/loop/index.js';
import { until } from '../support/wait.js';
import { loopFixture, MAINTAINER, type LoopFixture } from '../automerge/loop/local-support.js';

/** Passes unless both flags are in the tree: each change passes alone, the first and the third clash. */
export const CLASH_CHECK =
  "import { existsSync } from 'node:fs';\nif (existsSync('a.flag') && existsSync('b.flag')) { console.error('a.flag and b.flag clash'); process.exit(1); }\nconsole.log('ok');\n";

/** A title meant to run as HTML, reorder the text after it and drive a terminal; it must show as text. */
export const HOSTILE_TITLE = '<img src=x onerror="window.pwned=1"><b>bold</b> \u202eevil\u202c \u001b[31mred\u001b[0m';

export interface QueueScenario {
  readonly fixture: LoopFixture;
  readonly queues: QueueStore;
  /** The changes in queue order: a.flag, the hostile title, b.flag. */
  readonly ids: readonly [string, string, string];
  /** The loops' ends (each change's own job). */
  readonly done: readonly Promise<JobResult>[];
  /** The queue now. */
  state(): Promise<QueueState>;
  /** Resume the queue and wait for every loop to end. */
  release(): Promise<void>;
  cleanup(): Promise<void>;
}

/** Three changes waiting, in order, in the paused merge queue of main. */
export async function queueScenario(): Promise<QueueScenario> {
  const fixture = await loopFixture();
  try {
    // The fixture repository runs `check.mjs`: replace it with the clash check on main before any change forks.
    fixture.repo.commit('main', { 'check.mjs': CLASH_CHECK }, 'the clash check');
    const queues = new QueueStore(fixture.automerge.env.store.events);
    await queues.append('main', [{ type: 'queue-paused', data: { by: MAINTAINER, at: queues.now() } }]);
    const first = await fixture.openChange('flag-a', { 'a.flag': 'a\n' }, 'Add the a flag');
    const second = await fixture.openChange('plain', { 'plain.txt': 'plain\n' }, HOSTILE_TITLE);
    const third = await fixture.openChange('flag-b', { 'b.flag': 'b\n' }, 'Add the b flag');
    const ids = [first, second, third] as const;
    const done: Promise<JobResult>[] = [];
    // One at a time, so that the queue order is the order of the ids.
    for (const id of ids) {
      const routed = await fixture.command(id, '/proofgate automerge');
      if (routed.dispatch === null) throw new Error(`no job for change ${id}`);
      done.push(routed.dispatch.done);
      await until(async () => queuePosition(await queues.load('main'), id).kind === 'waiting', `change ${id} is queued`);
    }
    return {
      fixture,
      queues,
      ids,
      done,
      state: () => queues.load('main'),
      async release() {
        await queues.append('main', [{ type: 'queue-resumed', data: { by: MAINTAINER, at: queues.now() } }]);
        await Promise.all(done);
      },
      cleanup: () => fixture.cleanup(),
    };
  } catch (error) {
    await fixture.cleanup();
    throw error;
  }
}
