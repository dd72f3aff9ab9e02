/**
 * `proofgate change list|show` (the built CLI) on a repository whose merge
 * queue holds changes: a queued change says it is queued, where and at which
 * place; `show` gives the candidate and the queue history, in words and in
 * JSON; a hostile title stays inert in the human output (and exact in JSON).
 * The queue is a real one (test/service/queue-support.ts): three changes
 * queued while it is paused, then let go: a failing candidate is bisected,
 * two land, one is ejected. Client mode, through `serve --repo`, prints the
 * same records.
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createToken } from '../../src/cli/commands/token.js';
import { startLocalService } from '../../src/service/local.js';
import { HOSTILE_TITLE, queueScenario } from '../service/queue-support.js';
import { runCliAsync as runCli } from './helpers.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Listed {
  readonly id: string;
  readonly state: string;
  readonly title: string;
  readonly queue?: { base: string; position: number; of: number; paused: boolean };
}
interface Shown {
  readonly id: string;
  readonly queue?: {
    base: string;
    status: string;
    position: number | null;
    of: number | null;
    paused: boolean;
    candidate: unknown;
    history: { kind: string; at: string }[];
  };
}

/** No raw escape, bidi control or other unsafe character reaches the terminal. */
const inert = (text: string): void => {
  for (const unsafe of ['\u001b', '\u202e', '\u202c']) expect(text).not.toContain(unsafe);
};

describe('change list and show with a merge queue (built CLI)', () => {
  it('say where a change waits, its candidate and its queue history; a hostile title stays inert', async () => {
    const scenario = await queueScenario();
    cleanups.push(scenario.cleanup);
    const at = ['--repo', scenario.fixture.repo.dir, '--data', scenario.fixture.dataDir];
    const [a, hostile, b] = scenario.ids;

    const listedJson = await runCli(['change', 'list', ...at, '--json']);
    expect(listedJson.status, listedJson.stderr).toBe(0);
    const listed = JSON.parse(listedJson.stdout) as Listed[];
    expect(scenario.ids.map((id) => listed.find((entry) => entry.id === id)?.queue)).toEqual([
      { base: 'main', position: 1, of: 3, paused: true },
      { base: 'main', position: 2, of: 3, paused: true },
      { base: 'main', position: 3, of: 3, paused: true },
    ]);
    // JSON keeps the exact title.
    expect(listed.find((entry) => entry.id === hostile)?.title).toBe(HOSTILE_TITLE);

    const listedText = await runCli(['change', 'list', ...at]);
    expect(listedText.status, listedText.stderr).toBe(0);
    inert(listedText.stdout);
    const line = listedText.stdout.split('\n').find((text) => text.startsWith(`${hostile}\t`)) ?? '';
    expect(line.split('\t')).toEqual([
      hostile,
      'open, queued 2/3 on main (paused)',
      'plain -> main',
      '<img src=x onerror="window.pwned=1"><b>bold</b> \\u202eevil\\u202c \\x1b[31mred\\x1b[0m',
    ]);

    const waiting = await runCli(['change', 'show', hostile, ...at]);
    expect(waiting.status, waiting.stderr).toBe(0);
    inert(waiting.stdout);
    expect(waiting.stdout).toContain(`queue      position 2 of 3 in the merge queue of main (paused), head ${scenario.fixture.repo.sha('plain').slice(0, 12)}`);
    expect(waiting.stdout).toMatch(/\n {2}\S+ enqueued: queued for main at [0-9a-f]{12}\n/);
    const waitingJson = JSON.parse((await runCli(['change', 'show', hostile, ...at, '--json'])).stdout) as Shown;
    expect(waitingJson.queue).toMatchObject({ base: 'main', status: 'waiting', position: 2, of: 3, paused: true, candidate: null });
    expect(waitingJson.queue?.history.map((item) => item.kind)).toEqual(['enqueued']);

    // `queue show` lists the same line, the title inert.
    const queueShown = await runCli(['queue', 'show', ...at]);
    inert(queueShown.stdout);
    expect(queueShown.stdout).toContain(`  2. change ${hostile} at`);
    const queueJson = JSON.parse((await runCli(['queue', 'show', ...at, '--json'])).stdout) as { candidate: unknown; waiting: { title: string }[] };
    expect(queueJson.candidate).toBeNull();
    expect(queueJson.waiting.map((entry) => entry.title)).toEqual(['Add the a flag (#1)', `${HOSTILE_TITLE} (#2)`, 'Add the b flag (#3)']);

    await scenario.release();

    const ejected = JSON.parse((await runCli(['change', 'show', b, ...at, '--json'])).stdout) as Shown;
    expect(ejected.queue).toMatchObject({ base: 'main', status: 'ejected', position: null, of: null, candidate: null });
    expect(ejected.queue?.history.map((item) => item.kind)).toEqual(['enqueued', 'candidate', 'checks', 'bisect', 'candidate', 'checks', 'ejected']);
    const landedText = await runCli(['change', 'show', a, ...at]);
    expect(landedText.status, landedText.stderr).toBe(0);
    const queueLines = landedText.stdout
      .split('\n')
      .filter((text) => text.startsWith('queue') || /^ {2}\S+ (enqueued|candidate|checks|bisect|landed):/.test(text));
    expect(queueLines.map((text) => text.replace(/^ {2}\S+ /, ''))).toEqual([
      expect.stringMatching(/^queue {6}landed \(merge queue of main, head [0-9a-f]{12}\)$/),
      expect.stringMatching(/^enqueued: queued for main at [0-9a-f]{12}$/),
      expect.stringMatching(/^candidate: in candidate \S+ \(1 of 3\) on main, tip [0-9a-f]{12}$/),
      expect.stringMatching(/^checks: candidate \S+: checks failed: test \(failure\)$/),
      'bisect: bisecting 3 suspects after test (failure) failed',
      expect.stringMatching(/^candidate: in candidate \S+ \(1 of 2\) on main, tip [0-9a-f]{12}$/),
      expect.stringMatching(/^checks: candidate \S+: checks passed$/),
      expect.stringMatching(/^landed: landed on main as [0-9a-f]{12} \(candidate \S+\)$/),
    ]);
    // Nothing waits any more: no entry says it is queued.
    const afterText = (await runCli(['change', 'list', ...at, '--json'])).stdout;
    const after = JSON.parse(afterText) as Listed[];
    expect(after.map((entry) => 'queue' in entry)).toEqual([false, false, false]);

    // Client mode (PROOFGATE_URL) reads the same records from `serve --repo`: the queue history included.
    const token = (await createToken('reader', { data: scenario.fixture.dataDir, permission: 'read' })).token;
    const service = await startLocalService({
      repoDir: scenario.fixture.repo.dir,
      dataDir: scenario.fixture.dataDir,
      host: '127.0.0.1',
      port: 0,
      http: true,
      logger: pino({ level: 'silent' }),
      pollMs: 50,
    });
    cleanups.push(() => service.stop(0));
    const client = { env: { PROOFGATE_URL: service.url ?? '', PROOFGATE_TOKEN: token } };
    for (const args of [
      ['change', 'show', b, '--json'],
      ['change', 'show', a],
      ['change', 'list', '--json'],
    ]) {
      const viaServer = await runCli(args, client);
      expect(viaServer.status, viaServer.stderr).toBe(0);
      const viaDirect = await runCli([...args, ...at]);
      expect(viaServer.stdout, args.join(' ')).toBe(viaDirect.stdout);
    }
    expect(afterText).toBe((await runCli(['change', 'list', '--json'], client)).stdout);
  });
});
