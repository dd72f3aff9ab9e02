// What starting a program costs a large proofgate process (the service after
// a while, or a test worker), started by that process (node's spawn, a
// fork() of all it holds) against the launcher (src/host/launcher.ts, a small
// process that starts it instead). This process first fills RESIDENT_MB of
// memory, as a long-running service would hold, then runs `git --version`
// through runProcess, alternating the two ways in rounds. Measured: wall time
// per start, and the whole machine's busy CPU time per start (/proc/stat, so
// that the launcher's share and its programs count too; the bench should run
// on a quiet machine). A round of starts from a fresh process is the floor.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const RESIDENT_MB = 400;
const STARTS = 60;
const ROUNDS = 5;

const busyTicks = () => {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq] = fields.map(Number);
  return user + nice + system + irq + softirq;
};
const TICK_MS = 1000 / 100;

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function measure(runProcess, count) {
  const request = { argv: ['git', '--version'], cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, timeoutMs: 60_000, output: { maxBytes: 4096 } };
  const ticks = busyTicks();
  const started = performance.now();
  for (let i = 0; i < count; i += 1) {
    const result = await runProcess(request);
    if (result.exitCode !== 0) throw new Error(`git --version: exit ${result.exitCode} ${result.startError ?? ''}`);
  }
  return { wallMs: (performance.now() - started) / count, cpuMs: ((busyTicks() - ticks) * TICK_MS) / count };
}

export default async function bench(report) {
  try {
    busyTicks();
  } catch {
    console.log('  skipped: no /proc/stat on this machine');
    return;
  }
  const { runProcess } = await import('../dist/host/index.js');
  const { setLauncherMode } = await import('../dist/host/launcher.js');
  // The floor: a fresh node process starting the same program the same way.
  const fresh = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { runProcess } = await import(${JSON.stringify(new URL('../dist/host/index.js', import.meta.url).href)});
       const { setLauncherMode } = await import(${JSON.stringify(new URL('../dist/host/launcher.js', import.meta.url).href)});
       setLauncherMode('never');
       const t = performance.now();
       for (let i = 0; i < ${STARTS}; i += 1) await runProcess({ argv: ['git', '--version'], cwd: '/', env: { PATH: process.env.PATH }, timeoutMs: 60000, output: { maxBytes: 4096 } });
       console.log((performance.now() - t) / ${STARTS});`,
    ],
    { encoding: 'utf8' },
  );
  const freshWall = Number(fresh.stdout.trim());
  // Memory a long-running process holds: touched, so that fork() has its page tables to copy.
  const held = [];
  for (let i = 0; i < RESIDENT_MB; i += 1) held.push(Buffer.alloc(1024 * 1024, i % 251));
  const direct = [];
  const launched = [];
  try {
    setLauncherMode('always');
    await measure(runProcess, 5); // starts the launcher
    for (let round = 0; round < ROUNDS; round += 1) {
      setLauncherMode('never');
      direct.push(await measure(runProcess, STARTS));
      setLauncherMode('always');
      launched.push(await measure(runProcess, STARTS));
    }
  } finally {
    setLauncherMode('auto');
  }
  const rss = Math.round(process.memoryUsage.rss() / 1024 / 1024);
  const directWall = median(direct.map((m) => m.wallMs));
  const launchedWall = median(launched.map((m) => m.wallMs));
  const directCpu = median(direct.map((m) => m.cpuMs));
  const launchedCpu = median(launched.map((m) => m.cpuMs));
  report({
    name: `git --version from a ${rss} MB process, started by the launcher`,
    value: launchedWall,
    unit: 'ms wall per start',
    baseline: directWall,
    baselineUnit: 'ms, started by the process itself (fork)',
    ratio: directWall / launchedWall,
    note: `a fresh process: ${freshWall.toFixed(2)} ms; rounds: launcher ${launched.map((m) => m.wallMs.toFixed(1)).join(', ')}; direct ${direct.map((m) => m.wallMs.toFixed(1)).join(', ')}`,
  });
  report({
    name: `git --version from a ${rss} MB process, machine CPU per start, by the launcher`,
    value: launchedCpu,
    unit: 'ms busy CPU per start (whole machine)',
    baseline: directCpu,
    baselineUnit: 'ms, started by the process itself',
    ratio: directCpu / launchedCpu,
    note: 'ratio: direct / launcher (higher is better)',
  });
  held.length = 0;
}
