/**
 * git's smart HTTP through `proofgate serve --repo`: real `git clone` and
 * `git push` against the served URL on loopback, the token given as the
 * Basic password through http.extraHeader, never through a prompt.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { branchNameProblem, cgiHeaders, gitCredential, gitRoute, parseReceiveCommands, pushRefusal, servedName } from '../../src/service/git-http.js';
import { branchSha, call, git, remoteUrl, served, tempDir, type Cleanups } from './write-support.js';

const cleanups: Cleanups = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const Z = '0'.repeat(40);

function pkt(text: string): string {
  return (text.length + 4).toString(16).padStart(4, '0') + text;
}

describe('push rules (pure)', () => {
  it('reads receive-pack commands and refuses malformed pkt-lines', () => {
    const body = Buffer.from(`${pkt(`${A} ${B} refs/heads/alice/x\0report-status\n`)}${pkt(`${Z} ${B} refs/heads/alice/y\n`)}0000PACK...`);
    expect(parseReceiveCommands(body)).toEqual({
      commands: [
        { oldOid: A, newOid: B, ref: 'refs/heads/alice/x' },
        { oldOid: Z, newOid: B, ref: 'refs/heads/alice/y' },
      ],
    });
    const cases: [string, string][] = [
      ['', 'ends before'],
      [`${pkt(`${A} ${B} refs/heads/alice/x\n`)}`, 'ends before'],
      ['ffff' + `${A} ${B} refs/heads/alice/x\n0000`, 'claims more bytes'],
      ['0003', 'reserved length'],
      ['zz12', 'no valid pkt-line length'],
      [`${pkt('garbage\n')}0000`, 'is not'],
      [`${pkt('push-cert\0x\n')}0000`, 'signed'],
      ['0000', 'names no ref'],
    ];
    for (const [text, problem] of cases) {
      const parsed = parseReceiveCommands(Buffer.from(text));
      expect('problem' in parsed ? parsed.problem : 'parsed', JSON.stringify(text)).toContain(problem);
    }
  });

  it.each([
    ['refs/heads/alice/x', null],
    ['refs/heads/alice/deep/x', null],
    ['refs/heads/main', 'protected'],
    ['refs/heads/alice', 'only branches under refs/heads/alice/'],
    ['refs/heads/alice/', 'ending in "/"'],
    ['refs/heads/bob/x', 'only branches under refs/heads/alice/'],
    ['refs/heads/Alice/x', 'only branches under refs/heads/alice/'],
    ['refs/tags/v1', 'tags'],
    ['refs/notes/x', 'only branches'],
    ['refs/heads/alice/../main', '".."'],
    ['refs/heads/alice/a\x01b', 'control character'],
    ['refs/heads/alice/a b', 'control character'],
    ['refs/heads/alice/x.lock', '.lock'],
    ['refs/heads/alice/.hidden', 'starting with "."'],
    ['refs/heads/alice/x@{1}', '"@{"'],
  ])('%j -> %s', (ref, problem) => {
    const refusal = pushRefusal({ oldOid: A, newOid: B, ref }, 'alice', ['main', 'release']);
    if (problem === null) expect(refusal).toBeNull();
    else expect(refusal).toContain(problem);
  });

  it('reads names, routes, credentials and CGI headers', () => {
    expect(servedName('/srv/project')).toBe('project');
    expect(servedName('/srv/project.git')).toBe('project');
    expect(gitRoute('/git/p.git/info/refs', 'p')).toBe('info/refs');
    expect(gitRoute('/git/p.git/objects/info/packs', 'p')).toBeNull();
    expect(gitRoute('/git/q.git/info/refs', 'p')).toBeNull();
    expect(gitCredential(`Basic ${Buffer.from('x:pgt_abc').toString('base64')}`)).toEqual({ token: 'pgt_abc' });
    expect(gitCredential(['Basic a', 'Basic b'])).toHaveProperty('problem');
    expect(gitCredential('Bearer pgt_abc')).toEqual({ token: 'pgt_abc' });
    expect(branchNameProblem('a//b')).not.toBeNull();
    expect(cgiHeaders(Buffer.from('Status: 403 Forbidden\r\nContent-Type: text/plain\r\n\r\nno'))).toMatchObject({
      status: 403,
      headers: [['Content-Type', 'text/plain']],
    });
    expect(cgiHeaders(Buffer.from('Content-Type: x'))).toBeNull();
  });
});

describe('git over HTTP', () => {
  it("clones with a read token, not without one, and pushes only to the pusher's own branches", async () => {
    const setup = await served(cleanups);
    const home = tempDir(cleanups, 'proofgate-git-home-');
    const url = remoteUrl(setup);

    const anonymous = await git(home, ['clone', '-q', url, 'anon']);
    expect(anonymous.status).not.toBe(0);
    expect(existsSync(join(home, 'anon', '.git'))).toBe(false);
    const wrong = await git(home, ['clone', '-q', url, 'wrong'], { token: `pgt_${'A'.repeat(43)}` });
    expect(wrong.status).not.toBe(0);

    const cloned = await git(home, ['clone', '-q', url, 'work'], { token: setup.tokens.carol });
    expect(cloned.out).toBe('');
    expect(cloned.status).toBe(0);
    const work = join(home, 'work');
    expect((await git(home, ['rev-parse', 'origin/alice/feature'], { cwd: work })).status).toBe(0);

    writeFileSync(join(work, 'new.txt'), 'new\n');
    expect((await git(home, ['add', 'new.txt'], { cwd: work })).status).toBe(0);
    expect((await git(home, ['commit', '-q', '-m', 'new'], { cwd: work })).status).toBe(0);
    const mainBefore = branchSha(setup, 'main');

    // Read and triage tokens cannot push at all.
    for (const token of [setup.tokens.carol, setup.tokens.bob]) {
      const pushed = await git(home, ['push', url, 'HEAD:refs/heads/bob/new'], { cwd: work, token });
      expect(pushed.status).not.toBe(0);
      expect(branchSha(setup, 'bob/new')).toBeNull();
    }
    // A writer: not to main, not to another login's prefix, not a tag, not a delete of another's branch.
    for (const target of ['HEAD:refs/heads/main', 'HEAD:refs/heads/bob/new', 'HEAD:refs/tags/v1', ':refs/heads/bob/feature', 'HEAD:refs/heads/alice']) {
      const pushed = await git(home, ['push', url, target], { cwd: work, token: setup.tokens.alice });
      expect(pushed.status, target).not.toBe(0);
      expect(pushed.out, target).toContain('403');
    }
    expect(branchSha(setup, 'main')).toBe(mainBefore);
    expect(branchSha(setup, 'bob/new')).toBeNull();
    expect(branchSha(setup, 'bob/feature')).not.toBeNull();
    expect(spawnSync('git', ['tag', '-l'], { cwd: setup.repo.dir, encoding: 'utf8' }).stdout).toBe('');

    const own = await git(home, ['push', '-q', url, 'HEAD:refs/heads/alice/new'], { cwd: work, token: setup.tokens.alice });
    expect(own.status, own.out).toBe(0);
    expect(branchSha(setup, 'alice/new')).toBe((await git(home, ['rev-parse', 'HEAD'], { cwd: work })).out.trim());
    const deleted = await git(home, ['push', '-q', url, ':refs/heads/alice/new'], { cwd: work, token: setup.tokens.alice });
    expect(deleted.status, deleted.out).toBe(0);
    expect(branchSha(setup, 'alice/new')).toBeNull();
  });

  it("a push to a change's branch moves its head; a hook file in the pushed tree is never run", async () => {
    const setup = await served(cleanups);
    const home = tempDir(cleanups, 'proofgate-git-home-');
    const url = remoteUrl(setup);
    const opened = await call(setup.service.url, '/api/changes', { token: setup.tokens.alice, json: { head: 'alice/feature' } });
    expect(opened.status).toBe(201);
    expect((await git(home, ['clone', '-q', '-b', 'alice/feature', url, 'work'], { token: setup.tokens.alice })).status).toBe(0);
    const work = join(home, 'work');
    const marker = join(home, 'hook-ran');
    for (const dir of ['hooks', join('.githooks')]) {
      mkdirSync(join(work, dir), { recursive: true });
      for (const hook of ['pre-receive', 'update', 'post-receive', 'post-update']) {
        writeFileSync(join(work, dir, hook), `#!/bin/sh\ntouch ${marker}\n`);
        chmodSync(join(work, dir, hook), 0o755);
      }
    }
    expect((await git(home, ['add', '-A'], { cwd: work })).status).toBe(0);
    expect((await git(home, ['commit', '-q', '-m', 'hooks as data'], { cwd: work })).status).toBe(0);
    const pushed = await git(home, ['push', '-q', url, 'HEAD:refs/heads/alice/feature'], { cwd: work, token: setup.tokens.alice });
    expect(pushed.status, pushed.out).toBe(0);
    const head = (await git(home, ['rev-parse', 'HEAD'], { cwd: work })).out.trim();
    expect(branchSha(setup, 'alice/feature')).toBe(head);
    expect(existsSync(marker)).toBe(false);
    const shown = await call(setup.service.url, '/api/change-records/1', { token: setup.tokens.carol });
    expect(shown.json.change).toMatchObject({ head: { ref: 'alice/feature', sha: head } });
  });
});
