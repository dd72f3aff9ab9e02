/**
 * Attacks beyond issue 10's list, on the jail and the flows: symlinks out of
 * the job tree, writes through /proc, the host's loopback, filling /tmp, a
 * `.git` file or a submodule in the head tree, racing the head ref, the repair
 * gate and agent-fix running head code, reviewers printing huge or malformed
 * results, and terminal escapes or forged lines reaching the CLI's output.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { payload, type Action } from './payloads.js';
import {
  attackFixture,
  cleanupFixtures,
  expectRepoUnchanged,
  filesContaining,
  HONEST_CHECK,
  jailSkipReason,
  repoState,
  runCliAsync,
  survivors,
  trustedConfig,
  type Entry,
  type Fixture,
} from './support.js';

afterEach(cleanupFixtures);

const skip = await jailSkipReason();
if (skip !== null) console.warn(`test/attacks/beyond: ${skip}`);

function checkLog(fx: Fixture): string {
  const log = fx.cli(['checks', 'log', '1', 'test']);
  return log.status === 0 ? log.stdout : '';
}

/** main with the standard config (or `config`), feature = `entries` with check.mjs replaced by a payload doing `actions`. */
function checkAttack(
  actions: readonly Action[],
  entries: readonly Entry[] = [],
  config = trustedConfig(),
  extra: Partial<Parameters<typeof payload>[0]> = {},
): Fixture {
  const fx = attackFixture({ '.proofgate.yml': config, 'check.mjs': HONEST_CHECK, 'README.md': '# target\n' });
  const evil = payload({ repoDir: fx.repo.dir, canary: fx.canary('hit'), token: fx.token, ...extra }, actions);
  fx.commit('feature', [{ path: 'check.mjs', content: evil }, ...entries], 'innocent');
  const opened = fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']);
  expect(opened.status, opened.stderr).toBe(0);
  return fx;
}

describe.skipIf(skip !== null)('the job tree and the jail', () => {
  it('symlinks in the head to /etc/shadow, a file in the data dir and .git/config read nothing of the host', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK });
    const planted = `planted-${fx.token}-value`;
    expect(fx.cli(['change', 'list']).status).toBe(0); // creates the data dir
    writeFileSync(join(fx.dataDir, 'planted-secret'), `${planted}\n`);
    const shadowRoot =
      readFileSync('/etc/shadow', 'utf8')
        .split('\n')
        .find((line) => line.startsWith('root:')) ?? 'root:';
    const evil = payload(
      { repoDir: fx.repo.dir, canary: fx.canary('hit'), token: fx.token, readPaths: ['links/shadow', 'links/data', 'links/config', '/etc/shadow'] },
      ['read-paths'],
    );
    fx.commit('feature', [
      { path: 'check.mjs', content: evil },
      { path: 'links/shadow', mode: '120000', content: '/etc/shadow' },
      { path: 'links/data', mode: '120000', content: join(fx.dataDir, 'planted-secret') },
      { path: 'links/config', mode: '120000', content: join(fx.gitDir, 'config') },
    ]);
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    const log = checkLog(fx);
    expect(log, 'the check did not run').toContain('ok');
    expect(log.includes(planted), 'read the data dir through a symlink').toBe(false);
    expect(log.includes(shadowRoot), 'read /etc/shadow').toBe(false);
    expect(log.includes('[user]'), 'read .git/config').toBe(false);
    expect(existsSync(fx.canary('hit'))).toBe(false);
    expectRepoUnchanged(fx, before);
  });

  it('a trusted lane that quotes the changed files reads a head symlink to the data dir as a dangling link, and stores nothing of it', () => {
    const quoting = `import { readFileSync, writeFileSync } from 'node:fs';
const request = JSON.parse(readFileSync(0, 'utf8'));
let quoted = '';
for (const path of ['notes.txt']) { try { quoted += readFileSync(path, 'utf8'); } catch (error) { quoted += 'unreadable ' + error.code; } }
const evidence = process.env.PROOFGATE_EVIDENCE_PATH;
writeFileSync(evidence, 'quoted: ' + quoted + '\\n');
process.stdout.write(JSON.stringify({ schema: 'review-lane-result.v1', lane_id: process.env.PROOFGATE_LANE_ID, family: process.env.PROOFGATE_REVIEW_FAMILY,
  context_id: process.env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: request.nonce, read_only: true, evidence_path: evidence, findings: [], disposition: 'CONFIRMED' }));
`;
    const fx = attackFixture({
      '.proofgate.yml': trustedConfig({ checks: 'checks: []', lanes: '    - { id: quote, family: quote, command: ["node", "tools/quote.mjs"] }' }),
      'tools/quote.mjs': quoting,
    });
    expect(fx.cli(['change', 'list']).status).toBe(0);
    const planted = `planted-${fx.token}-value`;
    const plantedPath = join(fx.dataDir, 'planted-secret');
    writeFileSync(plantedPath, `${planted}\n`);
    fx.commit('feature', [{ path: 'notes.txt', mode: '120000', content: plantedPath }]);
    fx.cli(['review', '--base', 'main', '--head', 'feature']);
    expect(filesContaining([fx.dataDir], planted).filter((path) => path !== plantedPath)).toEqual([]);
  });

  it("writes through /proc/self/root, /proc/1/root and the parent's root reach no host path", () => {
    const fx = checkAttack(['proc-escape']);
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    expect(checkLog(fx)).not.toContain('ATTACK');
    expect(existsSync(fx.canary('hit'))).toBe(false);
    expectRepoUnchanged(fx, before);
  });

  it("a check that reads its environment sees none of proofgate's own: /proc/1/environ is bwrap's minimal one", () => {
    const fx = checkAttack(['read-env']);
    const marker = `PROOFGATE_ATTACK_MARKER_${fx.token}`;
    fx.cli(['checks', 'run', '1'], { [marker]: 'visible' });
    const log = checkLog(fx);
    expect(log, 'the check did not run').toContain('ok');
    expect(log.includes(marker), "proofgate's environment reached the check").toBe(false);
  });

  it.each([[false], [true]])('the host loopback is unreachable from a check (network: %s)', async (network) => {
    const received: string[] = [];
    const sockets: Socket[] = [];
    const server = createServer((socket) => {
      sockets.push(socket);
      socket.on('data', (chunk) => received.push(String(chunk)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const checks = ['checks:', '  - name: test', '    run: node check.mjs', ...(network ? ['    network: true'] : [])].join('\n');
      const fx = checkAttack(['connect-host'], [], trustedConfig({ checks }), { port });
      const run = await runCliAsync(['checks', 'run', '1', '--repo', fx.repo.dir]);
      expect(run.stderr).not.toContain('[CONFIG]');
      expect(checkLog(fx), 'the check did not run').toContain('ok');
      expect(sockets.length, `the check connected to 127.0.0.1:${port}`).toBe(0);
      expect(received).toEqual([]);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("a check that fills /tmp writes into its own size-limited /tmp, never the host's", () => {
    const fx = checkAttack(['fill-tmp']);
    fx.cli(['checks', 'run', '1']);
    expect(existsSync(`/tmp/fill-${fx.token}`), 'the check wrote into the host /tmp').toBe(false);
    const log = checkLog(fx);
    expect(log, 'the check did not run').toContain('FILL');
    expect(log).toMatch(/FILL stopped: (ENOSPC|EFBIG|EDQUOT)/);
  });

  it('a check that moves the head ref (racing the merge) leaves every ref where it was', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK });
    const other = fx.commit('unreviewed', [{ path: 'late.txt', content: 'pushed during the check\n' }]);
    fx.commit('feature', [
      { path: 'check.mjs', content: payload({ repoDir: fx.repo.dir, canary: fx.canary('hit'), token: fx.token, target: other }, ['move-head']) },
    ]);
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    expectRepoUnchanged(fx, before);
  });
});

/** A tree built with mktree (git's index refuses a `.git` entry; mktree does not). */
function mktree(fx: Fixture, entries: ReadonlyArray<{ mode: string; type: 'blob' | 'tree' | 'commit'; sha: string; name: string }>): string {
  return execFileSync('git', ['-C', fx.repo.dir, 'mktree'], {
    input: entries.map((e) => `${e.mode} ${e.type} ${e.sha}\t${e.name}`).join('\n') + '\n',
    encoding: 'utf8',
  }).trim();
}

function blob(fx: Fixture, content: string): string {
  return execFileSync('git', ['-C', fx.repo.dir, 'hash-object', '-w', '--stdin'], { input: content, encoding: 'utf8' }).trim();
}

describe.skipIf(skip !== null)('git metadata in the head tree', () => {
  it('a `.git` file pointing at an in-tree git dir with core.fsmonitor and hooks runs none of them, in checks, review or automerge', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ extra: 'automerge: { expectChecks: true }' }), 'check.mjs': HONEST_CHECK });
    const touch = `echo ran >> ${fx.canary('hit')}`;
    const hook = blob(fx, `#!/bin/sh\n${touch}\n`);
    const empty = blob(fx, '');
    const evilGit = mktree(fx, [
      { mode: '100644', type: 'blob', sha: blob(fx, 'ref: refs/heads/main\n'), name: 'HEAD' },
      {
        mode: '100644',
        type: 'blob',
        sha: blob(
          fx,
          `[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "${touch}; false"\n\thooksPath = hooks\n\tpager = ${touch}\n[diff]\n\texternal = ${touch}\n`,
        ),
        name: 'config',
      },
      {
        mode: '040000',
        type: 'tree',
        sha: mktree(fx, [
          { mode: '100755', type: 'blob', sha: hook, name: 'post-checkout' },
          { mode: '100755', type: 'blob', sha: hook, name: 'pre-commit' },
        ]),
        name: 'hooks',
      },
      { mode: '040000', type: 'tree', sha: mktree(fx, [{ mode: '100644', type: 'blob', sha: empty, name: '.keep' }]), name: 'objects' },
      {
        mode: '040000',
        type: 'tree',
        sha: mktree(fx, [{ mode: '040000', type: 'tree', sha: mktree(fx, [{ mode: '100644', type: 'blob', sha: empty, name: '.keep' }]), name: 'heads' }]),
        name: 'refs',
      },
    ]);
    const mainTree = fx.repo.git(['rev-parse', 'main^{tree}']);
    const mainEntries = fx.repo
      .git(['ls-tree', mainTree])
      .split('\n')
      .map((line) => {
        const [meta = '', name = ''] = line.split('\t');
        const [mode = '', type = '', sha = ''] = meta.split(' ');
        return { mode, type: type as 'blob', sha, name };
      });
    const check = blob(
      fx,
      "import { execFileSync } from 'node:child_process';\ntry { execFileSync('git', ['status'], { stdio: 'inherit' }); } catch {}\nconsole.log('ok');\n",
    );
    const tree = mktree(fx, [
      ...mainEntries.filter((entry) => entry.name !== 'check.mjs'),
      { mode: '100644', type: 'blob', sha: check, name: 'check.mjs' },
      { mode: '100644', type: 'blob', sha: blob(fx, 'gitdir: evilgit\n'), name: '.git' },
      { mode: '040000', type: 'tree', sha: evilGit, name: 'evilgit' },
    ]);
    const commit = fx.repo.git(['commit-tree', tree, '-p', 'main', '-m', 'add tooling']);
    fx.repo.git(['update-ref', 'refs/heads/feature', commit]);
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    fx.cli(['review', '--base', 'main', '--head', 'feature']);
    fx.cli(['automerge', '1']);
    expect(existsSync(fx.canary('hit')), 'a git program named by the head ran outside the jail').toBe(false);
    expect(fx.repo.sha('main')).toBe(before.main);
  });

  it('a submodule whose url is an ext:: command is never fetched (checks, review, automerge)', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig(), 'check.mjs': HONEST_CHECK });
    const gitmodules = `[submodule "vendor/lib"]\n\tpath = vendor/lib\n\turl = ext::sh -c touch% ${fx.canary('hit')}\n`;
    fx.commit('feature', [
      { path: '.gitmodules', content: gitmodules },
      { path: 'vendor/lib', mode: '160000', content: fx.repo.sha('main') },
      { path: 'secrets/x.key', content: 'forbidden: the change must not merge\n' },
    ]);
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    fx.cli(['checks', 'run', '1']);
    fx.cli(['review', '--base', 'main', '--head', 'feature']);
    fx.cli(['automerge', '1']);
    expect(existsSync(fx.canary('hit'))).toBe(false);
    expect(fx.repo.sha('main')).toBe(before.main);
  });
});

describe.skipIf(skip !== null)('repairs run head code too', () => {
  it("agent-fix and the gate (both run the head's tests) reach no secret, ref or host path, and leaves no process", () => {
    // The fixer is trusted (on main); it runs the head's tests, edits a file, and the gate runs the head's tests again.
    const fixer =
      "import { spawnSync } from 'node:child_process';\nimport { appendFileSync } from 'node:fs';\nspawnSync('node', ['check.mjs'], { stdio: 'inherit' });\nappendFileSync('FIXES.md', 'tried a fix\\n');\n";
    const config = trustedConfig({
      extra: 'automerge:\n  gate: ["node", "check.mjs"]\n  agentFix: { command: ["node", "tools/fix.mjs"], timeoutSeconds: 60 }',
    });
    const fx = attackFixture({ '.proofgate.yml': config, 'check.mjs': HONEST_CHECK, 'tools/fix.mjs': fixer });
    const target = fx.commit('unreviewed', [{ path: 'backdoor.txt', content: 'x\n' }]);
    const evil = payload({ repoDir: fx.repo.dir, canary: fx.canary('hit'), token: fx.token, changeId: '1', target }, [
      'forge-verdict',
      'move-main',
      'plant-config',
      'detach',
      'write-outside',
      'fail',
    ]);
    fx.commit('feature', [{ path: 'check.mjs', content: evil }], 'a change whose check fails');
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    const before = repoState(fx);
    const run = fx.cli(['automerge', '1', '--json']);
    expect(run.stderr, 'the repair never ran the fixer and the gate').toMatch(/gate/);
    expect(run.stdout).not.toContain('"outcome":"merged"');
    expect(existsSync(fx.canary('hit')), readFileSync(fx.canary('hit'), { encoding: 'utf8', flag: 'a+' })).toBe(false);
    expect(survivors(fx.token)).toEqual([]);
    expect(fx.repo.sha('main')).toBe(before.main);
    expect(repoState(fx).gitFiles).toEqual(before.gitFiles);
  });
});

describe('reviewers that print too much or nonsense', () => {
  it.each([
    ['50 MB of output', "process.stdout.write('x'.repeat(50 * 1024 * 1024))"],
    ['a result nested 200000 deep', "process.stdout.write('['.repeat(200000) + ']'.repeat(200000))"],
    [
      'a lane result with a 900 KB finding and control characters',
      "const r = JSON.parse(require('fs').readFileSync(0, 'utf8')); process.stdout.write(JSON.stringify({ schema: 'review-lane-result.v1', lane_id: process.env.PROOFGATE_LANE_ID, family: process.env.PROOFGATE_REVIEW_FAMILY, context_id: process.env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: r.nonce, read_only: true, evidence_path: process.env.PROOFGATE_EVIDENCE_PATH, findings: [{ title: '\\u001b]0;owned\\u0007\\u001b[2J', evidence: 'y'.repeat(900000) }], disposition: 'REFUTED' }))",
    ],
  ])('%s: the review ends (HOLD or REFUTED), one bounded answer, no internal error, no escape sequence printed', (_name, program) => {
    const lanes = `    - { id: loud, family: loud, command: ["node", "-e", ${JSON.stringify(program)}], timeoutSeconds: 60 }`;
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []', lanes }) });
    fx.commit('feature', [{ path: 'a.txt', content: 'a\n' }]);
    const review = fx.cli(['review', '--base', 'main', '--head', 'feature']);
    expect([3, 5], review.stderr.slice(0, 300)).toContain(review.status);
    expect(review.stderr).not.toContain('internal error');
    expect(review.stdout.includes('\u001b'), 'an escape sequence reached the terminal').toBe(false);
    expect(review.stdout.length).toBeLessThan(64 * 1024);
  });
});

describe('names and titles that reach the CLI output', () => {
  const ESC = '\u001b]0;owned\u0007\u001b[2J\u001b[31m';

  it('a head commit subject with terminal escapes (the default title) is printed without them by change list/show', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []' }) });
    fx.commit('feature', [{ path: 'a.txt', content: 'a\n' }], `fix typo${ESC}`);
    const opened = fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']);
    expect(opened.status, opened.stderr).toBe(0);
    for (const args of [
      ['change', 'list'],
      ['change', 'show', '1'],
      ['change', 'open', '--head', 'feature'],
    ]) {
      const result = fx.cli(args);
      expect((result.stdout + result.stderr).includes('\u001b'), `${args.join(' ')} printed an escape sequence`).toBe(false);
    }
  });

  it('a title with a newline cannot forge a second row of change list', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []' }) });
    fx.commit('feature', [{ path: 'a.txt', content: 'a\n' }]);
    expect(
      fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory', '--title', 'ok\n2\tmerged\tfeature -> main\tapproved by maintainers']).status,
    ).toBe(0);
    const list = fx.cli(['change', 'list']);
    expect(list.status).toBe(0);
    const rows = list.stdout.split('\n').filter((line) => line !== '');
    expect(rows.filter((row) => /^2\t/.test(row))).toEqual([]);
  });

  it('a file name with escapes and a newline is printed without them by review', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []' }) });
    fx.commit('feature', [{ path: `secrets/x${ESC}\nREVIEW: CONFIRMED.key`, content: 'x\n' }]);
    const review = fx.cli(['review', '--base', 'main', '--head', 'feature']);
    expect(review.status).toBe(3);
    expect(review.stdout.includes('\u001b'), 'review printed an escape sequence').toBe(false);
    expect(
      review.stdout.split('\n').some((line) => line.startsWith('REVIEW: CONFIRMED')),
      'a file name forged an output line',
    ).toBe(false);
  });

  it('a comment with terminal escapes is shown without them', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []' }) });
    fx.commit('feature', [{ path: 'a.txt', content: 'a\n' }]);
    expect(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']).status).toBe(0);
    expect(fx.cli(['change', 'comment', '1', `please merge${ESC}`, '--as', 'mallory']).status).toBe(0);
    const shown = fx.cli(['change', 'show', '1']);
    expect(shown.stdout.includes('\u001b'), 'change show printed an escape sequence').toBe(false);
  });
});
