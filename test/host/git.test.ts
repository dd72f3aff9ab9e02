import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { gitEnvironment, gitText, runGit } from '../../src/host/index.js';

let root: string;
let repo: string;
let other: string;

function init(dir: string): void {
  execFileSync('git', ['init', '-q', '-b', 'main', dir]);
  for (const [key, value] of [['user.name', 'Tess Tester'], ['user.email', 'tess@example.test'], ['commit.gpgsign', 'false']]) {
    execFileSync('git', ['-C', dir, 'config', key as string, value as string]);
  }
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'proofgate-host-git-'));
  repo = join(root, 'repo');
  other = join(root, 'other');
  init(repo);
  init(other);
  const hook = join(repo, '.git', 'hooks', 'pre-commit');
  writeFileSync(hook, '#!/bin/sh\necho "hook refused" >&2\nexit 1\n');
  chmodSync(hook, 0o755);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Run `body` with `name` set in proofgate's own environment, as a caller inside a git hook would have it. */
async function withInherited<T>(name: string, value: string, body: () => Promise<T>): Promise<T> {
  process.env[name] = value;
  try {
    return await body();
  } finally {
    delete process.env[name];
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable('expected a rejection'),
    (error: unknown) => error,
  );
}

describe('runGit', () => {
  it('returns stdout bytes, stderr text and the exit code; stdin carries input', async () => {
    const result = await runGit(repo, ['hash-object', '--stdin'], { input: 'hello\n' });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.toString('utf8').trim()).toBe('ce013625030ba8dba906f756967f9e9ca394464a');
    expect(await gitText(repo, ['rev-parse', '--is-inside-work-tree'])).toBe('true');
  });

  it('accepts listed exit codes as answers', async () => {
    const result = await runGit(repo, ['config', '--get', 'no.such-key'], { okExitCodes: [1] });
    expect(result.exitCode).toBe(1);
  });

  it('turns a failure into one GIT error naming the command and git message', async () => {
    const error = await rejection(runGit(repo, ['rev-parse', '--verify', 'no-such-branch']));
    expect(isProofgateError(error, 'GIT')).toBe(true);
    expect((error as Error).message).toBe('git rev-parse --verify failed: fatal: Needed a single revision');
  });

  it('passes -c settings for one command', async () => {
    expect(await gitText(repo, ['config', '--get', 'core.quotepath'], { config: [['core.quotepath', 'false']] })).toBe('false');
  });

  it('lays extra environment over the base', async () => {
    const result = await runGit(repo, ['var', 'GIT_COMMITTER_IDENT'], { env: { GIT_COMMITTER_NAME: 'Robo', GIT_COMMITTER_EMAIL: 'robo@example.test' } });
    expect(result.stdout.toString('utf8')).toMatch(/^Robo <robo@example\.test> /);
  });
});

describe('runGit hardening (every call)', () => {
  it('ignores an inherited GIT_DIR, in plain and isolated mode', async () => {
    const gitDir = async (isolated: boolean) => gitText(repo, ['rev-parse', '--absolute-git-dir'], { isolated });
    await withInherited('GIT_DIR', join(other, '.git'), async () => {
      expect(await gitDir(false)).toBe(join(repo, '.git'));
      expect(await gitDir(true)).toBe(join(repo, '.git'));
    });
  });

  it('runs no hook, in plain and isolated mode', async () => {
    const commit = (isolated: boolean) => runGit(repo, ['commit', '--allow-empty', '--quiet', '-m', 'x'], { isolated });
    expect((await commit(false)).exitCode).toBe(0);
    expect((await commit(true)).exitCode).toBe(0);
  });

  it('runs no fsmonitor command planted in the repository config, and git sees no token', async () => {
    const marker = join(root, 'fsmonitor-ran.txt');
    execFileSync('git', ['-C', repo, 'config', 'core.fsmonitor', `env > ${marker}; false #`]);
    try {
      await withInherited('GITHUB_TOKEN', 'ghp_hosttesthosttesthosttest0123456789', async () => {
        await runGit(repo, ['status', '--porcelain']);
        const env = gitEnvironment();
        expect(env.GITHUB_TOKEN).toBeUndefined();
      });
      expect(existsSync(marker)).toBe(false);
    } finally {
      execFileSync('git', ['-C', repo, 'config', '--unset', 'core.fsmonitor']);
    }
  });

  it('builds its environment from an allow-list and fixed settings', async () => {
    await withInherited('AWS_SECRET_ACCESS_KEY', 'nope', async () => {
      const env = gitEnvironment({ GIT_AUTHOR_NAME: 'A' }, true);
      expect(env).toMatchObject({ GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1', LC_ALL: 'C', GIT_EDITOR: 'true', GIT_AUTHOR_NAME: 'A', GIT_CONFIG_KEY_0: 'core.hooksPath', GIT_CONFIG_VALUE_0: '/dev/null' });
      expect(env.AWS_SECRET_ACCESS_KEY).toBeUndefined();
      const keys = Array.from({ length: Number(env.GIT_CONFIG_COUNT) }, (_, i) => env[`GIT_CONFIG_KEY_${i}`]);
      expect(keys).toEqual(expect.arrayContaining(['core.fsmonitor', 'commit.gpgsign', 'tag.gpgsign', 'gc.auto', 'rerere.enabled']));
      const plainKeys = Array.from({ length: Number(gitEnvironment().GIT_CONFIG_COUNT) }, (_, i) => gitEnvironment()[`GIT_CONFIG_KEY_${i}`]);
      expect(plainKeys).toEqual(expect.arrayContaining(['core.hooksPath', 'core.fsmonitor', 'core.sshCommand', 'credential.helper']));
      expect(plainKeys).not.toContain('commit.gpgsign');
    });
  });
});
