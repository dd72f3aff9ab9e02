import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyOutcome, initialLedger, type AutomergeDecision } from '../../../src/automerge/index.js';
import {
  ChangeSignals,
  DEFAULT_WAIT_SETTINGS,
  LABELS,
  LedgerStore,
  gateDecision,
  labelPlan,
  nextWindow,
  policyFromConfig,
  waitKindFor,
  waitSettings,
} from '../../../src/automerge/loop/index.js';
import { emptyRepoConfig, parseRepoConfig } from '../../../src/contracts/repo-config.js';
import { defaultStoragePolicy } from '../../../src/storage/policy.js';
import { createLocalRunStorage } from '../../../src/storage/sqlite/index.js';

const HEAD = 'a'.repeat(40);
const NEW = 'b'.repeat(40);
const AT = '2026-01-01T00:00:00.000Z';
const repair = (kind: 'rebase' | 'fix-checks' | 'fix-findings'): AutomergeDecision => ({ kind: 'repair', repair: kind, head: HEAD, reason: 'why' });

describe('gateDecision', () => {
  const noChange = applyOutcome(
    applyOutcome(initialLedger('1'), { type: 'repair-dispatched', id: 'r1', head: HEAD, repair: 'fix-findings', automatic: true, reason: 'x', at: AT }),
    { type: 'repair-finished', id: 'r1', result: 'no-change', newHead: null, commits: [], at: AT },
  );
  const pushed = applyOutcome(
    applyOutcome(initialLedger('1'), { type: 'repair-dispatched', id: 'r2', head: HEAD, repair: 'rebase', automatic: true, reason: 'x', at: AT }),
    { type: 'repair-finished', id: 'r2', result: 'pushed', newHead: NEW, commits: [NEW], at: AT },
  );
  it.each([
    ['a head a repair replaced is not repaired again: wait for the forge', repair('rebase'), pushed, { repair: true, agentFix: true }, 'wait', 'waiting for the forge to show the new head'],
    ['nor reviewed', { kind: 'review', head: HEAD, reason: 'r' } as AutomergeDecision, pushed, { repair: true, agentFix: true }, 'wait', `pushed ${NEW.slice(0, 12)}`],
    ['nor merged', { kind: 'merge', head: HEAD, reason: 'm' } as AutomergeDecision, pushed, { repair: true, agentFix: true }, 'wait', 'waiting for the forge'],
    ['the pushed head itself is reviewed', { kind: 'review', head: NEW, reason: 'r' } as AutomergeDecision, pushed, { repair: true, agentFix: true }, 'review', ''],
    ['a non-repair passes through', { kind: 'wait', reason: 'w' } as AutomergeDecision, initialLedger('1'), { repair: false, agentFix: false }, 'wait', ''],
    ['rebase needs only a repair worker', repair('rebase'), initialLedger('1'), { repair: true, agentFix: false }, 'repair', ''],
    ['rebase without a worker blocks', repair('rebase'), initialLedger('1'), { repair: false, agentFix: true }, 'block', 'no repair worker'],
    ['fix-checks without agent-fix blocks', repair('fix-checks'), initialLedger('1'), { repair: true, agentFix: false }, 'block', 'no agent-fix command'],
    ['fix-checks without agent-fix blocks when the head contains its base', repair('fix-checks'), initialLedger('1'), { repair: true, agentFix: false, headBehindBase: false }, 'block', 'no agent-fix command'],
    ['fix-checks without agent-fix repairs (by a rebase) when the head is behind its base', repair('fix-checks'), initialLedger('1'), { repair: true, agentFix: false, headBehindBase: true }, 'repair', ''],
    ['fix-findings without agent-fix blocks even when behind', repair('fix-findings'), initialLedger('1'), { repair: true, agentFix: false, headBehindBase: true }, 'block', 'no agent-fix command'],
    ['a futile rebase-only fix-checks from this head blocks', repair('fix-checks'), applyOutcome(
      applyOutcome(initialLedger('1'), { type: 'repair-dispatched', id: 'r3', head: HEAD, repair: 'fix-checks', automatic: true, reason: 'x', at: AT }),
      { type: 'repair-finished', id: 'r3', result: 'no-change', newHead: null, commits: [], at: AT },
    ), { repair: true, agentFix: false, headBehindBase: true }, 'block', 'made no change'],
    ['fix-findings with agent-fix repairs', repair('fix-findings'), initialLedger('1'), { repair: true, agentFix: true }, 'repair', ''],
    ['the same repair that made no change from this head blocks', repair('fix-findings'), noChange, { repair: true, agentFix: true }, 'block', 'made no change'],
    ['another kind from that head still runs', repair('rebase'), noChange, { repair: true, agentFix: true }, 'repair', ''],
  ] as const)('%s', (_name, decision, ledger, capabilities, kind, reason) => {
    const gated = gateDecision(decision, ledger, capabilities);
    expect(gated.kind).toBe(kind);
    expect(gated.reason).toContain(reason);
  });
});

describe('policyFromConfig', () => {
  it('local: configured checks are required; no checks means none expected', () => {
    const config = parseRepoConfig({ checks: [{ name: 'lint', run: 'true' }], automerge: { maxRepairsPerHead: 1, ignoredChecks: ['bots'] } }, 'test');
    const local = policyFromConfig(config, 'local');
    expect(local.checks).toEqual({ ignored: ['bots'], required: ['lint'], expectChecks: true });
    expect(local.maxRepairsPerHead).toBe(1);
    expect(policyFromConfig(emptyRepoConfig(), 'local').checks.expectChecks).toBe(false);
    expect(policyFromConfig(config, 'github').checks.required).toBeUndefined();
  });

  it.each([
    ['local, checks listed', { checks: [{ name: 'lint', run: 'true' }] }, 'local', true],
    ['local, no checks', {}, 'local', false],
    ['github, no checks listed (its CI reports them)', {}, 'github', true],
    ['github, automerge.expectChecks: false (a repository without CI)', { automerge: { expectChecks: false } }, 'github', false],
    ['local, no checks, automerge.expectChecks: true', { automerge: { expectChecks: true } }, 'local', true],
    ['local, checks listed, automerge.expectChecks: false', { checks: [{ name: 'lint', run: 'true' }], automerge: { expectChecks: false } }, 'local', false],
  ] as const)('expectChecks: %s', (_name, raw, forge, expected) => {
    expect(policyFromConfig(parseRepoConfig(raw, 'test'), forge).checks.expectChecks).toBe(expected);
  });

  it('automerge.expectChecks must be a boolean', () => {
    expect(() => parseRepoConfig({ automerge: { expectChecks: 'no' } }, 'main:.proofgate.yml')).toThrow(expect.objectContaining({ code: 'CONFIG', message: expect.stringContaining('automerge.expectChecks') }));
  });
});

describe('labelPlan', () => {
  it.each([
    ['requested', [], [LABELS.automerge], []],
    ['merge', [LABELS.automerge, LABELS.humanReview], [LABELS.mergeReady], [LABELS.humanReview]],
    ['block', [LABELS.automerge, LABELS.mergeReady], [LABELS.humanReview], [LABELS.mergeReady]],
    ['wait', [LABELS.automerge, LABELS.mergeReady], [], [LABELS.mergeReady]],
    ['merged', [LABELS.automerge, LABELS.mergeReady, 'bug'], [], [LABELS.automerge, LABELS.mergeReady]],
    ['stop', ['bug'], [], []],
  ] as const)('%s', (phase, present, add, remove) => {
    expect(labelPlan(phase, present)).toEqual({ add, remove });
  });
});

describe('wait windows', () => {
  it('defaults follow the seed and the config overrides them, explicit overrides win', () => {
    expect(DEFAULT_WAIT_SETTINGS).toEqual({ shepherdWaitMs: 600_000, shepherdPollMs: 15_000, transientWaitMs: 600_000, transientPollMs: 15_000 });
    expect(waitSettings({ transientWaitMs: 1000 }, { transientPollMs: 10 })).toMatchObject({ transientWaitMs: 1000, transientPollMs: 10, shepherdWaitMs: 600_000 });
  });
  it('a head a repair pushed waits in the shepherd window, others in the transient one', () => {
    let ledger = applyOutcome(initialLedger('1'), { type: 'repair-dispatched', id: 'r', head: HEAD, repair: 'rebase', automatic: true, reason: 'x', at: AT });
    ledger = applyOutcome(ledger, { type: 'repair-finished', id: 'r', result: 'pushed', newHead: NEW, commits: [NEW], at: AT });
    expect(waitKindFor(ledger, NEW)).toBe('shepherd');
    expect(waitKindFor(ledger, HEAD)).toBe('transient');
  });
  it('a window stays open for the same head and kind and reopens otherwise', () => {
    const first = nextWindow(null, 'transient', HEAD, 0, DEFAULT_WAIT_SETTINGS);
    expect(first).toEqual({ kind: 'transient', head: HEAD, openedAt: 0, deadline: 600_000, pollMs: 15_000 });
    expect(nextWindow(first, 'transient', HEAD, 5000, DEFAULT_WAIT_SETTINGS)).toBe(first);
    expect(nextWindow(first, 'transient', NEW, 5000, DEFAULT_WAIT_SETTINGS).openedAt).toBe(5000);
  });
});

describe('ChangeSignals', () => {
  it('wakes a waiter at once and keeps a notification that came before the wait', async () => {
    const signals = new ChangeSignals();
    const waiting = signals.wait('1', 10_000);
    signals.notify('1');
    expect(await waiting).toBe('notified');
    signals.notify('2');
    expect(await signals.wait('2', 10_000)).toBe('notified');
    expect(await signals.wait('2', 5)).toBe('timeout');
  });
});

describe('LedgerStore leases (real SQLite)', () => {
  it('of two owners only one holds the lease until it is released', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'proofgate-lease-'));
    const storage = createLocalRunStorage({ directory: dir, namespace: 'automerge-lease-test', policy: defaultStoragePolicy });
    try {
      const a = new LedgerStore(storage.eventStore);
      const b = new LedgerStore(storage.eventStore);
      const [first, second] = await Promise.all([a.acquireLease('7', 'owner-a', 60_000), b.acquireLease('7', 'owner-b', 60_000)]);
      expect([first.acquired, second.acquired].filter(Boolean)).toHaveLength(1);
      const winner = first.acquired ? 'owner-a' : 'owner-b';
      const loser = first.acquired ? b : a;
      expect(await loser.acquireLease('7', winner === 'owner-a' ? 'owner-b' : 'owner-a', 60_000)).toMatchObject({ acquired: false, holder: { owner: winner } });
      expect(await a.updateLease('7', winner, 'release')).toBe(true);
      expect((await loser.acquireLease('7', winner === 'owner-a' ? 'owner-b' : 'owner-a', 60_000)).acquired).toBe(true);
    } finally {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
