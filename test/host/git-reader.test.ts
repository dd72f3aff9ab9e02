import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { GitObjectReader, commitOf, gitObjectReader, hasCommit, isAncestor, objectInfo, readObject } from '../../src/host/index.js';
import { GitRepository } from '../../src/forge/local/index.js';
import { repositoryFingerprint } from '../../src/review/repo-state.js';
import { alive } from '../support/wait.js';
import { makeSeededRepo, type TempRepo } from '../forge/git-fixture.js';
import { startTestProcess } from '../support/processes.js';
import { until, within } from '../support/wait.js';

const DIST_READER = fileURLToPath(new URL('../../dist/host/git-reader.js', import.meta.url));

let repo: TempRepo & { mainSha: string };

beforeAll(() => {
  repo = makeSeededRepo('proofgate-git-reader-', { 'README.md': 'hello\n', 'dir/file.txt': 'in a dir\n' });
  repo.commit('feature', { 'feature.txt': 'feature\n' }, 'feature work', 'main');
});
afterAll(() => repo.cleanup());

/** What one `git rev-parse --verify --quiet --end-of-options <name>` prints, or null when it fails. */
function revParse(name: string): string | null {
  try {
    return execFileSync('git', ['-C', repo.dir, 'rev-parse', '--verify', '--quiet', '--end-of-options', name], { encoding: 'utf8', stdio: 'pipe' }).trim();
  } catch {
    return null;
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable('expected a rejection'),
    (error: unknown) => error,
  );
}

describe('the git object reader', () => {
  it('answers what rev-parse answers, name for name', async () => {
    repo.git(['update-ref', 'refs/heads/-dash', repo.mainSha]);
    repo.git(['tag', '-a', '-m', 'annotated', 'v1', repo.mainSha]);
    const names = [
      'HEAD',
      'main',
      'refs/heads/feature^{commit}',
      'feature~1',
      'main^{tree}',
      'main:README.md',
      'main:dir',
      'main:missing.txt',
      'v1',
      'v1^{commit}',
      'v1^{tree}',
      '-dash',
      '-dash^{commit}',
      '--all',
      'main@{upstream}',
      ':/feature work',
      'main..feature',
      'no-such-branch',
      `${repo.mainSha}^{commit}`,
      `${repo.mainSha.slice(0, 7)}`,
      `${'f'.repeat(40)}^{commit}`,
      ' HEAD',
      'HEAD ',
      'main feature',
      'HEAD\t',
      'main^{commit} missing',
    ];
    for (const name of names) expect((await objectInfo(repo.dir, name))?.oid ?? null, name).toBe(revParse(name));
    // The one difference: rev-parse prints a full object id without looking for the object; the reader looks.
    expect(revParse('f'.repeat(40))).toBe('f'.repeat(40));
    expect(await objectInfo(repo.dir, 'f'.repeat(40))).toBeNull();
  });

  it('reads object bytes, types and sizes as git stores them', async () => {
    const blob = await readObject(repo.dir, 'main:README.md');
    expect(blob).toMatchObject({ type: 'blob', size: 6 });
    expect(blob?.bytes.toString('utf8')).toBe('hello\n');
    const commit = await readObject(repo.dir, 'feature');
    expect(commit?.type).toBe('commit');
    expect(commit?.bytes.toString('utf8')).toContain('feature work');
    expect((await readObject(repo.dir, 'main^{tree}'))?.type).toBe('tree');
    expect(await readObject(repo.dir, 'main:missing.txt')).toBeNull();
  });

  it('answers many pipelined requests in order from one process', async () => {
    const reader = new GitObjectReader(repo.dir);
    try {
      const names = Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? 'main' : i % 3 === 1 ? 'main:README.md' : `absent-${i}`));
      const answers = await Promise.all(names.map((name, i) => (i % 2 === 0 ? reader.info(name) : reader.contents(name))));
      const pid = reader.pid;
      answers.forEach((answer, i) => {
        const name = names[i] ?? '';
        if (name.startsWith('absent-')) expect(answer).toBeNull();
        else expect(answer?.oid).toBe(revParse(name));
      });
      expect(pid).not.toBeNull();
      await reader.info('HEAD');
      expect(reader.pid).toBe(pid);
    } finally {
      reader.close();
    }
  });

  it('refuses a name that would end the request line, and the answers after it stay in step', async () => {
    const reader = new GitObjectReader(repo.dir);
    try {
      for (const name of ['main\nfeature', 'main\rfeature', 'main\r', 'main\0', '']) {
        const error = await rejection(reader.info(name));
        expect(isProofgateError(error, 'INVALID_INPUT'), JSON.stringify(name)).toBe(true);
      }
      expect((await reader.info('feature'))?.oid).toBe(revParse('feature'));
      // Through the query functions such a name names nothing, as one rev-parse process says.
      expect(await commitOf(repo.dir, 'main\nfeature')).toBeNull();
      expect(await commitOf(repo.dir, 'main\r')).toBeNull();
    } finally {
      reader.close();
    }
  });

  it('an ambiguous short name is no object, as for rev-parse', async () => {
    // Two blobs whose ids share their first four hex digits.
    const seen = new Map<string, string>();
    let pair: [string, string] | null = null;
    for (let i = 0; pair === null; i += 1) {
      const content = `blob ${i}\n`;
      const id = createHash('sha1')
        .update(`blob ${Buffer.byteLength(content)}\0${content}`)
        .digest('hex');
      const other = seen.get(id.slice(0, 4));
      if (other !== undefined) pair = [other, content];
      seen.set(id.slice(0, 4), content);
    }
    const written = pair.map((content) => execFileSync('git', ['-C', repo.dir, 'hash-object', '-w', '--stdin'], { input: content, encoding: 'utf8' }).trim());
    const prefix = (written[0] ?? '').slice(0, 4);
    expect((written[1] ?? '').slice(0, 4)).toBe(prefix);
    expect(revParse(prefix)).toBeNull();
    expect(await objectInfo(repo.dir, prefix)).toBeNull();
  });

  it('sees a branch another process moves, also after the refs are packed, between two reads', async () => {
    const reader = new GitObjectReader(repo.dir);
    try {
      const first = repo.commit('moving', { 'a.txt': 'one\n' }, 'one', 'main');
      expect((await reader.info('refs/heads/moving^{commit}'))?.oid).toBe(first);
      const pid = reader.pid;
      // Packed: the loose file goes away and packed-refs is rewritten.
      repo.git(['pack-refs', '--all', '--prune']);
      expect((await reader.info('refs/heads/moving^{commit}'))?.oid).toBe(first);
      const second = repo.commit('moving', { 'a.txt': 'two\n' }, 'two');
      expect((await reader.info('refs/heads/moving^{commit}'))?.oid).toBe(second);
      // Moved again and packed again: only packed-refs holds the new value.
      const third = repo.commit('moving', { 'a.txt': 'three\n' }, 'three');
      repo.git(['pack-refs', '--all', '--prune']);
      expect((await reader.info('refs/heads/moving^{commit}'))?.oid).toBe(third);
      repo.git(['update-ref', '-d', 'refs/heads/moving']);
      expect(await reader.info('refs/heads/moving^{commit}')).toBeNull();
      // New objects (loose, then in a new pack) are found too.
      const fourth = repo.commit('moving', { 'a.txt': 'four\n' }, 'four', 'main');
      repo.git(['repack', '-d', '-q']);
      expect((await reader.info(`${fourth}^{tree}`))?.type).toBe('tree');
      expect(reader.pid).toBe(pid);
    } finally {
      reader.close();
    }
  });

  it('an object it missed is found once another process fetched it into a new pack', async () => {
    const fetcher = makeSeededRepo('proofgate-git-reader-fetch-', { 'x.txt': 'x\n' });
    try {
      const wanted = repo.commit('to-fetch', { 'fetched.txt': 'fetched\n' }, 'to fetch', 'main');
      const reader = gitObjectReader(fetcher.dir);
      expect(await reader.info(`${wanted}^{commit}`)).toBeNull();
      expect(await hasCommit(fetcher.dir, wanted)).toBe(false);
      fetcher.git(['-c', 'fetch.unpackLimit=1', 'fetch', '-q', repo.dir, 'refs/heads/to-fetch:refs/heads/fetched']);
      expect((await reader.info(`${wanted}^{commit}`))?.oid).toBe(wanted);
      expect(await hasCommit(fetcher.dir, wanted)).toBe(true);
      expect(await commitOf(fetcher.dir, 'refs/heads/fetched')).toBe(wanted);
    } finally {
      fetcher.cleanup();
    }
  });

  it('two readers racing a ref update each answer the old or the new commit, and the new one once it is written', async () => {
    const before = repo.commit('raced', { 'r.txt': 'before\n' }, 'before', 'main');
    const after = repo.commit('raced-next', { 'r.txt': 'after\n' }, 'after', 'raced');
    const readers = [new GitObjectReader(repo.dir), new GitObjectReader(repo.dir)];
    try {
      const asks = readers.flatMap((reader) => Array.from({ length: 50 }, () => reader.info('refs/heads/raced^{commit}')));
      repo.git(['update-ref', 'refs/heads/raced', after, before]);
      for (const answer of await Promise.all(asks)) expect([before, after]).toContain(answer?.oid);
      for (const reader of readers) expect((await reader.info('refs/heads/raced^{commit}'))?.oid).toBe(after);
    } finally {
      for (const reader of readers) reader.close();
    }
  });

  it('killed under a request: the request fails with a GIT error, the next one starts a new process', async () => {
    const reader = new GitObjectReader(repo.dir);
    try {
      await reader.info('HEAD');
      const pid = reader.pid ?? 0;
      // Stopped first, so the request is surely pending when the process dies.
      process.kill(pid, 'SIGSTOP');
      const pending = reader.info('main');
      process.kill(pid, 'SIGKILL');
      const error = await within(rejection(pending), 'the pending request fails');
      expect(isProofgateError(error, 'GIT')).toBe(true);
      expect((await reader.info('main'))?.oid).toBe(repo.mainSha);
      expect(reader.pid).not.toBe(pid);
    } finally {
      reader.close();
    }
  });

  it('a name git dies on stops the reader; the query answers as rev-parse does and the reader starts again', async () => {
    const shared = gitObjectReader(repo.dir);
    await shared.info('HEAD');
    const pid = shared.pid;
    // `main@{upstream}` without an upstream: cat-file dies (128); rev-parse fails too.
    expect(await within(objectInfo(repo.dir, 'main@{upstream}'), 'an answer')).toBeNull();
    expect(shared.pid).not.toBe(pid);
    expect(await commitOf(repo.dir, 'main')).toBe(repo.mainSha);
    expect(shared.pid).not.toBeNull();
  });

  it('a reader whose repository was removed does not answer "no object": the query fails as one git process does', async () => {
    const gone = makeSeededRepo('proofgate-git-reader-gone-', { 'a.txt': 'a\n' });
    const repository = await GitRepository.open(gone.dir);
    expect(await repository.branchSha('main')).toBe(gone.mainSha);
    gone.cleanup();
    const error = await rejection(repository.branchSha('main'));
    expect(isProofgateError(error, 'GIT')).toBe(true);
    repository.close();
  });

  it('a repository made again at the same path, or its .git removed, is read as it is now, never through the old reader', async () => {
    const first = makeSeededRepo('proofgate-git-reader-again-', { 'a.txt': 'first\n' });
    const repository = await GitRepository.open(first.dir);
    try {
      expect(await repository.branchSha('main')).toBe(first.mainSha);
      // Moved away (the old reader's directory lives on) and made again at the same path with other history.
      renameSync(first.dir, `${first.dir}-moved`);
      mkdirSync(first.dir);
      execFileSync('git', ['init', '-q', '-b', 'main', first.dir]);
      const again = execFileSync('git', ['-C', first.dir, 'commit-tree', '-m', 'again', '4b825dc642cb6eb9a060e54bf8d69288fbee4904'], {
        encoding: 'utf8',
        env: { ...process.env, GIT_AUTHOR_NAME: 'T', GIT_AUTHOR_EMAIL: 't@example.test', GIT_COMMITTER_NAME: 'T', GIT_COMMITTER_EMAIL: 't@example.test' },
      }).trim();
      execFileSync('git', ['-C', first.dir, 'update-ref', 'refs/heads/main', again]);
      expect(await repository.branchSha('main')).toBe(again);
      expect(await repository.branchSha('main')).toBe(again);
      // Its .git removed: git's own error, as from one git process.
      rmSync(join(first.dir, '.git'), { recursive: true, force: true });
      await expect(repository.branchSha('main')).rejects.toMatchObject({ code: 'GIT' });
    } finally {
      repository.close();
      first.cleanup();
    }
  });

  it('never keeps node alive, and ends with node, also when node is SIGKILLed', async () => {
    const script = (hold: boolean) =>
      [
        `import { gitObjectReader } from ${JSON.stringify(DIST_READER)};`,
        `const reader = gitObjectReader(${JSON.stringify(repo.dir)});`,
        `const info = await reader.info('main');`,
        `process.stdout.write(JSON.stringify({ oid: info.oid, pid: reader.pid }) + '\\n');`,
        hold ? 'setInterval(() => undefined, 1000);' : '',
      ].join('\n');
    const run = (hold: boolean) => {
      const child = startTestProcess(process.execPath, ['--input-type=module', '-e', script(hold)], { stdio: ['ignore', 'pipe', 'inherit'] });
      const first = new Promise<{ oid: string; pid: number }>((resolve) => {
        let text = '';
        child.stdout?.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
          if (text.includes('\n')) resolve(JSON.parse(text) as { oid: string; pid: number });
        });
      });
      const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      return { child, first, exit };
    };

    // Idle reader: node ends by itself, and cat-file with it (end of its input).
    const quiet = run(false);
    const said = await within(quiet.first, 'the child reads through its reader');
    expect(said.oid).toBe(repo.mainSha);
    expect(await within(quiet.exit, 'node exits with an idle reader')).toBe(0);
    await until(() => !alive(said.pid), 'cat-file ends with node');

    // SIGKILLed node: cat-file's input closes and it exits.
    const held = run(true);
    const heldSaid = await within(held.first, 'the child reads through its reader');
    expect(alive(heldSaid.pid)).toBe(true);
    held.child.kill('SIGKILL');
    await within(held.exit, 'node is killed');
    await until(() => !alive(heldSaid.pid), 'cat-file ends after node was SIGKILLed');
  });
});

describe('GitRepository reads through the reader', () => {
  it('branchSha, resolveCommit, treeOf and readBlob answer as before, without a process per question', async () => {
    const repository = await GitRepository.open(repo.dir);
    expect(await repository.branchSha('main')).toBe(repo.mainSha);
    expect(await repository.branchSha('no-such')).toBeNull();
    expect(await repository.branchSha('bad..name')).toBeNull();
    expect(await repository.branchSha('a\nb')).toBeNull();
    expect(await repository.resolveCommit('main:README.md')).toBeNull();
    expect(await repository.resolveCommit('-dash')).toBeNull();
    expect(await repository.treeOf('main')).toBe(revParse('main^{tree}'));
    await expect(repository.treeOf('no-such')).rejects.toMatchObject({ code: 'GIT' });
    expect(Buffer.from((await repository.readBlob(repo.mainSha, 'dir/file.txt')) ?? []).toString()).toBe('in a dir\n');
    expect(await repository.readBlob(repo.mainSha, 'dir')).toBeNull();
    expect(await repository.readBlob(repo.mainSha, 'nope.txt')).toBeNull();
    // A path `<commit>:<path>` would resolve differently goes the ls-tree way, with its answer.
    expect(await repository.readBlob(repo.mainSha, 'dir/../README.md')).toBeNull();
    expect(await repository.readBlob(repo.mainSha, './README.md')).toBeNull();
    await expect(repository.readBlob('f'.repeat(40), 'README.md')).rejects.toMatchObject({ code: 'GIT' });
  });
});

describe('isValidBranchName', () => {
  it('answers as git check-ref-format does, also for the names it answers without asking git', async () => {
    const repository = await GitRepository.open(repo.dir);
    const gitSays = (name: string) => {
      try {
        execFileSync('git', ['check-ref-format', `refs/heads/${name}`], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    };
    const fixed = ['main', 'feature/x', 'v1.2', 'a.lock', 'a.lock/b', 'a..b', 'a.', '.a', 'a/.b', 'a//b', 'a/', 'HEAD', '@', 'a@{1}', 'x_y-z', '_a', 'a b'];
    // Random names from an alphabet of the characters the rules are about (seeded, so a failure repeats).
    const alphabet = ['a', 'Z', '0', '_', '-', '.', '/', 'lock', '@', '{', '~'];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    const names = [
      ...fixed,
      ...Array.from({ length: 400 }, () => Array.from({ length: 1 + (random() % 8) }, () => alphabet[random() % alphabet.length]).join('')),
    ];
    for (const name of new Set(names)) {
      if (name.startsWith('-')) continue;
      expect(await repository.isValidBranchName(name), name).toBe(gitSays(name));
    }
  });
});

describe('isAncestor remembers a yes only while both commits are there', () => {
  it("answers yes again from memory, and a commit pruned since is git's GIT error as before", async () => {
    const older = repo.commit('short-lived', { 's.txt': 'one\n' }, 'one', 'main');
    const newer = repo.commit('short-lived', { 's.txt': 'two\n' }, 'two');
    expect(await isAncestor(repo.dir, older, newer)).toBe(true);
    expect(await isAncestor(repo.dir, older, newer)).toBe(true);
    expect(await isAncestor(repo.dir, newer, older)).toBe(false);
    repo.git(['update-ref', '-d', 'refs/heads/short-lived']);
    repo.git(['reflog', 'expire', '--expire=now', '--all']);
    repo.git(['prune', '--expire=now']);
    await expect(isAncestor(repo.dir, older, newer)).rejects.toMatchObject({ code: 'GIT' });
  });
});

describe('the review fingerprint reads HEAD and named refs through the reader', () => {
  it('counts a detached HEAD by its commit, a branch HEAD by its name, and the named refs by their commits', async () => {
    const fixture = makeSeededRepo('proofgate-git-reader-fingerprint-', { 'a.txt': 'a\n' });
    try {
      fixture.git(['checkout', '-q', 'main']);
      const onMain = await repositoryFingerprint(fixture.dir, undefined, ['main']);
      expect(await repositoryFingerprint(fixture.dir, undefined, ['main'])).toBe(onMain);
      // The checked-out branch moves (not named by the review): HEAD counts by its name, so nothing changes but the
      // named ref, which does.
      const moved = fixture.commit('main', { 'b.txt': 'b\n' }, 'moved');
      fixture.git(['read-tree', '-m', '-u', fixture.mainSha, moved]);
      expect(await repositoryFingerprint(fixture.dir)).toBe(await repositoryFingerprint(fixture.dir));
      const afterMove = await repositoryFingerprint(fixture.dir, undefined, ['main']);
      expect(afterMove).not.toBe(onMain);
      // Detached at the same commit: HEAD now counts by its commit.
      const unnamed = await repositoryFingerprint(fixture.dir);
      fixture.git(['checkout', '-q', '--detach', 'main']);
      const detached = await repositoryFingerprint(fixture.dir);
      expect(detached).not.toBe(unnamed);
      fixture.git(['checkout', '-q', '--detach', fixture.mainSha]);
      expect(await repositoryFingerprint(fixture.dir)).not.toBe(detached);
      // Another branch checked out: another name.
      fixture.git(['checkout', '-q', '-b', 'other', 'main']);
      expect(await repositoryFingerprint(fixture.dir)).not.toBe(unnamed);
    } finally {
      fixture.cleanup();
    }
  });
});
