// Bundles the command-line entry (dist/cli/main.js, as tsc emitted it) into
// one file, dist/cli/proofgate.cjs, with its pure-JavaScript dependencies
// inside, and writes dist/cli/main.cjs, the loader that runs it with V8's
// code cache (scripts/cli-loader.cjs says why and how; the cache is made here
// by running the bundle once). dist/cli/main.js becomes two lines that
// require the loader, so that path runs the same command. The bundle is
// CommonJS because Node 20 can use a code cache only for scripts, not for ES
// modules; the entry therefore has no top-level await.
//
// Why: every `proofgate` command is a new Node process, and Node 20 spends
// most of a short command's start-up resolving, reading and compiling a few
// hundred small ES modules one by one (zod alone is over a hundred). One file
// roughly halves the CPU a command costs before it does any work
// (bench/cli-startup.bench.mjs measures both in one run). The library entry
// points (dist/index.js and the storage entries) stay tsc's output.
//
// Left outside the bundle, loaded from node_modules as before: Node's own
// modules, native addons and packages that load files of their own by path
// at run time (better-sqlite3's addon, pg and its optional native driver,
// graphile-worker's plugins, pino's transport workers), and prom-client, yauzl,
// yazl and the MCP SDK, which few commands need and which are loaded on first
// use (src/service/metrics.ts, src/proof/evidence/zip-modules.ts,
// src/review/tools/socket.ts): the first three load Node's HTTP or zlib
// modules as they load, and the SDK builds a few hundred zod schemas.
//
// The bundle carries code of other packages, so their licence texts go beside
// it in dist/cli/THIRD-PARTY-LICENSES.txt.
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { rolldown } from 'rolldown';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'dist', 'cli', 'main.js');
const loaderFile = join(root, 'dist', 'cli', 'main.cjs');
const bundleFile = join(root, 'dist', 'cli', 'proofgate.cjs');
const licencesFile = join(root, 'dist', 'cli', 'THIRD-PARTY-LICENSES.txt');
const KEEP_OUTSIDE = new Set(['better-sqlite3', 'pg', 'pg-native', 'graphile-worker', 'pino', 'prom-client', 'yauzl', 'yazl', '@modelcontextprotocol/sdk']);

function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

function external(id) {
  if (id.startsWith('node:')) return true;
  if (id.startsWith('.') || id.startsWith('/') || id.startsWith('\0')) return false;
  return KEEP_OUTSIDE.has(packageName(id));
}

/** The package folder (under node_modules) a bundled file belongs to, or null for our own code. */
function packageDirOf(file) {
  const rel = relative(root, file).split(sep);
  const at = rel.lastIndexOf('node_modules');
  if (at < 0) return null;
  const name = rel[at + 1]?.startsWith('@') ? rel.slice(at + 1, at + 3) : rel.slice(at + 1, at + 2);
  return join(root, ...rel.slice(0, at + 1), ...name);
}

function licenceOf(dir) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const names = ['LICENSE', 'LICENSE.md', 'LICENSE.txt', 'license', 'license.md', 'LICENCE', 'LICENSE-MIT'];
  const found = names.map((name) => join(dir, name)).find((path) => existsSync(path));
  const text = found ? readFileSync(found, 'utf8').trim() : `(no licence file; package.json says: ${manifest.license ?? 'nothing'})`;
  return `${manifest.name}@${manifest.version} (${manifest.license ?? 'unknown'})\n\n${text}\n`;
}

if (readFileSync(entry, 'utf8').includes('./main.cjs')) {
  throw new Error("bundle-cli: dist/cli/main.js is the forwarder an earlier build wrote, not tsc's entry: run tsc first (npm run build does both)");
}
const bundle = await rolldown({ input: entry, platform: 'node', external, logLevel: 'warn' });
// ASCII output (non-ASCII characters escaped) without JSDoc comments, which hold most of the rest: the loader reads an
// ASCII bundle as Latin-1, much cheaper than decoding UTF-8, and V8 keeps it as a one-byte string.
const { output } = await bundle.generate({ format: 'cjs', sourcemap: false, charset: 'ascii', comments: { jsdoc: false, legal: true, annotation: true } });
await bundle.close();
if (output.length !== 1 || output[0].type !== 'chunk') {
  throw new Error(`bundle-cli: expected one chunk, got ${output.map((item) => item.fileName).join(', ')}`);
}
const [chunk] = output;
const packages = [...new Set(chunk.moduleIds.map(packageDirOf).filter((dir) => dir !== null))].sort();
// The entry's `#!` line is not JavaScript inside the loader's function (its line stays, empty, so line numbers hold).
const code = chunk.code.replace(/^#!.*/, '');
writeFileSync(bundleFile, code);
rmSync(`${bundleFile}.cache`, { force: true });
// The loader (scripts/cli-loader.cjs) is the bin; tsc's entry, now in the bundle, becomes a module that runs it (tsc's
// source map described the entry as it was).
writeFileSync(loaderFile, `#!/usr/bin/env node\n${readFileSync(join(root, 'scripts', 'cli-loader.cjs'), 'utf8')}`, { mode: 0o755 });
writeFileSync(
  entry,
  `#!/usr/bin/env node\n// The \`proofgate\` command: dist/cli/main.cjs (the package's bin) runs it; see scripts/cli-loader.cjs.\nimport { createRequire } from 'node:module';\ncreateRequire(import.meta.url)('./main.cjs');\n`,
);
rmSync(`${entry}.map`, { force: true });
// The code cache: V8's compiled code for the bundle after it ran `--help` (which builds every command's options),
// saved by the loader at exit.
const warm = spawnSync(
  process.execPath,
  [
    '--input-type=module',
    '-e',
    `globalThis[Symbol.for('proofgate.cli.codeCache')] = 'write'; process.argv = [process.argv[0], ${JSON.stringify(loaderFile)}, '--help']; await import(${JSON.stringify(pathToFileURL(loaderFile).href)});`,
  ],
  { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' },
);
if (warm.status !== 0 || !existsSync(`${bundleFile}.cache`))
  throw new Error(`bundle-cli: the code cache was not written (exit ${warm.status}): ${warm.stderr}`);
writeFileSync(
  licencesFile,
  `The file proofgate.cjs beside this one bundles code of the following packages.\n\n${packages.map(licenceOf).join(`\n${'-'.repeat(72)}\n\n`)}`,
);

// The observer dashboard's files (plain HTML, CSS and JS modules: no build step) and uPlot's, beside the
// built module that serves them (dist/service/dashboard/), which the bundle finds from dist/cli/ too.
const dashboardAssets = join(root, 'dist', 'service', 'dashboard', 'assets');
cpSync(join(root, 'src', 'service', 'dashboard', 'assets'), dashboardAssets, { recursive: true });
mkdirSync(join(dashboardAssets, 'vendor'), { recursive: true });
const uplotDist = dirname(createRequire(import.meta.url).resolve('uplot/dist/uPlot.esm.js'));
for (const name of ['uPlot.esm.js', 'uPlot.min.css']) copyFileSync(join(uplotDist, name), join(dashboardAssets, 'vendor', name));
copyFileSync(join(uplotDist, '..', 'LICENSE'), join(dashboardAssets, 'vendor', 'uPlot-LICENSE'));
