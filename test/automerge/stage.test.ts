import { describe, expect, it } from 'vitest';
import type { RepairRecord, ReviewRecord } from '../../src/automerge/ledger.js';
import { CHANGE_STAGES, changeStage, isChangeStage, type StageFacts, type StageResult, type StageStep } from '../../src/automerge/stage.js';

const H1 = 'a'.repeat(40);
const H2 = 'b'.repeat(40);
const M = 'c'.repeat(40);
const t = (minute: number): string => new Date(Date.UTC(2026, 0, 1, 12, minute)).toISOString();

const review = (at: number, status: ReviewRecord['status'], head = H1): ReviewRecord => ({
  id: `r${at}`,
  head,
  status,
  verdict: status === 'finished' ? 'CONFIRMED' : null,
  at: t(at),
});
const repair = (at: number, status: RepairRecord['status']): RepairRecord => ({
  id: `p${at}`,
  head: H1,
  repair: 'rebase',
  automatic: true,
  reason: 'the base moved',
  status,
  newHead: null,
  commits: [],
  at: t(at),
});
const step = (at: number, name: string, details: Record<string, unknown> = {}): StageStep => ({ step: name, at: t(at), ...details });

function facts(partial: Partial<StageFacts> & { reviews?: ReviewRecord[]; repairs?: RepairRecord[] }): StageFacts {
  return {
    forgeState: partial.forgeState ?? 'open',
    forgeMergeCommit: partial.forgeMergeCommit ?? null,
    automergeOn: partial.automergeOn ?? true,
    ledger: partial.ledger ?? { reviews: partial.reviews ?? [], repairs: partial.repairs ?? [], merged: null },
    steps: partial.steps ?? [],
  };
}

const cases: [string, StageFacts, Partial<StageResult>][] = [
  ['no command at all', facts({ automergeOn: false }), { stage: 'arriving', detail: null }],
  ['automerge requested, nothing decided', facts({}), { stage: 'arriving', detail: 'automerge requested' }],
  ['forge merged', facts({ forgeState: 'merged', forgeMergeCommit: M }), { stage: 'merged', detail: `as ${M.slice(0, 12)}` }],
  [
    'ledger merged wins over a later block',
    facts({
      ledger: { reviews: [], repairs: [], merged: { head: H1, mergeCommit: M, at: t(5) } },
      steps: [step(6, 'decision', { kind: 'block', reason: 'x' })],
    }),
    { stage: 'merged' },
  ],
  ['forge closed', facts({ forgeState: 'closed', reviews: [review(1, 'dispatched')] }), { stage: 'closed', detail: null }],
  ['review dispatched', facts({ reviews: [review(1, 'dispatched')] }), { stage: 'reviewing', detail: `review of ${H1.slice(0, 12)}` }],
  ['review finished, nothing after', facts({ reviews: [review(1, 'finished')] }), { stage: 'arriving' }],
  [
    'review of a head with a proof admitted',
    facts({
      reviews: [review(2, 'dispatched')],
      steps: [step(1, 'proof-admitted', { decision: { headSha: H1, allowlist: ['smoke', 'load'] } })],
    }),
    { stage: 'proving', detail: `proof of ${H1.slice(0, 12)}: smoke, load` },
  ],
  [
    'a proof admitted for another head leaves a plain review',
    facts({ reviews: [review(2, 'dispatched', H2)], steps: [step(1, 'proof-admitted', { decision: { headSha: H1, allowlist: [] } })] }),
    { stage: 'reviewing' },
  ],
  [
    'a review dispatched before the job ended is not running',
    facts({ reviews: [review(1, 'dispatched')], steps: [step(2, 'job-finished', { outcome: 'interrupted', reason: 'stopping' })] }),
    { stage: 'waiting', detail: 'interrupted: stopping' },
  ],
  [
    'repair running',
    facts({ repairs: [repair(3, 'dispatched')], reviews: [review(4, 'dispatched')] }),
    { stage: 'repairing', detail: `rebase of ${H1.slice(0, 12)}: the base moved` },
  ],
  ['repair pushed', facts({ repairs: [repair(3, 'pushed')] }), { stage: 'arriving' }],
  [
    'blocked with its reason and code',
    facts({ steps: [step(1, 'decision', { kind: 'block', code: 'review-refuted', reason: 'REFUTED: a finding' })] }),
    { stage: 'blocked', detail: 'REFUTED: a finding', code: 'review-refuted' },
  ],
  [
    'waiting on checks',
    facts({ steps: [step(1, 'decision', { kind: 'wait', code: 'checks-pending', reason: 'checks pending: lint' })] }),
    { stage: 'waiting', detail: 'checks pending: lint', code: 'checks-pending' },
  ],
  [
    'a later decision replaces an earlier one',
    facts({ steps: [step(1, 'decision', { kind: 'block', reason: 'old' }), step(2, 'decision', { kind: 'wait', reason: 'new' })] }),
    { stage: 'waiting', detail: 'new' },
  ],
  [
    'parked wait',
    facts({ steps: [step(1, 'wait-parked', { window: 'shepherd', reason: 'checks pending: test' })] }),
    { stage: 'waiting', detail: 'checks pending: test' },
  ],
  [
    'job ended blocked',
    facts({ steps: [step(1, 'job-finished', { outcome: 'blocked', reason: 'not mergeable' })] }),
    { stage: 'blocked', detail: 'not mergeable' },
  ],
  ['job ended parked', facts({ steps: [step(1, 'job-finished', { outcome: 'parked', reason: 'waiting for checks' })] }), { stage: 'waiting' }],
  [
    'stopped',
    facts({ automergeOn: false, steps: [step(1, 'decision', { kind: 'stop', reason: 'stopped by maintainer' })] }),
    { stage: 'arriving', detail: 'stopped by maintainer' },
  ],
  [
    'expired wait',
    facts({ steps: [step(1, 'wait-expired', { window: 'shepherd', reason: 'checks never finished' })] }),
    { stage: 'blocked', detail: 'checks never finished' },
  ],
  ['config invalid', facts({ steps: [step(1, 'config-invalid', { reason: 'bad yaml' })] }), { stage: 'blocked', detail: 'bad yaml' }],
  ['checks running', facts({ steps: [step(1, 'checks-started', { head: H1 })] }), { stage: 'waiting', detail: `checks running on ${H1.slice(0, 12)}` }],
  [
    'checks finished, nothing decided',
    facts({ steps: [step(1, 'checks-started', { head: H1 }), step(2, 'checks-finished', { head: H1 })] }),
    { stage: 'arriving' },
  ],
  ['merge decided', facts({ steps: [step(1, 'decision', { kind: 'merge', reason: 'all green' })] }), { stage: 'waiting', detail: 'merging: all green' }],
  [
    'unknown steps are skipped',
    facts({ steps: [step(1, 'decision', { kind: 'block', reason: 'why' }), step(2, 'marker-rejected'), step(3, 'something-new')] }),
    { stage: 'blocked', detail: 'why' },
  ],
  ['a decision with no reason', facts({ steps: [step(1, 'decision', { kind: 'block' })] }), { stage: 'blocked', detail: 'blocked' }],
];

describe('changeStage', () => {
  it.each(cases)('%s', (_name, input, expected) => {
    expect(changeStage(input)).toMatchObject(expected);
  });

  it('always answers a known stage', () => {
    for (const [, input] of cases) expect(isChangeStage(changeStage(input).stage)).toBe(true);
    expect(CHANGE_STAGES).toHaveLength(8);
    expect(isChangeStage('nonsense')).toBe(false);
  });
});
