import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ForgeEvent } from '../../src/forge/port.js';
import { parseOutputUrl, type CheckProgress } from '../../src/forge/local/index.js';
import { localFixture, rejectionOf, type LocalFixture } from './local-support.js';
import { sandboxForTests } from '../support/jail.js';
import { eventually, runningWith } from '../support/wait.js';

let fixture: LocalFixture | undefined;
const scratch: string[] = [];
// Check runs a test started: cancelled before cleanup, so a check that waits for the test never outlives it.
const runs: AbortController[] = [];
afterEach(async () => {
  for (const run of runs.splice(0)) run.abort();
  await fixture?.cleanup();
  fixture = undefined;
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});

// Jailed where bubblewrap works (always under CI=true); unjailed, saying so, elsewhere.
const sandbox = await sandboxForTests();

function yamlChecks(checks: Array<{ name: string; run: string; timeoutSeconds?: number; git?: boolean }>): string {
  const lines = [`sandbox: ${sandbox}`, 'checks:'];
  for (const check of checks) {
    lines.push(`  - name: ${check.name}`, `    run: ${JSON.stringify(check.run)}`);
    if (check.timeoutSeconds !== undefined) lines.push(`    timeoutSeconds: ${check.timeoutSeconds}`);
    if (check.git === true) lines.push('    git: true');
  }
  return `${lines.join('\n')}\n`;
}

/**
 * A `cacheDir` for the trusted config: the one host folder a jailed check shares with the test (bound writable at
 * its own path; searchable by the jail's uid). A check waits on a file the test writes there.
 */
function sharedCacheDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-check-cache-'));
  scratch.push(dir);
  chmodSync(dir, 0o777);
  return dir;
}

async function outputOf(forge: LocalFixture['forge'], url: string | null): Promise<string> {
  const { runId, digest } = parseOutputUrl(url ?? '');
  return Buffer.from(await forge.store.storage.artifactStore.read({ namespace: forge.store.storage.namespace, runId }, digest)).toString();
}

describe('local forge: checks run', () => {
  it('runs each configured check at the exact head, records the runs and keeps the output', async () => {
    const config = yamlChecks([
      { name: 'exact-head', run: 'test "$(git rev-parse HEAD)" = "$PROOFGATE_HEAD_SHA" && test -f feature.txt && echo "at $PROOFGATE_HEAD_SHA"', git: true },
      { name: 'fails', run: 'echo broken >&2; exit 3' },
    ]);
    fixture = await localFixture(config, { outputCapBytes: 4096 });
    const { forge, repo } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    expect(change).toMatchObject({ mergeStateStatus: 'BLOCKED', checks: [] });
    const progress: string[] = [];
    const events: ForgeEvent[] = [];
    forge.onEvent((event) => events.push(event));
    const run = await forge.runChecks(change.id, {
      onProgress: (entry: CheckProgress) => progress.push(entry.phase === 'completed' ? `done ${entry.result.name}` : `${entry.phase} ${entry.name}`),
    });
    expect(progress).toEqual(['queued exact-head', 'queued fails', 'started exact-head', 'done exact-head', 'started fails', 'done fails']);
    expect(run.headSha).toBe(change.head.sha);
    expect(run.results.map((result) => [result.name, result.conclusion, result.exitCode, result.sandbox])).toEqual([
      ['exact-head', 'success', 0, sandbox],
      ['fails', 'failure', 3, sandbox],
    ]);
    const snapshot = await forge.snapshot(change.id);
    expect(snapshot.checks.map((check) => [check.name, check.status, check.conclusion, check.headSha])).toEqual([
      ['exact-head', 'completed', 'success', change.head.sha],
      ['fails', 'completed', 'failure', change.head.sha],
    ]);
    expect(snapshot.mergeStateStatus).toBe('BLOCKED');
    const url = run.results[0]?.outputUrl ?? '';
    const { runId, digest } = parseOutputUrl(url);
    const bytes = await forge.store.storage.artifactStore.read({ namespace: forge.store.storage.namespace, runId }, digest);
    expect(Buffer.from(bytes).toString()).toBe(`at ${change.head.sha}\n`);
    expect(snapshot.checks[0]?.url).toBe(url);
    const completed = events.filter((event) => event.kind === 'check-completed');
    expect(completed.map((event) => event.kind === 'check-completed' && [event.check.name, event.check.conclusion, event.changeIds, event.headSha])).toEqual([
      ['exact-head', 'success', [change.id], change.head.sha],
      ['fails', 'failure', [change.id], change.head.sha],
    ]);
    expect(
      repo
        .git(['worktree', 'list', '--porcelain'])
        .split('\n')
        .filter((line) => line.startsWith('worktree ')),
    ).toHaveLength(1);
  });

  it('kills a check that runs past its timeout, with everything it started', async () => {
    const marker = `30.${process.pid}${Date.now() % 100000}`;
    const run = `setsid sleep ${marker} & sleep ${marker} & echo started; wait`;
    // The limit must leave the jail and the shell time to start both sleepers on a loaded machine.
    fixture = await localFixture(yamlChecks([{ name: 'slow', run, timeoutSeconds: 5 }]));
    const { forge, repo } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results[0]).toMatchObject({ name: 'slow', conclusion: 'timed_out' });
    expect(await outputOf(forge, results[0]?.outputUrl ?? null)).toContain('started');
    expect(runningWith(`sleep\0${marker}`)).toEqual([]);
    expect(
      repo
        .git(['worktree', 'list', '--porcelain'])
        .split('\n')
        .filter((line) => line.startsWith('worktree ')),
    ).toHaveLength(1);
  });

  it('an aborted signal kills the running check and completes it and the checks not started as cancelled', async () => {
    const marks = mkdtempSync(join(tmpdir(), 'proofgate-check-marks-'));
    scratch.push(marks);
    const marker = `30.${process.pid}${Date.now() % 100000}1`;
    const run = `sleep ${marker} & echo started; wait`;
    fixture = await localFixture(
      yamlChecks([
        { name: 'slow', run },
        { name: 'later', run: `touch ${marks}/later-ran` },
      ]),
    );
    const { forge, repo } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const abort = new AbortController();
    runs.push(abort);
    let sleeperSeen: Promise<boolean> | undefined;
    const running = forge.runChecks(change.id, {
      signal: abort.signal,
      onProgress: (entry) => {
        // Abort once the check has started its sleeper.
        if (entry.phase !== 'started' || entry.name !== 'slow') return;
        sleeperSeen = eventually(() => runningWith(`sleep\0${marker}`).length > 0).finally(() => abort.abort());
      },
    });
    const { results } = await running;
    expect(await sleeperSeen).toBe(true);
    expect(results.map((result) => [result.name, result.conclusion])).toEqual([['slow', 'cancelled']]);
    expect(runningWith(`sleep\0${marker}`)).toEqual([]);
    expect(existsSync(join(marks, 'later-ran'))).toBe(false);
    const snapshot = await forge.snapshot(change.id);
    expect(snapshot.checks.map((check) => [check.name, check.status, check.conclusion])).toEqual([
      ['slow', 'completed', 'cancelled'],
      ['later', 'completed', 'cancelled'],
    ]);
    expect(
      repo
        .git(['worktree', 'list', '--porcelain'])
        .split('\n')
        .filter((line) => line.startsWith('worktree ')),
    ).toHaveLength(1);
  });

  it('keeps the tail of an output over the cap, says the first bytes were dropped, and marks it truncated', async () => {
    fixture = await localFixture(
      yamlChecks([{ name: 'noisy', run: 'echo first line; yes proofgate | head -c 100000; echo the failure explains itself here' }]),
      { outputCapBytes: 1000 },
    );
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results[0]).toMatchObject({ conclusion: 'success', outputTruncated: true });
    const { runId, digest } = parseOutputUrl(results[0]?.outputUrl ?? '');
    const text = Buffer.from(await forge.store.storage.artifactStore.read({ namespace: forge.store.storage.namespace, runId }, digest)).toString();
    const [header, ...rest] = text.split('\n');
    expect(header).toBe('[proofgate] (first bytes dropped: the output passed the 1000-byte cap; its last 1000 bytes follow)');
    const kept = rest.join('\n');
    expect(Buffer.byteLength(kept)).toBe(1000);
    expect(kept.endsWith('proofgate\nthe failure explains itself here\n')).toBe(true);
    expect(text).not.toContain('first line');
  });

  it('an output within the cap is kept whole, with no notice', async () => {
    fixture = await localFixture(yamlChecks([{ name: 'quiet', run: 'echo first line; echo last line' }]), { outputCapBytes: 1000 });
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results[0]).toMatchObject({ conclusion: 'success', outputTruncated: false });
    const { runId, digest } = parseOutputUrl(results[0]?.outputUrl ?? '');
    const text = Buffer.from(await forge.store.storage.artifactStore.read({ namespace: forge.store.storage.namespace, runId }, digest)).toString();
    expect(text).toBe('first line\nlast line\n');
  });

  it('a cut inside a multi-byte character starts the kept tail at the next whole character', async () => {
    // 1000 two-byte characters and one ASCII byte: the last 1000 bytes begin with the second byte of an 'é'.
    fixture = await localFixture(yamlChecks([{ name: 'accents', run: `node -e "process.stdout.write('\\u00e9'.repeat(1000) + 'x')"` }]), {
      outputCapBytes: 1000,
    });
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results[0]).toMatchObject({ conclusion: 'success', outputTruncated: true });
    const { runId, digest } = parseOutputUrl(results[0]?.outputUrl ?? '');
    const text = Buffer.from(await forge.store.storage.artifactStore.read({ namespace: forge.store.storage.namespace, runId }, digest)).toString();
    const kept = text.slice(text.indexOf('\n') + 1);
    expect(kept).toBe(`${'\u00e9'.repeat(499)}x`);
    expect(text).toContain('its last 999 bytes follow');
  });

  it('forgets results when the head moves, and is CLEAN once every check passed on the new head', async () => {
    fixture = await localFixture(yamlChecks([{ name: 'ok', run: 'true' }]));
    const { forge, repo } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    await forge.runChecks(change.id);
    expect(await forge.snapshot(change.id)).toMatchObject({ mergeStateStatus: 'CLEAN', checks: [{ name: 'ok', conclusion: 'success' }] });
    const moved = repo.commit('feature', { 'more.txt': 'more\n' }, 'more work');
    const after = await forge.snapshot(change.id);
    expect(after).toMatchObject({ head: { sha: moved }, checks: [], mergeStateStatus: 'BLOCKED' });
    await forge.runChecks(change.id);
    const ready = await forge.snapshot(change.id);
    expect(ready).toMatchObject({ mergeStateStatus: 'CLEAN' });
    const merged = await forge.merge(change.id, { expectedHeadSha: moved, title: 'Merge', message: '' });
    expect(repo.sha('main')).toBe(merged.sha);
  });

  it('runs only the checks of the base config, never checks the change adds', async () => {
    const marks = mkdtempSync(join(tmpdir(), 'proofgate-check-marks-'));
    scratch.push(marks);
    fixture = await localFixture(yamlChecks([{ name: 'base-check', run: 'true' }]));
    const { forge, repo } = fixture;
    repo.commit('feature', { '.proofgate.yml': yamlChecks([{ name: 'sneaky', run: `touch ${marks}/pwned` }]) }, 'add my own check');
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results.map((result) => result.name)).toEqual(['base-check']);
    expect(existsSync(join(marks, 'pwned'))).toBe(false);
  });

  it('reports a command that cannot start as startup_failure', async () => {
    fixture = await localFixture('checks:\n  - name: missing\n    run: ["/nonexistent/proofgate-tool", "--x"]\n');
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results[0]).toMatchObject({ name: 'missing', conclusion: 'startup_failure', exitCode: null });
  });

  it('shows queued and running checks, and only the latest run of each name', async () => {
    // `first` runs until the test has read the store: it waits for `release` in the shared cacheDir.
    const cache = sharedCacheDir();
    const release = join(cache, 'release');
    const first = `while [ ! -e ${release} ]; do sleep 0.05; done`;
    fixture = await localFixture(
      `${yamlChecks([
        { name: 'first', run: first },
        { name: 'second', run: 'true' },
      ])}cacheDir: ${cache}\n`,
    );
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const abort = new AbortController();
    runs.push(abort);
    let during: Promise<string> | undefined;
    const { results } = await forge.runChecks(change.id, {
      signal: abort.signal,
      onProgress: (progress) => {
        if (progress.phase !== 'started' || progress.name !== 'first') return;
        // Read while `first` runs, as another reader of the store would; then let it finish.
        during = forge
          .snapshot(change.id)
          .then((snapshot) => snapshot.checks.map((check) => `${check.name}:${check.status}`).join(','))
          .finally(() => writeFileSync(release, 'go'));
      },
    });
    expect(await during).toBe('first:in_progress,second:queued');
    expect(results.map((result) => [result.name, result.conclusion])).toEqual([
      ['first', 'success'],
      ['second', 'success'],
    ]);
    await forge.runChecks(change.id);
    const snapshot = await forge.snapshot(change.id);
    expect(snapshot.checks.map((check) => `${check.name}:${check.status}`)).toEqual(['first:completed', 'second:completed']);
  });

  it('redacts secret-looking output and withholds output holding a known secret', async () => {
    const config = yamlChecks([
      { name: 'leaky', run: 'echo "api_key=abcdef123456"; echo fine' },
      { name: 'known', run: 'echo "the value is hunter2-very-secret"' },
    ]);
    fixture = await localFixture(config, { knownSecrets: ['hunter2-very-secret'] });
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results.map((result) => result.conclusion)).toEqual(['success', 'success']);
    const texts = await Promise.all(
      results.map(async (result) => {
        const { runId, digest } = parseOutputUrl(result.outputUrl ?? '');
        return Buffer.from(await forge.store.storage.artifactStore.read({ namespace: forge.store.storage.namespace, runId }, digest)).toString();
      }),
    );
    expect(texts[0]).toBe('api_key=[redacted:assignment]\nfine\n');
    expect(texts[1]).toBe('[proofgate] output withheld: it contained a configured secret\n');
  });

  it("refuses a cacheDir inside the repository's .git or the data dir, before recording anything", async () => {
    fixture = await localFixture(yamlChecks([{ name: 'ok', run: 'true' }]));
    const { forge, repo, dataDir } = fixture;
    const opened = await forge.openChange({ head: 'feature', base: 'main' });
    for (const cacheDir of [join(repo.dir, '.git', 'cache'), join(dataDir, 'cache'), repo.dir]) {
      repo.commit('main', { '.proofgate.yml': `${yamlChecks([{ name: 'ok', run: 'true' }])}cacheDir: ${cacheDir}\n` }, 'cache');
      const error = await rejectionOf(forge.runChecks(opened.id));
      expect(error.code).toBe('CONFIG');
      expect(existsSync(join(repo.dir, '.git', 'cache'))).toBe(false);
    }
    expect((await forge.snapshot(opened.id)).checks).toEqual([]);
  });

  it('says how each check ran: sandbox: none runs it unjailed and records that', async () => {
    fixture = await localFixture(`sandbox: none\nchecks:\n  - name: plain\n    run: "echo ran"\n`);
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const { results } = await forge.runChecks(change.id);
    expect(results[0]).toMatchObject({ name: 'plain', conclusion: 'success', sandbox: 'none' });
  });

  it("runs checks with an allow-listed environment: tokens in proofgate's environment do not reach them", async () => {
    const config = yamlChecks([{ name: 'env', run: 'env | sort' }]);
    fixture = await localFixture(config);
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const saved = { token: process.env.GITHUB_TOKEN, aws: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.GITHUB_TOKEN = 'gh-token-in-parent-env';
    process.env.AWS_SECRET_ACCESS_KEY = 'aws-secret-in-parent-env';
    try {
      const { results } = await forge.runChecks(change.id);
      const { runId, digest } = parseOutputUrl(results[0]?.outputUrl ?? '');
      const text = Buffer.from(await forge.store.storage.artifactStore.read({ namespace: forge.store.storage.namespace, runId }, digest)).toString();
      expect(text).toMatch(/^PATH=/m);
      expect(text).not.toContain('gh-token-in-parent-env');
      expect(text).not.toContain('aws-secret-in-parent-env');
      expect(text).not.toMatch(/^(GITHUB_TOKEN|AWS_SECRET_ACCESS_KEY)=/m);
    } finally {
      if (saved.token === undefined) delete process.env.GITHUB_TOKEN;
      else process.env.GITHUB_TOKEN = saved.token;
      if (saved.aws === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
      else process.env.AWS_SECRET_ACCESS_KEY = saved.aws;
    }
  });
});
