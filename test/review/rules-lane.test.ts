/**
 * The rules lane against the bypasses of issue 10 (attack 9), each performed
 * on a real git repository: a newline in a path under a forbidden directory,
 * dot files, a key in a file git shows as binary (no added lines), a key glued
 * to `AWS_KEY_`; and the review's diff copy, which must not outlive the review.
 */
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changedFilesOf, judgeChangeByRules, matchesAny, parseNumstatZ, parseRawZ, runReview, type RulesFile } from '../../src/review/index.js';
import { makeRepo, sh, type TestRepo } from './repo-fixture.js';

const AWS_ID = ['AKIA', 'Z7Q3MXK2P9WLR4TB'].join('');
const AWS_SECRET = ['q8Jd/2kLm9Zr4TpVx7nW', 'c1Ye5Hb3Gs6Fa0Ou+Nk2'].join('');
const STRIPE = ['sk_live_', '4eC39HqLyjWDarjtT1zdp7dc'].join('');

describe('review globs (picomatch)', () => {
  it.each<[string, string, boolean]>([
    ['secret/**', 'secret/\nx', true],
    ['secret/**', 'secret/a/\nb/c', true],
    ['secret/**', 'secret/.env', true],
    ['secret/**', 'secret/.hidden/prod.key', true],
    ['secret/', 'secret/deep/er.txt', true],
    ['secret/**', 'not-secret/x', false],
    ['secret/**', 'x/secret/y', false],
    ['**/*.pem', 'a/\nb.pem', true],
    ['**/*.pem', '.ssh/id.pem', true],
    ['*.md', 'docs/a.md', false],
    ['*.md', 'a\nb.md', true],
    ['.github/workflows/', '.github/workflows/ci.yml', true],
    ['src/*.ts', 'src/a/b.ts', false],
  ])('%j matches %j: %s', (pattern, path, expected) => {
    expect(matchesAny(path, [pattern])).toBe(expected);
  });
});

describe('file facts for the rules lane', () => {
  const z = (...fields: string[]) => Buffer.from(fields.map((field) => `${field}\0`).join(''));

  it('keeps the head blob id of each file and marks binary files', () => {
    const oid = 'a'.repeat(40);
    const zero = '0'.repeat(40);
    const raw = parseRawZ(
      z(
        `:000000 100644 ${zero} ${oid} A`,
        'logo.bin',
        `:100644 000000 ${oid} ${zero} D`,
        'gone.txt',
        `:100644 100644 ${'b'.repeat(40)} ${'c'.repeat(40)} M`,
        'secret/\nx',
      ),
    );
    const numstat = parseNumstatZ(z('-\t-\tlogo.bin', '0\t1\tgone.txt', '1\t1\tsecret/\nx'));
    expect(changedFilesOf(raw, numstat).map((file) => [file.newPath, file.binary, file.newBlob])).toEqual([
      ['logo.bin', true, oid],
      [null, false, null],
      ['secret/\nx', false, 'c'.repeat(40)],
    ]);
  });

  it('refutes a binary file whose bytes it was not given (what was not scanned is not passed)', () => {
    const file: RulesFile = { oldPath: null, newPath: 'a.bin', newMode: '100644', newBlob: 'd'.repeat(40), binary: true, added: [] };
    const change = { diffSize: 200, files: [file] };
    expect(judgeChangeByRules(change).findings.map((finding) => finding.title)).toEqual(['binary file could not be scanned for secrets']);
    const tooBig = judgeChangeByRules(change, { maxDiffBytes: 10_000 }, new Map([['d'.repeat(40), { size: 20_000, bytes: null }]]));
    expect(tooBig.findings.map((finding) => finding.title)).toEqual(['binary file too large to scan for secrets']);
    const clean = judgeChangeByRules(change, {}, new Map([['d'.repeat(40), { size: 3, bytes: Buffer.from([0, 1, 2]) }]]));
    expect(clean.findings).toEqual([]);
  });
});

describe('rules lane bypasses, performed on a real repository', () => {
  let repo: TestRepo;
  let data: string;
  let base: string;
  beforeAll(() => {
    repo = makeRepo();
    base = repo.commit(
      { '.proofgate.yml': 'review:\n  lanes:\n    - { id: rules, builtin: rules }\n  rules: { forbiddenPaths: ["secret/**"] }\n' },
      'trusted rules',
    );
    data = mkdtempSync(join(tmpdir(), 'pg-rules-lane-'));
  });
  afterAll(() => {
    repo.remove();
    rmSync(data, { recursive: true, force: true });
  });

  /** Commit `files` on a new branch from the trusted base, review it, and return to main. */
  async function review(name: string, files: Record<string, string | Buffer>) {
    sh(repo.dir, ['checkout', '-q', '-b', name, base]);
    repo.commit(files as Record<string, string>, `attack: ${name}`);
    sh(repo.dir, ['checkout', '-q', 'main']);
    const before = repo.state();
    const outcome = await runReview({ repoDir: repo.dir, base: 'main', head: name, dataDir: join(data, name) });
    expect(repo.state()).toBe(before);
    return outcome;
  }

  const cases: [string, Record<string, string | Buffer>, string][] = [
    ['newline-path', { 'secret/\nx': 'hidden\n' }, 'change touches a forbidden path'],
    ['dot-file', { 'secret/.env': 'hidden\n' }, 'change touches a forbidden path'],
    ['dot-dir', { 'secret/.git-crypt/keys': 'hidden\n' }, 'change touches a forbidden path'],
    [
      'binary-ascii',
      { 'assets/logo.bin': Buffer.concat([Buffer.from([0, 1, 2, 0, 255]), Buffer.from(` ${AWS_ID} `), Buffer.from([0, 0])]) },
      'binary file holds a AWS access key id',
    ],
    [
      'binary-utf16',
      { 'assets/strings.dat': Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`key=${STRIPE}`, 'utf16le')]) },
      'binary file holds a Stripe secret or restricted key',
    ],
    // The repository's own attributes (here .git/info/attributes, as a maintainer's `*.cfg -diff` would be) hide the lines from the diff.
    ['binary-by-attributes', { 'app.cfg': `aws_secret_access_key = ${AWS_SECRET}\n` }, 'binary file holds a AWS secret access key'],
    ['glued-aws-id', { 'config.env': `AWS_KEY_${AWS_ID}\n` }, 'added line looks like a AWS access key id'],
    ['glued-aws-secret', { 'deploy.sh': `export AWS_SECRET_ACCESS_KEY=${AWS_SECRET}\n` }, 'added line looks like a AWS secret access key'],
  ];

  it.each(cases)('%s: REFUTED', async (name, files, title) => {
    const attributes = join(repo.dir, '.git', 'info', 'attributes');
    if (name === 'binary-by-attributes') writeFileSync(attributes, '*.cfg -diff\n');
    const outcome = await review(name, files).finally(() => rmSync(attributes, { force: true }));
    expect(outcome.verdict).toBe('REFUTED');
    const findings = outcome.lanes[0]?.result?.findings ?? [];
    expect(findings.map((finding) => finding.title)).toContain(title);
    // Nothing of the key is kept: not in the findings, and no file of the data dir holds it.
    const keys = [AWS_ID, AWS_SECRET, STRIPE];
    expect(keys.filter((key) => JSON.stringify(findings).includes(key))).toEqual([]);
    expect(keys.filter((key) => filesUnder(join(data, name)).some((file) => readFileSync(file).includes(key)))).toEqual([]);
    // The byte-exact diff copy lived only for the review; its digest stays in the outcome.
    expect(existsSync(outcome.diff.path)).toBe(false);
    expect(outcome.diff.sha256).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('confirms an honest change, and also removes its diff copy', async () => {
    const outcome = await review('honest', { 'README.md': '# demo, documented\n' });
    expect(outcome.verdict).toBe('CONFIRMED');
    expect(existsSync(outcome.diff.path)).toBe(false);
  });
});

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return lstatSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}
