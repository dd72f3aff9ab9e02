// The jail's cost.
//
// 1. Spawn overhead per job: `true` run through runUntrusted jailed
//    (prlimit + setpriv + bubblewrap: namespaces, mounts, rlimits) against the
//    same `true` run unjailed (sandbox: none, the plain process runner); the
//    difference of the medians is what the jail adds to every job.
//    Target: under 50 ms (the ratio is 50 ms / overhead, so >= 1 meets it).
// 2. `checks run` jailed against unjailed: one change, one check (`true`),
//    the whole local-forge path (export of the head, job dir, store records).
//    Reported as the ratio jailed / unjailed and the added time per check.
// Skipped with a line saying why when the jail does not work on this machine.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { jailStatus, makeJobDir, runUntrusted } from '../dist/host/index.js';
import { openLocalForge } from '../dist/forge/local/index.js';

const SPAWN_ROUNDS = 40;
const CHECK_ROUNDS = 8;
const TARGET_MS = 50;

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

async function spawnMedian(sandbox, jobDir) {
  const times = [];
  for (let i = 0; i < SPAWN_ROUNDS; i += 1) {
    const started = performance.now();
    const result = await runUntrusted({
      argv: ['true'],
      sandbox,
      jobDir,
      cwd: jobDir,
      env: { PATH: '/usr/bin:/bin' },
      timeoutMs: 10_000,
      output: { maxBytes: 1024 },
    });
    times.push(performance.now() - started);
    if (result.exitCode !== 0) throw new Error(`${sandbox}: true exited ${result.exitCode}: ${result.startError ?? result.output.toString()}`);
  }
  return median(times);
}

function git(dir, args) {
  return execFileSync('git', args, { cwd: dir, encoding: 'utf8' }).trim();
}

async function checksMedian(base, sandbox) {
  const repoDir = join(base, `repo-${sandbox}`);
  mkdirSync(repoDir, { recursive: true });
  git(repoDir, ['init', '-q', '-b', 'main']);
  git(repoDir, ['config', 'user.name', 'Bench Maintainer']);
  git(repoDir, ['config', 'user.email', 'bench@example.test']);
  writeFileSync(join(repoDir, '.proofgate.yml'), `sandbox: ${sandbox}\nchecks:\n  - name: ok\n    run: "true"\n`);
  writeFileSync(join(repoDir, 'README.md'), '# bench\n');
  git(repoDir, ['add', '-A']);
  git(repoDir, ['commit', '-q', '-m', 'initial']);
  git(repoDir, ['checkout', '-q', '-b', 'change', 'main']);
  writeFileSync(join(repoDir, 'notes.txt'), 'note\n');
  git(repoDir, ['add', '-A']);
  git(repoDir, ['commit', '-q', '-m', 'note']);
  git(repoDir, ['checkout', '-q', 'main']);
  const opened = await openLocalForge({ repoDir, dataDir: join(base, `data-${sandbox}`) });
  try {
    const { id } = await opened.forge.openChange({ head: 'change', base: 'main', author: 'Casey' });
    const times = [];
    for (let i = 0; i < CHECK_ROUNDS; i += 1) {
      const started = performance.now();
      const { results } = await opened.forge.runChecks(id);
      times.push(performance.now() - started);
      if (results[0]?.conclusion !== 'success' || results[0]?.sandbox !== sandbox)
        throw new Error(`${sandbox}: check ended ${results[0]?.conclusion} (${results[0]?.sandbox})`);
    }
    return median(times);
  } finally {
    await opened.close();
  }
}

export default async function bench(report) {
  const status = await jailStatus();
  if (!status.available) {
    console.log(`  skipped: ${status.reason}`);
    return;
  }
  const base = await makeJobDir('proofgate-bench-jail-');
  try {
    const jailed = await spawnMedian('jail', base);
    const plain = await spawnMedian('none', base);
    const overhead = Math.max(jailed - plain, 0.001);
    report({
      name: 'jail spawn overhead per job (`true`)',
      value: overhead,
      unit: 'ms',
      baseline: TARGET_MS,
      baselineUnit: 'ms (target)',
      ratio: TARGET_MS / overhead,
      target: 1,
      note: `median of ${SPAWN_ROUNDS}: jailed ${jailed.toFixed(1)} ms, unjailed ${plain.toFixed(1)} ms`,
    });
    const checksJailed = await checksMedian(base, 'jail');
    const checksPlain = await checksMedian(base, 'none');
    report({
      name: 'checks run, one check, jailed',
      value: checksJailed,
      unit: 'ms',
      baseline: checksPlain,
      baselineUnit: 'ms unjailed',
      ratio: checksJailed / checksPlain,
      note: `median of ${CHECK_ROUNDS}; the jail adds ${(checksJailed - checksPlain).toFixed(1)} ms per check`,
    });
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}
