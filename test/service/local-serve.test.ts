/**
 * `proofgate serve --repo DIR` as a real process (the built CLI) on a real
 * temporary git repository: comments posted by other processes are routed
 * once, ref moves made outside proofgate wake a change, SIGTERM ends the
 * process with exit 0, two services on one repository merge a change once,
 * and a change whose process was killed while it waited in the merge queue
 * lands through the service.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalAutomerge } from '../../src/automerge/loop/index.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { parseRefList, refMoves, refWakes } from '../../src/service/index.js';
import { CLI, runCliAsync } from '../cli/helpers.js';
import { makeSeededRepo, type TempRepo } from '../forge/git-fixture.js';
import { CHECK_SCRIPT, MAINTAINER, repoConfig } from '../automerge/loop/local-support.js';
import { startTestProcess, stopTestProcess } from '../support/processes.js';
import { until, within } from '../support/wait.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A repository with the trusted config on main and one open change (id 1) from `feature`; `broken` makes its check fail. */
async function repoWithChange(options: { broken?: boolean } = {}): Promise<{ repo: TempRepo; data: string; base: string }> {
  const repo = makeSeededRepo('proofgate-serve-', { 'README.md': '# serve\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() });
  cleanups.push(() => repo.cleanup());
  repo.commit('feature', { 'feature.txt': 'a feature\n', ...(options.broken === true ? { 'broken.txt': 'breaks the check\n' } : {}) }, 'add feature', 'main');
  const data = tempDir('proofgate-serve-data-');
  await withForge(repo, data, async (forge) => {
    expect((await forge.openChange({ head: 'feature', base: 'main', author: 'Casey Contributor' })).id).toBe('1');
  });
  return { repo, data, base: repo.sha('main') };
}

async function withForge<T>(repo: TempRepo, data: string, action: (forge: Awaited<ReturnType<typeof openLocalForge>>['forge']) => Promise<T>): Promise<T> {
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  try {
    return await action(opened.forge);
  } finally {
    await opened.close();
  }
}

/** Post a comment the way another process does, without routing it (as an agent using the library would). */
function postComment(repo: TempRepo, data: string, body: string, author: string): Promise<string> {
  return withForge(repo, data, async (forge) => (await forge.commentAs('1', body, author)).id);
}

/** The automerge steps of change 1 named `step` for one comment. */
async function stepsFor(repo: TempRepo, data: string, step: string, comment: string): Promise<number> {
  return withForge(repo, data, async (forge) => {
    const automerge = await openLocalAutomerge({ forge, dataDir: data });
    try {
      const { steps } = await automerge.env.store.load('1');
      return steps.filter((entry) => entry.step === step && (entry as { comment?: unknown }).comment === comment).length;
    } finally {
      await automerge.close();
    }
  });
}

type LogLine = Record<string, unknown> & { msg: string };

interface Served {
  readonly child: ChildProcess;
  readonly lines: LogLine[];
  /** Every stderr line, raw. */
  readonly raw: () => string;
  readonly url: string;
  /** Resolves with the first log line (past or future) that `match` accepts. */
  waitFor(match: (line: LogLine) => boolean, what: string): Promise<LogLine>;
  /** SIGTERM, then the exit code. */
  terminate(): Promise<number | null>;
}

async function serve(repo: TempRepo, data: string, extra: readonly string[] = []): Promise<Served> {
  const child = startTestProcess(process.execPath, [CLI, 'serve', '--repo', repo.dir, '--data', data, '--port', '0', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  let text = '';
  let pending = '';
  const waiters = new Set<() => void>();
  child.stderr?.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    pending += chunk.toString('utf8');
    const complete = pending.split('\n');
    pending = complete.pop() ?? '';
    for (const line of complete) {
      try {
        lines.push(JSON.parse(line) as LogLine);
      } catch {
        lines.push({ msg: '(not JSON)', line });
      }
    }
    for (const wake of [...waiters]) wake();
  });
  // 'close', not 'exit': the process's output is read to its end before the exit code counts.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const waitFor = (match: (line: LogLine) => boolean, what: string): Promise<LogLine> =>
    within(
      new Promise<LogLine>((resolve, reject) => {
        const look = (): void => {
          const found = lines.find(match);
          if (found !== undefined) {
            waiters.delete(look);
            resolve(found);
          }
        };
        waiters.add(look);
        void exited.then(() => {
          look();
          if (waiters.has(look)) reject(new Error(`serve exited before: ${what}\n${text}`));
        });
        look();
      }),
      `serve: ${what}\n${text}`,
    );
  const listening = await waitFor((line) => line.msg === 'listening', 'listening');
  return {
    child,
    lines,
    raw: () => text,
    url: listening.url as string,
    waitFor,
    async terminate() {
      child.kill('SIGTERM');
      return within(exited, 'serve ends after SIGTERM');
    },
  };
}

const merges = (repo: TempRepo, base: string): number => Number(repo.git(['rev-list', '--count', `${base}..main`]));

describe('refMoves and refWakes (pure)', () => {
  const a = 'a'.repeat(40);
  const b = 'b'.repeat(40);
  it('finds created, moved and deleted refs and maps them onto the open changes', () => {
    const before = parseRefList(`${a} refs/heads/main\n${a} refs/heads/feature\n${a} refs/heads/gone\n`);
    const after = parseRefList(`${b} refs/heads/main\n${a} refs/heads/feature\n${b} refs/heads/new\n`);
    const moves = refMoves(before, after);
    expect(moves).toEqual([
      { ref: 'refs/heads/gone', before: a, after: null },
      { ref: 'refs/heads/main', before: a, after: b },
      { ref: 'refs/heads/new', before: null, after: b },
    ]);
    const open = [
      { changeId: '1', headRef: 'new', baseRef: 'main' },
      { changeId: '2', headRef: 'gone', baseRef: 'main' },
    ];
    expect(refWakes(moves, open)).toEqual([
      { kind: 'base', ref: 'refs/heads/main', before: a, after: b, changeIds: ['1', '2'] },
      { kind: 'head', changeId: '1', ref: 'refs/heads/new', headSha: b },
    ]);
    expect(refMoves(after, after)).toEqual([]);
    expect(parseRefList('garbage\nnot a sha refs/heads/x\n')).toEqual(new Map());
  });
});

// Each test starts the built CLI and runs whole automerge sessions: limits for a loaded machine.
describe('proofgate serve --repo (built CLI)', () => {
  it('merges a change when another process posts /proofgate automerge; health answers; SIGTERM ends it with 0', async () => {
    const { repo, data, base } = await repoWithChange();
    const served = await serve(repo, data);
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${served.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${served.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${served.url}/webhooks`, { method: 'POST', body: '{}' })).status).toBe(404);

    const head = repo.sha('feature');
    const comment = await postComment(repo, data, '/proofgate automerge', MAINTAINER);
    const ended = await served.waitFor((line) => line.msg === 'job ended' && line.changeId === '1', 'the job of change 1 ends');
    expect(ended).toMatchObject({ outcome: 'merged', head });
    expect(repo.sha('main')).toBe(ended.mergeCommit);
    expect(merges(repo, base)).toBe(1);
    expect(served.lines.some((line) => line.msg === 'progress' && line.changeId === '1' && typeof line.text === 'string')).toBe(true);
    expect(served.lines.find((line) => line.msg === 'comment routed' && line.commentId === comment)).toMatchObject({ ran: 1, dispatched: true });
    expect((await fetch(`${served.url}/healthz`)).status).toBe(200);

    expect(await served.terminate()).toBe(0);
    expect(served.lines.map((line) => line.msg)).toContain('stopped');
    for (const line of served.raw().trimEnd().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it('a comment routed by the CLI that posted it and by serve runs its command once', async () => {
    const { repo, data, base } = await repoWithChange();
    const served = await serve(repo, data);
    const posted = await runCliAsync(['change', 'comment', '1', '/proofgate automerge', '--as', MAINTAINER, '--repo', repo.dir, '--data', data, '--json']);
    expect(posted.status, posted.stderr).toBe(0);
    const document = JSON.parse(posted.stdout) as { comment?: { id: string }; id?: string };
    const comment = document.comment?.id ?? document.id ?? '';
    expect(comment).not.toBe('');
    // serve has seen the comment too: its command was applied by one of the two processes only.
    const routed = await served.waitFor((line) => line.msg === 'comment routed' && line.commentId === comment, 'serve routes the comment');
    await until(() => merges(repo, base) === 1, 'change 1 merges');
    expect(await stepsFor(repo, data, 'command-run', comment)).toBe(1);
    expect(await stepsFor(repo, data, 'command-skipped', comment)).toBe(1);
    // Whichever process came second skipped it as a redelivery.
    if (routed.ran === 0) expect(routed.skipped).toBe('redelivery');
    expect(await served.terminate()).toBe(0);
    expect(merges(repo, base)).toBe(1);
  });

  it('a push made outside proofgate to a blocked change wakes it, and it merges', async () => {
    const { repo, data, base } = await repoWithChange({ broken: true });
    const served = await serve(repo, data);
    await postComment(repo, data, '/proofgate automerge', MAINTAINER);
    const blocked = await served.waitFor((line) => line.msg === 'job ended' && line.changeId === '1', 'the first job of change 1 ends');
    expect(blocked.outcome).toBe('blocked');
    // A plain git commit on the change's branch: the local forge records no event for it.
    const fixed = repo.commit('feature', { 'broken.txt': null }, 'fix the check');
    await served.waitFor((line) => line.msg === 'ref moved' && line.ref === 'refs/heads/feature' && line.after === fixed, 'serve sees the push');
    const merged = await served.waitFor((line) => line.msg === 'job ended' && line.changeId === '1' && line.outcome === 'merged', 'change 1 merges');
    expect(merged.head).toBe(fixed);
    expect(merges(repo, base)).toBe(1);
    expect(await served.terminate()).toBe(0);
  });

  it('attack: a stranger posting /proofgate automerge changes nothing, and newlines and escapes in a comment keep every log line JSON', async () => {
    const { repo, data, base } = await repoWithChange();
    const served = await serve(repo, data);
    const author = 'Mallory\u001b[2J\u001b]0;owned\u0007';
    const comment = await postComment(repo, data, '/proofgate automerge\n\u001b[31m/proofgate approve\r\n\u001b]8;;http://x\u0007link', author);
    const routed = await served.waitFor((line) => line.msg === 'comment routed' && line.commentId === comment, 'serve routes the comment');
    expect(routed).toMatchObject({ ran: 0, dispatched: false, author });
    expect((routed.refused as number) > 0).toBe(true);
    expect(served.lines.some((line) => line.msg === 'job started')).toBe(false);
    expect(repo.sha('main')).toBe(base);
    expect(await withForge(repo, data, async (forge) => (await forge.snapshot('1')).state)).toBe('open');
    expect(await served.terminate()).toBe(0);
    const raw = served.raw();
    // No control character other than the line feeds between lines reaches the log.
    expect([...raw].filter((char) => char !== '\n' && (char.codePointAt(0) ?? 0) < 0x20)).toEqual([]);
    for (const line of raw.trimEnd().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it('a change whose own process was killed while it waited in the merge queue lands through serve, with nobody asked', async () => {
    const { repo, data, base } = await repoWithChange();
    const at = ['--repo', repo.dir, '--data', data];
    expect((await runCliAsync(['queue', 'pause', '--as', MAINTAINER, ...at])).status).toBe(0);
    // `proofgate automerge 1` in a process of its own: change 1 is queued and its process waits, the queue being paused.
    const waiting = startTestProcess(process.execPath, [CLI, 'automerge', '1', ...at], { stdio: ['ignore', 'ignore', 'pipe'] });
    let progress = '';
    waiting.stderr?.on('data', (chunk: Buffer) => (progress += chunk.toString('utf8')));
    await until(() => progress.includes('in the merge queue of main'), 'change 1 waits in the paused queue');
    // serve, started now, finds change 1's automerge on: its job of it ends at once, that process holding the change.
    const served = await serve(repo, data);
    expect(await served.waitFor((line) => line.msg === 'job ended' && line.changeId === '1', 'serve leaves change 1 to its process')).toMatchObject({
      outcome: 'held-elsewhere',
    });
    await stopTestProcess(waiting);
    expect(waiting.signalCode).toBe('SIGKILL');
    // Its process is gone: resuming the queue is all that happens.
    expect((await runCliAsync(['queue', 'resume', '--as', MAINTAINER, ...at])).status).toBe(0);
    const merged = await served.waitFor(
      (line) => line.msg === 'job ended' && line.changeId === '1' && line.outcome !== 'held-elsewhere',
      'serve runs the queue and change 1 lands',
    );
    expect(merged.outcome).toBe('merged');
    expect(served.lines.filter((line) => line.msg === 'merge queue unattended: its first change runs it').map((line) => line.changeId)).toEqual(['1']);
    expect(merges(repo, base)).toBe(1);
    expect(await served.terminate()).toBe(0);
  });

  it('two services on one repository: both route the comment, the change merges once', async () => {
    const { repo, data, base } = await repoWithChange();
    const [first, second] = await Promise.all([serve(repo, data), serve(repo, data)]);
    const comment = await postComment(repo, data, '/proofgate automerge', MAINTAINER);
    const routed = await Promise.all(
      [first, second].map((served) => served.waitFor((line) => line.msg === 'comment routed' && line.commentId === comment, 'both route the comment')),
    );
    expect(routed.map((line) => line.ran).sort()).toEqual([0, 1]);
    const winner = [first, second][routed.findIndex((line) => line.ran === 1)] as Served;
    await winner.waitFor((line) => line.msg === 'job ended' && line.changeId === '1' && line.outcome === 'merged', 'the winner records the merge');
    expect(await stepsFor(repo, data, 'command-run', comment)).toBe(1);
    expect(await Promise.all([first.terminate(), second.terminate()])).toEqual([0, 0]);
    expect(merges(repo, base)).toBe(1);
    const mergedBy = [first, second].map((served) => served.lines.filter((line) => line.msg === 'job ended' && line.outcome === 'merged').length);
    expect(mergedBy.reduce((sum, n) => sum + n, 0)).toBe(1);
  });

  it('SIGTERM during a running job: the job is interrupted after the grace, its lease released, exit 0 once its check run ended', async () => {
    const hang =
      "import { existsSync } from 'node:fs';\nif (existsSync('hang.txt')) await new Promise(() => setInterval(() => {}, 1000));\nconsole.log('ok');\n";
    // ChangeJobs.close waits for the check runs an interrupted loop leaves running (nothing cancels them): this check ends at its timeout.
    const config = repoConfig().replace('    run: node check.mjs', '    run: node check.mjs\n    timeoutSeconds: 3');
    expect(config).toContain('timeoutSeconds: 3');
    const repo = makeSeededRepo('proofgate-serve-', { 'README.md': '# serve\n', 'check.mjs': hang, '.proofgate.yml': config });
    cleanups.push(() => repo.cleanup());
    repo.commit('feature', { 'hang.txt': 'the check never ends\n' }, 'hang', 'main');
    const data = tempDir('proofgate-serve-data-');
    await withForge(repo, data, async (forge) => forge.openChange({ head: 'feature', base: 'main', author: 'Casey Contributor' }));
    const served = await serve(repo, data, ['--grace-seconds', '0']);
    await postComment(repo, data, '/proofgate automerge', MAINTAINER);
    await served.waitFor((line) => line.msg === 'job started' && line.changeId === '1', 'the job starts');
    await served.waitFor((line) => line.msg === 'progress' && String(line.text).startsWith('running'), 'the check runs');
    expect(await served.terminate()).toBe(0);
    expect(served.lines.find((line) => line.msg === 'job ended' && line.changeId === '1')).toMatchObject({ outcome: 'interrupted' });
    const lease = await withForge(repo, data, async (forge) => {
      const automerge = await openLocalAutomerge({ forge, dataDir: data });
      try {
        return (await automerge.env.store.load('1')).lease;
      } finally {
        await automerge.close();
      }
    });
    expect(lease?.released).toBe(true);
  });
});

describe('proofgate serve: usage', () => {
  it('without --repo and without GitHub settings: one usage line (exit 2); a bad --grace-seconds: one usage line; --help tells both ways', async () => {
    const bare = await runCliAsync(['serve']);
    expect(bare.status).toBe(2);
    expect(bare.stderr.trim().split('\n')).toEqual([
      'proofgate: proofgate serve needs the PROOFGATE_GITHUB_* settings (a GitHub App: see docs/service.md), or --repo DIR to serve a local repository [USAGE]',
    ]);
    const grace = await runCliAsync(['serve', '--repo', '.', '--grace-seconds', 'soon']);
    expect(grace.status).toBe(2);
    expect(grace.stderr.trim().split('\n')).toEqual(['proofgate: --grace-seconds must be an integer from 0 to 3600 [USAGE]']);
    const help = await runCliAsync(['serve', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('proofgate serve --repo DIR     one local repository');
    expect(help.stdout).toContain('proofgate serve                a GitHub App');
    expect(help.stdout).toContain('--database-url <url>');
    expect(help.stdout).toContain('--workers <n>');
  });
});
