import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addedLinesOfPatch,
  changedFilesOf,
  judgeChangeByRules,
  judgePathsForTests,
  linesOfText,
  loadReviewConfig,
  parseNumstatZ,
  parseRawZ,
  parseReviewConfigText,
  runReview,
  type RulesInput,
} from '../../src/review/index.js';
import { makeRepo, sh, type TestRepo } from './repo-fixture.js';
import { emptyRepoConfig } from '../../src/contracts/repo-config.js';

const AWS_ID = ['AKIA', 'IOSFODNN7EXAMPLE'].join('');
const GH_TOKEN = ['ghp_', 'a'.repeat(36)].join('');
const PEM = ['-----BEGIN RSA ', 'PRIVATE KEY-----'].join('');

/**
 * A change as the rules lane sees it: each file modified, keeping its first
 * line and adding `added` after it (so the added lines are numbered from 2).
 * The diff size is the added text's.
 */
function changeOf(files: Record<string, string[]>): RulesInput {
  const entries = Object.entries(files);
  return {
    diffSize: entries.reduce((size, [, added]) => size + Buffer.byteLength(added.join('\n')), 0),
    files: entries.map(([path, added]) => ({
      oldPath: path,
      newPath: path,
      newMode: '100644',
      newBlob: 'b'.repeat(40),
      binary: false,
      added: added.map((text, i) => ({ line: i + 2, text })),
    })),
  };
}

describe('rules reviewer', () => {
  it('finds secrets in added lines without echoing them', () => {
    const { findings } = judgeChangeByRules(changeOf({ 'config/keys.txt': [`aws = ${AWS_ID}`, `token: ${GH_TOKEN}`, PEM] }));
    expect(findings.map((finding) => finding.title)).toEqual([
      'added line looks like a AWS access key id',
      'added line looks like a GitHub token',
      'added line looks like a PEM private key',
    ]);
    expect(findings[0]).toMatchObject({ path: 'config/keys.txt', line: 2 });
    expect(JSON.stringify(findings)).not.toContain(AWS_ID);
    expect(JSON.stringify(findings)).not.toContain(GH_TOKEN);
  });

  it('ignores secrets on removed and context lines', () => {
    const patch = `diff --git a/${'a'.repeat(40)} b/${'b'.repeat(40)}\n@@ -1,2 +1,1 @@\n ${AWS_ID}\n-${GH_TOKEN}\n`;
    const added = addedLinesOfPatch(patch);
    expect(added).toEqual([]);
    const file = { oldPath: 'k', newPath: 'k', newMode: '100644', newBlob: 'b'.repeat(40), binary: false, added };
    expect(judgeChangeByRules({ diffSize: patch.length, files: [file] }).findings).toEqual([]);
  });

  it('finds conflict markers, forbidden paths and oversized diffs', () => {
    const conflict = judgeChangeByRules(changeOf({ 'a.txt': ['<<<<<<< HEAD', 'x', '=======', 'y', '>>>>>>> other'] }));
    expect(conflict.findings.map((finding) => finding.line)).toEqual([2, 4, 6]);
    expect(judgeChangeByRules(changeOf({ 'doc.md': ['Title', '======='] })).findings).toEqual([]);
    const forbidden = judgeChangeByRules(changeOf({ '.github/workflows/ci.yml': ['on: push'] }), { forbiddenPaths: ['.github/workflows/'] });
    expect(forbidden.findings[0]?.title).toBe('change touches a forbidden path');
    const big = judgeChangeByRules(changeOf({ 'a.txt': ['x'.repeat(200)] }), { maxDiffBytes: 100 });
    expect(big.findings[0]?.title).toBe('diff too large to review');
  });
});

describe('tests reviewer', () => {
  it.each([
    ['source without test', { 'src/a.ts': ['x'] }, 1],
    ['source with test', { 'src/a.ts': ['x'], 'test/a.test.ts': ['y'] }, 0],
    ['source with spec file', { 'lib/b.py': ['x'], 'lib/test_b.py': ['y'] }, 0],
    ['docs only', { 'README.md': ['x'], 'docs/a.md': ['y'] }, 0],
    ['go source without test', { 'pkg/x.go': ['x'] }, 1],
  ] as const)('%s', (_name, files, count) => {
    expect(judgePathsForTests(Object.keys(files)).findings).toHaveLength(count);
  });

  it('honours configured globs', () => {
    const paths = ['app/main.rb'];
    expect(judgePathsForTests(paths, { sourcePaths: ['lib/**'] }).findings).toHaveLength(0);
    expect(judgePathsForTests(paths, { sourcePaths: ['app/**'], testPaths: ['checks/**'] }).findings).toHaveLength(1);
  });
});

describe('file facts', () => {
  it('reads added, deleted and unusual paths and new line numbers', () => {
    const z = (...fields: string[]) => Buffer.from(fields.map((field) => `${field}\0`).join(''));
    const [zero, oidA, oidB, oidC] = ['0', 'a', 'b', 'c'].map((char) => char.repeat(40)) as [string, string, string, string];
    const raw = parseRawZ(
      z(`:000000 100644 ${zero} ${oidA} A`, 'new.txt', `:100644 000000 ${oidB} ${zero} D`, 'gone.txt', `:100644 100644 ${oidB} ${oidC} M`, 'sp ace\tx'),
    );
    const numstat = parseNumstatZ(z('2\t0\tnew.txt', '0\t1\tgone.txt', '1\t0\tsp ace\tx'));
    const files = changedFilesOf(raw, numstat);
    expect(files.map((file) => [file.oldPath, file.newPath])).toEqual([
      [null, 'new.txt'],
      ['gone.txt', null],
      ['sp ace\tx', 'sp ace\tx'],
    ]);
    // An added file's lines are its new bytes; a modified file's are the `+` lines of the patch between its blobs.
    expect(linesOfText('one\ntwo\n')).toEqual([
      { line: 1, text: 'one' },
      { line: 2, text: 'two' },
    ]);
    expect(addedLinesOfPatch(`diff --git a/${oidB} b/${oidC}\n@@ -3,1 +3,2 @@\n keep\n+added\n`)).toEqual([{ line: 4, text: 'added' }]);
  });
});

describe('review configuration', () => {
  let repo: TestRepo;
  let dir: string;
  beforeAll(() => {
    repo = makeRepo();
    repo.commit({ '.proofgate.yml': 'review:\n  lanes:\n    - { id: rules, builtin: rules }\n  rules: { forbiddenPaths: ["secrets/"] }\n' }, 'config on base');
    repo.branch('feature');
    // The head tries to switch the reviewers off: it must not matter.
    repo.commit(
      { '.proofgate.yml': 'review:\n  lanes:\n    - { id: rules, builtin: rules }\n  rules: { forbiddenPaths: [] }\n', 'secrets/key.txt': 'hidden\n' },
      'sneak',
    );
    repo.switchTo('main');
    dir = mkdtempSync(join(tmpdir(), 'pg-review-cfg-'));
  });
  afterAll(() => {
    repo.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads .proofgate.yml from the base, never from the head', async () => {
    const loaded = await loadReviewConfig(repo.dir, sh(repo.dir, ['rev-parse', 'main']));
    expect(loaded.source).toMatch(/:\.proofgate\.yml$/);
    const outcome = await runReview({ repoDir: repo.dir, base: 'main', head: 'feature', dataDir: join(dir, 'data') });
    expect(outcome.verdict).toBe('REFUTED');
    expect(outcome.lanes[0]?.result?.findings[0]?.path).toBe('secrets/key.txt');
    expect(outcome.dir.startsWith(join(dir, 'data', 'reviews'))).toBe(true);
  });

  it('defaults to rules + tests in fresh-context mode when there is no config', async () => {
    const loaded = await loadReviewConfig(repo.dir, sh(repo.dir, ['rev-parse', 'main~1']));
    expect(loaded).toEqual({
      source: 'default',
      config: {
        mode: 'fresh-context',
        lanes: [
          { id: 'rules', builtin: 'rules' },
          { id: 'tests', builtin: 'tests' },
        ],
      },
      trusted: emptyRepoConfig(),
    });
  });

  it('uses the acceptance contract file named in the config, as on the base', async () => {
    const contract = repo.commit(
      { 'CONTRACT.md': 'add must add\n', '.proofgate.yml': 'review:\n  acceptanceContract: CONTRACT.md\n  lanes: [{ id: rules, builtin: rules }]\n' },
      'contract',
    );
    const head = repo.commit({ 'NOTES.md': 'a change on top of the contract\n' }, 'notes');
    const outcome = await runReview({ repoDir: repo.dir, base: contract, head, dataDir: join(dir, 'data2') });
    expect(readFileSync(outcome.acceptance_contract.path, 'utf8')).toBe('add must add\n');
    sh(repo.dir, ['reset', '-q', '--hard', 'HEAD~2']);
  });

  it.each([
    [
      'review:\n  lanes:\n    - { id: a, builtin: rules }\n    - { id: b, builtin: tests }\n    - { id: c, command: [x], timeoutSeconds: -5 }\n',
      'review.lanes[2].timeoutSeconds: expected a positive integer',
    ],
    ['review:\n  lanes:\n    - { id: a, builtin: rules, colour: red }\n', 'unknown key review.lanes[0].colour'],
    ['review:\n  modes: fresh-context\n  lanes: [{ id: a, builtin: rules }]\n', 'unknown key review.modes'],
    ['review:\n  transportRetries: -1\n  lanes: [{ id: a, builtin: rules }]\n', 'review.transportRetries: expected an integer from 0 to 10'],
    ['review:\n  transportRetries: 11\n  lanes: [{ id: a, builtin: rules }]\n', 'review.transportRetries: expected an integer from 0 to 10'],
    ['review:\n  transportRetries: 1.5\n  lanes: [{ id: a, builtin: rules }]\n', 'review.transportRetries: expected an integer from 0 to 10'],
    ['review:\n  transportRetries: two\n  lanes: [{ id: a, builtin: rules }]\n', 'review.transportRetries: expected an integer from 0 to 10'],
    ['review:\n  budgetSeconds: 0\n  lanes: [{ id: a, builtin: rules }]\n', 'review.budgetSeconds: expected a positive integer'],
    ['review:\n  mode: single\n  lanes: [{ id: a, builtin: rules }]\n', 'review.mode: expected one of'],
    ['review:\n  lanes: [{ id: a, builtin: rules, command: [x] }]\n', 'review.lanes[0]: a lane needs exactly one of builtin, command or openai'],
    ['review:\n  lanes: [{ id: a, builtin: rules }, { id: a, builtin: tests }]\n', 'review.lanes: lane ids must be unique'],
    ['review:\n  lanes: [{ id: a, builtin: magic }]\n', 'review.lanes[0].builtin:'],
    ['review: [\n', 'not valid YAML'],
  ])('config error %#', (text, message) => {
    let error: unknown;
    try {
      parseReviewConfigText(text, 'test.yml');
    } catch (caught) {
      error = caught;
    }
    expect(error).toMatchObject({ code: 'CONFIG' });
    expect((error as Error).message).toContain(message);
  });

  it('reads transportRetries and budgetSeconds, and every bad key path is named on one line', () => {
    const config = parseReviewConfigText('review:\n  transportRetries: 0\n  budgetSeconds: 900\n  lanes: [{ id: a, builtin: rules }]\n', 'test.yml');
    expect(config).toMatchObject({ transportRetries: 0, budgetSeconds: 900 });
    expect(() => parseReviewConfigText('review:\n  transportRetries: 99\n  budgetSeconds: -1\n  lanes: [{ id: a, builtin: rules }]\n', 'test.yml')).toThrow(
      'test.yml: review.transportRetries: expected an integer from 0 to 10; review.budgetSeconds: expected a positive integer',
    );
  });

  it('an invalid --config file fails the review with one CONFIG error', async () => {
    const file = join(dir, 'bad.yml');
    writeFileSync(file, 'review:\n  lanes: [{ id: a, builtin: rules, timeoutSeconds: 0 }]\n');
    await expect(runReview({ repoDir: repo.dir, base: 'main', head: 'feature', configFile: file, dataDir: join(dir, 'd3') })).rejects.toMatchObject({
      code: 'CONFIG',
      message: `${file}: review.lanes[0].timeoutSeconds: expected a positive integer`,
    });
  });
});
