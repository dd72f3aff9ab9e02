import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SEED = resolve(ROOT, '../shared/seeds/proof-bound-acceptance-and-approval.md');
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

/** Compile one program in the consumer folder with a given tsc and run it; returns its stdout. */
function compileAndRun(tsc: string, file: string, outDir: string): string {
  writeFileSync(join(consumer, `tsconfig.${outDir}.json`), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, outDir,
      types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')],
    },
    files: [file],
  }));
  const compiled = spawnSync(process.execPath, [tsc, '-p', `tsconfig.${outDir}.json`], { cwd: consumer, encoding: 'utf8' });
  expect(`${compiled.stdout}${compiled.stderr}`).toBe('');
  expect(compiled.status).toBe(0);
  const ran = spawnSync(process.execPath, [join(outDir, file.replace(/\.ts$/, '.js'))], { cwd: consumer, encoding: 'utf8', timeout: 60_000 });
  expect(ran.stderr).toBe('');
  return ran.stdout.trim();
}

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
  }, 300_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs outside the project and resolves the public entry points', () => {
    expect(consumer.startsWith(ROOT)).toBe(false);
    const out = execFileSync(process.execPath, ['--input-type=module', '-e',
      "const m = await import('proofgate'); const s = await import('proofgate/storage/local'); console.log(typeof m.compileGraph, typeof s.createLocalRunStorage)"],
    { cwd: consumer, encoding: 'utf8' });
    expect(out.trim()).toBe('function function');
  });

  it('compiles (tsc --strict, TypeScript 5.9) and runs our example, printing the expected report', () => {
    copyFileSync(join(ROOT, 'examples/proof-bound-approval.ts'), join(consumer, 'example.ts'));
    expect(JSON.parse(compileAndRun(TSC, 'example.ts', 'out-example'))).toEqual(EXPECTED);
  });

  function seedSource(): { source: string; report: string } {
    const text = readFileSync(SEED, 'utf8');
    const program = /```ts[^\n]*\n([\s\S]*?)```/.exec(text)?.[1];
    const report = /```json[^\n]*\n([\s\S]*?)```/.exec(text)?.[1];
    if (!program || !report) throw new Error('seed document has no ts or json block');
    const source = program
      .replaceAll("'@obversa/runtime/storage/local'", "'proofgate/storage/local'")
      .replaceAll("'@obversa/runtime'", "'proofgate'");
    return { source, report: report.trim() };
  }

  it.skipIf(!existsSync(SEED))('compiles and runs the seed document program with only its import specifiers changed', () => {
    const { source, report } = seedSource();
    writeFileSync(join(consumer, 'seed.ts'), source);
    expect(compileAndRun(TSC, 'seed.ts', 'out-seed')).toBe(report);
  });

  it('compiles (tsc --strict, TypeScript 7) and runs our example', () => {
    copyFileSync(join(ROOT, 'examples/proof-bound-approval.ts'), join(consumer, 'example7.ts'));
    expect(JSON.parse(compileAndRun(TSC7, 'example7.ts', 'out-ts7'))).toEqual(EXPECTED);
  });

  it.skipIf(!existsSync(SEED))('compiles the seed document program with TypeScript 7 too', () => {
    const { source, report } = seedSource();
    writeFileSync(join(consumer, 'seed7.ts'), source);
    expect(compileAndRun(TSC7, 'seed7.ts', 'out-seed7')).toBe(report);
  });
});
