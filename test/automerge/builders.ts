import {
  collectVerdicts,
  composeMarkedBody,
  type ReviewFacts,
  type ReviewVerdictFields,
  type TrustedVerdict,
  type Verdict,
} from '../../src/automerge/index.js';
import type { ChangeSnapshot, ForgeCheck, ForgeComment } from '../../src/forge/port.js';

export const SECRET = 'test-secret-0123456789abcdef';
export const SELF = 'proofgate[bot]';
export const CHANGE = '42';
export const HEAD = 'a'.repeat(40);
export const OLD_HEAD = 'b'.repeat(40);
export const BASE = 'c'.repeat(40);

let commentSeq = 0;

export function comment(body: string, overrides: Partial<ForgeComment> = {}): ForgeComment {
  commentSeq += 1;
  return {
    id: `c${commentSeq}`,
    author: SELF,
    authorType: 'Bot',
    body,
    createdAt: '2024-05-01T10:00:00Z',
    updatedAt: '2024-05-01T10:00:00Z',
    ...overrides,
  };
}

export const VERDICT_AT = '2024-05-01T10:00:00.000Z';
/** The digests every verdict is bound to unless given, and the live ones of `facts()`. */
export const DIFF = `sha256:${'1'.repeat(64)}`;
export const CONTRACT = `sha256:${'2'.repeat(64)}`;
export const CONFIG = `sha256:${'3'.repeat(64)}`;

/** Verdict fields; the review id, the signed time and the bindings are fixed unless given. */
export function verdictFields(overrides: Partial<ReviewVerdictFields> = {}): ReviewVerdictFields {
  return {
    kind: 'review-verdict',
    change: CHANGE,
    head: HEAD,
    verdict: 'CONFIRMED',
    findings: 0,
    review: 'rvw_1',
    at: VERDICT_AT,
    diff: DIFF,
    contract: CONTRACT,
    config: CONFIG,
    run: null,
    ...overrides,
  };
}

/** What the loop read: live bindings equal to the verdicts' defaults, no stored records, nothing trusted touched. */
export function facts(overrides: Partial<ReviewFacts> = {}): ReviewFacts {
  return { live: { diff: DIFF, contract: CONTRACT, config: CONFIG }, records: {}, touchesTrusted: [], approval: null, ...overrides };
}

/** A review comment proofgate wrote, with a verdict marker. */
export function verdictComment(fields: Partial<ReviewVerdictFields> = {}, overrides: Partial<ForgeComment> = {}): ForgeComment {
  const f = verdictFields(fields);
  return comment(composeMarkedBody(`Review of ${f.head}: ${f.verdict}`, [f], SECRET), overrides);
}

let reviewSeq = 0;

/**
 * Trusted verdicts, made the real way: signed, written as comments, read back.
 * Each entry is made one second after the previous one (signed time and comment
 * times); an entry without a review id gets a fresh one.
 */
export function verdicts(
  ...entries: (Partial<Pick<ReviewVerdictFields, 'diff' | 'contract' | 'config' | 'run'>> & {
    head?: string;
    verdict?: Verdict;
    findings?: number;
    review?: string | null;
    change?: string;
  })[]
): TrustedVerdict[] {
  const comments = entries.map(({ review, ...entry }, i) => {
    const at = new Date(Date.parse(VERDICT_AT) + i * 1000).toISOString();
    reviewSeq += 1;
    return verdictComment({ ...entry, review: review ?? `rvw_b${reviewSeq}`, at }, { createdAt: at, updatedAt: at });
  });
  return [...collectVerdicts(comments, { selfLogin: SELF, secret: SECRET, changeId: entries[0]?.change ?? CHANGE }).verdicts];
}

export function check(name: string, overrides: Partial<ForgeCheck> = {}): ForgeCheck {
  return {
    kind: 'check_run',
    name,
    workflow: 'CI',
    status: 'completed',
    conclusion: 'success',
    startedAt: '2024-05-01T10:00:00Z',
    completedAt: '2024-05-01T10:05:00Z',
    url: null,
    headSha: HEAD,
    ...overrides,
  };
}

export function snapshot(overrides: Partial<ChangeSnapshot> = {}): ChangeSnapshot {
  return {
    id: CHANGE,
    number: 42,
    title: 'Add a feature',
    state: 'open',
    draft: false,
    base: { ref: 'main', sha: BASE },
    head: { ref: 'feature', sha: HEAD },
    reviewDecision: null,
    author: { login: 'alice' },
    mergeable: 'MERGEABLE',
    mergeStateStatus: 'CLEAN',
    labels: [],
    checks: [check('build'), check('test')],
    comments: [],
    mergeCommitSha: null,
    url: null,
    ...overrides,
  };
}
