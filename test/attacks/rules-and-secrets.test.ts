/**
 * Issue 10, attacks 9-10: getting past the rules lane (a newline in a
 * forbidden path, a dot file, a secret in a file git treats as binary or that
 * `.gitattributes` hides from the diff, a key glued to `AWS_KEY_`), and secrets
 * that stay in the data dir (titles, comments, check output, the review's diff
 * copy) or are printed raw by the CLI.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  attackFixture,
  cleanupFixtures,
  expectNoSecretStored,
  storedSecrets,
  expectRepoUnchanged,
  HONEST_CHECK,
  MAINTAINER,
  repoState,
  trustedConfig,
  type Entry,
  type Fixture,
} from './support.js';

afterEach(cleanupFixtures);

/** Fake credentials in the shapes real ones have (never valid anywhere). */
const KEYS = {
  awsKeyId: 'AKIAQ3EGRXZB7J2KLM4N',
  awsSecret: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Tq3vPgN',
  slack: 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx',
  stripe: 'sk_live_4eC39HqLyjWDarjtT1zdp7dcQ8vZ',
  google: 'AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY',
  openai: 'sk-proj-Zx9Qm2Lk8Pw4Rt6Yu1Io3As5Df7Gh9Jk0LzXcVbNm',
  github: 'ghp_Q8vZ3kLmN0pRsT5uVwXyZaBcDeFgHiJkLmNo',
} as const;

function reviewOf(fx: Fixture, entries: readonly Entry[]) {
  fx.commit('feature', entries, 'a harmless change');
  const review = fx.cli(['review', '--base', 'main', '--head', 'feature', '--json']);
  return review;
}

function rulesFixture(): Fixture {
  return attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []' }), 'README.md': '# target\n' });
}

describe('attack 9: the rules lane is bypassed', () => {
  it.each<[string, Entry[]]>([
    ['a newline in a path under a forbidden directory', [{ path: 'secrets/innocent\nname.key', content: 'x\n' }]],
    ['a dot file under a forbidden directory', [{ path: 'secrets/.env', content: 'x\n' }]],
    ['a dot directory under a forbidden directory', [{ path: 'secrets/.hidden/prod.key', content: 'x\n' }]],
    [
      'a secret in a file git treats as binary',
      [{ path: 'assets/logo.bin', content: Buffer.concat([Buffer.from([0, 1, 2, 0, 255]), Buffer.from(` ${KEYS.awsKeyId} `), Buffer.from([0, 0])]) }],
    ],
    ['an AWS key id glued to a name (AWS_KEY_AKIA...)', [{ path: 'config.env', content: `AWS_KEY_${KEYS.awsKeyId}\n` }]],
    [
      'a key in a text file that .gitattributes marks binary',
      [
        { path: '.gitattributes', content: '*.txt binary\n' },
        { path: 'notes.txt', content: `deploy with ${KEYS.github}\n` },
      ],
    ],
    [
      'a key in a text file that .gitattributes marks -diff',
      [
        { path: '.gitattributes', content: '*.cfg -diff\n' },
        { path: 'app.cfg', content: `token = ${KEYS.stripe}\n` },
      ],
    ],
    [
      'a key behind a .gitattributes textconv driver the head names',
      [
        { path: '.gitattributes', content: '*.md diff=hide\n' },
        { path: 'NOTES.md', content: `key ${KEYS.google}\n` },
      ],
    ],
    [
      'a key in a file whose line endings .gitattributes rewrites',
      [
        { path: '.gitattributes', content: '*.ini text eol=crlf\n' },
        { path: 'prod.ini', content: `slack=${KEYS.slack}\r\n` },
      ],
    ],
  ])('%s: the review is REFUTED (exit 3)', (_name, entries) => {
    const fx = rulesFixture();
    const before = repoState(fx);
    const review = reviewOf(fx, entries);
    expect(review.status, review.stderr.slice(0, 400)).toBe(3);
    expect((JSON.parse(review.stdout) as { verdict: string }).verdict).toBe('REFUTED');
    expect({ ...repoState(fx), refs: '' }).toEqual({ ...before, refs: '' });
  });
});

describe('attack 10: secrets stay in the data dir or are printed raw', () => {
  it('keys in a title, a comment, check output and the reviewed diff are stored nowhere and printed by no command', () => {
    const fx = attackFixture({
      '.proofgate.yml': trustedConfig({ checks: ['checks:', '  - name: test', '    run: cat config/keys.txt'].join('\n') }),
      'check.mjs': HONEST_CHECK,
    });
    const keyFile = Object.entries(KEYS)
      .map(([name, value]) => (name === 'awsSecret' ? `aws_secret_access_key = ${value}` : `${name}: ${value}`))
      .join('\n');
    fx.commit('feature', [{ path: 'config/keys.txt', content: `${keyFile}\n` }], 'add config');
    const printed: string[] = [];
    const run = (args: string[]) => {
      const result = fx.cli(args);
      printed.push(result.stdout, result.stderr);
      return result;
    };
    expect(run(['change', 'open', '--head', 'feature', '--as', 'mallory', '--title', `rotate ${KEYS.stripe} and ${KEYS.openai}`]).status).toBe(0);
    expect(
      run(['change', 'comment', '1', `the new slack token is ${KEYS.slack}, google ${KEYS.google}, aws_secret_access_key=${KEYS.awsSecret}`, '--as', 'mallory'])
        .status,
    ).toBe(0);
    run(['checks', 'run', '1']);
    run(['checks', 'log', '1', 'test']);
    run(['checks', 'log', '1', 'test', '--json']);
    run(['review', '--base', 'main', '--head', 'feature']);
    run(['review', '--base', 'main', '--head', 'feature', '--json']);
    run(['change', 'show', '1']);
    run(['change', 'show', '1', '--json']);
    run(['change', 'list']);
    run(['change', 'list', '--json']);
    const output = printed.join('\n');
    expect(
      Object.entries(KEYS)
        .filter(([, value]) => output.includes(value))
        .map(([name]) => name),
      'printed by the CLI',
    ).toEqual([]);
    expect(storedSecrets(fx, KEYS), 'stored').toEqual([]);
  });

  it('the rules reviewer refutes every key shape that storage redacts (one catalogue)', () => {
    for (const [name, value] of Object.entries(KEYS)) {
      const fx = rulesFixture();
      const line = name === 'awsSecret' ? `aws_secret_access_key = ${value}` : `const key = "${value}";`;
      const review = reviewOf(fx, [
        { path: 'src/settings.ts', content: `${line}\n` },
        { path: 'test/settings.test.ts', content: 'ok\n' },
      ]);
      expect({ name, status: review.status }).toEqual({ name, status: 3 });
      expect(review.stdout.includes(value), `${name} echoed by the review`).toBe(false);
      cleanupFixtures();
    }
  });
});

describe("attack 10b: a secret in proofgate's own environment", () => {
  it('a check that prints a maintainer variable holding a key (passed by no allow-list) stores nothing; the review diff copy is gone or redacted', () => {
    const fx = attackFixture({
      '.proofgate.yml': trustedConfig({ checks: ['checks:', '  - name: test', '    run: "echo $AWS_SECRET_ACCESS_KEY; env"'].join('\n') }),
    });
    fx.commit('feature', [{ path: 'src/a.ts', content: `export const k = '${KEYS.awsKeyId}';\n` }], 'feature');
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1'], { AWS_SECRET_ACCESS_KEY: KEYS.awsSecret });
    fx.cli(['review', '--base', 'main', '--head', 'feature'], { AWS_SECRET_ACCESS_KEY: KEYS.awsSecret });
    fx.cli(['change', 'comment', '1', '/proofgate review', '--as', MAINTAINER]);
    expectNoSecretStored(fx, KEYS.awsSecret);
    expectNoSecretStored(fx, KEYS.awsKeyId);
    expectRepoUnchanged(fx, before);
  });
});
