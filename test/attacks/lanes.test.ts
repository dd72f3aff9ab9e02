/**
 * Issue 10, attacks 7-8: a command lane runs the head's copy of its reviewer
 * program (or of a module it imports), and a verdict outlives the config it
 * was made under. The maintainer runs `review` / `automerge`; the outcome must
 * be the trusted reviewer's REFUTED (or a re-review under the new rules), and
 * main stays where it was.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { attackFixture, cleanupFixtures, commentsOf, expectRepoUnchanged, MAINTAINER, repoState, trustedConfig, type Fixture } from './support.js';

afterEach(cleanupFixtures);

/** The trusted reviewer: REFUTED when the diff adds anything under secrets/, else CONFIRMED; the judgment lives in judge.mjs. */
const JUDGE = 'export const judge = (diff) => /^\\+\\+\\+ b\\/secrets\\//m.test(diff);\n';
const REVIEWER = `import { readFileSync, writeFileSync } from 'node:fs';
import { judge } from './judge.mjs';
const request = JSON.parse(readFileSync(0, 'utf8'));
const bad = judge(readFileSync(request.diff.path, 'utf8'));
const evidence = process.env.PROOFGATE_EVIDENCE_PATH;
writeFileSync(evidence, bad ? 'adds a file under secrets/\\n' : 'reviewed ' + request.head_sha + '\\n');
process.stdout.write(JSON.stringify({ schema: 'review-lane-result.v1', lane_id: process.env.PROOFGATE_LANE_ID, family: process.env.PROOFGATE_REVIEW_FAMILY,
  context_id: process.env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: request.nonce, read_only: true, evidence_path: evidence,
  findings: bad ? [{ title: 'adds a file under secrets/', evidence: 'see the diff', path: 'secrets/prod.key', line: 1 }] : [], disposition: bad ? 'REFUTED' : 'CONFIRMED' }));
`;
/** The head's replacement: always CONFIRMED, with a valid result and evidence. */
const RUBBER_STAMP = REVIEWER.replace("import { judge } from './judge.mjs';", 'const judge = () => false;');

function laneFixture(): Fixture {
  return attackFixture({
    '.proofgate.yml': trustedConfig({
      checks: 'checks: []',
      forbidden: [],
      lanes: '    - { id: script, family: my-script, command: ["node", "tools/review.mjs"], timeoutSeconds: 60 }',
      extra: 'automerge: { expectChecks: false }',
    }),
    'tools/review.mjs': REVIEWER,
    'tools/judge.mjs': JUDGE,
  });
}

describe("attack 7: a command lane runs the head's copy of its program", () => {
  it.each([
    ['the reviewer itself', 'tools/review.mjs', RUBBER_STAMP],
    ['a module the reviewer imports', 'tools/judge.mjs', 'export const judge = () => false;\n'],
  ])('the head rewrites %s to say CONFIRMED: the trusted reviewer still REFUTES and automerge does not merge', (_what, path, content) => {
    const fx = laneFixture();
    fx.commit(
      'feature',
      [
        { path, content },
        { path: 'secrets/prod.key', content: 'a forbidden file\n' },
      ],
      'tidy the reviewer',
    );
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    const review = fx.cli(['review', '--base', 'main', '--head', 'feature', '--json']);
    expect(review.status, review.stderr.slice(0, 400)).toBe(3);
    expect((JSON.parse(review.stdout) as { verdict: string }).verdict).toBe('REFUTED');
    const automerge = fx.cli(['automerge', '1', '--json']);
    expect(automerge.stdout).not.toContain('"outcome":"merged"');
    expectRepoUnchanged(fx, before);
  });
});

describe('attack 8: a verdict outlives the config it was made under', () => {
  it('CONFIRMED under lenient rules, then main forbids the path: automerge re-reviews and does not merge', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []', forbidden: [], extra: 'automerge: { expectChecks: false }' }) });
    fx.commit('feature', [{ path: 'vendor/payload.bin.txt', content: 'vendored bytes\n' }], 'vendor a thing');
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const asked = fx.cli(['change', 'comment', '1', '/proofgate review', '--as', MAINTAINER]);
    // Exit 5: the review ran and automerge was not requested.
    expect(asked.status, asked.stderr).toBe(5);
    expect(
      commentsOf(fx, '1').some((comment) => comment.body.includes('"verdict":"CONFIRMED"')),
      'no CONFIRMED verdict to reuse',
    ).toBe(true);
    // The maintainers tighten the rules on main.
    fx.repo.commit(
      'main',
      { '.proofgate.yml': trustedConfig({ checks: 'checks: []', forbidden: ['vendor/**'], extra: 'automerge: { expectChecks: false }' }) },
      'forbid vendor/',
    );
    const before = repoState(fx);
    const automerge = fx.cli(['automerge', '1', '--json']);
    expect(automerge.stdout).not.toContain('"outcome":"merged"');
    expectRepoUnchanged(fx, before);
    // The re-review under the new rules is REFUTED.
    expect(commentsOf(fx, '1').some((comment) => comment.body.includes('"verdict":"REFUTED"'))).toBe(true);
  });

  it('CONFIRMED by `proofgate review` (the accepted-result record), then main forbids the path: automerge does not merge', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []', forbidden: [], extra: 'automerge: { expectChecks: false }' }) });
    fx.commit('feature', [{ path: 'vendor/payload.bin.txt', content: 'vendored bytes\n' }], 'vendor a thing');
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    expect(fx.cli(['review', '--base', 'main', '--head', 'feature']).status).toBe(0);
    fx.repo.commit(
      'main',
      { '.proofgate.yml': trustedConfig({ checks: 'checks: []', forbidden: ['vendor/**'], extra: 'automerge: { expectChecks: false }' }) },
      'forbid vendor/',
    );
    const before = repoState(fx);
    const automerge = fx.cli(['automerge', '1', '--json']);
    expect(automerge.stdout).not.toContain('"outcome":"merged"');
    expectRepoUnchanged(fx, before);
  });
});
