import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { repairConfigFrom, type RepairConfig, type RepairContext } from '../../../src/automerge/repair/index.js';
import type { ChangeSnapshot } from '../../../src/forge/port.js';
import { prepareJobDir, type SandboxMode } from '../../../src/host/index.js';
import { CHECK } from './agent-scripts.js';
import { repairFixture, type RepairFixture } from './fixture.js';

/**
 * The agent-fix scenario the repair tests share: main has a check that needs
 * value.txt = ok; the change breaks it; the check has run and failed. The
 * agent program and any gate program live in a cache dir the trusted config
 * names (the jail sees it), beside the reports they write.
 */

const CONFIG_YML = 'checks:\n  - name: unit\n    run: [node, check.cjs]\n';
export const CHANGELOG = '# Changelog\n\n## Unreleased\n\n- existing entry\n';

export interface Scenario {
  readonly f: RepairFixture;
  readonly snapshot: ChangeSnapshot;
  /** The shared cache dir the trusted config names: the agent scripts and their reports live there (the jail sees it). */
  readonly cache: string;
  readonly report: string;
  readonly config: RepairConfig;
  script(name: string, source: string): string;
  context(overrides?: Partial<RepairContext>): Promise<RepairContext>;
}

const open: RepairFixture[] = [];

/** For afterEach: remove every fixture a scenario made. */
export async function cleanupScenarios(): Promise<void> {
  for (const f of open.splice(0)) await f.cleanup();
}

export async function failingChange(
  sandbox: SandboxMode,
  agentSource: string,
  options: { timeoutSeconds?: number; behind?: boolean; args?: readonly string[] } = {},
): Promise<Scenario> {
  const f = await repairFixture({
    '.proofgate.yml': CONFIG_YML,
    'check.cjs': CHECK,
    'value.txt': 'ok\n',
    'CHANGELOG.md': CHANGELOG,
    'src/app.txt': 'one\ntwo\nthree\n',
  });
  open.push(f);
  f.commit('feature', { 'value.txt': 'broken\n', 'CHANGELOG.md': CHANGELOG.replace('- existing', '- change entry\n- existing') }, 'break value', 'main');
  const change = await f.forge.openChange({ head: 'feature', base: 'main' });
  if (options.behind === true)
    f.commit('main', { 'CHANGELOG.md': CHANGELOG.replace('- existing', '- main entry\n- existing'), 'other.txt': 'o\n' }, 'main moves');
  await f.forge.runChecks(change.id);
  const snapshot = await f.forge.snapshot(change.id);
  // The jail's uid must reach the cache dir to mount it; nothing else under the fixture root is mounted.
  chmodSync(f.root, 0o755);
  const cache = join(f.root, 'cache');
  mkdirSync(cache);
  const script = (name: string, source: string) => {
    const path = join(cache, name);
    writeFileSync(path, source, { mode: 0o644 });
    return path;
  };
  const report = join(cache, 'report.json');
  script('report.json', '{}');
  await prepareJobDir(cache);
  const command = ['node', script('agent.cjs', agentSource), report, ...(options.args ?? [])];
  const config: RepairConfig = repairConfigFrom({
    automerge: {
      gate: ['node', 'check.cjs'],
      agentFix: { command, ...(options.timeoutSeconds === undefined ? {} : { timeoutSeconds: options.timeoutSeconds }) },
    },
    sandbox,
    cacheDir: cache,
  });
  return {
    f,
    snapshot,
    cache,
    report,
    config,
    script,
    context: async (overrides = {}) => {
      const failing = snapshot.checks.filter((check) => check.conclusion === 'failure');
      const failingChecks = await Promise.all(failing.map(async (check) => ({ check, log: await f.checkLog(check.url) })));
      return f.context(snapshot, { repair: 'fix-checks', reason: 'failed checks: unit', failingChecks, config, ...overrides });
    },
  };
}

export interface AgentReport {
  env: Record<string, string>;
  contextPath: string;
  cwd: string;
  hasGit: boolean;
  context: { repair: string; failingChecks: { log: string }[]; worktree: { rebasedOnto: string | null } };
}

/** What the agent saw (the report its last run wrote). */
export function seen<T = AgentReport>(s: Scenario, suffix = ''): T {
  return JSON.parse(readFileSync(`${s.report}${suffix}`, 'utf8')) as T;
}

/** Nothing changed in the user's repository: clean work tree, one worktree, the change's branch where it was. */
export function clean(f: RepairFixture, head: string): void {
  expect(f.status()).toBe('');
  expect(f.worktrees()).toBe(1);
  expect(f.sha('feature')).toBe(head);
}
