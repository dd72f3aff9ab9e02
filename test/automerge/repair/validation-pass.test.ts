import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GATE_OUTPUT_MAX_BYTES, VALIDATION_PASSES, runRepair, type RepairConfig } from '../../../src/automerge/repair/index.js';
import { boundGateOutput, makeRedactor } from '../../../src/automerge/repair/context-file.js';
import { withoutCutLine } from '../../../src/automerge/repair/process.js';
import type { SandboxMode } from '../../../src/host/index.js';
import { survivors } from '../../attacks/support.js';
import { jailSkipReason, sandboxForTests } from '../../support/jail.js';
import { finished, loopFixture, repoConfig, type LoopFixture } from '../loop/local-support.js';
import { cleanupScenarios, clean, failingChange, seen, type Scenario } from './agent-scenario.js';
import { FAILS, FIX_FROM_GATE_OUTPUT, HANGING_CHECK, HOSTILE_ACTION, LOGGING_CHECK, floodingCheck, leakyCheck, twoPass } from './agent-scripts.js';

/**
 * A failed gate goes back to the agent once: the agent gets the gate's
 * output (redacted, bounded, a file beside its context file) for one
 * validation pass on top of the commit that failed, and the gate judges the
 * new tip. It is all one repair: at most one push, one spend of the caps.
 */

let loop: LoopFixture | null = null;
afterEach(async () => {
  await cleanupScenarios();
  await loop?.cleanup();
  loop = null;
});

let sandbox: SandboxMode = 'jail';
let skipJail: string | null = null;
beforeAll(async () => {
  sandbox = await sandboxForTests();
  skipJail = await jailSkipReason();
});

/** The first pass's wrong fix. */
const ALMOST = String.raw`fs.writeFileSync('value.txt', 'almost\n');`;

interface PassReport {
  pass: number;
  env: Record<string, string>;
  contextPath: string;
  contextRaw: string;
  context: { worktree: { startSha: string; rebasedOnto: string | null }; failingChecks: { log: string }[]; validation: Record<string, unknown> | null };
  outputPath: string | null;
  gateOutput: string | null;
  outputSize: number | null;
  hasGit: boolean;
  value: string;
  [attempt: string]: unknown;
}

const pass = (s: Scenario, n: 1 | 2) => seen<PassReport>(s, `.pass${n}`);
const short = (sha: string) => sha.slice(0, 12);

/** The scenario's config with the gate `gate` (and more overrides). */
function withGate(s: Scenario, gate: readonly string[], more: Partial<RepairConfig> = {}): RepairConfig {
  return { ...s.config, gate: [...gate], ...more };
}

function gateLog(s: Scenario): string[] {
  const path = join(s.cache, 'gate.log');
  return existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
    : [];
}

describe('runRepair: a failed gate goes back to agent-fix once', () => {
  it('the agent fixes what the gate reported on its validation pass: one push, of the tip the gate passed', async () => {
    expect(VALIDATION_PASSES).toBe(1);
    const s = await failingChange(sandbox, twoPass(ALMOST, FIX_FROM_GATE_OUTPUT));
    const { f, snapshot } = s;
    const config = withGate(s, ['node', s.script('gate.cjs', LOGGING_CHECK), join(s.cache, 'gate.log')]);
    const lines: string[] = [];

    const outcome = await runRepair(await s.context({ config, onProgress: (line) => lines.push(line) }));

    expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', oldHead: snapshot.head.sha, gated: true });
    if (outcome.kind !== 'pushed') throw new Error('not pushed');
    const [first = '', second = ''] = outcome.commits;
    expect(outcome.commits).toHaveLength(2);
    expect(second).toBe(outcome.newHead);
    expect(f.git(['rev-parse', `${second}^`, `${first}^`]).split('\n')).toEqual([first, snapshot.head.sha]);
    // The gate judged the first commit (and failed), then exactly the commit that was published.
    expect(gateLog(s)).toEqual([`${first} almost`, `${second} ok`]);
    expect(f.pushes).toEqual([{ branch: 'feature', newSha: second, expectedOldSha: snapshot.head.sha }]);
    expect(f.sha('feature')).toBe(second);
    expect(f.show('feature', 'value.txt')).toBe('ok');
    expect(f.git(['log', '-1', '--format=%s', second])).toBe(`proofgate agent-fix: fix-checks for change ${snapshot.id} (validation pass 1)`);

    const one = pass(s, 1);
    const two = pass(s, 2);
    expect(one.context.validation).toBeNull();
    expect(one.outputPath).toBeNull();
    // The validation pass starts from the commit the gate failed on, and reads the gate's output from its file.
    expect(two.value).toBe('almost\n');
    expect(two.env.PROOFGATE_START_SHA).toBe(first);
    expect(two.context.worktree.startSha).toBe(first);
    expect(two.context.validation).toEqual({
      pass: 1,
      passes: 1,
      failedSha: first,
      gate: { command: config.gate, ended: 'exited with 1' },
      outputFile: 'gate-output.txt',
      outputEnv: 'PROOFGATE_GATE_OUTPUT',
      outputBytes: Buffer.byteLength(two.gateOutput ?? ''),
      outputTruncated: false,
    });
    expect(two.gateOutput).toBe('value.txt must say ok, found almost\n');
    expect(two.context.failingChecks).toEqual(one.context.failingChecks);
    // The same jail and environment as the first pass, plus the one file.
    expect(two.hasGit).toBe(false);
    expect(Object.keys(two.env).filter((name) => !(name in one.env))).toEqual(['PROOFGATE_GATE_OUTPUT']);
    expect(Object.keys(one.env).filter((name) => !(name in two.env))).toEqual([]);
    expect(two.outputPath?.startsWith(join(two.contextPath, '..'))).toBe(true);
    for (const path of [one.contextPath, two.contextPath, two.outputPath ?? '']) expect(existsSync(path)).toBe(false);

    const story = [
      `gate failed on ${short(first)} (exited with 1); agent-fix gets 1 more pass with the gate's output (${Buffer.byteLength(two.gateOutput ?? '')} bytes)`,
      'agent-fix validation pass 1 of 1: node',
      `validation pass changed files; proofgate committed them as ${short(second)}`,
      `gate passed on ${short(second)}`,
      `pushed feature: ${short(snapshot.head.sha)} -> ${short(second)}`,
    ];
    const at = story.map((start) => lines.findIndex((line) => line.startsWith(start)));
    expect(
      at.every((index) => index !== -1),
      lines.join('\n'),
    ).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    clean(f, second);
  });

  it('a validation pass that still fails the gate, or fails itself, fails the repair once: nothing pushed', async () => {
    const s = await failingChange(sandbox, twoPass(ALMOST, String.raw`fs.writeFileSync('value.txt', 'still almost\n');`));
    const { f, snapshot } = s;
    const config = withGate(s, ['node', s.script('gate.cjs', LOGGING_CHECK), join(s.cache, 'gate.log')]);
    const lines: string[] = [];

    const outcome = await runRepair(await s.context({ config, onProgress: (line) => lines.push(line) }));

    const [first = '', second = ''] = gateLog(s).map((line) => line.split(' ')[0] ?? '');
    expect(gateLog(s).map((line) => line.slice(41))).toEqual(['almost', 'still almost']);
    expect(outcome).toEqual({
      kind: 'failed',
      transient: false,
      reason: `the gate failed again after agent-fix's validation pass, on ${short(second)}: gate exited with 1; output tail: value.txt must say ok, found still almost; nothing pushed`,
    });
    expect(f.git(['rev-parse', `${second}^`])).toBe(first);
    expect(lines.some((line) => line.startsWith(`gate failed on ${short(first)} (exited with 1); agent-fix gets 1 more pass`))).toBe(true);
    expect(lines).toContain(`gate failed again on ${short(second)} (exited with 1) after validation pass 1; the repair failed, nothing pushed`);
    expect(lines.filter((line) => line.startsWith('agent-fix validation pass'))).toHaveLength(1);
    expect(lines.some((line) => line.startsWith('pushed'))).toBe(false);
    expect(f.pushes).toEqual([]);
    clean(f, snapshot.head.sha);

    // The validation pass itself exits nonzero: the same one failure, naming both.
    const giveUp = s.script('gives-up.cjs', twoPass(ALMOST, String.raw`console.error('agent gave up'); process.exit(3);`));
    const failing = await runRepair(await s.context({ config: { ...config, agentFix: { command: ['node', giveUp, s.report], timeoutSeconds: 30 } } }));
    expect(failing).toMatchObject({ kind: 'failed', transient: false });
    if (failing.kind !== 'failed') throw new Error('expected failed');
    expect(failing.reason).toMatch(
      /^agent-fix's validation pass failed \(agent-fix exited with 3; output tail: agent gave up\) after the gate failed on [0-9a-f]{12}: gate exited with 1; output tail: value.txt must say ok, found almost; nothing pushed$/,
    );
    expect(f.pushes).toEqual([]);
    clean(f, snapshot.head.sha);
  });

  it("keeps secrets out of the validation pass: the gate's output is redacted (known secrets, the agent's provider key, token patterns)", async () => {
    const token = `ghp_${'Zz90'.repeat(9)}`;
    const known = 'known-secret-in-gate-7';
    const providerKey = 'fxk-7Q2m9Lr4Vt8Wz3pN';
    const saved = process.env.FIXER_API_KEY;
    process.env.FIXER_API_KEY = providerKey;
    try {
      // The first pass leaks its provider key into the tree; the gate prints it, a token and a known secret.
      const leak = String.raw`fs.writeFileSync('debug.txt', 'key ' + process.env.FIXER_API_KEY + '\n');` + ALMOST;
      const s = await failingChange(sandbox, twoPass(leak, String.raw`fs.rmSync('debug.txt');` + FIX_FROM_GATE_OUTPUT));
      const agentFix = { ...(s.config.agentFix ?? { command: [], timeoutSeconds: 1 }), env: ['FIXER_API_KEY'] };
      const config = withGate(s, ['node', s.script('gate.cjs', leakyCheck([`token ${token}`, `known ${known}`]))], { agentFix });
      const lines: string[] = [];

      const outcome = await runRepair(await s.context({ config, knownSecrets: [known], onProgress: (line) => lines.push(line) }));

      expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', gated: true });
      expect(pass(s, 1).env.FIXER_API_KEY).toBe(providerKey);
      const two = pass(s, 2);
      const output = two.gateOutput ?? '';
      // The output arrived, with the secrets blanked out where they stood.
      expect(output).toContain('token [redacted:github-token]');
      expect(output).toContain('known [redacted]');
      expect(output).toContain('debug: key [redacted]');
      expect(output).toContain('value.txt must say ok, found almost');
      for (const secret of [token, known, providerKey]) {
        expect(two.contextRaw).not.toContain(secret);
        expect(output).not.toContain(secret);
        expect(lines.join('\n')).not.toContain(secret);
      }
      expect(s.f.git(['ls-tree', '--name-only', 'feature'])).not.toContain('debug.txt');
    } finally {
      if (saved === undefined) delete process.env.FIXER_API_KEY;
      else process.env.FIXER_API_KEY = saved;
    }
  });

  it("bounds the gate's output the validation pass gets: megabytes of it become the last 128 KiB, starting at a line", async () => {
    const s = await failingChange(sandbox, twoPass(ALMOST, FIX_FROM_GATE_OUTPUT));
    // The runner keeps 16 MiB: the bound is the context file's own, not the output cap's.
    const config = withGate(s, ['node', s.script('gate.cjs', floodingCheck(8))], { maxOutputBytes: 16 * 1024 * 1024 });

    const outcome = await runRepair(await s.context({ config }));

    expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', gated: true });
    const two = pass(s, 2);
    const output = two.gateOutput ?? '';
    expect(two.outputSize).toBeLessThanOrEqual(GATE_OUTPUT_MAX_BYTES);
    expect(two.outputSize).toBeGreaterThan(GATE_OUTPUT_MAX_BYTES - 200);
    expect(output.startsWith(`filler ${'x'.repeat(89)}\n`)).toBe(true);
    expect(output.endsWith('\nvalue.txt must say ok, found almost\n')).toBe(true);
    expect(two.context.validation).toMatchObject({ outputBytes: two.outputSize, outputTruncated: true });
    // The output is in its file, not in the context JSON.
    expect(two.contextRaw.length).toBeLessThan(16 * 1024);
  });

  it('a gate that timed out (its whole time budget spent) does not go back to the agent', async () => {
    const s = await failingChange(sandbox, twoPass(ALMOST, FIX_FROM_GATE_OUTPUT));
    const config = withGate(s, ['node', s.script('gate.cjs', HANGING_CHECK)], { timeoutSeconds: 1 });
    const lines: string[] = [];
    const outcome = await runRepair(await s.context({ config, onProgress: (line) => lines.push(line) }));
    expect(outcome).toMatchObject({ kind: 'failed', transient: false, reason: expect.stringMatching(/^gate timed out after 1s; .*; nothing pushed$/) });
    expect(existsSync(`${s.report}.pass1`)).toBe(true);
    expect(existsSync(`${s.report}.pass2`)).toBe(false);
    expect(lines.some((line) => line.includes('validation pass'))).toBe(false);
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('a gated rebase: without an agent its gate failure stands; with an agent that had nothing to add, the agent gets the pass', async () => {
    const s = await failingChange(sandbox, twoPass('', FIX_FROM_GATE_OUTPUT), { behind: true });
    const lines: string[] = [];
    const noAgent = withGate(s, ['node', '-e', "console.error('base check says no'); process.exit(1)"], { agentFix: null });
    const alone = await runRepair(await s.context({ config: noAgent, onProgress: (line) => lines.push(line) }));
    expect(alone).toEqual({ kind: 'failed', transient: false, reason: 'gate exited with 1; output tail: base check says no; nothing pushed' });
    expect(lines.some((line) => line.includes('validation pass'))).toBe(false);
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);

    lines.length = 0;
    const outcome = await runRepair(await s.context({ onProgress: (line) => lines.push(line) }));
    expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', gated: true, resolved: ['CHANGELOG.md'] });
    if (outcome.kind !== 'pushed') throw new Error('not pushed');
    expect(lines).toContain('agent-fix made no change; the rebase alone is the repair');
    const rebased = s.f.git(['rev-parse', `${outcome.newHead}^`]);
    expect(s.f.git(['merge-base', '--is-ancestor', 'main', rebased])).toBe('');
    expect(outcome.commits).toEqual([rebased, outcome.newHead]);
    expect(pass(s, 2).context.validation).toMatchObject({ failedSha: rebased });
    expect(pass(s, 2).context.worktree).toMatchObject({ startSha: rebased, rebasedOnto: s.f.sha('main') });
    expect(s.f.show('feature', 'value.txt')).toBe('ok');
    expect(s.f.pushes).toHaveLength(1);
  });

  it('a hostile validation pass is contained like the first: nothing outside its job changes, only its honest edit is committed', async (test) => {
    if (skipJail !== null) test.skip(skipJail);
    const marker = `pgvalidation${process.pid}x${Math.random().toString(36).slice(2, 10)}`;
    process.env.GITHUB_TOKEN = `ghp_${'Yy81'.repeat(9)}`;
    try {
      const s = await failingChange(sandbox, twoPass(ALMOST, HOSTILE_ACTION));
      const { f, snapshot } = s;
      const command = ['node', join(s.cache, 'agent.cjs'), s.report, f.dir, marker];
      const gitDir = join(f.dir, '.git');
      const before = {
        config: readFileSync(join(gitDir, 'config'), 'utf8'),
        untracked: f.git(['ls-files', '--others']),
        refs: f.refs(),
        hook: existsSync(join(gitDir, 'hooks', 'post-checkout')),
      };
      const lines: string[] = [];

      const outcome = await runRepair(
        await s.context({ config: { ...s.config, agentFix: { command, timeoutSeconds: 60 } }, onProgress: (line) => lines.push(line) }),
      );

      const two = pass(s, 2);
      expect(two.context.validation).not.toBeNull();
      expect(two.realGitConfig).toMatch(/^failed/);
      expect(two.realHook).toMatch(/^failed/);
      expect(two.realFile).toMatch(/^failed/);
      expect(String(two.environ ?? '')).not.toContain('ghp_');
      expect(readFileSync(join(gitDir, 'config'), 'utf8')).toBe(before.config);
      expect(existsSync(join(gitDir, 'hooks', 'post-checkout'))).toBe(before.hook);
      expect(f.git(['ls-files', '--others'])).toBe(before.untracked);
      expect(survivors(marker)).toEqual([]);
      expect(existsSync('/tmp/pwned')).toBe(false);

      expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', gated: true });
      if (outcome.kind !== 'pushed') throw new Error('not pushed');
      const [first = ''] = outcome.commits;
      expect(f.git(['diff', '--name-only', first, outcome.newHead]).split('\n').sort()).toEqual(['value-link', 'value.txt']);
      expect(f.git(['diff', '--name-only', snapshot.head.sha, first])).toBe('value.txt');
      const validation = lines.slice(lines.findIndex((line) => line.startsWith('agent-fix validation pass')));
      for (const path of ['.git', 'passwd-link', 'src/escape']) expect(validation.some((line) => line.includes(`left out "${path}"`))).toBe(true);
      expect(f.refs().filter((line) => !line.startsWith('refs/heads/feature '))).toEqual(before.refs.filter((line) => !line.startsWith('refs/heads/feature ')));
      expect(f.status()).toBe('');
      expect(f.worktrees()).toBe(1);
    } finally {
      delete process.env.GITHUB_TOKEN;
    }
  });

  it('an agent that fails on its first pass gets no validation pass (the gate never ran)', async () => {
    const s = await failingChange(sandbox, FAILS);
    const lines: string[] = [];
    const outcome = await runRepair(await s.context({ onProgress: (line) => lines.push(line) }));
    expect(outcome).toMatchObject({ kind: 'failed', reason: expect.stringMatching(/^agent-fix exited with 3/) });
    expect(lines.some((line) => line.startsWith('gate'))).toBe(false);
    clean(s.f, s.snapshot.head.sha);
  });
});

describe('the validation pass inside the automerge loop', () => {
  it('is part of the one repair: with caps of one repair, a fix made on the validation pass merges', async () => {
    const agent = [
      "const fs = require('node:fs');",
      'const p = process.env.PROOFGATE_GATE_OUTPUT;',
      "if (p !== undefined && fs.readFileSync(p, 'utf8').includes('broken.txt is present')) fs.rmSync('broken.txt');",
      "else fs.writeFileSync('note.txt', 'tried');",
    ].join(' ');
    const yaml = [
      'automerge:',
      '  maxRepairsPerHead: 1',
      '  maxRepairsPerChange: 1',
      '  gate: [node, check.mjs]',
      '  agentFix:',
      `    command: [node, -e, ${JSON.stringify(agent)}]`,
    ].join('\n');
    const f = (loop = await loopFixture({ config: repoConfig(yaml) }));
    const id = await f.openChange('broken', { 'broken.txt': 'this breaks the check\n', 'feature.txt': 'a feature\n' });
    const head = f.repo.sha('broken');

    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);

    expect(outcome.kind, outcome.reason).toBe('merged');
    const { state } = await f.automerge.env.store.load(id);
    expect(state.repairs.map((r) => [r.repair, r.head, r.status])).toEqual([['fix-checks', head, 'pushed']]);
    const repair = state.repairs[0];
    expect(repair?.commits).toHaveLength(2);
    expect(outcome.head).toBe(repair?.newHead);
    expect(repair?.commits[1]).toBe(repair?.newHead);
    expect(f.repo.git(['ls-tree', '--name-only', 'main'])).not.toContain('broken.txt');
    const text = f.progress.map((p) => p.text);
    expect(text.some((line) => /^repair: gate failed on [0-9a-f]{12} \(exited with 1\); agent-fix gets 1 more pass/.test(line))).toBe(true);
    expect(text.some((line) => line.startsWith('repair: validation pass changed files'))).toBe(true);
  });
});

describe('what the validation pass reads: pure parts', () => {
  it('redacts the values of credential-like environment variables, not other values', () => {
    const redact = makeRedactor(['known-4'], {
      MY_API_KEY: 'provider-key-123',
      DEPLOY_TOKEN: 'deploy-token-456',
      PATH: '/usr/bin:/bin',
      SHORT_SECRET: 'abc',
      HOME: '/root',
    });
    expect(redact('a provider-key-123 b deploy-token-456 c /usr/bin:/bin d abc e known-4 /root')).toBe(
      'a [redacted] b [redacted] c /usr/bin:/bin d abc e [redacted] /root',
    );
  });

  it('drops the partial first line of a cut output before redacting, so half a secret never stays', () => {
    const secret = 'known-secret-value-42';
    const redact = makeRedactor([secret]);
    const full = `start\nleaked ${secret}\nnext line\n`;
    const cut = full.slice(full.indexOf('secret-value'));
    expect(redact(cut)).toContain('secret-value-42');
    expect(redact(withoutCutLine(cut, true))).toBe('next line\n');
    expect(withoutCutLine(cut, false)).toBe(cut);
    expect(withoutCutLine('x'.repeat(5000), true)).toBe('x'.repeat(904));
  });

  it('bounds the output by bytes, at a line, and never starts with half a character', () => {
    expect(boundGateOutput({ text: 'small\n', cut: false })).toEqual({ text: 'small\n', bytes: 6, truncated: false });
    expect(boundGateOutput({ text: 'small\n', cut: true })).toMatchObject({ truncated: true });
    const lines = boundGateOutput({ text: `${'line of text\n'.repeat(20_000)}last\n`, cut: false });
    expect(lines.bytes).toBeLessThanOrEqual(GATE_OUTPUT_MAX_BYTES);
    expect(lines.text.startsWith('line of text\n')).toBe(true);
    expect(lines.text.endsWith('last\n')).toBe(true);
    expect(lines).toMatchObject({ bytes: Buffer.byteLength(lines.text), truncated: true });
    // Two-byte characters and one odd byte at the end: the cut falls inside a character.
    const wide = boundGateOutput({ text: `${'é'.repeat(GATE_OUTPUT_MAX_BYTES)}a`, cut: false });
    expect(wide.bytes).toBeLessThanOrEqual(GATE_OUTPUT_MAX_BYTES);
    expect(wide.text.startsWith('é')).toBe(true);
    expect(wide.text.endsWith('éa')).toBe(true);
    expect(wide.text).not.toContain('\uFFFD');
  });
});
