// The automerge ledger store: what one append costs as a change's history
// grows, on the embedded SQLite store. The history is what a long-running
// change collects: mostly steps (decisions, check runs, commands), timeline
// notes, a few commands, reviews and repairs. An append here is what the loop
// does all the time: a `decision` step, then a `note` record (which reads the
// ledger state, folds the outcome in and appends it at the revision it saw).
//
// Measured: appends from a store that already holds the change's fold (a
// running job), at 100 and at 10,000 events of history. Baseline, in the same
// run: the same appends from a store that re-reads and folds the whole stream
// before each one (a fresh `LedgerStore` per append, which is how every append
// worked before the store kept its fold). Target: the append cost at 10,000
// events is at most 1.5x the cost at 100 (flat).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerStore, automergeStream } from '../dist/automerge/loop/index.js';
import { defaultStoragePolicy } from '../dist/storage/policy.js';
import { createLocalRunStorage } from '../dist/storage/sqlite/index.js';

const SIZES = [100, 10_000];
const ROUNDS = 7;
const HEAD = 'a'.repeat(40);
const at = (i) => new Date(Date.UTC(2024, 4, 1, 9) + i * 1000).toISOString();

/** The event data of history position `i` (steps 80 %, timeline notes 20 %, a few commands, reviews and repairs first). */
function historyEvent(i) {
  if (i === 0)
    return {
      type: 'ledger',
      data: {
        record: {
          type: 'commands',
          delivery: {
            comment: { id: 'c1', author: 'maintainer', updatedAt: at(0) },
            commands: [{ kind: 'automerge', line: 1, source: '/proofgate automerge' }],
          },
        },
      },
    };
  if (i === 1) return { type: 'ledger', data: { record: { type: 'review-dispatched', id: 'rvw_1', head: HEAD, at: at(1) } } };
  if (i === 2) return { type: 'ledger', data: { record: { type: 'review-finished', id: 'rvw_1', head: HEAD, verdict: 'CONFIRMED', at: at(2) } } };
  if (i === 3)
    return {
      type: 'ledger',
      data: { record: { type: 'repair-dispatched', id: 'rpr_1', head: HEAD, repair: 'rebase', automatic: true, reason: 'behind main', at: at(3) } },
    };
  if (i === 4)
    return { type: 'ledger', data: { record: { type: 'repair-finished', id: 'rpr_1', result: 'no-change', newHead: null, commits: [], at: at(4) } } };
  if (i % 5 === 0)
    return {
      type: 'ledger',
      data: { record: { type: 'note', id: `note_${i}`, text: `wait: checks pending on ${HEAD.slice(0, 12)}: pending: CI / test (run ${i})`, at: at(i) } },
    };
  const kind = i % 5;
  if (kind === 1)
    return { type: 'step', data: { step: 'decision', kind: 'wait', code: 'checks-pending', reason: `checks pending (run ${i})`, head: HEAD, at: at(i) } };
  if (kind === 2) return { type: 'step', data: { step: 'checks-started', head: HEAD, at: at(i) } };
  if (kind === 3) return { type: 'step', data: { step: 'checks-finished', head: HEAD, at: at(i) } };
  return { type: 'step', data: { step: 'command-run', comment: `c${i}`, actor: 'maintainer', command: 'status', at: at(i) } };
}

async function seed(events, changeId, size) {
  const stream = automergeStream(changeId);
  for (let start = 0; start < size; start += 500) {
    const batch = [];
    for (let i = start; i < Math.min(size, start + 500); i += 1) batch.push({ id: `hist_${changeId}_${i}`, ...historyEvent(i) });
    await events.append(stream, start, batch);
  }
}

let appended = 0;
async function appendOnce(store, changeId) {
  appended += 1;
  await store.step(changeId, 'decision', { kind: 'wait', code: 'checks-pending', reason: `checks pending (bench ${appended})`, head: HEAD });
  await store.record(changeId, { type: 'note', id: `bench_${appended}`, text: `wait: checks pending (bench ${appended})`, at: store.now() });
}

/**
 * Mean ms per append (a step plus a record) over `count` appends to a change
 * seeded with `size` events just before; `fresh`: a new store (a full
 * re-read) for each append. Each append adds 2 events: 20 appends grow a
 * 100-event history to 140 while it is measured.
 */
let changes = 0;
async function timeAppends(events, size, count, fresh) {
  changes += 1;
  const changeId = `c${changes}`;
  await seed(events, changeId, size);
  const kept = new LedgerStore(events);
  if (!fresh) await kept.load(changeId);
  const start = process.hrtime.bigint();
  for (let i = 0; i < count; i += 1) await appendOnce(fresh ? new LedgerStore(events) : kept, changeId);
  return Number(process.hrtime.bigint() - start) / 1e6 / count;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

export default async function run(report) {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-bench-ledger-'));
  const storage = createLocalRunStorage({ directory: dir, namespace: 'automerge', policy: defaultStoragePolicy });
  try {
    const events = storage.eventStore;
    // Sanity: the seeded history reads back and folds as intended.
    await seed(events, 'check', SIZES[1]);
    const check = await new LedgerStore(events).load('check');
    if (check.revision !== SIZES[1] || check.state.timeline.length < SIZES[1] / 5) throw new Error('bench history is not the intended one');
    for (const size of SIZES) await timeAppends(events, size, 10, false);

    const kept = new Map(SIZES.map((size) => [size, []]));
    const reread = new Map(SIZES.map((size) => [size, []]));
    // Rounds interleave the sizes and the two ways, so a busy machine slows all of them alike.
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const size of SIZES) {
        kept.get(size).push(await timeAppends(events, size, 20, false));
        reread.get(size).push(await timeAppends(events, size, size > 1000 ? 3 : 20, true));
      }
    }
    const [small, large] = SIZES;
    const keptSmall = median(kept.get(small));
    const keptLarge = median(kept.get(large));
    const rereadSmall = median(reread.get(small));
    const rereadLarge = median(reread.get(large));
    for (const [size, keptMs, rereadMs] of [
      [small, keptSmall, rereadSmall],
      [large, keptLarge, rereadLarge],
    ]) {
      report({
        name: `ledger append (a step and a record), ${size.toLocaleString('en')}-event history, fold kept`,
        value: keptMs * 1000,
        unit: 'us/append',
        baseline: rereadMs * 1000,
        baselineUnit: 'us/append re-reading the stream',
        ratio: rereadMs / keptMs,
        note: 'ratio: how many times faster than re-reading',
      });
    }
    report({
      name: `ledger append cost growth, ${small} -> ${large.toLocaleString('en')} events, fold kept`,
      value: keptLarge / keptSmall,
      unit: 'x',
      baseline: rereadLarge / rereadSmall,
      baselineUnit: 'x re-reading the stream',
      ratio: keptLarge / keptSmall,
      target: { max: 1.5 },
    });
  } finally {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
