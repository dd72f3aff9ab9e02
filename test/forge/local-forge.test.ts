import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ForgeEvent } from '../../src/forge/port.js';
import { GitRepository } from '../../src/forge/local/index.js';
import { localFixture, rejectionOf, type LocalFixture } from './local-support.js';

let fixture: LocalFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});
const setup = async (config?: string) => {
  fixture = await localFixture(config);
  return fixture;
};

describe('local forge: opening changes', () => {
  it('refuses a path that is not a git repository', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'proofgate-not-git-'));
    try {
      const error = await rejectionOf(GitRepository.open(dir));
      expect(error.code).toBe('GIT');
      expect(error.message).toBe(`not a git repository: ${dir}`);
      expect((await rejectionOf(GitRepository.open(join(dir, 'missing')))).code).toBe('GIT');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a missing branch, unrelated histories and a head with nothing new', async () => {
    const { forge, repo } = await setup();
    expect(await rejectionOf(forge.openChange({ head: 'nope', base: 'main' }))).toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringContaining('no branch "nope"'),
    });
    expect(await rejectionOf(forge.openChange({ head: 'feature', base: 'nope' }))).toMatchObject({ code: 'NOT_FOUND' });
    repo.commit('orphan', { 'x.txt': 'x\n' }, 'orphan root');
    expect(await rejectionOf(forge.openChange({ head: 'orphan', base: 'main' }))).toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringContaining('share no history'),
    });
    repo.git(['branch', 'same', 'main']);
    expect(await rejectionOf(forge.openChange({ head: 'same', base: 'main' }))).toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringContaining('no commits'),
    });
    expect(await forge.listChanges()).toEqual([]);
  });

  it('numbers changes, takes the git identity as author and the head subject as title', async () => {
    const { forge, repo } = await setup();
    const first = await forge.openChange({ head: 'feature', base: 'main' });
    expect(first).toMatchObject({ id: '1', number: 1, title: 'add feature', author: { login: 'Tess Tester' } });
    expect(await forge.permission(first.author.login)).toBe('read');
    repo.commit('second', { 'second.txt': '2\n' }, 'second work', 'main');
    const second = await forge.openChange({ head: 'second', base: 'main', title: 'Second', author: 'dana' });
    expect(second).toMatchObject({ id: '2', title: 'Second', author: { login: 'dana' } });
    expect((await forge.listChanges()).map((record) => record.changeId)).toEqual(['1', '2']);
    expect((await rejectionOf(forge.snapshot('3'))).code).toBe('NOT_FOUND');
    expect((await rejectionOf(forge.snapshot('../1'))).code).toBe('NOT_FOUND');
  });
});

describe('local forge: trusted configuration', () => {
  it('reads permissions from the base branch, never from the change', async () => {
    const { forge, repo } = await setup('maintainers:\n  - alice\n');
    repo.commit('feature', { '.proofgate.yml': 'maintainers:\n  - login: mallory\n    permission: admin\n' }, 'grant myself admin');
    const snapshot = await forge.openChange({ head: 'feature', base: 'main', author: 'mallory' });
    expect(snapshot.author.login).toBe('mallory');
    expect(await forge.permission('mallory')).toBe('read');
    expect(await forge.permission('alice')).toBe('write');
  });

  it('fails with one CONFIG error naming the key path when the base config is bad', async () => {
    const { forge } = await setup('automerge:\n  maxRepairsPerHead: -1\n');
    const error = await rejectionOf(forge.openChange({ head: 'feature', base: 'main' }));
    expect(error.code).toBe('CONFIG');
    expect(error.message).toContain('main:.proofgate.yml: automerge.maxRepairsPerHead');
  });
});

describe('local forge: mergeability', () => {
  it('is CLEAN without config, BEHIND when the base moved and up-to-date is required', async () => {
    const { forge, repo } = await setup('requireUpToDate: true\n');
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    expect(change).toMatchObject({ mergeable: 'MERGEABLE', mergeStateStatus: 'CLEAN' });
    repo.commit('main', { 'other.txt': 'unrelated\n' }, 'base moves on');
    const behind = await forge.snapshot(change.id);
    expect(behind).toMatchObject({ mergeable: 'MERGEABLE', mergeStateStatus: 'BEHIND' });
    const error = await rejectionOf(forge.merge(change.id, { expectedHeadSha: behind.head.sha, title: '', message: '' }));
    expect(error).toMatchObject({ code: 'NOT_MERGEABLE', message: expect.stringContaining('BEHIND') });
  });

  it('merges a base that moved when up-to-date is not required, keeping both sides', async () => {
    const { forge, repo } = await setup();
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const moved = repo.commit('main', { 'other.txt': 'unrelated\n' }, 'base moves on');
    const result = await forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'Add the feature', message: 'Body text.' });
    expect(repo.sha('main')).toBe(result.sha);
    expect(repo.git(['log', '-1', '--format=%P', result.sha])).toBe(moved);
    expect(repo.git(['show', `${result.sha}:feature.txt`])).toBe('new feature');
    expect(repo.git(['show', `${result.sha}:other.txt`])).toBe('unrelated');
    const message = repo.git(['log', '-1', '--format=%B', result.sha]);
    expect(message).toContain('Add the feature\n\nBody text.');
    expect(message).toContain('Proofgate-Change: 1');
    expect(message).toContain(`Proofgate-Reviewed-Head: ${change.head.sha}`);
    expect(message).toContain(`Proofgate-Base: ${moved}`);
    expect(repo.git(['log', '-1', '--format=%an <%ae>|%cn', result.sha])).toBe('Tess Tester <tess@example.test>|proofgate');
    const after = await forge.snapshot(change.id);
    expect(after).toMatchObject({ state: 'merged', mergeCommitSha: result.sha, head: { sha: change.head.sha }, mergeable: 'UNKNOWN' });
    expect((await rejectionOf(forge.merge(change.id, { expectedHeadSha: change.head.sha, title: '', message: '' }))).code).toBe('NOT_MERGEABLE');
    expect(repo.sha('main')).toBe(result.sha);
  });

  it('refuses with BASE_MOVED when the base moves during the merge, and changes nothing', async () => {
    let intruder = '';
    fixture = await localFixture(undefined, {
      beforeBaseUpdate: async () => {
        intruder = fixture!.repo.commit('main', { 'intruder.txt': 'i\n' }, 'concurrent push');
      },
    });
    const { forge, repo } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const error = await rejectionOf(forge.merge(change.id, { expectedHeadSha: change.head.sha, title: '', message: '' }));
    expect(error.code).toBe('BASE_MOVED');
    expect(repo.sha('main')).toBe(intruder);
    const after = await forge.snapshot(change.id);
    expect(after).toMatchObject({ state: 'open', mergeCommitSha: null });
  });

  it('closes a change without touching refs; a closed change neither merges nor runs checks', async () => {
    const { forge, repo } = await setup();
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const events: ForgeEvent[] = [];
    forge.onEvent((event) => events.push(event));
    expect(await forge.closeChange(change.id)).toMatchObject({ state: 'closed', mergeable: 'UNKNOWN', head: { sha: change.head.sha } });
    await forge.closeChange(change.id);
    expect(events).toEqual([{ kind: 'change-closed', changeId: change.id, merged: false, deliveryId: expect.any(String) }]);
    expect(repo.sha('main')).toBe(repo.baseSha);
    expect(repo.sha('feature')).toBe(repo.headSha);
    expect((await rejectionOf(forge.merge(change.id, { expectedHeadSha: change.head.sha, title: '', message: '' }))).code).toBe('NOT_MERGEABLE');
    expect((await rejectionOf(forge.runChecks(change.id))).code).toBe('INVALID_INPUT');
  });

  it('refuses a malformed expected head', async () => {
    const { forge } = await setup();
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    expect((await rejectionOf(forge.merge(change.id, { expectedHeadSha: change.head.sha.slice(0, 12), title: '', message: '' }))).code).toBe('INVALID_INPUT');
  });
});

describe('local forge: comments, labels, files, pushes, events', () => {
  it('keeps authors apart and edits only its own comments', async () => {
    const { forge } = await setup();
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const human = await forge.commentAs(change.id, '/proofgate automerge', 'alice');
    expect(human).toMatchObject({ author: 'alice', authorType: 'User' });
    const mine = await forge.createComment(change.id, 'status: waiting');
    expect(mine).toMatchObject({ author: 'proofgate', authorType: 'Bot' });
    expect((await rejectionOf(forge.editComment(change.id, human.id, 'rewritten'))).code).toBe('INVALID_INPUT');
    expect((await rejectionOf(forge.editComment(change.id, 'cmt_missing', 'x'))).code).toBe('NOT_FOUND');
    expect((await rejectionOf(forge.createComment(change.id, '   '))).code).toBe('INVALID_INPUT');
    expect((await forge.snapshot(change.id)).comments.map((comment) => comment.body)).toEqual(['/proofgate automerge', 'status: waiting']);
  });

  it('reads files at a ref: content, null for missing paths and directories, NOT_FOUND for a missing ref', async () => {
    const { forge, repo } = await setup();
    repo.commit('feature', { 'dir/inner.txt': 'inner\n' }, 'nested');
    expect(Buffer.from((await forge.readFile('feature', 'dir/inner.txt'))!).toString()).toBe('inner\n');
    expect(Buffer.from((await forge.readFile(repo.baseSha, 'README.md'))!).toString()).toBe('hello\n');
    expect(await forge.readFile('main', 'dir/inner.txt')).toBeNull();
    expect(await forge.readFile('feature', 'dir')).toBeNull();
    expect((await rejectionOf(forge.readFile('no-such-ref', 'README.md'))).code).toBe('NOT_FOUND');
  });

  it('keeps what a commit id names, never what a branch names: a moved branch is read afresh, a kept blob cannot be changed by a caller', async () => {
    const { forge, repo } = await setup();
    const first = repo.commit('feature', { 'notes.txt': 'one\n' }, 'one');
    const atFirst = await forge.repo.readBlob(first, 'notes.txt');
    expect(Buffer.from(atFirst!).toString()).toBe('one\n');
    atFirst!.fill(0x21);
    expect(Buffer.from((await forge.repo.readBlob(first, 'notes.txt'))!).toString()).toBe('one\n');
    expect(Buffer.from((await forge.repo.readBlob('feature', 'notes.txt'))!).toString()).toBe('one\n');
    repo.commit('feature', { 'notes.txt': 'two\n' }, 'two');
    expect(Buffer.from((await forge.repo.readBlob('feature', 'notes.txt'))!).toString()).toBe('two\n');
    expect(Buffer.from((await forge.repo.readBlob(first, 'notes.txt'))!).toString()).toBe('one\n');
    expect(await forge.repo.readBlob(first, 'absent.txt')).toBeNull();
    // Branch names: the same answer every time, asked once of git.
    for (let round = 0; round < 2; round += 1) {
      expect(await forge.repo.isValidBranchName('feature')).toBe(true);
      expect(await forge.repo.isValidBranchName('bad..name')).toBe(false);
      expect(await forge.repo.isValidBranchName('-x')).toBe(false);
    }
  });

  it('pushes with compare-and-swap and reports the new head as change-synchronized', async () => {
    const { forge, repo } = await setup();
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const events: ForgeEvent[] = [];
    const stop = forge.onEvent((event) => events.push(event));
    const next = repo.git(['commit-tree', `${change.head.sha}^{tree}`, '-p', change.head.sha, '-m', 'pushed']);
    const wrong = await rejectionOf(forge.pushBranch({ branch: 'feature', newSha: next, expectedOldSha: repo.baseSha }));
    expect(wrong.code).toBe('HEAD_MOVED');
    expect(repo.sha('feature')).toBe(change.head.sha);
    await forge.pushBranch({ branch: 'feature', newSha: next, expectedOldSha: change.head.sha });
    expect(repo.sha('feature')).toBe(next);
    await forge.pushBranch({ branch: 'copy', newSha: next, expectedOldSha: null });
    expect((await rejectionOf(forge.pushBranch({ branch: 'copy', newSha: next, expectedOldSha: null }))).code).toBe('HEAD_MOVED');
    stop();
    expect(events).toEqual([{ kind: 'change-synchronized', changeId: change.id, headSha: next, deliveryId: expect.any(String) }]);
  });

  it('tails events written by another forge instance on the same store', async () => {
    const { forge, reopen } = await setup();
    const other = await reopen();
    const controller = new AbortController();
    const seen: string[] = [];
    const tail = (async () => {
      for await (const { event } of forge.events({ pollMs: 20, signal: controller.signal })) {
        seen.push(event.kind);
        if (event.kind === 'comment-edited') controller.abort();
      }
    })();
    const change = await other.openChange({ head: 'feature', base: 'main' });
    const comment = await other.createComment(change.id, 'one');
    await other.editComment(change.id, comment.id, 'two');
    await tail;
    expect(seen).toEqual(['change-opened', 'comment-created', 'comment-edited']);
  });
});
