/**
 * Client mode (PROOFGATE_URL, PROOFGATE_TOKEN): the built CLI as separate
 * processes, talking to `proofgate serve --repo` on loopback under different
 * identities, compared with direct mode on an identical repository.
 */
import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalForge } from '../../src/forge/local/index.js';
import { served, tempDir, type Cleanups, type Served } from '../service/write-support.js';
import { runCliAsync, type CliResult } from './helpers.js';

const cleanups: Cleanups = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function client(setup: Served, token: string | null, args: readonly string[]): Promise<CliResult> {
  const cwd = tempDir(cleanups, 'proofgate-client-cwd-');
  return runCliAsync(args, {
    cwd,
    env: { PROOFGATE_URL: setup.service.url, PROOFGATE_TOKEN: token ?? '', PROOFGATE_DATA_DIR: '' },
  });
}

function direct(setup: Served, args: readonly string[]): Promise<CliResult> {
  return runCliAsync([...args, '--repo', setup.repo.dir, '--data', setup.data], { env: { PROOFGATE_URL: '', PROOFGATE_TOKEN: '' } });
}

/** What may differ between two runs: ids, times, durations, commit shas (the repositories' commits have their own times). */
function normal(text: string): string {
  return text
    .replace(/cmt_[0-9a-f]+/g, 'cmt_ID')
    .replace(/chk_[0-9a-f]+/g, 'chk_ID')
    .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'TIME')
    .replace(/\d+\.\ds/g, 'N.Ns')
    .replace(/\b[0-9a-f]{12}(?:[0-9a-f]{28}(?:[0-9a-f]{24})?)?\b/g, 'SHA');
}

function expectNoTokens(setup: Served, result: CliResult): void {
  for (const token of Object.values(setup.tokens)) {
    expect(result.stdout).not.toContain(token);
    expect(result.stderr).not.toContain(token);
  }
}

/** Change 1's progress lines, normalised; a `wait:` line says a check was still running when the loop looked, which depends on timing, not on the mode. */
function progressLines(text: string): string[] {
  return normal(text)
    .split('\n')
    .filter((line) => line.startsWith('[change 1] ') && !/^\[change 1\] wait: checks pending/.test(line));
}

describe('client mode', () => {
  it('prints what direct mode prints and exits as it does', async () => {
    const remote = await served(cleanups);
    const local = await served(cleanups, { serve: false });
    const alice = remote.tokens.alice;
    const steps: { args: string[]; direct?: string[] }[] = [
      { args: ['change', 'open', '--head', 'alice/feature', '--title', 'the feature'], direct: ['--as', 'alice'] },
      { args: ['change', 'list'] },
      { args: ['change', 'list', '--state', 'closed', '--json'] },
      { args: ['change', 'comment', '1', 'hello <b>there</b>'], direct: ['--as', 'alice'] },
      { args: ['change', 'show', '1'] },
      { args: ['checks', 'run', '1'] },
      { args: ['change', 'show', '9'] },
      { args: ['change', 'show', 'abc', '--json'] },
      { args: ['checks', 'run', '9'] },
      { args: ['change', 'comment', '9', 'x'], direct: ['--as', 'alice'] },
      { args: ['change', 'open', '--head', 'main'], direct: ['--as', 'alice'] },
      { args: ['change', 'close', '1'] },
      { args: ['change', 'close', '1', '--json'] },
      { args: ['automerge', '1'] },
    ];
    for (const step of steps) {
      const viaServer = await client(remote, alice, step.args);
      const viaDirect = await direct(local, [...step.args, ...(step.direct ?? [])]);
      const name = step.args.join(' ');
      expect(viaServer.status, `${name}: ${viaServer.stderr}`).toBe(viaDirect.status);
      expect(normal(viaServer.stdout), name).toBe(normal(viaDirect.stdout));
      if (viaDirect.status !== 0) {
        const code = (text: string) => /\[([A-Z_]+)\]\s*$/.exec(text.trim())?.[1];
        expect(code(viaServer.stderr), name).toBe(code(viaDirect.stderr));
      }
      expectNoTokens(remote, viaServer);
    }
  });

  it('two identities: the one without write cannot start automerge, nobody posts as proofgate, --as is refused', async () => {
    const setup = await served(cleanups, { openChange: true, broken: true });
    const bob = await client(setup, setup.tokens.bob, ['automerge', '1']);
    expect(bob.status).toBe(1);
    expect(bob.stderr).toContain('permission triage');
    expect(bob.stderr).toContain('[READ_ONLY]');
    const carol = await client(setup, setup.tokens.carol, ['change', 'comment', '1', '/proofgate automerge']);
    expect(carol.status).toBe(1);
    expect(carol.stderr).toContain('[READ_ONLY]');
    const as = await client(setup, setup.tokens.alice, ['change', 'comment', '1', 'hi', '--as', 'proofgate']);
    expect(as.status).toBe(2);
    const none = await client(setup, null, ['change', 'comment', '1', 'hi']);
    expect(none.status).toBe(1);
    expect(none.stderr).toContain('[FORGE_AUTH]');
    const bogus = await client(setup, `pgt_${'Z'.repeat(43)}`, ['change', 'comment', '1', 'hi']);
    expect(bogus.status).toBe(1);
    expect(bogus.stderr).not.toContain('Z'.repeat(43));
    for (const result of [bob, carol, as, none]) expectNoTokens(setup, result);

    const opened = await openLocalForge({ repoDir: setup.repo.dir, dataDir: setup.data });
    try {
      const comments = (await opened.forge.store.requireChange('1')).comments;
      expect(comments.map((comment) => comment.author)).toEqual(['bob']);
    } finally {
      await opened.close();
    }

    // The writer starts it and follows it to its end: the check fails, so it blocks (exit 3), as in direct mode.
    const local = await served(cleanups, { openChange: true, broken: true, serve: false });
    const alice = await client(setup, setup.tokens.alice, ['automerge', '1']);
    const operator = await direct(local, ['automerge', '1']);
    expect(alice.stdout).toMatch(/^change 1: blocked/);
    expect(alice.status).toBe(3);
    expect(normal(alice.stdout)).toBe(normal(operator.stdout));
    expectNoTokens(setup, alice);
    // A command comment is followed to the end of the job it starts, like `change comment` in direct mode.
    const commented = await client(setup, setup.tokens.alice, ['change', 'comment', '1', '/proofgate automerge']);
    const commentedDirect = await direct(local, ['change', 'comment', '1', '/proofgate automerge', '--as', 'alice']);
    expect(commented.status).toBe(3);
    expect(commented.status).toBe(commentedDirect.status);
    expect(normal(commented.stdout)).toBe(normal(commentedDirect.stdout));
    // Its progress lines too, streamed by the server.
    expect(progressLines(commented.stderr).length).toBeGreaterThan(0);
    expect(progressLines(commented.stderr)).toEqual(progressLines(commentedDirect.stderr));
    expectNoTokens(setup, commented);
  });

  it('automerge ID: the same progress lines on stderr, in the same order, the same outcome and exit code as direct mode', async () => {
    for (const broken of [false, true]) {
      const remote = await served(cleanups, { openChange: true, broken });
      const local = await served(cleanups, { openChange: true, broken, serve: false });
      // Direct mode acts as the local git identity: alice, as the client's token.
      spawnSync('git', ['config', 'user.name', 'alice'], { cwd: local.repo.dir });
      const viaServer = await client(remote, remote.tokens.alice, ['automerge', '1']);
      const viaDirect = await direct(local, ['automerge', '1']);
      expect(viaServer.status).toBe(viaDirect.status);
      expect(viaServer.status).toBe(broken ? 3 : 0);
      const progress = progressLines;
      const rest = (text: string): string[] =>
        normal(text)
          .split('\n')
          .filter((line) => !line.startsWith('[change 1] '));
      expect(progress(viaDirect.stderr).length).toBeGreaterThan(2);
      expect(progress(viaServer.stderr)).toEqual(progress(viaDirect.stderr));
      expect(rest(viaServer.stderr)).toEqual(rest(viaDirect.stderr));
      expect(normal(viaServer.stdout)).toBe(normal(viaDirect.stdout));
      expectNoTokens(remote, viaServer);
    }
  });
});
