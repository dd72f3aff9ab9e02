import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/core/index.js';
import type { RepoPermission } from '../../src/forge/port.js';
import {
  admitProofCommand,
  offeredTools,
  proofCoverage,
  recheckAdmission,
  type AdmissionRefusalReason,
  type AdmissionResult,
  type ProofAdmission,
  type ProofCapabilities,
  type ProofCommandInput,
  type ProofCommandRequest,
} from '../../src/proof/admission.js';
import type { ProofScenario } from '../../src/proof/scenarios.js';

const HEAD = 'a'.repeat(40);
const NEW_HEAD = 'b'.repeat(40);
const NOW = Date.parse('2026-03-01T12:00:00Z');
const LEASE = { owner: 'worker-1', epoch: 4 };

function scenario(id: string, timeoutSeconds = 300): ProofScenario {
  return {
    id,
    description: `exercises ${id}`,
    producer: { kind: 'local', command: ['node', `proof/${id}.mjs`] },
    timeoutSeconds,
    evidence: { requiredFiles: [], maxBytes: 1024, maxEntries: 8 },
  };
}

const SCENARIOS = [scenario('web-chat'), scenario('bot-e2e', 900), scenario('cli-smoke', 60)];
const ALL_CAPABLE: ProofCapabilities = { lease: LEASE, headSha: HEAD, scenarios: ['web-chat', 'bot-e2e', 'cli-smoke'] };

function input(overrides: Partial<ProofCommandInput> & { command?: ProofCommandRequest } = {}): ProofCommandInput {
  return {
    command: { scenarios: [], sha: null },
    commentId: '501',
    author: { login: 'maintainer', permission: 'write' },
    change: { id: '7', state: 'open', locked: false, crossRepository: false, headSha: HEAD },
    scenarios: SCENARIOS,
    capabilities: ALL_CAPABLE,
    now: NOW,
    ...overrides,
  };
}

function admitted(result: AdmissionResult): Extract<AdmissionResult, { kind: 'admitted' }> {
  if (result.kind !== 'admitted') throw new Error(`expected admission, got ${JSON.stringify(result)}`);
  return result;
}

function refusal(result: AdmissionResult | ReturnType<typeof recheckAdmission>): AdmissionRefusalReason | 'admitted' | 'unchanged' | 'stands' {
  return result.kind === 'refused' ? result.reason : result.kind;
}

describe('admitProofCommand', () => {
  const cases: [string, Partial<ProofCommandInput>, AdmissionRefusalReason | 'admitted'][] = [
    ['a plain command from a writer', {}, 'admitted'],
    ['a maintainer', { author: { login: 'm', permission: 'maintain' } }, 'admitted'],
    ['an admin', { author: { login: 'm', permission: 'admin' } }, 'admitted'],
    ['the current head named', { command: { scenarios: ['web-chat'], sha: HEAD } }, 'admitted'],
    ['triage permission', { author: { login: 't', permission: 'triage' } }, 'PERMISSION'],
    ['read permission', { author: { login: 'r', permission: 'read' } }, 'PERMISSION'],
    ['no permission', { author: { login: 'x', permission: 'none' as RepoPermission } }, 'PERMISSION'],
    ['a closed change', { change: { id: '7', state: 'closed', locked: false, crossRepository: false, headSha: HEAD } }, 'NOT_OPEN'],
    ['a merged change', { change: { id: '7', state: 'merged', locked: false, crossRepository: false, headSha: HEAD } }, 'NOT_OPEN'],
    ['a locked change', { change: { id: '7', state: 'open', locked: true, crossRepository: false, headSha: HEAD } }, 'LOCKED'],
    ['a fork head', { change: { id: '7', state: 'open', locked: false, crossRepository: true, headSha: HEAD } }, 'FORK_HEAD'],
    ['another sha named (retarget at admission)', { command: { scenarios: [], sha: NEW_HEAD } }, 'SHA_MISMATCH'],
    ['a short sha', { command: { scenarios: [], sha: 'abcdef1' } }, 'INVALID_COMMAND'],
    ['an upper-case sha', { command: { scenarios: [], sha: HEAD.toUpperCase() } }, 'INVALID_COMMAND'],
    ['a scenario name with path characters', { command: { scenarios: ['../etc/passwd'], sha: null } }, 'INVALID_COMMAND'],
    ['a scenario name with a slash', { command: { scenarios: ['web/chat'], sha: null } }, 'INVALID_COMMAND'],
    ['an empty scenario name', { command: { scenarios: [''], sha: null } }, 'INVALID_COMMAND'],
    ['33 scenario names', { command: { scenarios: Array.from({ length: 33 }, (_, i) => `s${i}`), sha: null } }, 'INVALID_COMMAND'],
  ];
  it.each(cases)('%s', (_name, overrides, expected) => {
    const result = admitProofCommand(input(overrides));
    expect(refusal(result)).toBe(expected);
    if (result.kind === 'refused') expect(result.message).not.toContain('\n');
  });

  it('checks permission before anything else: a stranger learns nothing about the change', () => {
    const result = admitProofCommand(
      input({ author: { login: 'x', permission: 'read' }, change: { id: '7', state: 'closed', locked: true, crossRepository: true, headSha: HEAD } }),
    );
    expect(refusal(result)).toBe('PERMISSION');
  });

  it('stores the captured head and the named allowlist', () => {
    const { decision, coverage } = admitted(admitProofCommand(input({ command: { scenarios: ['cli-smoke', 'web-chat', 'cli-smoke'], sha: null } })));
    expect(decision).toEqual({
      schema: 'proof-admission.v1',
      changeId: '7',
      commentId: '501',
      requestedBy: 'maintainer',
      headSha: HEAD,
      selection: 'named',
      allowlist: ['cli-smoke', 'web-chat'],
      command: { scenarios: ['cli-smoke', 'web-chat'], sha: null },
      admittedAt: '2026-03-01T12:00:00.000Z',
    });
    expect(() => canonicalJson(decision)).not.toThrow();
    expect(coverage.offered.map((tool) => tool.name)).toEqual(['proof_cli-smoke', 'proof_web-chat']);
    expect(coverage.gaps).toEqual([{ scenarioId: 'bot-e2e', reason: 'NOT_ALLOWED', message: 'scenario "bot-e2e" is not in the admitted list' }]);
  });

  it('with no names, allows what is configured at admission and no more', () => {
    const { decision, coverage } = admitted(admitProofCommand(input()));
    expect(decision.selection).toBe('configured');
    expect(decision.allowlist).toEqual(['web-chat', 'bot-e2e', 'cli-smoke']);
    expect(coverage.offered.map((tool) => tool.scenarioId)).toEqual(['web-chat', 'bot-e2e', 'cli-smoke']);
    // A scenario configured later is not in the stored decision: it is reported, not offered.
    const later = [...SCENARIOS, scenario('added-later')];
    const capable = { ...ALL_CAPABLE, scenarios: [...ALL_CAPABLE.scenarios, 'added-later'] };
    expect(offeredTools(decision, later, capable).map((tool) => tool.scenarioId)).toEqual(['web-chat', 'bot-e2e', 'cli-smoke']);
    expect(proofCoverage(decision, later, capable).gaps).toEqual([
      { scenarioId: 'added-later', reason: 'NOT_ALLOWED', message: 'scenario "added-later" is not in the admitted list' },
    ]);
  });

  it('admits unknown and legacy names, offers nothing for them and reports them as gaps', () => {
    const { decision, coverage } = admitted(admitProofCommand(input({ command: { scenarios: ['web-chat', 'legacy.markdown', 'nope'], sha: null } })));
    expect(decision.allowlist).toEqual(['web-chat', 'legacy.markdown', 'nope']);
    expect(coverage.offered.map((tool) => tool.scenarioId)).toEqual(['web-chat']);
    expect(coverage.gaps.map((gap) => [gap.scenarioId, gap.reason])).toEqual([
      ['legacy.markdown', 'UNKNOWN_SCENARIO'],
      ['nope', 'UNKNOWN_SCENARIO'],
      ['bot-e2e', 'NOT_ALLOWED'],
      ['cli-smoke', 'NOT_ALLOWED'],
    ]);
  });

  it('admits with no scenarios configured, offering nothing', () => {
    const { decision, coverage } = admitted(admitProofCommand(input({ scenarios: [] })));
    expect(decision.allowlist).toEqual([]);
    expect(coverage).toEqual({ offered: [], gaps: [] });
  });
});

describe('proofCoverage and offeredTools', () => {
  const decision = admitted(admitProofCommand(input({ command: { scenarios: ['web-chat', 'bot-e2e'], sha: null } }))).decision;

  const cases: [string, ProofCapabilities | null, string[], [string, string][]][] = [
    ['every capability', ALL_CAPABLE, ['web-chat', 'bot-e2e'], [['cli-smoke', 'NOT_ALLOWED']]],
    [
      'no capabilities at all: no tools, never unrestricted ones',
      null,
      [],
      [
        ['web-chat', 'NO_CAPABILITIES'],
        ['bot-e2e', 'NO_CAPABILITIES'],
        ['cli-smoke', 'NOT_ALLOWED'],
      ],
    ],
    [
      'an empty capability list',
      { ...ALL_CAPABLE, scenarios: [] },
      [],
      [
        ['web-chat', 'UNAVAILABLE'],
        ['bot-e2e', 'UNAVAILABLE'],
        ['cli-smoke', 'NOT_ALLOWED'],
      ],
    ],
    [
      'one producer unavailable',
      { ...ALL_CAPABLE, scenarios: ['bot-e2e', 'cli-smoke'] },
      ['bot-e2e'],
      [
        ['web-chat', 'UNAVAILABLE'],
        ['cli-smoke', 'NOT_ALLOWED'],
      ],
    ],
    [
      'capabilities naming what is neither allowed nor configured, or a wildcard',
      { ...ALL_CAPABLE, scenarios: ['*', 'cli-smoke', 'ghost', 'web-chat'] },
      ['web-chat'],
      [
        ['bot-e2e', 'UNAVAILABLE'],
        ['cli-smoke', 'NOT_ALLOWED'],
      ],
    ],
    [
      'capabilities looked up for another head',
      { ...ALL_CAPABLE, headSha: NEW_HEAD },
      [],
      [
        ['web-chat', 'HEAD_MOVED'],
        ['bot-e2e', 'HEAD_MOVED'],
        ['cli-smoke', 'NOT_ALLOWED'],
      ],
    ],
  ];
  it.each(cases)('%s', (_name, capabilities, offered, gaps) => {
    const coverage = proofCoverage(decision, SCENARIOS, capabilities);
    expect(coverage.offered.map((tool) => tool.scenarioId)).toEqual(offered);
    expect(coverage.gaps.map((gap) => [gap.scenarioId, gap.reason])).toEqual(gaps);
    expect(offeredTools(decision, SCENARIOS, capabilities)).toEqual(coverage.offered);
  });

  it('names each tool for its scenario, within what tool-calling APIs accept', () => {
    const long = scenario('a'.repeat(48), 120);
    const wide = admitted(admitProofCommand(input({ scenarios: [long], capabilities: { ...ALL_CAPABLE, scenarios: [long.id] } })));
    expect(wide.coverage.offered).toEqual([{ name: `proof_${'a'.repeat(48)}`, scenarioId: long.id, description: long.description, timeoutSeconds: 120 }]);
    for (const tool of wide.coverage.offered) expect(tool.name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
  });
});

describe('an admitted decision cannot be widened or retargeted', () => {
  const stored: ProofAdmission = admitted(admitProofCommand(input({ command: { scenarios: ['web-chat', 'cli-smoke'], sha: null } }))).decision;
  const storedAll: ProofAdmission = admitted(admitProofCommand(input())).decision;

  const cases: [string, ProofAdmission, { commentId: string; command: ProofCommandRequest | null; headSha: string }, string][] = [
    ['the same comment redelivered', stored, { commentId: '501', command: { scenarios: ['web-chat', 'cli-smoke'], sha: null }, headSha: HEAD }, 'stands'],
    ['the same names in another order', stored, { commentId: '501', command: { scenarios: ['cli-smoke', 'web-chat'], sha: null }, headSha: HEAD }, 'stands'],
    [
      'an edit adding a scenario',
      stored,
      { commentId: '501', command: { scenarios: ['web-chat', 'cli-smoke', 'bot-e2e'], sha: null }, headSha: HEAD },
      'WIDENED',
    ],
    ['an edit swapping a scenario', stored, { commentId: '501', command: { scenarios: ['web-chat', 'bot-e2e'], sha: null }, headSha: HEAD }, 'WIDENED'],
    ['an edit removing the list (all scenarios)', stored, { commentId: '501', command: { scenarios: [], sha: null }, headSha: HEAD }, 'WIDENED'],
    [
      'an edit naming the new head after a push',
      stored,
      { commentId: '501', command: { scenarios: ['web-chat'], sha: NEW_HEAD }, headSha: NEW_HEAD },
      'RETARGETED',
    ],
    ['an edit naming another sha', stored, { commentId: '501', command: { scenarios: ['web-chat', 'cli-smoke'], sha: NEW_HEAD }, headSha: HEAD }, 'RETARGETED'],
    ['an edit narrowing the list', stored, { commentId: '501', command: { scenarios: ['web-chat'], sha: null }, headSha: HEAD }, 'EDITED'],
    ['an edit adding the admitted sha', stored, { commentId: '501', command: { scenarios: ['web-chat', 'cli-smoke'], sha: HEAD }, headSha: HEAD }, 'EDITED'],
    ['an edit removing the command', stored, { commentId: '501', command: null, headSha: HEAD }, 'EDITED'],
    [
      'the unchanged comment after a push',
      stored,
      { commentId: '501', command: { scenarios: ['web-chat', 'cli-smoke'], sha: null }, headSha: NEW_HEAD },
      'HEAD_MOVED',
    ],
    ['another comment', stored, { commentId: '502', command: { scenarios: ['web-chat', 'cli-smoke'], sha: null }, headSha: HEAD }, 'OTHER_COMMENT'],
    ['an all-scenarios decision redelivered', storedAll, { commentId: '501', command: { scenarios: [], sha: null }, headSha: HEAD }, 'stands'],
    [
      'an all-scenarios decision narrowed by an edit',
      storedAll,
      { commentId: '501', command: { scenarios: ['web-chat'], sha: null }, headSha: HEAD },
      'EDITED',
    ],
    [
      'an all-scenarios decision edited to name an unknown one',
      storedAll,
      { commentId: '501', command: { scenarios: ['ghost'], sha: null }, headSha: HEAD },
      'WIDENED',
    ],
  ];
  it.each(cases)('%s', (_name, decision, later, expected) => {
    const result = recheckAdmission(decision, later);
    expect(refusal(result)).toBe(expected);
    if (result.kind === 'stands') expect(result.decision).toBe(decision);
  });

  it('admitProofCommand with the stored decision never admits the edit', () => {
    const widened = admitProofCommand(input({ previous: stored, command: { scenarios: ['web-chat', 'cli-smoke', 'bot-e2e'], sha: null } }));
    expect(refusal(widened)).toBe('WIDENED');
    const moved = admitProofCommand(
      input({
        previous: stored,
        command: { scenarios: ['web-chat', 'cli-smoke'], sha: NEW_HEAD },
        change: { id: '7', state: 'open', locked: false, crossRepository: false, headSha: NEW_HEAD },
      }),
    );
    expect(refusal(moved)).toBe('RETARGETED');
    const replay = admitProofCommand(input({ previous: stored, command: { scenarios: ['cli-smoke', 'web-chat'], sha: null } }));
    expect(replay).toEqual({ kind: 'unchanged', decision: stored });
  });

  it('the stored decision offers nothing once the head has moved', () => {
    expect(offeredTools(stored, SCENARIOS, { ...ALL_CAPABLE, headSha: NEW_HEAD })).toEqual([]);
  });
});
