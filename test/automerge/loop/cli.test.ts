import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalForge } from '../../../src/forge/local/index.js';
import { runCliAsync as runCli } from '../../cli/helpers.js';
import { makeSeededRepo, type TempRepo } from '../../forge/git-fixture.js';
import { CHECK_SCRIPT, MAINTAINER, repoConfig } from './local-support.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** What the data dir's store holds: every event and artifact of every namespace. */
function stored(data: string): { events: number; last: number; artifacts: number } {
  const db = new Database(join(data, 'proofgate.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const events = db.prepare('SELECT COUNT(*) AS n, COALESCE(MAX(position), 0) AS last FROM proofgate_events').get() as { n: number; last: number };
    const artifacts = db.prepare('SELECT COUNT(*) AS n FROM proofgate_artifacts').get() as { n: number };
    return { events: events.n, last: events.last, artifacts: artifacts.n };
  } finally {
    db.close();
  }
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A repository with the trusted config on main and one open change (id 1); `broken` makes its check fail.
 * The change is opened through the forge API (what `proofgate change open` calls; its CLI is tested in
 * test/forge/local-cli.test.ts): one CLI start less per test.
 */
async function repoWithChange(options: { broken?: boolean } = {}): Promise<{ repo: TempRepo; data: string }> {
  const repo = makeSeededRepo('proofgate-automerge-cli-', { 'README.md': '# cli\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() });
  cleanups.push(() => repo.cleanup());
  repo.commit('feature', { 'feature.txt': 'a feature\n', ...(options.broken === true ? { 'broken.txt': 'breaks the check\n' } : {}) }, 'add feature', 'main');
  const data = tempDir('proofgate-automerge-cli-data-');
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  try {
    expect((await opened.forge.openChange({ head: 'feature', base: 'main' })).id).toBe('1');
  } finally {
    await opened.close();
  }
  return { repo, data };
}

// Each test starts the built CLI several times (the demo runs a whole automerge session): limits for a loaded machine.
describe('proofgate automerge / demo (built CLI)', () => {
  it('proofgate automerge ID runs the loop to a merge, progress on stderr, the outcome on stdout', async () => {
    const { repo, data } = await repoWithChange();
    const head = repo.sha('feature');
    const result = await runCli(['automerge', '1', '--repo', repo.dir, '--data', data, '--json']);
    expect(result.status, result.stderr).toBe(0);
    const outcome = JSON.parse(result.stdout) as { outcome: string; head: string; mergeCommit: string; verdict: string };
    expect(outcome).toMatchObject({ outcome: 'merged', head, verdict: 'CONFIRMED' });
    expect(repo.sha('main')).toBe(outcome.mergeCommit);
    expect(result.stderr).toContain('[change 1] reviewing');
    expect(result.stderr).toContain('[change 1] merged');
  });

  it('proofgate change comment ID "/proofgate automerge" runs the same loop through the router and reports its outcome', async () => {
    const { repo, data } = await repoWithChange();
    const head = repo.sha('feature');
    const result = await runCli(['change', 'comment', '1', '/proofgate automerge', '--as', MAINTAINER, '--repo', repo.dir, '--data', data]);
    expect(result.status, result.stderr).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toMatch(new RegExp(`^comment \\S+ on change 1 by ${MAINTAINER}$`));
    expect(lines[1]).toBe(`change 1: merged head ${head.slice(0, 12)} as ${repo.sha('main')} (CONFIRMED, 0 repairs)`);
    expect(result.stderr).toContain('[change 1] merged');
    const shown = await runCli(['change', 'show', '1', '--repo', repo.dir, '--data', data, '--json']);
    expect((JSON.parse(shown.stdout) as { state: string }).state).toBe('merged');
  });

  it('the routed run exits as proofgate automerge does (3 blocked) and --json carries the outcome and the comment', async () => {
    const { repo, data } = await repoWithChange({ broken: true });
    const result = await runCli(['change', 'comment', '1', '/proofgate automerge', '--as', MAINTAINER, '--repo', repo.dir, '--data', data, '--json']);
    expect(result.status, result.stderr).toBe(3);
    const json = JSON.parse(result.stdout) as { change: string; outcome: string; reason: string; head: string; comment: { body: string; author: string } };
    expect(json).toMatchObject({ change: '1', outcome: 'blocked', head: repo.sha('feature'), comment: { body: '/proofgate automerge', author: MAINTAINER } });
    expect(json.reason).toContain('no agent-fix command');
  });

  it('a comment with no command is posted and printed as before, exit 0', async () => {
    const { repo, data } = await repoWithChange();
    const result = await runCli(['change', 'comment', '1', 'looks good to me', '--as', MAINTAINER, '--repo', repo.dir, '--data', data, '--json']);
    expect(result.status, result.stderr).toBe(0);
    const json = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(json).toMatchObject({ author: MAINTAINER, body: 'looks good to me' });
    expect(json.outcome).toBeUndefined();
  });

  it('proofgate automerge on a merged change reports the merge and posts nothing; on a closed change it fails and posts nothing', async () => {
    const { repo, data } = await repoWithChange();
    const first = await runCli(['automerge', '1', '--repo', repo.dir, '--data', data]);
    expect(first.status, first.stderr).toBe(0);
    const commentsOf = async (id: string) =>
      (JSON.parse((await runCli(['change', 'show', id, '--repo', repo.dir, '--data', data, '--json'])).stdout) as { comments: unknown[] }).comments.length;
    const before = await commentsOf('1');
    const again = await runCli(['automerge', '1', '--repo', repo.dir, '--data', data, '--json']);
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      change: '1',
      outcome: 'merged',
      head: repo.sha('feature'),
      mergeCommit: repo.sha('main'),
      verdict: 'CONFIRMED',
    });
    expect(again.stderr).toBe('');
    expect(await commentsOf('1')).toBe(before);

    repo.commit('other', { 'other.txt': 'other\n' }, 'other', 'main');
    expect((await runCli(['change', 'open', '--head', 'other', '--base', 'main', '--repo', repo.dir, '--data', data])).status).toBe(0);
    expect((await runCli(['change', 'close', '2', '--repo', repo.dir, '--data', data])).status).toBe(0);
    const closed = await runCli(['automerge', '2', '--repo', repo.dir, '--data', data]);
    expect(closed.status).toBe(1);
    expect(closed.stderr.trim().split('\n')).toEqual([
      'proofgate: change 2 is closed without merging; nothing to automerge (nothing was posted) [NOT_MERGEABLE]',
    ]);
    expect(await commentsOf('2')).toBe(0);
  });

  it('--data naming a regular file is one clear line, exit 1, for automerge and demo', async () => {
    const { repo } = await repoWithChange();
    const file = join(tempDir('proofgate-automerge-cli-file-'), 'regular');
    writeFileSync(file, 'a file\n');
    const automerge = await runCli(['automerge', '1', '--repo', repo.dir, '--data', file]);
    expect(automerge.status).toBe(1);
    expect(automerge.stderr.trim().split('\n')).toEqual([`proofgate: cannot use ${file} as a data directory: it is a file, not a directory [DATA_DIR]`]);
    const demo = await runCli(['demo', '--data', file]);
    expect(demo.status).toBe(1);
    expect(demo.stderr.trim().split('\n')).toEqual([
      `proofgate: cannot keep the demo's state in ${file}: it (or a path inside it) is a file, not a directory [DATA_DIR]`,
    ]);
  });

  it('a comment command from someone without write permission is refused and runs nothing', async () => {
    const { repo, data } = await repoWithChange();
    const result = await runCli(['change', 'comment', '1', '/proofgate automerge', '--as', 'Mallory', '--repo', repo.dir, '--data', data]);
    expect(result.status).toBe(0);
    expect(result.stderr).toContain('ignored "automerge" from Mallory');
    const shown = await runCli(['change', 'show', '1', '--repo', repo.dir, '--data', data, '--json']);
    expect((JSON.parse(shown.stdout) as { state: string }).state).toBe('open');
  });

  it("--replay COMMENT_ID processes a maintainer's /proofgate automerge again: the loop runs once more, the timeline says who asked", async () => {
    const { repo, data } = await repoWithChange({ broken: true });
    const first = await runCli(['change', 'comment', '1', '/proofgate automerge', '--as', MAINTAINER, '--repo', repo.dir, '--data', data, '--json']);
    expect(first.status, first.stderr).toBe(3);
    const blocked = JSON.parse(first.stdout) as { code: string; comment: { id: string } };
    // --json carries the reason code of the decision the loop ended on.
    expect(blocked.code).toBe('no-agent-fix');
    // The author fixes the branch; the ledger has processed the comment, so only a replay runs it again.
    const fixed = repo.commit('feature', { 'broken.txt': null }, 'remove broken.txt');
    const replayed = await runCli(['automerge', '1', '--replay', blocked.comment.id, '--repo', repo.dir, '--data', data, '--json']);
    expect(replayed.status, replayed.stderr).toBe(0);
    const outcome = JSON.parse(replayed.stdout) as { outcome: string; code: string; head: string; replayed: string; timeline: { text: string }[] };
    expect(outcome).toMatchObject({ outcome: 'merged', code: 'ready', head: fixed, replayed: blocked.comment.id });
    const operator = repo.git(['config', 'user.name']);
    const texts = outcome.timeline.map((entry) => entry.text);
    const replay = texts.indexOf(`${operator} replayed comment ${blocked.comment.id} by ${MAINTAINER}`);
    expect(replay).toBeGreaterThan(0);
    expect(texts.slice(replay + 1)).toContain(`${MAINTAINER}: /proofgate automerge`);
    expect(replayed.stderr).toContain(`replaying comment ${blocked.comment.id} by ${MAINTAINER}, asked by ${operator}`);
    // Nothing new was posted in the maintainer's name or the operator's: the one command comment is still the only one.
    const shown = JSON.parse((await runCli(['change', 'show', '1', '--repo', repo.dir, '--data', data, '--json'])).stdout) as {
      state: string;
      comments: { body: string }[];
    };
    expect(shown.state).toBe('merged');
    expect(shown.comments.filter((c) => c.body === '/proofgate automerge')).toHaveLength(1);
  });

  it("--replay of an unknown comment, a comment on another change, a stranger's command or a plain comment: one typed line, exit 1, nothing stored changes", async () => {
    const { repo, data } = await repoWithChange();
    repo.commit('other', { 'other.txt': 'other\n' }, 'other', 'main');
    const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
    let elsewhere: string;
    let stranger: string;
    let plain: string;
    try {
      expect((await opened.forge.openChange({ head: 'other', base: 'main' })).id).toBe('2');
      // Posted straight to the forge: none of them was routed.
      elsewhere = (await opened.forge.commentAs('2', '/proofgate automerge', MAINTAINER)).id;
      stranger = (await opened.forge.commentAs('1', '/proofgate automerge', 'Mallory')).id;
      plain = (await opened.forge.commentAs('1', 'looks good to me', MAINTAINER)).id;
    } finally {
      await opened.close();
    }
    const before = stored(data);
    const refs = repo.git(['for-each-ref', '--format=%(refname) %(objectname)']);
    const cases: [string, string][] = [
      [
        'cmt_nosuchcomment',
        'proofgate: change 1 has no comment cmt_nosuchcomment: only a comment on this change can be replayed (nothing was stored) [NOT_FOUND]',
      ],
      [elsewhere, `proofgate: change 1 has no comment ${elsewhere}: only a comment on this change can be replayed (nothing was stored) [NOT_FOUND]`],
      [
        stranger,
        `proofgate: comment ${stranger} on change 1 cannot be replayed: Mallory has read permission; only a command comment from someone with write permission can be (nothing was stored) [INVALID_INPUT]`,
      ],
      [plain, `proofgate: comment ${plain} on change 1 is not a proofgate command comment; nothing to replay (nothing was stored) [INVALID_INPUT]`],
    ];
    for (const [comment, line] of cases) {
      const result = await runCli(['automerge', '1', '--replay', comment, '--repo', repo.dir, '--data', data]);
      expect(result.status, result.stderr).toBe(1);
      expect(result.stderr.trim().split('\n')).toEqual([line]);
      expect(result.stdout).toBe('');
      expect(stored(data)).toEqual(before);
    }
    expect(repo.git(['for-each-ref', '--format=%(refname) %(objectname)'])).toBe(refs);
  });

  it('--help documents --replay', async () => {
    const help = await runCli(['automerge', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--replay <comment-id>');
    expect(help.stdout).toContain('write permission');
  });

  it('rejects a bad change id with a usage error', async () => {
    const result = await runCli(['automerge', 'abc']);
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('proofgate demo ends with the table: 3 merged (one clean, one rebased, one fixed), the secret blocked, one proof inconclusive, one proven', async () => {
    const cwd = tempDir('proofgate-demo-cwd-');
    // Six changes, each reviewed, checked and two of them proven, all jailed: minutes on a loaded 2-core machine.
    const result = await runCli(['demo'], { cwd, timeoutMs: 420_000 });
    expect(result.status, result.stderr).toBe(0);
    const rows = result.stdout.split('\n').filter((line) => /^\d+\s/.test(line) && !line.includes(' changes in '));
    expect(rows).toHaveLength(6);
    expect(rows.map((row) => / (merged|blocked) /.exec(row)?.[1])).toEqual(['merged', 'merged', 'merged', 'blocked', 'blocked', 'merged']);
    expect(rows[3]).toContain('REFUTED');
    // The proof scenario could not run on the moved module: inconclusive is never a pass, the review holds.
    expect(rows[4]).toContain('HOLD');
    expect(result.stderr).toContain('[change 5] proof-focused review of');
    expect(rows[5]).toContain('CONFIRMED');
    expect(result.stderr).toContain('[change 6] proof-focused review of');
    expect(result.stdout).toContain(join(cwd, '.proofgate', 'demo'));
    expect(result.stderr).toContain('resolved CHANGELOG.md');
    // The agent only edits files; proofgate makes the commit and pushes exactly that commit.
    const committed = /\[change 3\] repair: agent-fix changed files; proofgate committed them as ([0-9a-f]{12})\n/.exec(result.stderr)?.[1];
    expect(committed, result.stderr).toBeDefined();
    expect(result.stderr).toContain(`[change 3] repair (agent-fix) pushed ${committed ?? ''}\n`);
  }, 480_000);
});
