// What one `proofgate` command costs before it does any work, the CLI being
// one bundled file (scripts/bundle-cli.mjs) against the same code loaded as
// tsc emitted it (dist/cli/program.js and the few hundred modules under it,
// dependencies from node_modules). Both print the version, so the difference
// is start-up: resolving, reading, compiling and running the modules.
// Measured as CPU time (user + system) of the command, which a loaded machine
// changes far less than wall time: a shell runs it and reports its children's
// times (`times`). Medians of ROUNDS runs, interleaved so both see the same load;
// a bare `node -e 0` is measured beside them. Also the bundle with and
// without its V8 code cache (scripts/cli-loader.cjs), both started the same
// way (an inline module that sets the loader's mode and imports it).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROUNDS = 15;
const bundled = fileURLToPath(new URL('../dist/cli/main.cjs', import.meta.url));
const program = new URL('../dist/cli/program.js', import.meta.url).href;

// A wrapper that runs the command and prints the child's CPU time: getrusage(RUSAGE_CHILDREN) via a shell's `times`.
function cpuOf(argv) {
  const script = `"$@" >/dev/null; times`;
  const result = spawnSync('sh', ['-c', script, 'sh', ...argv], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${argv.join(' ')}: exit ${result.status}: ${result.stderr}`);
  // times prints two lines: the shell's own user/system, then its children's.
  const children = result.stdout.trim().split('\n').pop() ?? '';
  const seconds = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
  return (seconds[0] + seconds[1]) * 1000;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export default async function bench(report) {
  const unbundledArgv = [
    process.execPath,
    '--input-type=module',
    '-e',
    `import { runCli } from ${JSON.stringify(program)}; process.exitCode = await runCli(['--version']);`,
  ];
  const bundledArgv = [process.execPath, bundled, '--version'];
  const bareArgv = [process.execPath, '-e', '0'];
  const withMode = (mode) => [
    process.execPath,
    '--input-type=module',
    '-e',
    `globalThis[Symbol.for('proofgate.cli.codeCache')] = ${JSON.stringify(mode)}; process.argv = [process.argv[0], ${JSON.stringify(bundled)}, '--version']; await import(${JSON.stringify(new URL('../dist/cli/main.cjs', import.meta.url).href)});`,
  ];
  const times = { bundled: [], unbundled: [], bare: [], cacheOn: [], cacheOff: [] };
  for (let i = 0; i < ROUNDS; i += 1) {
    times.unbundled.push(cpuOf(unbundledArgv));
    times.bundled.push(cpuOf(bundledArgv));
    times.bare.push(cpuOf(bareArgv));
    times.cacheOn.push(cpuOf(withMode('report')));
    times.cacheOff.push(cpuOf(withMode('off')));
  }
  const [bundledMs, unbundledMs, bareMs] = [median(times.bundled), median(times.unbundled), median(times.bare)];
  report({
    name: 'proofgate --version, CPU per process (bundled CLI)',
    value: bundledMs,
    unit: 'ms',
    baseline: unbundledMs,
    ratio: unbundledMs / bundledMs,
    target: 1.5,
    note: `unbundled modules as baseline; a bare node -e 0 costs ${bareMs.toFixed(0)} ms`,
  });
  report({
    name: 'start-up above bare node (bundled)',
    value: bundledMs - bareMs,
    unit: 'ms',
    baseline: unbundledMs - bareMs,
    ratio: (unbundledMs - bareMs) / (bundledMs - bareMs),
    note: 'what the CLI adds to every command before its work',
  });
  const [onMs, offMs] = [median(times.cacheOn), median(times.cacheOff)];
  report({
    name: 'proofgate --version, CPU per process with the code cache',
    value: onMs,
    unit: 'ms',
    baseline: offMs,
    ratio: offMs / onMs,
    target: 1.2,
    note: 'the same bundle compiled afresh as baseline',
  });
}
