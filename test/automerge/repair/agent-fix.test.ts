import { existsSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { ALLOWED_ENVIRONMENT, repairConfigFrom, runRepair, type RepairConfig, type RepairContext } from '../../../src/automerge/repair/index.js';
import type { ChangeSnapshot } from '../../../src/forge/port.js';
import { BAD_FIX, CHECK, CHECKS_OUT_BRANCH, COMMITS_ITSELF, FAILS, FIX_FROM_LOG, HANGS, MERGES_BASE, NOTHING } from './agent-scripts.js';
import { IDENTITY, repairFixture, writeScript, type RepairFixture } from './fixture.js';

let fixture: RepairFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});

const CONFIG_YML = 'checks:\n  - name: unit\n    run: [node, check.cjs]\n';
const CHANGELOG = '# Changelog\n\n## Unreleased\n\n- existing entry\n';

interface Scenario {
  readonly f: RepairFixture;
  readonly snapshot: ChangeSnapshot;
  readonly report: string;
  readonly config: RepairConfig;
  context(overrides?: Partial<RepairContext>): Promise<RepairContext>;
}

/** main has a check that needs value.txt = ok; the change breaks it; the check has run and failed. */
async function failingChange(agentSource: string, options: { timeoutSeconds?: number; behind?: boolean } = {}): Promise<Scenario> {
  const f = await repairFixture({ '.proofgate.yml': CONFIG_YML, 'check.cjs': CHECK, 'value.txt': 'ok\n', 'CHANGELOG.md': CHANGELOG, 'src/app.txt': 'one\ntwo\nthree\n' });
  fixture = f;
  f.commit('feature', { 'value.txt': 'broken\n', 'CHANGELOG.md': CHANGELOG.replace('- existing', '- change entry\n- existing') }, 'break value', 'main');
  const change = await f.forge.openChange({ head: 'feature', base: 'main' });
  if (options.behind === true) f.commit('main', { 'CHANGELOG.md': CHANGELOG.replace('- existing', '- main entry\n- existing'), 'other.txt': 'o\n' }, 'main moves');
  await f.forge.runChecks(change.id);
  const snapshot = await f.forge.snapshot(change.id);
  const script = writeScript(f, 'agent.cjs', agentSource);
  const report = `${f.root}/report.json`;
  const config = repairConfigFrom({ automerge: { gate: ['node', 'check.cjs'], agentFix: { command: ['node', script, report] } } });
  const limited: RepairConfig = options.timeoutSeconds === undefined ? config : { ...config, agentFix: { command: config.agentFix?.command ?? [], timeoutSeconds: options.timeoutSeconds } };
  return {
    f,
    snapshot,
    report,
    config: limited,
    context: async (overrides = {}) => {
      const failing = snapshot.checks.filter((check) => check.conclusion === 'failure');
      const failingChecks = await Promise.all(failing.map(async (check) => ({ check, log: await f.checkLog(check.url) })));
      return f.context(snapshot, { repair: 'fix-checks', reason: 'failed checks: unit', failingChecks, config: limited, ...overrides });
    },
  };
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

function clean(f: RepairFixture, head: string) {
  expect(f.status()).toBe('');
  expect(f.worktrees()).toBe(1);
  expect(f.sha('feature')).toBe(head);
}

describe('runRepair: agent-fix on the local forge', () => {
  it('fixes a failing check from its log, passes the gate, commits and pushes once', async () => {
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
    expect(f.git(['log', '-1', '--format=%an <%ae>|%cn|%s', outcome.newHead])).toBe(`${IDENTITY.name} <${IDENTITY.email}>|${IDENTITY.name}|proofgate agent-fix: fix-checks for change ${snapshot.id}`);
    expect(f.git(['rev-parse', `${outcome.newHead}^`])).toBe(snapshot.head.sha);
    expect(f.pushes).toHaveLength(1);
    expect(lines.some((line) => line.startsWith('gate passed'))).toBe(true);
    const seen = JSON.parse(readFileSync(s.report, 'utf8')) as { contextPath: string; context: { repair: string; failingChecks: { name: string; log: string }[] } };
    expect(seen.context.repair).toBe('fix-checks');
    expect(seen.context.failingChecks[0]?.log).toContain('value.txt must say ok, found broken');
    expect(existsSync(seen.contextPath)).toBe(false);
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
    const seen = JSON.parse(readFileSync(s.report, 'utf8')) as { context: { worktree: { rebasedOnto: string } } };
    expect(seen.context.worktree.rebasedOnto).toBe(s.f.sha('main'));
  });

  it('accepts commits the agent made itself', async () => {
    const s = await failingChange(COMMITS_ITSELF);
    const outcome = await runRepair(await s.context({ repair: 'fix-findings', failingChecks: [], findings: [{ title: 'value is broken', evidence: 'value.txt says broken', path: 'value.txt', line: 1 }] }));
    expect(outcome).toMatchObject({ kind: 'pushed', method: 'agent-fix' });
    expect(s.f.git(['log', '-1', '--format=%s', 'feature'])).toBe('agent: fix value');
    const seen = JSON.parse(readFileSync(s.report, 'utf8')) as { context: { findings: unknown[] } };
    expect(seen.context.findings).toEqual([{ title: 'value is broken', evidence: 'value.txt says broken', path: 'value.txt', line: 1 }]);
  });

  it('pushes nothing when the gate fails, and says why with the gate output', async () => {
    const s = await failingChange(BAD_FIX);
    const outcome = await runRepair(await s.context());
    expect(outcome).toMatchObject({ kind: 'failed', transient: false });
    if (outcome.kind !== 'failed') throw new Error('expected failed');
    expect(outcome.reason).toContain('gate exited with 1');
    expect(outcome.reason).toContain('value.txt must say ok, found almost');
    expect(outcome.reason).toContain('nothing pushed');
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('reports no-change when the agent changes nothing, and failed when it exits nonzero', async () => {
    const s = await failingChange(NOTHING);
    expect(await runRepair(await s.context())).toEqual({ kind: 'no-change', reason: 'agent-fix made no change', conflicts: [] });
    clean(s.f, s.snapshot.head.sha);
    const failing = { ...s.config, agentFix: { command: ['node', writeScript(s.f, 'fails.cjs', FAILS), s.report], timeoutSeconds: 30 } };
    const outcome = await runRepair(await s.context({ config: failing }));
    expect(outcome).toMatchObject({ kind: 'failed', transient: false, reason: expect.stringContaining('agent-fix exited with 3; output tail: agent gave up') });
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('kills an agent that hangs at its time limit, with everything it started', async () => {
    const s = await failingChange(HANGS, { timeoutSeconds: 1 });
    const started = Date.now();
    const outcome = await runRepair(await s.context());
    expect(Date.now() - started).toBeLessThan(6000);
    expect(outcome).toMatchObject({ kind: 'failed', transient: false, reason: expect.stringContaining('agent-fix timed out after 1s; process group killed') });
    const pids = JSON.parse(readFileSync(`${s.report}.pids`, 'utf8')) as number[];
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(alive(pid)).toBe(false);
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });

  it('refuses a worktree left on a branch', async () => {
    const s = await failingChange(CHECKS_OUT_BRANCH);
    const before = s.f.refs();
    const outcome = await runRepair(await s.context());
    expect(outcome).toMatchObject({ kind: 'failed', reason: expect.stringContaining('checked out refs/heads/agent-branch') });
    expect(s.f.pushes).toEqual([]);
    // The branch the agent made is its own doing; the repair itself moved nothing.
    expect(s.f.refs().filter((line) => !line.startsWith('refs/heads/agent-branch '))).toEqual(before);
  });

  it('hides secrets from the agent: allow-listed environment, redacted logs', async () => {
    const secrets = { GITHUB_TOKEN: `ghp_${'A1b2'.repeat(9)}`, PROOFGATE_WEBHOOK_SECRET: 'webhook-secret-value-42', DATABASE_URL: 'postgres://admin:hunter2-db-pass@db/prod', AWS_SECRET_ACCESS_KEY: 'aws-secret-key-value-99' };
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
      const seen = JSON.parse(raw) as { env: Record<string, string>; context: { failingChecks: { log: string }[] } };
      const allowed = new Set([...ALLOWED_ENVIRONMENT, 'PROOFGATE_REPAIR_CONTEXT', 'PROOFGATE_REPAIR_KIND', 'PROOFGATE_CHANGE_ID', 'PROOFGATE_BASE_SHA', 'PROOFGATE_HEAD_SHA', 'PROOFGATE_START_SHA', 'GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL']);
      expect(Object.keys(seen.env).filter((name) => !allowed.has(name))).toEqual([]);
      expect(seen.env.PATH).toBe(process.env.PATH);
      expect(seen.context.failingChecks[0]?.log).toContain('leaked [redacted] and token=[redacted:assignment]');
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('hands an unresolvable rebase to the agent when asked, and pushes its gated merge', async () => {
    const s = await failingChange(MERGES_BASE);
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
    expect(f.show('feature', 'src/app.txt')).toBe('one\nTWO (both)\nthree');
    expect(f.git(['merge-base', '--is-ancestor', 'main', 'feature'])).toBe('');
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
    const aborted = await runRepair(await s.context({ signal: controller.signal, onProgress: (line) => (line.startsWith('agent-fix:') ? controller.abort() : undefined) }));
    expect(aborted).toEqual({ kind: 'failed', reason: 'agent-fix aborted; process group killed', transient: true });
    expect(s.f.pushes).toEqual([]);
    clean(s.f, s.snapshot.head.sha);
  });
});
