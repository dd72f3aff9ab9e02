import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ALLOWED_ENVIRONMENT, repairConfigFrom, runRepair, type RepairConfig } from '../../../src/automerge/repair/index.js';
import { parseRepoConfigYaml } from '../../../src/contracts/repo-config.js';
import type { SandboxMode } from '../../../src/host/index.js';
import { survivors } from '../../attacks/support.js';
import { runCliAsync } from '../../cli/helpers.js';
import { jailSkipReason, sandboxForTests } from '../../support/jail.js';
import { cleanupScenarios, clean, failingChange as scenario, seen } from './agent-scenario.js';
import { BAD_FIX, CHECK, FAILS, FIX_FROM_LOG, HANGS, HOSTILE, NOTHING, RESOLVES_MERGE } from './agent-scripts.js';
import { IDENTITY, repairFixture, type RepairFixture } from './fixture.js';

let fixture: RepairFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
  await cleanupScenarios();
});

let sandbox: SandboxMode = 'jail';
let skipJail: string | null = null;
beforeAll(async () => {
  sandbox = await sandboxForTests();
  skipJail = await jailSkipReason();
});

/** main has a check that needs value.txt = ok; the change breaks it; the check has run and failed. */
const failingChange = (agentSource: string, options: Parameters<typeof scenario>[2] = {}) => scenario(sandbox, agentSource, options);

const killed = () => (sandbox === 'jail' ? 'its jail and everything in it killed' : 'process group killed');

describe('runRepair: agent-fix on the local forge', () => {
  it('fixes a failing check from its log; proofgate commits the edit, the gate passes, one push', async () => {
    const s = await failingChange(FIX_FROM_LOG);
    const { f, snapshot } = s;
    expect(snapshot.checks.map((check) => [check.name, check.conclusion])).toEqual([['unit', 'failure']]);
    const lines: string[] = [];

    const outcome = await runRepair(await s.context({ onProgress: (line) => lines.push(line) }));

    expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', oldHead: snapshot.head.sha, gated: true, resolved: [] });
    if (outcome.kind !== 'pushed') throw new Error('not pushed');
    expect(outcome.commits).toEqual([outcome.newHead]);
    expect(f.sha('feature')).toBe(outcome.newHead);
    expect(f.show('feature', 'value.txt')).toBe('ok');
    expect(f.git(['log', '-1', '--format=%an <%ae>|%cn|%s', outcome.newHead])).toBe(
      `${IDENTITY.name} <${IDENTITY.email}>|${IDENTITY.name}|proofgate agent-fix: fix-checks for change ${snapshot.id}`,
    );
    expect(f.git(['rev-parse', `${outcome.newHead}^`])).toBe(snapshot.head.sha);
    // Only the one edit: nothing the agent's run left around it (the report lives outside the tree).
    expect(f.git(['diff', '--name-only', snapshot.head.sha, outcome.newHead])).toBe('value.txt');
    expect(f.pushes).toHaveLength(1);
    expect(lines.some((line) => line.startsWith('gate passed'))).toBe(true);
    const report = seen(s);
    expect(report.hasGit).toBe(false);
    expect(report.context.repair).toBe('fix-checks');
    expect(report.context.failingChecks[0]?.log).toContain('value.txt must say ok, found broken');
    expect(existsSync(report.contextPath)).toBe(false);
    expect(existsSync(report.cwd)).toBe(false);
    expect(f.status()).toBe('');
    expect(f.worktrees()).toBe(1);
    // The checks run again on the new head and pass.
    const rerun = await f.forge.runChecks(snapshot.id);
    expect(rerun.results.map((result) => result.conclusion)).toEqual(['success']);
  });

  it('rebases first when the head is behind (with the CHANGELOG resolver), then lets the agent fix the rest', async () => {
    const s = await failingChange(FIX_FROM_LOG, { behind: true });
    const outcome = await runRepair(await s.context());
    expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', resolved: ['CHANGELOG.md'], gated: true });
    if (outcome.kind !== 'pushed') throw new Error('not pushed');
    expect(outcome.commits).toHaveLength(2);
    expect(s.f.show('feature', 'CHANGELOG.md')).toBe('# Changelog\n\n## Unreleased\n\n- main entry\n- change entry\n- existing entry');
    expect(s.f.show('feature', 'value.txt')).toBe('ok');
    expect(s.f.git(['merge-base', '--is-ancestor', 'main', 'feature'])).toBe('');
    expect(seen(s).context.worktree.rebasedOnto).toBe(s.f.sha('main'));
  });

  it('pushes nothing when the gate fails and the validation pass changes nothing, and says why with the gate output', async () => {
    const s = await failingChange(BAD_FIX);
    const outcome = await runRepair(await s.context());
    expect(outcome).toMatchObject({ kind: 'failed', transient: false });
    if (outcome.kind !== 'failed') throw new Error('expected failed');
    expect(outcome.reason).toMatch(/^agent-fix's validation pass made no change after the gate failed on [0-9a-f]{12}: gate exited with 1/);
    // The last run of the agent was the validation pass: it had the gate's output.
    expect(seen<{ context: { validation: { pass: number } | null } }>(s).context.validation).toMatchObject({ pass: 1 });
    expect(outcome.reason).toContain('value.txt must say ok, found almost');
    expect(outcome.reason).toContain('nothing pushed');
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('reports no-change when the agent changes nothing, and failed when it exits nonzero', async () => {
    const s = await failingChange(NOTHING);
    expect(await runRepair(await s.context())).toEqual({ kind: 'no-change', reason: 'agent-fix made no change', conflicts: [] });
    clean(s.f, s.snapshot.head.sha);
    const failing = { ...s.config, agentFix: { command: ['node', s.script('fails.cjs', FAILS), s.report], timeoutSeconds: 30 } };
    const outcome = await runRepair(await s.context({ config: failing }));
    expect(outcome).toMatchObject({ kind: 'failed', transient: false, reason: expect.stringContaining('agent-fix exited with 3; output tail: agent gave up') });
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('kills an agent that hangs at its time limit, with everything it started', async () => {
    const marker = `pghang${process.pid}x${Math.random().toString(36).slice(2, 10)}`;
    const s = await failingChange(HANGS, { timeoutSeconds: 1, args: [marker] });
    const outcome = await runRepair(await s.context());
    expect(outcome).toMatchObject({ kind: 'failed', transient: false, reason: expect.stringContaining(`agent-fix timed out after 1s; ${killed()}`) });
    expect(survivors(marker)).toEqual([]);
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('hides secrets from the agent: allow-listed environment, redacted logs', async () => {
    const secrets = {
      GITHUB_TOKEN: `ghp_${'A1b2'.repeat(9)}`,
      PROOFGATE_WEBHOOK_SECRET: 'webhook-secret-value-42',
      DATABASE_URL: 'postgres://admin:hunter2-db-pass@db/prod',
      AWS_SECRET_ACCESS_KEY: 'aws-secret-key-value-99',
    };
    const saved = Object.fromEntries(Object.keys(secrets).map((name) => [name, process.env[name]]));
    Object.assign(process.env, secrets);
    try {
      const s = await failingChange(FIX_FROM_LOG);
      const context = await s.context({ knownSecrets: ['known-secret-in-log-7'] });
      const withSecretLog = context.failingChecks.map((entry) => ({ ...entry, log: `${entry.log ?? ''}\nleaked known-secret-in-log-7 and token=abc123def` }));
      const outcome = await runRepair({ ...context, failingChecks: withSecretLog });
      expect(outcome).toMatchObject({ kind: 'pushed' });
      const raw = readFileSync(s.report, 'utf8');
      for (const value of [...Object.values(secrets), 'known-secret-in-log-7', 'abc123def']) expect(raw).not.toContain(value);
      const report = seen(s);
      const allowed = new Set([
        ...ALLOWED_ENVIRONMENT,
        'PWD',
        'PROOFGATE_REPAIR_CONTEXT',
        'PROOFGATE_REPAIR_KIND',
        'PROOFGATE_CHANGE_ID',
        'PROOFGATE_BASE_SHA',
        'PROOFGATE_HEAD_SHA',
        'PROOFGATE_START_SHA',
      ]);
      expect(Object.keys(report.env).filter((name) => !allowed.has(name))).toEqual([]);
      expect(report.env.PATH).toBe(process.env.PATH);
      expect(report.context.failingChecks[0]?.log).toContain('leaked [redacted] and token=[redacted:assignment]');
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it("hands an unresolvable rebase to the agent when asked: it resolves git's conflict markers, proofgate commits the merge", async () => {
    const s = await failingChange(RESOLVES_MERGE);
    const { f } = s;
    // A real source conflict on top of the failing change; value fixed on main's side of the story.
    f.commit('feature', { 'src/app.txt': 'one\nTWO (change)\nthree\n', 'value.txt': 'ok\n' }, 'edit two');
    f.commit('main', { 'src/app.txt': 'one\nTWO (main)\nthree\n' }, 'edit two on main');
    const snapshot = await f.forge.snapshot(s.snapshot.id);
    const base = await s.context();
    const without = await runRepair({ ...base, snapshot, repair: 'rebase' });
    expect(without).toMatchObject({ kind: 'no-change', conflicts: ['src/app.txt'] });
    const outcome = await runRepair({ ...base, snapshot, repair: 'rebase', agentFixConflicts: true });
    expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', gated: true });
    expect(seen<{ conflicted: string }>(s).conflicted).toContain('<<<<<<<');
    expect(f.show('feature', 'src/app.txt')).toBe('one\nTWO (both)\nthree');
    expect(f.git(['merge-base', '--is-ancestor', 'main', 'feature'])).toBe('');
    expect(f.git(['log', '-1', '--format=%P', 'feature'])).toBe(`${snapshot.head.sha} ${snapshot.base.sha}`);
    expect(f.pushes).toHaveLength(1);
    expect(f.status()).toBe('');
  });

  it('fix-findings on a head that is behind: an agent that changes nothing pushes nothing (a rebase does not answer findings)', async () => {
    const s = await failingChange(NOTHING, { behind: true });
    const outcome = await runRepair(await s.context({ repair: 'fix-findings', findings: [{ title: 'secret in diff', evidence: 'config.yml:3' }] }));
    expect(outcome).toEqual({ kind: 'no-change', reason: 'agent-fix made no change', conflicts: [] });
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('without an agent: fix-checks of a head that is behind is a gated rebase; fix-findings changes nothing', async () => {
    const s = await failingChange(NOTHING, { behind: true });
    const noAgent: RepairConfig = { ...s.config, agentFix: null, gate: ['node', '-e', "require('node:fs').accessSync('other.txt')"] };
    const findings = await runRepair(await s.context({ repair: 'fix-findings', config: noAgent, findings: [{ title: 't', evidence: 'e' }] }));
    expect(findings).toMatchObject({ kind: 'no-change', reason: expect.stringContaining('no agent-fix command is configured') });
    expect(s.f.pushes).toEqual([]);
    const outcome = await runRepair(await s.context({ config: noAgent }));
    expect(outcome).toMatchObject({ kind: 'pushed', method: 'rebase', gated: true, resolved: ['CHANGELOG.md'] });
    expect(s.f.show('feature', 'other.txt')).toBe('o');
    expect(s.f.pushes).toHaveLength(1);
  });

  it('refuses an agent without a gate, and aborts when the signal fires', async () => {
    const s = await failingChange(FIX_FROM_LOG);
    const ungated = await runRepair(await s.context({ config: { ...s.config, gate: null } }));
    expect(ungated).toMatchObject({ kind: 'failed', transient: false, reason: expect.stringContaining('without a gate') });
    const controller = new AbortController();
    const aborted = await runRepair(
      await s.context({ signal: controller.signal, onProgress: (line) => (line.startsWith('agent-fix:') ? controller.abort() : undefined) }),
    );
    expect(aborted).toEqual({ kind: 'failed', reason: `agent-fix aborted; ${killed()}`, transient: true });
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });
});

describe('automerge.agentFix from .proofgate.yml', () => {
  it('passes exactly the provider variables agentFix.env names; a reserved name is a CONFIG error', async () => {
    const s = await failingChange(FIX_FROM_LOG);
    const command = s.config.agentFix?.command ?? [];
    const yaml = `automerge:\n  gate: [node, check.cjs]\n  agentFix:\n    command: ${JSON.stringify(command)}\n    network: false\n    env: [FIXER_API_KEY]\n`;
    const config = repairConfigFrom({ ...parseRepoConfigYaml(yaml, 'main:.proofgate.yml'), sandbox, cacheDir: s.cache });
    expect(config.agentFix).toMatchObject({ network: false, env: ['FIXER_API_KEY'] });
    const secrets = { FIXER_API_KEY: 'fixer-provider-key-value-1', OTHER_API_KEY: 'other-provider-key-value-2', GITHUB_TOKEN: `ghp_${'Q7w8'.repeat(9)}` };
    Object.assign(process.env, secrets);
    try {
      const outcome = await runRepair(await s.context({ config }));
      expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix' });
      const { env } = seen(s);
      expect(env.FIXER_API_KEY).toBe(secrets.FIXER_API_KEY);
      expect(env.OTHER_API_KEY).toBeUndefined();
      expect(env.GITHUB_TOKEN).toBeUndefined();
    } finally {
      for (const name of Object.keys(secrets)) delete process.env[name];
    }
    for (const name of ['GITHUB_TOKEN', 'PROOFGATE_WEBHOOK_SECRET', 'HOME']) {
      const reserved = `automerge:\n  gate: [x]\n  agentFix: { command: [x], env: [${name}] }\n`;
      expect(() => parseRepoConfigYaml(reserved, 'main:.proofgate.yml')).toThrow(
        `main:.proofgate.yml: automerge.agentFix.env[0]: ${name} cannot be passed to agent-fix`,
      );
    }
    expect(() => parseRepoConfigYaml('automerge:\n  agentFix: { command: [x], network: yes-please }\n', 'main:.proofgate.yml')).toThrow(
      /automerge\.agentFix\.network/,
    );
  });
});

describe('automerge without a working jail', () => {
  it('ends with one JAIL_UNAVAILABLE error naming bubblewrap when the agent-fix must run jailed: exit 1, nothing pushed', async () => {
    const config = [
      'sandbox: jail',
      'review:',
      '  lanes:',
      '    - id: rules',
      '      builtin: rules',
      '  rules:',
      '    forbiddenPaths: [secret/]',
      'automerge:',
      '  gate: [node, check.cjs]',
      '  agentFix: { command: [sh, -c, "rm -rf secret"] }',
      '',
    ].join('\n');
    const f = await repairFixture({ '.proofgate.yml': config, 'check.cjs': CHECK, 'value.txt': 'ok\n' });
    fixture = f;
    const head = f.commit('feature', { 'secret/key.txt': 'not for main\n' }, 'add a forbidden file', 'main');
    const refsBefore = f.refs();
    const data = join(f.root, 'cli-data');
    const opened = await runCliAsync(['change', 'open', '--head', 'feature', '--repo', f.dir, '--data', data]);
    expect(opened.status).toBe(0);
    // The seam in src/host/jail/status.ts: a bwrap that is not there is a machine without a working jail.
    const run = await runCliAsync(['automerge', '1', '--repo', f.dir, '--data', data], { env: { PROOFGATE_BWRAP: join(f.root, 'no-such-bwrap') } });
    expect(run.status).toBe(1);
    const errors = run.stderr.split('\n').filter((line) => line.startsWith('proofgate:'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/bubblewrap.*\[JAIL_UNAVAILABLE\]$/);
    expect(run.stderr).toContain('agent-fix:');
    expect(f.sha('feature')).toBe(head);
    expect(f.refs()).toEqual(refsBefore);
    expect(f.status()).toBe('');
  });
});

describe('runRepair: a hostile agent-fix is contained by the jail', () => {
  it("cannot plant git config or hooks, leak symlinks, read proofgate's environment or outlive its run; its edit still becomes the commit", async (test) => {
    if (skipJail !== null) test.skip(skipJail);
    const marker = `pghostile${process.pid}x${Math.random().toString(36).slice(2, 10)}`;
    process.env.GITHUB_TOKEN = `ghp_${'Zz90'.repeat(9)}`;
    try {
      const s = await failingChange(HOSTILE);
      const { f, snapshot } = s;
      // The repository path is only known once the fixture exists: name it in the agent's argv now.
      const command = ['node', join(s.cache, 'agent.cjs'), s.report, f.dir, marker];
      const gitDir = join(f.dir, '.git');
      const before = { config: readFileSync(join(gitDir, 'config'), 'utf8'), untracked: f.git(['ls-files', '--others']), refs: f.refs() };
      const hooksBefore = existsSync(join(gitDir, 'hooks', 'post-checkout'));
      const lines: string[] = [];

      const outcome = await runRepair(
        await s.context({ config: { ...s.config, agentFix: { command, timeoutSeconds: 60 } }, onProgress: (line) => lines.push(line) }),
      );

      const report = seen<Record<string, string>>(s);
      expect(report.realGitConfig).toMatch(/^failed/);
      expect(report.realHook).toMatch(/^failed/);
      expect(report.realFile).toMatch(/^failed/);
      expect(report.environ ?? '').not.toContain('ghp_');
      expect(report.environ ?? '').not.toContain('GITHUB_TOKEN');
      expect(readFileSync(join(gitDir, 'config'), 'utf8')).toBe(before.config);
      expect(existsSync(join(gitDir, 'hooks', 'post-checkout'))).toBe(hooksBefore);
      expect(f.git(['ls-files', '--others'])).toBe(before.untracked);
      expect(survivors(marker)).toEqual([]);
      expect(existsSync('/tmp/pwned')).toBe(false);

      expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix', gated: true });
      if (outcome.kind !== 'pushed') throw new Error('not pushed');
      // The honest edit and the in-tree link are the commit; nothing else the agent planted is.
      expect(f.git(['diff', '--name-only', snapshot.head.sha, outcome.newHead]).split('\n').sort()).toEqual(['value-link', 'value.txt']);
      expect(f.git(['ls-tree', outcome.newHead, 'value-link'])).toMatch(/^120000 /);
      expect(f.show('feature', 'value.txt')).toBe('ok');
      for (const path of ['.git', 'passwd-link', 'src/escape']) expect(lines.some((line) => line.includes(`left out "${path}"`))).toBe(true);
      expect(f.refs().filter((line) => !line.startsWith('refs/heads/feature '))).toEqual(before.refs.filter((line) => !line.startsWith('refs/heads/feature ')));
      expect(f.status()).toBe('');
    } finally {
      delete process.env.GITHUB_TOKEN;
    }
  });
});
