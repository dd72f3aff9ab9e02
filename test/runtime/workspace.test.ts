import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captureWorkspaceAnchor, verifyWorkspaceAnchor } from '../../src/runtime/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function repo(): string {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-ws-'));
  dirs.push(dir);
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'pipe' });
  git('init', '-q', '-b', 'main');
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src', 'a.ts'), 'export const a = 1;\n');
  writeFileSync(join(dir, 'README.md'), 'hello\n');
  writeFileSync(join(dir, '.gitignore'), 'ignored.txt\n');
  git('add', '.');
  git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
  return dir;
}

describe('git workspace anchor', () => {
  it('captures head, files and a fingerprint, and verifies an unchanged checkout', async () => {
    const dir = repo();
    const anchor = await captureWorkspaceAnchor(join(dir, 'src'), { scope: null });
    expect(anchor.head).toMatch(/^[0-9a-f]{40}$/);
    expect(anchor.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(anchor.repositoryId.endsWith('.git')).toBe(true);
    expect(anchor.files.map((file) => `${file.path}:${file.state}`)).toEqual(['.gitignore:clean', 'README.md:clean', 'src/a.ts:clean']);
    expect(await verifyWorkspaceAnchor(anchor)).toMatchObject({ kind: 'verified' });
    writeFileSync(join(dir, 'ignored.txt'), 'noise');
    expect((await verifyWorkspaceAnchor(anchor)).kind).toBe('verified');
  });

  it('notices modified, untracked and deleted files, but only inside the scope', async () => {
    const dir = repo();
    const whole = await captureWorkspaceAnchor(dir, { scope: null });
    const scoped = await captureWorkspaceAnchor(dir, { scope: ['src'] });
    expect(scoped.files.map((file) => file.path)).toEqual(['src/a.ts']);
    writeFileSync(join(dir, 'README.md'), 'changed\n');
    expect(await verifyWorkspaceAnchor(whole)).toMatchObject({ kind: 'changed', paths: ['README.md'] });
    expect((await verifyWorkspaceAnchor(scoped)).kind).toBe('verified');
    writeFileSync(join(dir, 'src', 'new.ts'), 'x');
    unlinkSync(join(dir, 'src', 'a.ts'));
    const after = await captureWorkspaceAnchor(dir, { scope: ['src'] });
    expect(after.files.map((file) => `${file.path}:${file.state}:${file.digest === null}`)).toEqual(['src/a.ts:deleted:true', 'src/new.ts:untracked:false']);
    expect(await verifyWorkspaceAnchor(scoped)).toMatchObject({ kind: 'changed', paths: ['src/a.ts', 'src/new.ts'] });
  });

  it('refuses a directory that is not a repository and bad scopes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'proofgate-nogit-'));
    dirs.push(dir);
    await expect(captureWorkspaceAnchor(dir, { scope: null })).rejects.toMatchObject({ code: 'GIT' });
    await expect(captureWorkspaceAnchor(repo(), { scope: ['../x'] })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });
});
