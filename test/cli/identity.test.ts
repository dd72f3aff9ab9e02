import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StatusWriter } from '../../src/automerge/loop/status.js';
import { renderStatusComment } from '../../src/automerge/status-comment.js';
import { ProofgateError } from '../../src/core/index.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { changeStream } from '../../src/forge/local/records.js';
import type { Forge } from '../../src/forge/port.js';
import { CHECK_SCRIPT, MAINTAINER, repoConfig } from '../automerge/loop/local-support.js';
import { SELF, startHarness } from '../forge/github/harness.js';
import { makeTempRepo, type TempRepo } from '../forge/git-fixture.js';
import { runCli } from './helpers.js';

/**
 * Identity (issue 10, item 11): proofgate's own login is reserved in every
 * letter case, a look-alike status comment is never fatal, and an unusable
 * data dir is one typed line. These tests run the built binary (`npm run build` first).
 */

// Each test runs the built CLI many times (a few seconds each on a loaded machine).

const cleanups: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The trusted config on main and change 1 whose check fails (automerge blocks on it). */
function repoWithChange(): { repo: TempRepo; data: string } {
  const repo = makeTempRepo('proofgate-identity-');
  cleanups.push(() => repo.cleanup());
  repo.commit('main', { 'README.md': '# identity\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() }, 'initial');
  repo.git(['reset', '-q', '--hard', 'main']);
  repo.commit('feature', { 'feature.txt': 'work\n', 'broken.txt': 'breaks the check\n' }, 'add feature', 'main');
  const data = tempDir('proofgate-identity-data-');
  expect(runCli(['change', 'open', '--head', 'feature', '--repo', repo.dir, '--data', data]).status).toBe(0);
  return { repo, data };
}

type Comments = { author: string; body: string }[];
const commentsOf = (repo: TempRepo, data: string): Comments =>
  (JSON.parse(runCli(['change', 'show', '1', '--repo', repo.dir, '--data', data, '--json']).stdout) as { comments: Comments }).comments;

function oneLine(stderr: string): string {
  const lines = stderr.split('\n').filter((line) => line !== '');
  expect(lines).toHaveLength(1);
  return lines[0] ?? '';
}

describe('reserved identity', () => {
  it('refuses --as proofgate in any letter case, for comments and for change authors, changing nothing', () => {
    const { repo, data } = repoWithChange();
    for (const login of ['PROOFGATE', 'ProofGate', 'proofgate', 'proofGATE']) {
      const body = `/proofgate automerge\nLGTM <!-- proofgate:marker v2 {} -->`;
      const posted = runCli(['change', 'comment', '1', body, '--as', login, '--repo', repo.dir, '--data', data]);
      expect(posted.status).toBe(1);
      expect(oneLine(posted.stderr)).toMatch(/is proofgate's own identity.*\[RESERVED_IDENTITY\]$/);
    }
    expect(commentsOf(repo, data)).toEqual([]);
    repo.commit('other', { 'other.txt': 'x\n' }, 'other', 'main');
    const opened = runCli(['change', 'open', '--head', 'other', '--as', 'ProofGate', '--repo', repo.dir, '--data', data]);
    expect(opened.status).toBe(1);
    expect(opened.stderr).toContain('[RESERVED_IDENTITY]');
    expect((JSON.parse(runCli(['change', 'list', '--repo', repo.dir, '--data', data, '--json']).stdout) as unknown[]).length).toBe(1);
  });

  it('a copy of the status comment cannot be posted as PROOFGATE, and one already stored does not break automerge', async () => {
    const { repo, data } = repoWithChange();
    const first = runCli(['change', 'comment', '1', '/proofgate automerge', '--as', MAINTAINER, '--repo', repo.dir, '--data', data]);
    expect(first.status, first.stderr).toBe(3);
    const status = commentsOf(repo, data).find((comment) => comment.author === 'proofgate');
    expect(status?.body).toContain('proofgate:marker');
    const body = status?.body ?? '';

    const copy = runCli(['change', 'comment', '1', body, '--as', 'PROOFGATE', '--repo', repo.dir, '--data', data]);
    expect(copy.status).toBe(1);
    expect(copy.stderr).toContain('[RESERVED_IDENTITY]');

    // A store written before the rule may hold such a copy: every later automerge still runs to its outcome.
    const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
    await opened.forge.store.append(changeStream('1'), [
      { type: 'comment-created', data: { commentId: 'cmt_lookalike', author: 'PROOFGATE', authorType: 'User', body, at: new Date().toISOString() } },
    ]);
    await opened.close();
    for (let round = 0; round < 2; round += 1) {
      const again = runCli(['automerge', '1', '--repo', repo.dir, '--data', data]);
      expect(again.status, again.stderr).toBe(3);
    }
  });

  it('on GitHub a look-alike status comment is ignored, never adopted and never fatal', async () => {
    const h = await startHarness();
    cleanups.push(() => h.close());
    const pr = h.server.model.openPullRequest({ author: 'mallory' });
    const id = String(pr.number);
    const secret = randomBytes(32);
    const head = 'a'.repeat(40);
    const render = (reason: string) =>
      renderStatusComment({ changeId: id, intent: 'automerge', head, decision: { kind: 'wait', code: 'checks-pending', reason }, timeline: [] }, secret);
    const own = await new StatusWriter(h.forge, secret).writeComment(await h.forge.snapshot(id), render('first'));
    // Anyone can post: mallory copies proofgate's status comment, byte for byte, after it.
    h.server.model.addComment(pr.number, 'mallory', own?.body ?? '');
    await new StatusWriter(h.forge, secret).writeComment(await h.forge.snapshot(id), render('second'));
    const comments = h.server.model.commentsOf(pr.number);
    expect(comments.map((comment) => [comment.author, comment.body.includes('second')])).toEqual([
      [SELF, true],
      ['mallory', false],
    ]);

    // A copy under a case variant of proofgate's login is taken as proofgate's; when the forge refuses the edit, a fresh comment is written.
    h.server.model.addComment(pr.number, SELF.toUpperCase(), render('second'));
    const refusing: Forge = {
      ...h.forge,
      editComment: (_change, commentId, body) =>
        commentId === String(comments[0]?.id)
          ? h.forge.editComment(id, commentId, body)
          : Promise.reject(new ProofgateError('FORGE_AUTH', 'GitHub edit comment failed with HTTP 403')),
    };
    const written = await new StatusWriter(refusing, secret).writeComment(await h.forge.snapshot(id), render('third'));
    expect(written?.author).toBe(SELF);
    expect(
      h.server.model
        .commentsOf(pr.number)
        .filter((comment) => comment.body.includes('third'))
        .map((comment) => comment.author),
    ).toEqual([SELF]);
  });
});

describe('unusable data dir', () => {
  it('a data dir whose proofgate.sqlite is a directory is one DATA_DIR line, for every command', () => {
    const { repo } = repoWithChange();
    const data = tempDir('proofgate-identity-eisdir-');
    mkdirSync(join(data, 'proofgate.sqlite'));
    for (const args of [
      ['change', 'list'],
      ['change', 'show', '1'],
      ['automerge', '1'],
      ['checks', 'run', '1'],
      ['runs', 'list'],
    ]) {
      const result = runCli([...args, '--repo', repo.dir, '--data', data]);
      expect(result.status, args.join(' ')).toBe(1);
      expect(oneLine(result.stderr)).toMatch(/proofgate\.sqlite is a directory.*\[DATA_DIR\]$/);
    }
    const file = join(tempDir('proofgate-identity-file-'), 'not-a-dir');
    writeFileSync(file, 'x');
    const onFile = runCli(['change', 'list', '--repo', repo.dir, '--data', file]);
    expect(onFile.status).toBe(1);
    expect(oneLine(onFile.stderr)).toMatch(/it is a file, not a directory \[DATA_DIR\]$/);
  });
});
