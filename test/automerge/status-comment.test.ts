import { describe, expect, it } from 'vitest';
import {
  DEFAULT_STATUS_INTENT,
  TIMELINE_LIMIT,
  escapeText,
  findStatusComment,
  parseCommands,
  readMarkers,
  renderFinalComment,
  renderStatusComment,
  type AutomergeDecision,
  type RepairRecord,
} from '../../src/automerge/index.js';
import { CHANGE, HEAD, OLD_HEAD, SECRET, SELF, comment } from './builders.js';

const MERGE_COMMIT = 'e'.repeat(40);
const OPTIONS = { selfLogin: SELF, secret: SECRET, changeId: CHANGE, intent: DEFAULT_STATUS_INTENT };

function status(decision: AutomergeDecision, timeline = [{ at: '2024-05-01T10:00:00Z', text: 'alice: /proofgate automerge' }]): string {
  return renderStatusComment({ changeId: CHANGE, intent: DEFAULT_STATUS_INTENT, head: HEAD, decision, timeline }, SECRET);
}

describe('renderStatusComment', () => {
  const rows: [AutomergeDecision, RegExp][] = [
    [
      { kind: 'wait', code: 'checks-pending', reason: 'checks pending on aaaa: pending: CI / test (in_progress)' },
      /^### proofgate automerge: waiting\n\nHead `a{40}`: \*\*wait\*\*, checks pending on aaaa: pending: CI \/ test \(in_progress\) \(`checks-pending`\)\n/,
    ],
    [{ kind: 'review', code: 'no-verdict', head: HEAD, reason: 'needs review' }, /: reviewing\n[^]*needs review \(`no-verdict`\)/],
    [{ kind: 'repair', code: 'behind', repair: 'rebase', head: HEAD, reason: 'behind' }, /: repairing\n[^]*behind \(`behind`\)/],
    [{ kind: 'merge', code: 'ready', head: HEAD, reason: 'CONFIRMED' }, /: merging\n[^]*\(`ready`\)/],
    [{ kind: 'block', code: 'base-blocked', reason: 'the base is blocked' }, /: blocked: needs a human\n[^]*\(`base-blocked`\)/],
    [{ kind: 'stop', code: 'stopped', reason: 'stopped by bob' }, /: stopped\n[^]*\(`stopped`\)/],
  ];
  it.each(rows)('%j', (decision, pattern) => {
    const body = status(decision);
    expect(body).toMatch(pattern);
    expect(body).toContain('- 2024-05-01T10:00:00Z: alice: /proofgate automerge');
    const { trusted } = readMarkers(comment(body), { selfLogin: SELF, secret: SECRET, changeId: CHANGE });
    expect(trusted.map((m) => m.fields)).toEqual([{ kind: 'automerge-status', change: CHANGE, head: HEAD, intent: 'automerge' }]);
  });

  it('shows only the last entries of a long timeline', () => {
    const timeline = Array.from({ length: TIMELINE_LIMIT + 5 }, (_, i) => ({ at: `t${i}`, text: `entry ${i}` }));
    const body = status({ kind: 'wait', code: 'checks-pending', reason: 'x' }, timeline);
    expect(body).toContain('- (5 earlier entries not shown)');
    expect(body).not.toContain('entry 4\n');
    expect(body).toContain(`entry ${TIMELINE_LIMIT + 4}`);
  });

  it('says so when the timeline is empty', () => {
    expect(status({ kind: 'wait', code: 'checks-pending', reason: 'x' }, [])).toContain('- (nothing yet)');
  });

  it('outside text cannot smuggle a marker, markup, a mention or a command into the comment', () => {
    const hostile = '<!-- proofgate:marker v1 {} -->\n/proofgate automerge @everyone `x`';
    const body = status({ kind: 'block', code: 'review-hold', reason: hostile }, [{ at: 'now', text: hostile }]);
    expect(body).not.toContain('<!-- proofgate:marker v1 {}');
    expect(body).not.toContain('@everyone');
    expect(parseCommands(body)).toEqual([]);
    expect(readMarkers(comment(body), { selfLogin: SELF, secret: SECRET }).rejected).toEqual([]);
  });
});

describe('escapeText', () => {
  const rows: [string, string][] = [
    ['plain', 'plain'],
    ['a < b > c & d', 'a &lt; b &gt; c &amp; d'],
    ['@alice', '&#64;alice'],
    ['line\nbreak\r\n', 'line break '],
    ['`code`', '&#96;code&#96;'],
    ['[x](https://e) ![i](u)', '&#91;x&#93;(https://e) !&#91;i&#93;(u)'],
  ];
  it.each(rows)('%j', (input, output) => {
    expect(escapeText(input)).toBe(output);
  });
});

describe('renderFinalComment', () => {
  const repairs: RepairRecord[] = [
    { id: 'p1', head: OLD_HEAD, repair: 'rebase', automatic: true, reason: 'conflicts with main', status: 'pushed', newHead: HEAD, commits: [HEAD], at: 't' },
    { id: 'p2', head: OLD_HEAD, repair: 'fix-checks', automatic: true, reason: 'lint', status: 'failed', newHead: null, commits: [], at: 't' },
  ];
  const timeline = [
    { at: 't1', text: 'alice: /proofgate automerge' },
    { at: 't2', text: `merged ${HEAD.slice(0, 12)}` },
  ];

  it('names the merged head, the merge commit link, the repairs and the timeline', () => {
    const body = renderFinalComment(
      {
        changeId: CHANGE,
        intent: 'automerge',
        mergedHead: HEAD,
        mergeCommit: MERGE_COMMIT,
        mergeCommitUrl: 'https://example.test/o/r/commit/(e)',
        repairs,
        timeline,
      },
      SECRET,
    );
    expect(body).toContain('### proofgate automerge: merged');
    expect(body).toContain(`Merged the reviewed head \`${HEAD}\` as [\`${MERGE_COMMIT}\`](https://example.test/o/r/commit/%28e%29).`);
    expect(body).toContain(`- rebase from \`${OLD_HEAD}\` to \`${HEAD}\`: \`${HEAD}\` (conflicts with main)`);
    expect(body).not.toContain('fix-checks');
    expect(body).toContain('- t1: alice: /proofgate automerge');
    expect(readMarkers(comment(body), { selfLogin: SELF, secret: SECRET, changeId: CHANGE }).trusted).toHaveLength(1);
  });

  it('names the change: title, head branch and the base it merged into', () => {
    const body = renderFinalComment(
      {
        changeId: CHANGE,
        intent: 'automerge',
        mergedHead: HEAD,
        mergeCommit: MERGE_COMMIT,
        mergeCommitUrl: null,
        repairs,
        timeline,
        title: 'Add <b>login</b> for @team',
        headRef: 'feature/login',
        baseRef: 'main',
      },
      SECRET,
    );
    expect(body).toContain('Change: **Add &lt;b&gt;login&lt;/b&gt; for &#64;team** (branch <code>feature/login</code>)');
    expect(body).toContain(`Merged the reviewed head \`${HEAD}\` into <code>main</code> as \`${MERGE_COMMIT}\`.`);
    expect(body).toContain(`- rebase from \`${OLD_HEAD}\` to \`${HEAD}\`: \`${HEAD}\` (conflicts with main)`);
    expect(body).toContain('- t1: alice: /proofgate automerge');
    expect(parseCommands(body)).toEqual([]);
    expect(readMarkers(comment(body), { selfLogin: SELF, secret: SECRET, changeId: CHANGE }).trusted).toHaveLength(1);
  });

  it('a hostile branch name carries no markup, marker or mention', () => {
    const body = renderFinalComment(
      {
        changeId: CHANGE,
        intent: 'automerge',
        mergedHead: HEAD,
        mergeCommit: MERGE_COMMIT,
        mergeCommitUrl: null,
        repairs: [],
        timeline: [],
        headRef: 'x</code><!-- proofgate:marker v2 {} -->@all`',
        baseRef: 'main',
      },
      SECRET,
    );
    expect(body).toContain('Change: branch <code>x&lt;/code&gt;&lt;!-- proofgate:marker v2 {} --&gt;&#64;all&#96;</code>\n');
    expect(readMarkers(comment(body), { selfLogin: SELF, secret: SECRET, changeId: CHANGE }).rejected).toEqual([]);
  });

  it('only the head branch known', () => {
    const body = renderFinalComment(
      {
        changeId: CHANGE,
        intent: 'automerge',
        mergedHead: HEAD,
        mergeCommit: MERGE_COMMIT,
        mergeCommitUrl: null,
        repairs: [],
        timeline,
        title: '  ',
        headRef: 'feature',
      },
      SECRET,
    );
    expect(body).toContain('Change: branch <code>feature</code>\n');
    expect(body).toContain(`Merged the reviewed head \`${HEAD}\` as`);
  });

  it('without repairs or a link', () => {
    const body = renderFinalComment(
      { changeId: CHANGE, intent: 'automerge', mergedHead: HEAD, mergeCommit: MERGE_COMMIT, mergeCommitUrl: null, repairs: [], timeline },
      SECRET,
    );
    expect(body).toContain(`as \`${MERGE_COMMIT}\`.`);
    expect(body).toContain('- none: the reviewed head merged as it was');
    expect(body).not.toContain('Change:');
  });
});

describe('findStatusComment', () => {
  const own = comment(status({ kind: 'wait', code: 'checks-pending', reason: 'x' }), { id: 's1' });
  const newer = comment(status({ kind: 'merge', code: 'ready', head: HEAD, reason: 'y' }), { id: 's2' });
  const other = comment(
    renderStatusComment(
      { changeId: CHANGE, intent: 'proof', head: HEAD, decision: { kind: 'wait', code: 'checks-pending', reason: 'x' }, timeline: [] },
      SECRET,
    ),
    { id: 's3' },
  );
  const copiedByHuman = { ...own, id: 'h1', author: 'mallory' };
  const edited = { ...own, id: 's4', body: own.body.replace('waiting', 'merged') };
  const otherChange = comment(
    renderStatusComment(
      { changeId: '43', intent: 'automerge', head: HEAD, decision: { kind: 'wait', code: 'checks-pending', reason: 'x' }, timeline: [] },
      SECRET,
    ),
    { id: 's5' },
  );

  const rows: [string, ReturnType<typeof comment>[], string | null][] = [
    ['none yet', [comment('hello', { author: 'alice' })], null],
    ['own status comment', [comment('hi', { author: 'alice' }), own], 's1'],
    ['last one in forge order', [own, newer], 's2'],
    ['another intent is another comment', [other], null],
    ['a human copy is not ours', [copiedByHuman], null],
    ['an edited one no longer verifies', [edited], null],
    ['a status comment of another change', [otherChange], null],
    ['mixed', [copiedByHuman, own, other, edited, otherChange], 's1'],
  ];
  it.each(rows)('%s', (_name, comments, expected) => {
    expect(findStatusComment(comments, OPTIONS)?.id ?? null).toBe(expected);
  });
});
