import { spawnSync } from 'node:child_process';
import { isAscii } from 'node:buffer';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI } from './helpers.js';

// The command's loader (scripts/cli-loader.cjs, built as dist/cli/main.cjs) runs the bundle dist/cli/proofgate.cjs
// with V8's code cache dist/cli/proofgate.cjs.cache. These run the loader in 'report' mode, in which it says on
// stderr at exit whether V8 used the cache, and check what the command printed.
const built = dirname(CLI);
const copies: string[] = [];

afterEach(() => {
  for (const dir of copies.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The loader, bundle and cache copied to a new folder inside dist (packages and package.json resolve from there as from dist/cli). */
function copyOfCli(): string {
  const dir = mkdtempSync(join(dirname(built), 'cli-copy-'));
  copies.push(dir);
  for (const name of ['main.cjs', 'proofgate.cjs', 'proofgate.cjs.cache']) copyFileSync(join(built, name), join(dir, name));
  return dir;
}

function help(dir: string): { status: number | null; stdout: string; cache: string } {
  const main = join(dir, 'main.cjs');
  const code = `globalThis[Symbol.for('proofgate.cli.codeCache')] = 'report'; process.argv = [process.argv[0], ${JSON.stringify(main)}, '--help']; await import(${JSON.stringify(`file://${main}`)});`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 120_000, killSignal: 'SIGKILL' });
  return { status: result.status, stdout: result.stdout, cache: /code cache: (\w+)/.exec(result.stderr)?.[1] ?? `no report: ${result.stderr}` };
}

describe('the CLI loader and its code cache', () => {
  it('the build leaves a cache that V8 takes, and the command works with it', () => {
    const run = help(built);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('Review, prove and merge');
    expect(run.cache).toBe('used');
  });

  it('a bundle changed after the build (same length) runs as it is now: the cache of the old bytes is not used', () => {
    const dir = copyOfCli();
    const bundle = join(dir, 'proofgate.cjs');
    const before = readFileSync(bundle, 'utf8');
    const after = before.replace('Review, prove and merge', 'Review, PROVE and merge');
    expect(after).not.toBe(before);
    writeFileSync(bundle, after);
    // Same length: V8's own check of a cache (its version, flags and the source's length) would accept it.
    expect(statSync(bundle).size).toBe(Buffer.byteLength(before));
    const run = help(dir);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('Review, PROVE and merge');
    expect(run.cache).toBe('none');
  });

  it('a damaged cache with the right header is refused by V8 and the command still works', () => {
    const dir = copyOfCli();
    const cacheFile = join(dir, 'proofgate.cjs.cache');
    const cache = readFileSync(cacheFile);
    const header = cache.indexOf(0x0a) + 1;
    for (let i = header; i < cache.length; i += 7) cache[i] = cache[i]! ^ 0x5a;
    writeFileSync(cacheFile, cache);
    const run = help(dir);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('Review, prove and merge');
    expect(run.cache).toBe('refused');
  });

  it('the bundle is ASCII (read as Latin-1); one edited with other text is read as UTF-8 and prints that text whole', () => {
    expect(isAscii(readFileSync(join(built, 'proofgate.cjs')))).toBe(true);
    const dir = copyOfCli();
    const bundle = join(dir, 'proofgate.cjs');
    writeFileSync(bundle, readFileSync(bundle, 'utf8').replace('Review, prove and merge', 'Review, prüve and merge \u{1F512}'));
    const run = help(dir);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('Review, prüve and merge \u{1F512}');
    expect(run.cache).toBe('none');
  });

  it('dist/cli/main.js runs the same command as the bin, dist/cli/main.cjs', () => {
    const viaModule = spawnSync(process.execPath, [join(built, 'main.js'), '--version'], { encoding: 'utf8', timeout: 120_000, killSignal: 'SIGKILL' });
    const viaBin = spawnSync(process.execPath, [CLI, '--version'], { encoding: 'utf8', timeout: 120_000, killSignal: 'SIGKILL' });
    expect(viaBin.status).toBe(0);
    expect(viaBin.stdout).toMatch(/^\d+\.\d+\.\d+/);
    expect(viaModule.status).toBe(0);
    expect(viaModule.stdout).toBe(viaBin.stdout);
  });

  it('without a cache the command compiles the bundle and works', () => {
    const dir = copyOfCli();
    rmSync(join(dir, 'proofgate.cjs.cache'));
    const run = help(dir);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('Review, prove and merge');
    expect(run.cache).toBe('none');
  });
});
