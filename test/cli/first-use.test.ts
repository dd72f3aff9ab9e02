import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from './helpers.js';

// The CLI bundle holds every pure-JavaScript package the command needs; the ones it leaves outside
// (scripts/bundle-cli.mjs) are loaded from node_modules on first use, so that a command that needs none
// of them does not pay for them at its start (docs/cli.md). These run the built command with a preload
// that records every module it requires, and check which packages a command loaded.

const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-first-use-'));
  dirs.push(dir);
  return dir;
}

/** Loaded through require at run time, so the preload sees each one by name. */
const RECORDER = `
const Module = require('node:module');
const { writeFileSync } = require('node:fs');
const requested = new Set();
const load = Module._load;
Module._load = function (request, ...rest) {
  requested.add(request);
  return load.call(this, request, ...rest);
};
process.on('exit', () => writeFileSync(process.env.PROOFGATE_TEST_REQUIRES, [...requested].join('\\n')));
`;

/** The packages (not Node's own modules, not files of a package) the command required, and how it ended. */
function packagesLoaded(args: readonly string[]): { status: number | null; stderr: string; packages: string[] } {
  const dir = tempDir();
  const recorder = join(dir, 'recorder.cjs');
  const out = join(dir, 'requires.txt');
  writeFileSync(recorder, RECORDER);
  const result = runCli(args, { env: { NODE_OPTIONS: `--require "${recorder}"`, PROOFGATE_TEST_REQUIRES: out } });
  const requests = readFileSync(out, 'utf8').split('\n');
  const packages = requests
    .filter((request) => request !== '' && !request.startsWith('.') && !request.startsWith('/') && !request.startsWith('node:'))
    .filter((request) => !isBuiltin(request))
    .map((request) =>
      request
        .split('/')
        .slice(0, request.startsWith('@') ? 2 : 1)
        .join('/'),
    );
  return { status: result.status, stderr: result.stderr, packages: [...new Set(packages)].sort() };
}

describe('packages the CLI loads on first use', () => {
  it('--version, --help, digest and github manifest load no package from node_modules', () => {
    const json = join(tempDir(), 'doc.json');
    writeFileSync(json, '{"b":1,"a":2}');
    for (const args of [['--version'], ['--help'], ['digest', json], ['github', 'manifest']]) {
      const run = packagesLoaded(args);
      expect(run.status, `${args.join(' ')}: ${run.stderr}`).toBe(0);
      expect(run.packages, args.join(' ')).toEqual([]);
    }
  });

  it('a command that opens the store loads better-sqlite3, and nothing it does not use (the MCP SDK, PostgreSQL, metrics)', () => {
    const run = packagesLoaded(['token', 'list', '--data', tempDir()]);
    expect(run.status, run.stderr).toBe(0);
    expect(run.packages).toContain('better-sqlite3');
    for (const unused of ['@modelcontextprotocol/sdk', 'pg', 'graphile-worker', 'prom-client', 'yauzl', 'yazl']) {
      expect(run.packages).not.toContain(unused);
    }
  });
});
