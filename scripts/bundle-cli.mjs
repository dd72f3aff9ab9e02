// Bundles the command-line entry (dist/cli/main.js, as tsc emitted it) into
// one file in place, with its pure-JavaScript dependencies inside.
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
// graphile-worker's plugins, pino's transport workers).
//
// The bundle carries code of other packages, so their licence texts go beside
// it in dist/cli/THIRD-PARTY-LICENSES.txt.
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'dist', 'cli', 'main.js');
const licencesFile = join(root, 'dist', 'cli', 'THIRD-PARTY-LICENSES.txt');
const KEEP_OUTSIDE = new Set(['better-sqlite3', 'pg', 'pg-native', 'graphile-worker', 'pino']);

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

const bundle = await rolldown({ input: entry, platform: 'node', external, logLevel: 'warn' });
const { output } = await bundle.generate({ format: 'esm', sourcemap: false });
await bundle.close();
if (output.length !== 1 || output[0].type !== 'chunk') {
  throw new Error(`bundle-cli: expected one chunk, got ${output.map((item) => item.fileName).join(', ')}`);
}
const [chunk] = output;
const packages = [...new Set(chunk.moduleIds.map(packageDirOf).filter((dir) => dir !== null))].sort();
writeFileSync(entry, chunk.code.startsWith('#!') ? chunk.code : `#!/usr/bin/env node\n${chunk.code}`);
// tsc's source map described the two-line entry, not the bundle.
rmSync(`${entry}.map`, { force: true });
writeFileSync(
  licencesFile,
  `The file main.js beside this one bundles code of the following packages.\n\n${packages.map(licenceOf).join(`\n${'-'.repeat(72)}\n\n`)}`,
);

// The observer dashboard's files (plain HTML, CSS and JS modules: no build step) and uPlot's, beside the
// built module that serves them (dist/service/dashboard/), which the bundle finds from dist/cli/ too.
const dashboardAssets = join(root, 'dist', 'service', 'dashboard', 'assets');
cpSync(join(root, 'src', 'service', 'dashboard', 'assets'), dashboardAssets, { recursive: true });
mkdirSync(join(dashboardAssets, 'vendor'), { recursive: true });
const uplotDist = dirname(createRequire(import.meta.url).resolve('uplot/dist/uPlot.esm.js'));
for (const name of ['uPlot.esm.js', 'uPlot.min.css']) copyFileSync(join(uplotDist, name), join(dashboardAssets, 'vendor', name));
copyFileSync(join(uplotDist, '..', 'LICENSE'), join(dashboardAssets, 'vendor', 'uPlot-LICENSE'));
