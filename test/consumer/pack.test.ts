import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
// The seed document lives in ../shared beside the repository, which a clone does not have.
const SEED = resolve(ROOT, '../shared/seeds/proof-bound-acceptance-and-approval.md');
const NO_SEED = 'no ../shared/seeds/proof-bound-acceptance-and-approval.md beside the repository, nothing to cross-check';
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
// The TypeScript 7 line, installed as the devDependency alias `typescript7`.
const TSC7 = join(ROOT, 'node_modules/typescript7/bin/tsc');
const EXPECTED = {
  proof: { digest: 'sha256:db5b2a0eb5743b52617a78335dbc003a9a10619dc6cab05f6099f81c9b7fb329', byteLength: 133, recordsShareDigest: true },
  callback: { responseSurvivedReopen: true, changedRequest: true },
  acceptedResult: { unchanged: 'accepted', changedAnchor: 'wait' },
  approval: { unchanged: 'allow', changedOutput: 'wait' },
};

let work = '';
let consumer = '';

function npm(args: string[], cwd: string): { ok: boolean; output: string } {
  const result = spawnSync('npm', args, { cwd, encoding: 'utf8', timeout: 240_000, env: { ...process.env, npm_config_update_notifier: 'false' } });
  return { ok: result.status === 0, output: `${result.stdout}\n${result.stderr}` };
}

/** The output of one tsc run over several programs: the diagnostics, each as one block of text. */
interface Compiled {
  readonly status: number | null;
  readonly diagnostics: readonly string[];
}

/**
 * Compile `files` in the consumer folder with a given tsc, as one program (one
 * tsc start and one load of the package's and Node's types per TypeScript
 * version, however many programs are checked).
 */
function compile(tsc: string, files: readonly string[], outDir: string): Compiled {
  writeFileSync(
    join(consumer, `tsconfig.${outDir}.json`),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        outDir,
        rootDir: '.',
        types: ['node'],
        typeRoots: [join(ROOT, 'node_modules/@types')],
        // TypeScript's own lib files are not ours to check; the package's declarations and @types/node still are.
        skipDefaultLibCheck: true,
      },
      files,
    }),
  );
  const compiled = spawnSync(process.execPath, [tsc, '-p', `tsconfig.${outDir}.json`, '--pretty', 'false'], { cwd: consumer, encoding: 'utf8' });
  // A diagnostic starts at the beginning of a line; its continuation lines are indented.
  const diagnostics = `${compiled.stdout}${compiled.stderr}`
    .split(/\n(?=\S)/)
    .map((block) => block.trim())
    .filter((block) => block !== '');
  return { status: compiled.status, diagnostics };
}

/** Run a program `compile` emitted; returns its stdout. */
function run(outDir: string, file: string): string {
  const ran = spawnSync(process.execPath, [join(outDir, file.replace(/\.ts$/, '.js'))], { cwd: consumer, encoding: 'utf8', timeout: 60_000 });
  expect(ran.stderr).toBe('');
  expect(ran.status).toBe(0);
  return ran.stdout.trim();
}

/**
 * The diagnostics that concern `file`: every one except those naming another
 * of the compiled programs (an error in the package's own declarations
 * concerns every program).
 */
function diagnosticsFor(compiled: Compiled, file: string, files: readonly string[]): string[] {
  const others = files.filter((other) => other !== file);
  return compiled.diagnostics.filter((diagnostic) => !others.some((other) => diagnostic.startsWith(`${other}(`)));
}

const PROGRAMS = ['example.ts', ...(existsSync(SEED) ? ['seed.ts'] : [])];
const compiledBy = new Map<string, Compiled>();

/** Compile every program with `tsc` once (on first use) and return what tsc said about `file`. */
function compiledFor(tsc: string, outDir: string, file: string): string[] {
  let compiled = compiledBy.get(tsc);
  if (compiled === undefined) {
    compiled = compile(tsc, PROGRAMS, outDir);
    compiledBy.set(tsc, compiled);
  }
  if (compiled.diagnostics.length === 0) expect(compiled.status).toBe(0);
  return diagnosticsFor(compiled, file, PROGRAMS);
}

// npm pack and install, and a full type check per TypeScript version.
describe('packed package in a clean consumer', () => {
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'proofgate-pack-'));
    // Packs the current build (`npm test` builds first); `prepare` is not re-run here.
    if (!existsSync(join(ROOT, 'dist/index.js'))) throw new Error('dist/ is missing: run npm run build first');
    const packed = npm(['pack', '--silent', '--ignore-scripts', '--pack-destination', work], ROOT);
    expect(packed.ok, packed.output).toBe(true);
    const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
    if (!tarball) throw new Error('npm pack wrote no tarball');
    consumer = join(work, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'proofgate-consumer', private: true, type: 'module' }));
    // Install scripts are skipped (no network for prebuilt binaries); the native SQLite binding is copied from this checkout below.
    let installed = npm(['install', join(work, tarball), '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], consumer);
    if (!installed.ok) installed = npm(['install', join(work, tarball), '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], consumer);
    expect(installed.ok, installed.output).toBe(true);
    const binding = 'node_modules/better-sqlite3/build/Release/better_sqlite3.node';
    mkdirSync(dirname(join(consumer, binding)), { recursive: true });
    copyFileSync(join(ROOT, binding), join(consumer, binding));
    copyFileSync(join(ROOT, 'examples/proof-bound-approval.ts'), join(consumer, 'example.ts'));
    if (existsSync(SEED)) writeFileSync(join(consumer, 'seed.ts'), seedSource().source);
  }, 300_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs outside the project and resolves the public entry points', () => {
    expect(consumer.startsWith(ROOT)).toBe(false);
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('proofgate'); const s = await import('proofgate/storage/local'); console.log(typeof m.compileGraph, typeof s.createLocalRunStorage)",
      ],
      { cwd: consumer, encoding: 'utf8' },
    );
    expect(out.trim()).toBe('function function');
  });

  it('compiles (tsc --strict, TypeScript 5.9) and runs our example, printing the expected report', () => {
    expect(compiledFor(TSC, 'out-ts5', 'example.ts')).toEqual([]);
    expect(JSON.parse(run('out-ts5', 'example.ts'))).toEqual(EXPECTED);
  });

  function seedSource(): { source: string; report: string } {
    const text = readFileSync(SEED, 'utf8');
    const program = /```ts[^\n]*\n([\s\S]*?)```/.exec(text)?.[1];
    const report = /```json[^\n]*\n([\s\S]*?)```/.exec(text)?.[1];
    if (!program || !report) throw new Error('seed document has no ts or json block');
    const source = program.replaceAll("'@obversa/runtime/storage/local'", "'proofgate/storage/local'").replaceAll("'@obversa/runtime'", "'proofgate'");
    return { source, report: report.trim() };
  }

  it('compiles and runs the seed document program with only its import specifiers changed', (ctx) => {
    ctx.skip(!existsSync(SEED), NO_SEED);
    expect(compiledFor(TSC, 'out-ts5', 'seed.ts')).toEqual([]);
    expect(run('out-ts5', 'seed.ts')).toBe(seedSource().report);
  });

  it('compiles (tsc --strict, TypeScript 7) and runs our example', () => {
    expect(compiledFor(TSC7, 'out-ts7', 'example.ts')).toEqual([]);
    expect(JSON.parse(run('out-ts7', 'example.ts'))).toEqual(EXPECTED);
  });

  it('compiles the seed document program with TypeScript 7 too', (ctx) => {
    ctx.skip(!existsSync(SEED), NO_SEED);
    expect(compiledFor(TSC7, 'out-ts7', 'seed.ts')).toEqual([]);
    expect(run('out-ts7', 'seed.ts')).toBe(seedSource().report);
  });
});
