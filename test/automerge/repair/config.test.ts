import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ALLOWED_ENVIRONMENT,
  commandEnvironment,
  DEFAULT_AGENT_FIX_TIMEOUT_SECONDS,
  DEFAULT_GATE_TIMEOUT_SECONDS,
  DEFAULT_REPAIR_OUTPUT_BYTES,
  repairConfigFrom,
  validateRepairConfig,
} from '../../../src/automerge/repair/index.js';
import { parseRepoConfigYaml } from '../../../src/contracts/repo-config.js';
import { runCommand } from '../../../src/automerge/repair/process.js';

describe('repairConfigFrom', () => {
  it.each([
    ['no automerge section', '', { gate: null, agentFix: null }],
    ['a gate only', 'automerge:\n  gate: [npm, test]\n', { gate: ['npm', 'test'], agentFix: null }],
    [
      'gate and agent-fix',
      'automerge:\n  gate: [npm, run, check]\n  agentFix:\n    command: [codex, exec, --full-auto]\n',
      { gate: ['npm', 'run', 'check'], agentFix: { command: ['codex', 'exec', '--full-auto'], timeoutSeconds: DEFAULT_AGENT_FIX_TIMEOUT_SECONDS } },
    ],
  ])('%s', (_name, yaml, expected) => {
    const config = repairConfigFrom(parseRepoConfigYaml(yaml, 'main:.proofgate.yml'));
    expect(config).toEqual({ ...expected, timeoutSeconds: DEFAULT_GATE_TIMEOUT_SECONDS, maxOutputBytes: DEFAULT_REPAIR_OUTPUT_BYTES, sandbox: 'jail' });
  });

  it.each([
    [{ gate: [], agentFix: null, timeoutSeconds: 1, maxOutputBytes: 1 }, 'repair config gate: expected a nonempty argv of nonempty strings'],
    [
      { gate: null, agentFix: { command: ['x', ''], timeoutSeconds: 1 }, timeoutSeconds: 1, maxOutputBytes: 1 },
      'repair config agentFix.command: expected a nonempty argv of nonempty strings',
    ],
    [
      { gate: null, agentFix: { command: ['x'], timeoutSeconds: 0 }, timeoutSeconds: 1, maxOutputBytes: 1 },
      'repair config agentFix.timeoutSeconds: expected a number > 0',
    ],
    [{ gate: null, agentFix: null, timeoutSeconds: Number.NaN, maxOutputBytes: 1 }, 'repair config timeoutSeconds: expected a number > 0'],
    [{ gate: null, agentFix: null, timeoutSeconds: 1, maxOutputBytes: 0.5 }, 'repair config maxOutputBytes: expected an integer >= 1'],
  ])('refuses a bad config: %j', (config, message) => {
    expect(() => validateRepairConfig(config)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT', message }));
  });
});

describe('commandEnvironment', () => {
  const source = {
    PATH: '/usr/bin:/bin',
    HOME: '/home/dev',
    LANG: 'C.UTF-8',
    GITHUB_TOKEN: 'ghp_x',
    NPM_TOKEN: 'npm_x',
    AWS_SECRET_ACCESS_KEY: 'aws',
    PROOFGATE_SECRET: 'pg',
    DATABASE_URL: 'postgres://u:p@h/db',
    SSH_AUTH_SOCK: '/tmp/agent.sock',
    GIT_ASKPASS: '/usr/bin/askpass',
    OPENAI_API_KEY: 'sk-x',
  };
  it('keeps only allow-listed variables, then adds the extras', () => {
    expect(commandEnvironment(source, { PROOFGATE_REPAIR_KIND: 'fix-checks' })).toEqual({
      PATH: '/usr/bin:/bin',
      HOME: '/home/dev',
      LANG: 'C.UTF-8',
      PROOFGATE_REPAIR_KIND: 'fix-checks',
    });
  });
  it('allows no name that looks like a credential', () => {
    expect(ALLOWED_ENVIRONMENT.filter((name) => /TOKEN|SECRET|KEY|PASS|AUTH/.test(name))).toEqual([]);
  });
});

describe('runCommand', () => {
  // The output cap and start failures, unjailed (the jail itself is tested in agent-fix.test.ts).
  const plainJob = () => {
    const jobDir = mkdtempSync(join(tmpdir(), 'proofgate-run-command-'));
    jobs.push(jobDir);
    return { jobDir, tree: jobDir, home: jobDir, tmp: jobDir };
  };
  const jobs: string[] = [];
  afterAll(() => {
    for (const dir of jobs) rmSync(dir, { recursive: true, force: true });
  });
  it('keeps the tail of a long output within the cap', async () => {
    const script = "for (let i = 0; i < 20000; i += 1) console.log('line ' + i); console.log('the end');";
    const result = await runCommand({
      argv: [process.execPath, '-e', script],
      job: plainJob(),
      sandbox: 'none',
      env: commandEnvironment(process.env),
      timeoutMs: 20_000,
      maxOutputBytes: 1000,
    });
    expect(result).toMatchObject({ exitCode: 0, timedOut: false, truncated: true });
    expect(Buffer.byteLength(result.output)).toBeLessThanOrEqual(1000);
    expect(result.output).toContain('line 19999');
    expect(result.output.trimEnd().endsWith('the end')).toBe(true);
  });

  it('reports a command that cannot start', async () => {
    const result = await runCommand({
      argv: ['/nonexistent/proofgate-agent'],
      job: plainJob(),
      sandbox: 'none',
      env: {},
      timeoutMs: 5000,
      maxOutputBytes: 100,
    });
    expect(result.exitCode).toBeNull();
    expect(result.startError).toContain('ENOENT');
  });
});
