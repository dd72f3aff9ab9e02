// The merge queue: time to land 20 ready, non-conflicting changes on one local
// base whose check takes about 1 s, through the queue with batch size 1, 4
// and 8. Baseline, measured in the same run: merging them one after another
// by hand (bring the change up to date with the base, run the check on it,
// merge; the next one starts when the previous one landed). Target with batch
// 4: at most 0.4x of one-by-one. The same again with one change among the 20
// that breaks the check: the cost of finding it by bisection.
//
// The queue runs in this process against the real local forge (git, the
// store, the jailed check when the jail works here); reviews are not part of
// it (every change is queued at a head whose check already passed).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseCommands } from '../dist/automerge/index.js';
import { openLocalAutomerge } from '../dist/automerge/loop/index.js';
import { runQueue, queueOwnerId } from '../dist/automerge/queue/runner.js';
import { QueueStore } from '../dist/automerge/queue/store.js';
import { openLocalForge } from '../dist/forge/local/index.js';
import { jailStatus } from '../dist/host/index.js';

const CHANGES = 20;
const CHECK =
  "import { existsSync } from 'node:fs';\nsetTimeout(() => { if (existsSync('broken.txt')) { console.error('broken'); process.exit(1); } console.log('ok'); }, 1000);\n";

function git(dir, args) {
  return execFileSync('git', args, {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, GIT_AUTHOR_NAME: 'Bench', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'Bench', GIT_COMMITTER_EMAIL: 'b@x' },
  }).trim();
}

function write(dir, path, text) {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), text);
}

async function scenario({ broken }) {
  const root = mkdtempSync(join(tmpdir(), 'proofgate-bench-queue-'));
  const repo = join(root, 'repo');
  const data = join(root, 'data');
  mkdirSync(repo);
  const sandbox = (await jailStatus()).available ? 'jail' : 'none';
  git(repo, ['init', '-q', '-b', 'main']);
  write(repo, 'check.mjs', CHECK);
  write(
    repo,
    '.proofgate.yml',
    `sandbox: ${sandbox}\nmaintainers:\n  - login: Bench\n    permission: admin\nchecks:\n  - name: test\n    run: node check.mjs\n`,
  );
  git(repo, ['add', '.']);
  git(repo, ['commit', '-q', '-m', 'initial']);
  for (let n = 1; n <= CHANGES; n += 1) {
    git(repo, ['checkout', '-q', '-b', `change-${n}`, 'main']);
    write(repo, `file-${n}.txt`, `change ${n}\n`);
    if (broken === n) write(repo, 'broken.txt', 'breaks the check\n');
    git(repo, ['add', '.']);
    git(repo, ['commit', '-q', '-m', `change ${n}`]);
  }
  git(repo, ['checkout', '-q', 'main']);
  const opened = await openLocalForge({ repoDir: repo, dataDir: data });
  const automerge = await openLocalAutomerge({ forge: opened.forge, dataDir: data, repair: null });
  const ids = [];
  for (let n = 1; n <= CHANGES; n += 1) {
    const id = (await opened.forge.openChange({ head: `change-${n}`, base: 'main', title: `change ${n}` })).id;
    await automerge.env.store.applyCommands(id, {
      comment: { id: `c${id}`, author: 'Bench', updatedAt: new Date().toISOString() },
      commands: parseCommands('/proofgate automerge'),
    });
    ids.push(id);
  }
  return {
    forge: opened.forge,
    env: automerge.env,
    ids,
    async close() {
      await automerge.close();
      await opened.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Land all through the queue with `batchSize`; returns seconds and the queue's totals. */
async function throughQueue(batchSize, broken) {
  const s = await scenario({ broken });
  try {
    const queues = new QueueStore(s.env.store.events);
    for (const id of s.ids) {
      const head = (await s.forge.snapshot(id)).head.sha;
      await queues.append('main', [{ type: 'queue-enqueued', data: { change: id, head, title: `change ${id}`, approvedTrusted: [], at: queues.now() } }]);
    }
    const owner = queueOwnerId();
    const start = performance.now();
    await queues.acquireLease('main', owner, 60_000, () => false);
    await runQueue({ queues, forge: s.forge, ledger: s.env.store, owner, batchSize }, 'main');
    const seconds = (performance.now() - start) / 1000;
    const state = await queues.load('main');
    return { seconds, stats: state.stats };
  } finally {
    await s.close();
  }
}

/** One after another by hand: each change brought up to date on the base, checked, merged; a failing one is skipped. */
async function oneByOne(broken) {
  const s = await scenario({ broken });
  try {
    const port = s.forge.mergeQueue;
    const start = performance.now();
    for (const id of s.ids) {
      const head = (await s.forge.snapshot(id)).head.sha;
      const built = await port.buildCandidate('main', [{ changeId: id, headSha: head, title: `change ${id}` }]);
      if (built.kind !== 'built') throw new Error(`change ${id}: ${built.reason}`);
      const checked = await port.checkCandidate(built.candidate, { passedTrees: [] });
      if (checked.passed) await port.landCandidate(built.candidate);
    }
    return (performance.now() - start) / 1000;
  } finally {
    await s.close();
  }
}

export default async function (report) {
  const baseline = await oneByOne(undefined);
  for (const size of [1, 4, 8]) {
    const { seconds, stats } = await throughQueue(size, undefined);
    report({
      name: `20 changes, batch ${size}`,
      value: seconds,
      unit: 's',
      baseline,
      ratio: seconds / baseline,
      ...(size === 4 ? { target: { max: 0.4 } } : {}),
      note: `${stats.candidates} candidates, ${stats.landed} landed`,
    });
  }
  const brokenBaseline = await oneByOne(7);
  for (const size of [1, 4, 8]) {
    const { seconds, stats } = await throughQueue(size, 7);
    report({
      name: `20 changes, one breaking, batch ${size}`,
      value: seconds,
      unit: 's',
      baseline: brokenBaseline,
      ratio: seconds / brokenBaseline,
      note: `${stats.candidates} candidates, ${stats.bisections} bisections, ${stats.ejected} ejected, ${stats.landed} landed`,
    });
  }
}
