import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers.js';

const doc = `{ "result": {"tests": 21, "passed": true},\n "inputs": {"proposal": "sha256:${'1'.repeat(64)}"} }\n`;

describe('proofgate canonicalize / digest', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pg-cli-'));
  const file = join(dir, 'doc.json');
  writeFileSync(file, doc);

  it('canonicalize writes the canonical bytes with no trailing newline', () => {
    const out = runCli(['canonicalize', file]);
    expect(out.status).toBe(0);
    expect(out.stdout).toBe(`{"inputs":{"proposal":"sha256:${'1'.repeat(64)}"},"result":{"passed":true,"tests":21}}`);
  });

  it('digest prints the known answer, also from stdin', () => {
    const expected = 'sha256:db5b2a0eb5743b52617a78335dbc003a9a10619dc6cab05f6099f81c9b7fb329';
    expect(runCli(['digest', file]).stdout.trim()).toBe(expected);
    expect(runCli(['digest', '-'], { input: doc }).stdout.trim()).toBe(expected);
    expect(JSON.parse(runCli(['digest', '--json', file]).stdout)).toEqual({ digest: expected, byteLength: 133 });
  });

  it('invalid JSON is one line on stderr and exit 1', () => {
    const out = runCli(['digest', '-'], { input: '{"a":' });
    expect(out.status).toBe(1);
    expect(out.stdout).toBe('');
    expect(out.stderr.trim().split('\n')).toHaveLength(1);
    expect(out.stderr).toMatch(/not valid JSON/);
  });

  it('a missing file is exit 1, a usage error is exit 2, help is exit 0', () => {
    expect(runCli(['digest', join(dir, 'missing.json')]).status).toBe(1);
    const usage = runCli(['digest']);
    expect(usage.status).toBe(2);
    expect(usage.stderr.trim().split('\n')).toHaveLength(1);
    const help = runCli(['digest', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/sha256/);
  });
});

describe('proofgate with no command', () => {
  it('prints help to stderr and exits 2 (usage), for the program and for a command group', () => {
    for (const args of [[], ['runs'], ['change']]) {
      const out = runCli(args);
      expect(out.status).toBe(2);
      expect(out.stdout).toBe('');
      expect(out.stderr).toMatch(/Usage: proofgate/);
    }
    expect(runCli(['--help']).status).toBe(0);
  });

  it('canonicalize refuses duplicate member names and invalid UTF-8 (exit 1, one line)', () => {
    const dup = runCli(['canonicalize', '-'], { input: '{"a":1,"a":2}' });
    expect(dup.status).toBe(1);
    expect(dup.stderr.trim().split('\n')).toHaveLength(1);
    expect(dup.stderr).toMatch(/occurs twice/);
  });
});
