// Throughput of the GitHub App service with 1, 2 and 3 worker processes on one
// PostgreSQL database: pull requests merged per second, from the first
// automerge comment sent to the last merge, on the GitHub API test server
// (the built-in rules reviewer, no sleeps; every fifth pull request waits for
// a check that a later delivery completes). It runs
// test/service/github-scale.test.ts through vitest with
// PROOFGATE_SCALE_WORKERS=1..3 and no worker killed, and reads the line of
// figures it prints. Baseline, measured in the same run: one worker.
// Needs PROOFGATE_TEST_DATABASE_URL (skipped with a line without it).
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const TEST = 'test/service/github-scale.test.ts';
const PULLS = 60;

function run(workers) {
  const result = spawnSync(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', TEST], {
    cwd: root,
    encoding: 'utf8',
    timeout: 600_000,
    env: { ...process.env, PROOFGATE_SCALE_WORKERS: String(workers), PROOFGATE_SCALE_KILL: '0', PROOFGATE_SCALE_PULLS: String(PULLS) },
  });
  const match = /scale figures: (\{.*\})$/m.exec(`${result.stdout}${result.stderr}`);
  if (match === null) throw new Error(`${TEST} printed no figures with ${workers} worker(s) (exit ${result.status})`);
  if (result.status !== 0) throw new Error(`${TEST} failed with ${workers} worker(s) (exit ${result.status})`);
  return JSON.parse(match[1]);
}

export default async function (report) {
  if (!process.env.PROOFGATE_TEST_DATABASE_URL) {
    console.log('  skipped: PROOFGATE_TEST_DATABASE_URL is not set (the workers share a PostgreSQL database)');
    return;
  }
  const one = run(1);
  const base = (one.pulls * 1000) / one.ms;
  report({ name: `service: ${PULLS} pull requests, 1 worker`, value: base, unit: 'merges/s', note: `${one.ms} ms` });
  for (const workers of [2, 3]) {
    const figures = run(workers);
    const rate = (figures.pulls * 1000) / figures.ms;
    report({
      name: `service: ${PULLS} pull requests, ${workers} workers`,
      value: rate,
      unit: 'merges/s',
      baseline: base,
      baselineUnit: 'merges/s with 1 worker',
      ratio: rate / base,
      note: `${figures.ms} ms; the machine has the cores it has: on 2 cores, more than 2 workers cannot add much`,
    });
  }
}
