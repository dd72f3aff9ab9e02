// The automerge loop, end to end.
//
// 1. Local forge: time from the last check finishing to the merge commit. A
//    change's loop runs the configured checks itself and waits for them; the
//    check-completed event wakes it, so the merge follows at once. Baseline:
//    the seed's 15 s poll interval, which is what a polling loop waits at worst
//    before it even notices the check finished. Target: under 1 s (ratio >= 15).
// 2. GitHub: API requests per merged change on the happy path (automerge
//    comment webhook, review, check webhook, merge), counted by the GitHub API
//    test server. The server is TypeScript test support, so this part runs the
//    e2e test through vitest and reads the figure it prints.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { openLocalAutomerge } from '../dist/automerge/loop/index.js';
import { openLocalForge } from '../dist/forge/local/index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SEED_POLL_MS = 15_000;
const RUNS = 5;

const CONFIG = [
  'maintainers:',
  '  - login: Bench Maintainer',
  '    permission: admin',
  'checks:',
  '  - name: lint',
  '    run: node -e "setTimeout(() => {}, 50)"',
  '  - name: test',
  '    run: node -e "setTimeout(() => {}, 150)"',
  'review:',
  '  lanes:',
  '    - id: rules',
  '      builtin: rules',
  '',
].join('\n');

function git(dir, args) {
  return execFileSync('git', args, { cwd: dir, encoding: 'utf8' }).trim();
}

function write(dir, path, text) {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), text);
}

async function localLatencies() {
  const base = mkdtempSync(join(tmpdir(), 'proofgate-bench-loop-'));
  const repoDir = join(base, 'repo');
  mkdirSync(repoDir);
  git(repoDir, ['init', '-q', '-b', 'main']);
  git(repoDir, ['config', 'user.name', 'Bench Maintainer']);
  git(repoDir, ['config', 'user.email', 'bench@example.test']);
  write(repoDir, 'README.md', '# bench\n');
  write(repoDir, '.proofgate.yml', CONFIG);
  git(repoDir, ['add', '-A']);
  git(repoDir, ['commit', '-q', '-m', 'initial']);
  for (let i = 0; i < RUNS; i += 1) {
    git(repoDir, ['checkout', '-q', '-b', `change-${i}`, 'main']);
    write(repoDir, `notes/${i}.txt`, `note ${i}\n`);
    git(repoDir, ['add', '-A']);
    git(repoDir, ['commit', '-q', '-m', `note ${i}`]);
    git(repoDir, ['checkout', '-q', 'main']);
  }
  const dataDir = join(base, 'data');
  const opened = await openLocalForge({ repoDir, dataDir });
  const automerge = await openLocalAutomerge({ forge: opened.forge, dataDir });
  let lastCheckAt = 0;
  let mergedAt = 0;
  const unsubscribe = opened.forge.onEvent((event) => {
    if (event.kind === 'check-completed') lastCheckAt = performance.now();
    if (event.kind === 'change-closed' && event.merged) mergedAt = performance.now();
  });
  const latencies = [];
  try {
    for (let i = 0; i < RUNS; i += 1) {
      const { id } = await opened.forge.openChange({ head: `change-${i}`, base: 'main', author: 'Casey' });
      const comment = await opened.forge.commentAs(id, '/proofgate automerge', 'Bench Maintainer');
      const routed = await automerge.router.handleComment(id, comment);
      const result = await routed.dispatch.done;
      if (result.kind !== 'ran' || result.outcome.kind !== 'merged')
        throw new Error(`change ${id} did not merge: ${JSON.stringify(result.kind === 'ran' ? result.outcome.reason : result)}`);
      latencies.push(mergedAt - lastCheckAt);
    }
  } finally {
    unsubscribe();
    await automerge.close();
    await opened.close();
    rmSync(base, { recursive: true, force: true });
  }
  return latencies.sort((a, b) => a - b);
}

function githubRequests() {
  const run = spawnSync(
    process.execPath,
    [join(root, 'node_modules/vitest/vitest.mjs'), 'run', 'test/e2e/github-automerge.test.ts', '-t', 'merge at the reviewed sha'],
    {
      cwd: root,
      encoding: 'utf8',
      timeout: 120_000,
    },
  );
  const match = /github api requests per merged change \(happy path\): (\d+) \(([^)]*)\)/.exec(`${run.stdout}${run.stderr}`);
  if (match === null) throw new Error(`the GitHub e2e test printed no request count (exit ${run.status})`);
  return { count: Number(match[1]), operations: match[2] };
}

export default async function (report) {
  const latencies = await localLatencies();
  const median = latencies[Math.floor(latencies.length / 2)];
  report({
    name: `local forge: last check finished -> merge commit (median of ${RUNS}, max ${latencies[latencies.length - 1].toFixed(0)} ms)`,
    value: median,
    unit: 'ms',
    baseline: SEED_POLL_MS,
    baselineUnit: 'ms (seed poll interval)',
    ratio: SEED_POLL_MS / median,
    target: { min: 15 },
  });
  const requests = githubRequests();
  report({ name: 'GitHub API requests per merged change (happy path)', value: requests.count, unit: 'requests', note: requests.operations });
}
