import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AUTOMERGE_REASON_CODES, applyOutcome, initialLedger, type AutomergeDecision } from '../../../src/automerge/index.js';
import {
  ChangeSignals,
  DEFAULT_WAIT_SETTINGS,
  LABELS,
  expiredWindow,
  LedgerStore,
  gateDecision,
  labelPlan,
  nextWindow,
  policyFromConfig,
  waitKindFor,
  waitSettings,
  type WaitKind,
  type WaitWindow,
} from '../../../src/automerge/loop/index.js';
import { fixedClock } from '../../../src/core/index.js';
import { baseResultsMissing } from '../../../src/automerge/loop/base-checks.js';
import { emptyRepoConfig, parseRepoConfig } from '../../../src/contracts/repo-config.js';
import type { ChangeSnapshot, ForgeCheck } from '../../../src/forge/port.js';
import { defaultStoragePolicy } from '../../../src/storage/policy.js';
import { createLocalRunStorage } from '../../../src/storage/sqlite/index.js';

const HEAD = 'a'.repeat(40);
const NEW = 'b'.repeat(40);
const AT = '2026-01-01T00:00:00.000Z';
const REPAIR_CODES = { rebase: 'merge-conflict', 'fix-checks': 'checks-failed', 'fix-findings': 'review-refuted' } as const;
const repair = (kind: 'rebase' | 'fix-checks' | 'fix-findings'): AutomergeDecision => ({
  kind: 'repair',
  code: REPAIR_CODES[kind],
  repair: kind,
  head: HEAD,
  reason: 'why',
});

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
    [
      "a fork's head is never repaired: a rebase it needs is a block its author must lift",
      repair('rebase'),
      initialLedger('1'),
      { repair: true, agentFix: true, fork: true },
      'block',
      'fork-no-repair',
      "the head is a fork's branch, which proofgate never pushes to",
    ],
    [
      'a head a repair replaced is not repaired again: wait for the forge',
      repair('rebase'),
      pushed,
      { repair: true, agentFix: true },
      'wait',
      'new-head-pending',
      'waiting for the forge to show the new head',
    ],
    [
      'nor reviewed',
      { kind: 'review', code: 'head-moved', head: HEAD, reason: 'r' } as AutomergeDecision,
      pushed,
      { repair: true, agentFix: true },
      'wait',
      'new-head-pending',
      `pushed ${NEW.slice(0, 12)}`,
    ],
    [
      'nor merged',
      { kind: 'merge', code: 'ready', head: HEAD, reason: 'm' } as AutomergeDecision,
      pushed,
      { repair: true, agentFix: true },
      'wait',
      'new-head-pending',
      'waiting for the forge',
    ],
    [
      'the pushed head itself is reviewed',
      { kind: 'review', code: 'head-moved', head: NEW, reason: 'r' } as AutomergeDecision,
      pushed,
      { repair: true, agentFix: true },
      'review',
      'head-moved',
      '',
    ],
    [
      'a non-repair passes through',
      { kind: 'wait', code: 'checks-pending', reason: 'w' } as AutomergeDecision,
      initialLedger('1'),
      { repair: false, agentFix: false },
      'wait',
      'checks-pending',
      '',
    ],
    ['rebase needs only a repair worker', repair('rebase'), initialLedger('1'), { repair: true, agentFix: false }, 'repair', 'merge-conflict', ''],
    [
      'a BEHIND rebase needs only a repair worker too',
      { kind: 'repair', code: 'behind', repair: 'rebase', head: HEAD, reason: 'behind' } as AutomergeDecision,
      initialLedger('1'),
      { repair: true, agentFix: false },
      'repair',
      'behind',
      '',
    ],
    [
      'rebase without a worker blocks',
      repair('rebase'),
      initialLedger('1'),
      { repair: false, agentFix: true },
      'block',
      'no-repair-worker',
      'no repair worker',
    ],
    [
      'fix-checks without agent-fix blocks',
      repair('fix-checks'),
      initialLedger('1'),
      { repair: true, agentFix: false },
      'block',
      'no-agent-fix',
      'no agent-fix command',
    ],
    [
      'fix-checks without agent-fix blocks when the head contains its base',
      repair('fix-checks'),
      initialLedger('1'),
      { repair: true, agentFix: false, headBehindBase: false },
      'block',
      'no-agent-fix',
      'no agent-fix command',
    ],
    [
      'fix-checks without agent-fix repairs (by a rebase) when the head is behind its base',
      repair('fix-checks'),
      initialLedger('1'),
      { repair: true, agentFix: false, headBehindBase: true },
      'repair',
      'checks-failed',
      '',
    ],
    [
      'fix-findings without agent-fix blocks even when behind',
      repair('fix-findings'),
      initialLedger('1'),
      { repair: true, agentFix: false, headBehindBase: true },
      'block',
      'no-agent-fix',
      'no agent-fix command',
    ],
    [
      'a futile rebase-only fix-checks from this head blocks',
      repair('fix-checks'),
      applyOutcome(
        applyOutcome(initialLedger('1'), { type: 'repair-dispatched', id: 'r3', head: HEAD, repair: 'fix-checks', automatic: true, reason: 'x', at: AT }),
        { type: 'repair-finished', id: 'r3', result: 'no-change', newHead: null, commits: [], at: AT },
      ),
      { repair: true, agentFix: false, headBehindBase: true },
      'block',
      'repair-made-no-change',
      'made no change',
    ],
    ['fix-findings with agent-fix repairs', repair('fix-findings'), initialLedger('1'), { repair: true, agentFix: true }, 'repair', 'review-refuted', ''],
    [
      'the same repair that made no change from this head blocks',
      repair('fix-findings'),
      noChange,
      { repair: true, agentFix: true },
      'block',
      'repair-made-no-change',
      'made no change',
    ],
    ['another kind from that head still runs', repair('rebase'), noChange, { repair: true, agentFix: true }, 'repair', 'merge-conflict', ''],
  ] as const)('%s', (_name, decision, ledger, capabilities, kind, code, reason) => {
    const gated = gateDecision(decision, ledger, capabilities);
    expect({ kind: gated.kind, code: gated.code }).toEqual({ kind, code });
    expect(gated.reason).toContain(reason);
    // A gate's own code is listed with the others.
    expect(AUTOMERGE_REASON_CODES).toContain(gated.code);
  });
});

describe('baseResultsMissing', () => {
  const BASE = 'c'.repeat(40);
  const run = (name: string, headSha: string, conclusion: 'success' | 'failure' | 'cancelled' | null): ForgeCheck => ({
    kind: 'check_run',
    name,
    workflow: 'proofgate',
    status: conclusion === null ? 'in_progress' : 'completed',
    conclusion,
    startedAt: AT,
    completedAt: conclusion === null ? null : AT,
    url: null,
    headSha,
  });
  const snap = (checks: ForgeCheck[]): ChangeSnapshot => ({
    id: '1',
    number: 1,
    title: 't',
    state: 'open',
    draft: false,
    base: { ref: 'main', sha: BASE },
    head: { ref: 'f', sha: HEAD },
    author: { login: 'a' },
    mergeable: 'MERGEABLE',
    mergeStateStatus: 'BLOCKED',
    labels: [],
    checks,
    comments: [],
    mergeCommitSha: null,
    url: null,
    reviewDecision: null,
  });
  const policy = { ignored: [] };
  it.each([
    ['nothing fails on the head: nothing to ask', [run('lint', HEAD, 'success')], []],
    ['a head failure without a base run is asked for', [run('lint', HEAD, 'failure'), run('test', HEAD, 'failure')], ['lint', 'test']],
    [
      'a base result (failed or passed) is not asked again',
      [run('lint', HEAD, 'failure'), run('test', HEAD, 'failure'), run('lint', BASE, 'failure'), run('test', BASE, 'success')],
      [],
    ],
    [
      'a cancelled or running base run is no result',
      [run('lint', HEAD, 'failure'), run('test', HEAD, 'failure'), run('lint', BASE, 'cancelled'), run('test', BASE, null)],
      ['lint', 'test'],
    ],
  ] as const)('%s', (_name, checks, expected) => {
    expect(baseResultsMissing(snap([...checks]), policy)).toEqual(expected);
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
    expect(() => parseRepoConfig({ automerge: { expectChecks: 'no' } }, 'main:.proofgate.yml')).toThrow(
      expect.objectContaining({ code: 'CONFIG', message: expect.stringContaining('automerge.expectChecks') }),
    );
  });
});

describe('labelPlan', () => {
  it.each([
    ['review', [], [LABELS.automerge], []],
    ['repair', ['Proofgate:Automerge', LABELS.humanReview], [], [LABELS.humanReview]],
    ['merge', [LABELS.automerge, LABELS.humanReview], [LABELS.mergeReady], [LABELS.humanReview]],
    ['block', [LABELS.automerge, LABELS.mergeReady], [LABELS.humanReview], [LABELS.mergeReady]],
    ['block', [], [LABELS.automerge, LABELS.humanReview], []],
    ['wait', [LABELS.automerge, LABELS.mergeReady], [], [LABELS.mergeReady]],
    ['merged', [LABELS.automerge, LABELS.mergeReady, 'bug'], [], [LABELS.automerge, LABELS.mergeReady]],
    ['stop', ['bug'], [], []],
  ] as const)('%s', (phase, present, add, remove) => {
    expect(labelPlan(phase, present)).toEqual({ add, remove });
  });
});

describe('wait windows', () => {
  it('defaults follow the seed and the config overrides them, explicit overrides win', () => {
    expect(DEFAULT_WAIT_SETTINGS).toEqual({
      shepherdWaitMs: 600_000,
      shepherdPollMs: 15_000,
      transientWaitMs: 600_000,
      transientPollMs: 15_000,
      reviewWaitMs: 600_000,
      reviewPollMs: 15_000,
    });
    expect(waitSettings({ transientWaitMs: 1000 }, { transientPollMs: 10 })).toMatchObject({
      transientWaitMs: 1000,
      transientPollMs: 10,
      shepherdWaitMs: 600_000,
    });
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

  it("times out on its clock: a manual clock's advance ends the wait, and nothing else does", async () => {
    const clock = fixedClock('2030-01-01T00:00:00Z');
    const signals = new ChangeSignals(clock);
    let ended: string | null = null;
    const waiting = signals.wait('1', 15_000).then((how) => (ended = how));
    await clock.whenPending();
    clock.advance(14_999);
    await Promise.resolve();
    expect(ended).toBeNull();
    clock.advance(1);
    expect(await waiting).toBe('timeout');
    expect(clock.pendingTimers()).toBe(0);

    // A notification cancels the timer it was waiting on; an abort too.
    const notified = signals.wait('1', 15_000);
    signals.notify('1');
    expect(await notified).toBe('notified');
    const abort = new AbortController();
    const aborted = signals.wait('1', 15_000, abort.signal);
    abort.abort();
    expect(await aborted).toBe('aborted');
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe('expiredWindow (pure)', () => {
  const decision = { kind: 'wait', code: 'checks-pending', reason: 'checks are running' } as const;
  const window = (kind: WaitKind): WaitWindow => ({ kind, head: NEW, openedAt: 1_000, deadline: 601_000, pollMs: 15_000 });

  it('ends the shepherd and transient windows as waiting, naming the window and its span', () => {
    expect(expiredWindow(window('transient'), decision)).toEqual({ kind: 'waiting', reason: 'transient wait window of 600000 ms expired: checks are running' });
    expect(expiredWindow(window('shepherd'), decision)).toEqual({ kind: 'waiting', reason: 'shepherd wait window of 600000 ms expired: checks are running' });
  });

  it('blocks when the review window expires (only a person can approve), keeping the wait’s code', () => {
    const review = { kind: 'wait', code: 'review-required', reason: 'approvals missing' } as const;
    expect(expiredWindow(window('review'), review)).toEqual({
      kind: 'blocked',
      decision: { kind: 'block', code: 'review-required', reason: 'no required approval within the 600000 ms review window: approvals missing' },
    });
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
