/**
 * The facts the rules and tests lanes judge come from git's NUL-separated
 * output (`--raw -z`, `--numstat -z`) and from blobs by object id, never from
 * unified diff headers. Hostile file names, binary files, symlinks, mode-only
 * changes and deletions, each committed for real (with git's plumbing, so any
 * name and mode is possible) and reviewed.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError, sha256Digest } from '../../src/core/index.js';
import {
  addedLinesOfPatch,
  changedFilesOf,
  judgeChangeByRules,
  parseNumstatZ,
  parseRawZ,
  readReviewedChange,
  readReviewSubject,
  runReview,
  type ReviewedChange,
} from '../../src/review/index.js';

const AWS_ID = ['AKIA', 'Z7Q3MXK2P9WLR4TB'].join('');
const STRIPE = ['sk_live_', '4eC39HqLyjWDarjtT1zdp7dc'].join('');
const OID_A = 'a'.repeat(40);
const OID_B = 'b'.repeat(40);
const ZERO = '0'.repeat(40);

const z = (...fields: string[]) => Buffer.from(fields.map((field) => `${field}\0`).join(''));

describe('git -z output, read by position', () => {
  it('takes a path that spells a raw record, a newline and a diff header for a path', () => {
    const spoof = `:100644 100644 ${OID_A} ${OID_B} M`;
    const header = 'x\ndiff --git a/secret/k b/secret/k';
    const raw = parseRawZ(
      z(`:000000 100644 ${ZERO} ${OID_A} A`, spoof, `:100644 000000 ${OID_B} ${ZERO} D`, header, `:100644 100644 ${OID_A} ${OID_B} R087`, 'old => a', 'new\tb'),
    );
    const numstat = parseNumstatZ(z(`1\t0\t${spoof}`, `0\t3\t${header}`, '-\t-\t', 'old => a', 'new\tb'));
    expect(changedFilesOf(raw, numstat)).toEqual([
      {
        status: 'A',
        score: null,
        oldPath: null,
        newPath: spoof,
        oldMode: null,
        newMode: '100644',
        oldBlob: null,
        newBlob: OID_A,
        binary: false,
        linesAdded: 1,
        linesDeleted: 0,
      },
      {
        status: 'D',
        score: null,
        oldPath: header,
        newPath: null,
        oldMode: '100644',
        newMode: null,
        oldBlob: OID_B,
        newBlob: null,
        binary: false,
        linesAdded: 0,
        linesDeleted: 3,
      },
      {
        status: 'R',
        score: 87,
        oldPath: 'old => a',
        newPath: 'new\tb',
        oldMode: '100644',
        newMode: '100644',
        oldBlob: OID_A,
        newBlob: OID_B,
        binary: true,
        linesAdded: null,
        linesDeleted: null,
      },
    ]);
  });

  it.each<[string, () => unknown]>([
    ['a raw record cut short', () => parseRawZ(z(`:000000 100644 ${ZERO} ${OID_A} R100`, 'only-one-path'))],
    ['raw output not ended by NUL', () => parseRawZ(Buffer.from(`:000000 100644 ${ZERO} ${OID_A} A\0name`))],
    ['an abbreviated object id', () => parseRawZ(z(`:000000 100644 0000000 ${OID_A.slice(0, 7)} A`, 'name'))],
    ['a numstat record with one count binary', () => parseNumstatZ(z('-\t3\tname'))],
    ['listings that disagree on a path', () => changedFilesOf(parseRawZ(z(`:000000 100644 ${ZERO} ${OID_A} A`, 'a')), parseNumstatZ(z('1\t0\tb')))],
    ['listings that disagree on the count', () => changedFilesOf(parseRawZ(z(`:000000 100644 ${ZERO} ${OID_A} A`, 'a')), [])],
  ])('refuses %s with a GIT error', (_name, parse) => {
    expect(parse).toThrow(expect.objectContaining({ code: 'GIT' }));
  });
});

describe('the patch of two blobs, read by its hunk counts', () => {
  it('takes content that looks like a header for content, and numbers added lines', () => {
    const patch = [
      `diff --git a/${OID_A} b/${OID_B}`,
      `index ${OID_A}..${OID_B} 100644`,
      `--- a/${OID_A}`,
      `+++ b/${OID_B}`,
      '@@ -1,3 +1,4 @@',
      ' keep',
      '-gone',
      '+diff --git a/x b/x',
      '+@@ -1 +1 @@',
      '', // '' is a blank context line (diff.suppressBlankEmpty)
      '@@ -10 +11,2 @@',
      '-last',
      '\\ No newline at end of file',
      '+--- a/y',
      '++++ b/y',
      '\\ No newline at end of file',
      '',
    ].join('\n');
    expect(addedLinesOfPatch(patch)).toEqual([
      { line: 2, text: 'diff --git a/x b/x' },
      { line: 3, text: '@@ -1 +1 @@' },
      { line: 11, text: '--- a/y' },
      { line: 12, text: '+++ b/y' },
    ]);
  });

  it.each([
    ['a hunk shorter than its counts', '@@ -1,2 +1,2 @@\n a\n+b\n'],
    ['a line after the counts that is not a hunk', '@@ -1 +1 @@\n-a\n+b\n+c\n'],
    ['a line with an unknown tag', '@@ -1 +1 @@\n-a\n*b\n'],
  ])('refuses %s', (_name, patch) => {
    expect(() => addedLinesOfPatch(patch)).toThrow(expect.objectContaining({ code: 'GIT' }));
  });
});

/** A repository whose commits are built with git's plumbing: any path, any mode, no work tree involved. */
interface Entry {
  readonly path: string;
  readonly content: string | Buffer;
  /** 100644 (default), 100755, 120000 (symlink: content is the target). */
  readonly mode?: string;
}

const ENV = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'Author',
  GIT_AUTHOR_EMAIL: 'author@example.com',
  GIT_COMMITTER_NAME: 'Author',
  GIT_COMMITTER_EMAIL: 'author@example.com',
};

function git(dir: string, args: string[], input?: string | Buffer, env: NodeJS.ProcessEnv = ENV): string {
  return execFileSync('git', ['-C', dir, ...args], { input, env, encoding: 'utf8' }).trim();
}

function commitTree(dir: string, entries: readonly Entry[], parent: string | null, message: string): string {
  const index = join(dir, '.git', `plumbing-index-${Math.random().toString(36).slice(2)}`);
  const info = entries.map((entry) => {
    const oid = git(dir, ['hash-object', '-w', '--stdin'], entry.content);
    return `${entry.mode ?? '100644'} ${oid}\t${entry.path}\0`;
  });
  const env = { ...ENV, GIT_INDEX_FILE: index };
  try {
    git(dir, ['update-index', '-z', '--index-info'], info.join(''), env);
    const tree = git(dir, ['write-tree'], undefined, env);
    return git(dir, ['commit-tree', tree, ...(parent === null ? [] : ['-p', parent]), '-m', message]);
  } finally {
    rmSync(index, { force: true });
  }
}

const CONFIG = 'review:\n  lanes:\n    - { id: rules, builtin: rules }\n  rules: { forbiddenPaths: ["secret/**", "dev/**", "x => y.txt"] }\n';

const BASE: readonly Entry[] = [
  { path: '.proofgate.yml', content: CONFIG },
  { path: 'README.md', content: '# demo\n' },
  { path: 'secret/run.sh', content: 'echo run\n' },
  { path: 'old.env', content: `AWS=${AWS_ID}\n` },
  { path: 'old => a.txt', content: 'same content here\nline 2\n' },
  { path: 'dev/null', content: 'a file, not the device\n' },
  { path: 'notes.txt', content: 'one\ntwo\nthree\n' },
  { path: 'blank.txt', content: 'a\n\nb\n' },
];

describe('hostile changes, committed and reviewed for real', () => {
  let dir: string;
  let data: string;
  let base: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'pg-diff-files-'));
    data = mkdtempSync(join(tmpdir(), 'pg-diff-files-data-'));
    git(dir, ['init', '-q', '-b', 'main']);
    base = commitTree(dir, BASE, null, 'base');
    git(dir, ['update-ref', 'refs/heads/main', base]);
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  });

  /** Commit the base with `changes` applied (null deletes) on branch `name`. */
  function change(name: string, changes: Record<string, Omit<Entry, 'path'> | null>): string {
    const entries = new Map(BASE.map((entry) => [entry.path, entry]));
    for (const [path, entry] of Object.entries(changes)) {
      if (entry === null) entries.delete(path);
      else entries.set(path, { path, ...entry });
    }
    const head = commitTree(dir, [...entries.values()], base, name);
    git(dir, ['update-ref', `refs/heads/${name}`, head]);
    return head;
  }

  async function facts(name: string, maxBytes = 1024 * 1024): Promise<ReviewedChange> {
    const subject = await readReviewSubject({ repoDir: dir, base: 'main', head: name });
    const request = { base_sha: subject.baseSha, head_sha: subject.headSha, diff: { path: '/unused', sha256: sha256Digest(subject.diff) } };
    return readReviewedChange(dir, request, { maxBytes, content: true });
  }

  async function findings(name: string): Promise<{ verdict: string; found: [string, string | undefined, number | undefined][] }> {
    const outcome = await runReview({ repoDir: dir, base: 'main', head: name, dataDir: join(data, name) });
    const lane = outcome.lanes[0];
    expect(lane?.validation.valid, JSON.stringify(lane?.result)).toBe(true);
    return { verdict: outcome.verdict, found: (lane?.result?.findings ?? []).map((finding) => [finding.title, finding.path, finding.line]) };
  }

  it('a name with a space, a "b/" and a tab: one file, its exact path, its added line', async () => {
    change('tab-space', { 'a b/c\td.txt': { content: `key ${AWS_ID}\n` } });
    const change1 = await facts('tab-space');
    expect(change1.files.map((file) => [file.status, file.oldPath, file.newPath, file.added])).toEqual([
      ['A', null, 'a b/c\td.txt', [{ line: 1, text: `key ${AWS_ID}` }]],
    ]);
    expect((await findings('tab-space')).found).toEqual([['added line looks like a AWS access key id', 'a b/c\td.txt', 1]]);
  });

  it('a name holding a newline and a diff header: one file under the forbidden directory, not the path it spells', async () => {
    const name = 'secret/a\ndiff --git a/README.md b/README.md';
    change('newline-header', { [name]: { content: 'hidden\n' } });
    expect((await facts('newline-header')).files.map((file) => file.newPath)).toEqual([name]);
    expect(await findings('newline-header')).toEqual({ verdict: 'REFUTED', found: [['change touches a forbidden path', name, undefined]] });
  });

  it('a file named dev/null is a file: added, changed and deleted', async () => {
    change('dev-null', { 'dev/null': { content: `now with ${STRIPE}\n` } });
    const changed = (await facts('dev-null')).files;
    expect(changed.map((file) => [file.status, file.oldPath, file.newPath, file.linesAdded, file.linesDeleted])).toEqual([['M', 'dev/null', 'dev/null', 1, 1]]);
    expect((await findings('dev-null')).found).toEqual([
      ['change touches a forbidden path', 'dev/null', undefined],
      ['added line looks like a Stripe secret or restricted key', 'dev/null', 1],
    ]);
    change('dev-null-gone', { 'dev/null': null });
    expect((await facts('dev-null-gone')).files.map((file) => [file.status, file.oldPath, file.newPath])).toEqual([['D', 'dev/null', null]]);
  });

  it('a rename between names holding " => " is a deletion and an addition of the exact names (no rename detection, as in the bound diff)', async () => {
    change('rename-arrow', { 'old => a.txt': null, 'x => y.txt': { content: 'same content here\nline 2\n' } });
    const changed = (await facts('rename-arrow')).files;
    expect(changed.map((file) => [file.status, file.oldPath, file.newPath])).toEqual([
      ['D', 'old => a.txt', null],
      ['A', null, 'x => y.txt'],
    ]);
    expect((await findings('rename-arrow')).found).toEqual([['change touches a forbidden path', 'x => y.txt', undefined]]);
    // With rename detection asked for, the same listings give one rename with both names intact.
    const renamed = changedFilesOf(
      parseRawZ(Buffer.from(execFileSync('git', ['-C', dir, 'diff', '--raw', '-z', '-M', '--no-abbrev', 'main', 'rename-arrow']))),
      parseNumstatZ(Buffer.from(execFileSync('git', ['-C', dir, 'diff', '--numstat', '-z', '-M', 'main', 'rename-arrow']))),
    );
    expect(renamed.map((file) => [file.status, file.score, file.oldPath, file.newPath])).toEqual([['R', 100, 'old => a.txt', 'x => y.txt']]);
  });

  it('a binary file holding a key is binary per git, has no added lines, and its head bytes are scanned', async () => {
    change('binary', { 'assets/logo.bin': { content: Buffer.concat([Buffer.from([0, 1, 2, 0, 255]), Buffer.from(` ${AWS_ID} `), Buffer.from([0])]) } });
    const [file] = (await facts('binary')).files;
    expect(file).toMatchObject({ status: 'A', newPath: 'assets/logo.bin', binary: true, linesAdded: null, added: [] });
    expect((await findings('binary')).found).toEqual([['binary file holds a AWS access key id', 'assets/logo.bin', undefined]]);
  });

  it('a symlink into a forbidden directory, out of the repository, or to the top: findings that never show the target', async () => {
    change('symlinks', {
      'docs/key': { mode: '120000', content: '../secret/prod.key' },
      'links/ssh': { mode: '120000', content: '/home/ci/.ssh/id_rsa' },
      'links/up': { mode: '120000', content: '../../etc/passwd' },
      'links/top': { mode: '120000', content: '..' },
      'links/readme': { mode: '120000', content: '../README.md' },
    });
    const changed = (await facts('symlinks')).files;
    expect(changed.map((file) => [file.newPath, file.newMode])).toEqual([
      ['docs/key', '120000'],
      ['links/readme', '120000'],
      ['links/ssh', '120000'],
      ['links/top', '120000'],
      ['links/up', '120000'],
    ]);
    const { verdict, found } = await findings('symlinks');
    expect(verdict).toBe('REFUTED');
    expect(found).toEqual([
      ['symlink points to a forbidden path', 'docs/key', undefined],
      ['symlink points outside the repository', 'links/ssh', undefined],
      ['symlink points to a forbidden path', 'links/top', undefined],
      ['symlink points outside the repository', 'links/up', undefined],
    ]);
    change('symlink-honest', { 'links/readme': { mode: '120000', content: '../README.md' } });
    expect(await findings('symlink-honest')).toEqual({ verdict: 'CONFIRMED', found: [] });
  });

  it('a mode-only change is a change of that path: its modes, no lines, and the forbidden path found', async () => {
    change('mode-only', { 'secret/run.sh': { mode: '100755', content: 'echo run\n' } });
    const [file] = (await facts('mode-only')).files;
    expect(file).toMatchObject({ status: 'M', newPath: 'secret/run.sh', oldMode: '100644', newMode: '100755', linesAdded: 0, linesDeleted: 0, added: [] });
    expect(file?.oldBlob).toBe(file?.newBlob);
    expect((await findings('mode-only')).found).toEqual([['change touches a forbidden path', 'secret/run.sh', undefined]]);
  });

  it('a deleted file with a key in its lines adds nothing: CONFIRMED', async () => {
    change('deleted-secret', { 'old.env': null });
    const [file] = (await facts('deleted-secret')).files;
    expect(file).toMatchObject({ status: 'D', oldPath: 'old.env', newPath: null, linesAdded: 0, linesDeleted: 1, added: [] });
    expect(await findings('deleted-secret')).toEqual({ verdict: 'CONFIRMED', found: [] });
  });

  it('a modified file: only its + lines are added, numbered in the new file, header-like content included', async () => {
    change('modified', { 'notes.txt': { content: `one\ndiff --git a/x b/x\n+++ b/${AWS_ID}\nthree\n` } });
    const [file] = (await facts('modified')).files;
    expect(file?.added).toEqual([
      { line: 2, text: 'diff --git a/x b/x' },
      { line: 3, text: `+++ b/${AWS_ID}` },
    ]);
    expect((await findings('modified')).found).toEqual([['added line looks like a AWS access key id', 'notes.txt', 3]]);
  });

  it('line numbers stay right when the repository prints blank context lines empty (diff.suppressBlankEmpty)', async () => {
    change('blank-context', { 'blank.txt': { content: `a\n\nb\n${AWS_ID}\n` } });
    git(dir, ['config', 'diff.suppressBlankEmpty', 'true']);
    try {
      const subject = await readReviewSubject({ repoDir: dir, base: 'main', head: 'blank-context' });
      expect(subject.diff.toString('utf8')).toContain(' a\n\n b\n+');
      expect((await findings('blank-context')).found).toEqual([['added line looks like a AWS access key id', 'blank.txt', 4]]);
    } finally {
      git(dir, ['config', '--unset', 'diff.suppressBlankEmpty']);
    }
  });

  it('a file too large to read is a finding, never a pass', async () => {
    change('large', { 'big.txt': { content: `${'x'.repeat(100)}\n${AWS_ID}\n` } });
    const changed = await facts('large', 50);
    expect(changed.files[0]?.added).toBeNull();
    const judged = judgeChangeByRules({ diffSize: 10, files: changed.files }, { maxDiffBytes: 50 }, changed.blobs);
    expect(judged.findings.map((finding) => finding.title)).toEqual(['file too large to scan for secrets']);
  });

  it('facts about other bytes than the bound diff are refused (MUTABLE_INPUT)', async () => {
    change('bound', { 'README.md': { content: '# demo, documented\n' } });
    const subject = await readReviewSubject({ repoDir: dir, base: 'main', head: 'bound' });
    const request = { base_sha: subject.baseSha, head_sha: subject.headSha, diff: { path: '/unused', sha256: sha256Digest('other bytes') } };
    const error = await readReviewedChange(dir, request, { maxBytes: 1024, content: false }).catch((caught: unknown) => caught);
    expect(isProofgateError(error, 'MUTABLE_INPUT')).toBe(true);
  });

  it('the tests lane takes the old path of a deleted source file', async () => {
    const config = { path: '.proofgate.yml', content: 'review:\n  lanes:\n    - { id: tests, builtin: tests }\n' };
    const kept = BASE.filter((entry) => entry.path !== '.proofgate.yml');
    const withSource = commitTree(dir, [...kept, config, { path: 'lib/\nx.ts', content: 'x\n' }], base, 'tests lane, a source file');
    git(dir, ['update-ref', 'refs/heads/tests-base', withSource]);
    git(dir, ['update-ref', 'refs/heads/tests-head', commitTree(dir, [...kept, config], withSource, 'source deleted')]);
    const outcome = await runReview({ repoDir: dir, base: 'tests-base', head: 'tests-head', dataDir: join(data, 'tests-lane') });
    expect(outcome.lanes[0]?.result?.findings.map((finding) => [finding.title, finding.path])).toEqual([
      ['source changed without any test changed', 'lib/\nx.ts'],
    ]);
  });
});
