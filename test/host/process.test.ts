import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProcess, type ProcessRequest } from '../../src/host/index.js';
import { setLauncherMode, type LauncherMode } from '../../src/host/launcher.js';
import { alive, eventually } from '../support/wait.js';

const scratch = mkdtempSync(join(tmpdir(), 'proofgate-host-process-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const NODE = process.execPath;
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

function request(script: string, extra: Partial<ProcessRequest> = {}): ProcessRequest {
  return { argv: [NODE, '-e', script], cwd: scratch, env: ENV, timeoutMs: 20_000, output: { maxBytes: 64 * 1024 }, ...extra };
}

/** The kernel reaps a killed process soon, but not synchronously: poll, with a bound far below the sleepers' 300 s. */
const eventuallyDead = (pid: number): Promise<boolean> => eventually(() => !alive(pid));

/** A node script that starts `sleep 300` in its own process group and prints the sleeper's pid. */
const SPAWN_SLEEPER = "const c = require('node:child_process').spawn('sleep', ['300'], { stdio: 'ignore' }); c.unref(); console.log(c.pid);";

/**
 * A limit that the program must outlast its own start-up to meet (node can take a second to start on a loaded
 * machine); the programs of those tests are /bin/sh scripts, which start in milliseconds.
 */
const READY_MS = 2_000;

function shell(script: string, extra: Partial<ProcessRequest> = {}): ProcessRequest {
  return { ...request('', extra), argv: ['/bin/sh', '-c', script] };
}

/** The request, aborted as soon as its program printed `ready` (it is stopped on that event, not after a time). */
function stopWhenReady(base: ProcessRequest): ProcessRequest {
  const stop = new AbortController();
  return {
    ...base,
    signal: stop.signal,
    onSpawn: (child) => {
      let seen = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        seen += chunk.toString('utf8');
        if (seen.includes('ready\n')) stop.abort();
      });
    },
  };
}

// Every case runs twice: started by this process (node's spawn), and by the launcher a large process uses.
for (const mode of ['never', 'always'] as const satisfies readonly LauncherMode[]) {
  describe(mode === 'never' ? 'runProcess, started here' : 'runProcess, started by the launcher', () => {
    let before: LauncherMode;
    beforeAll(() => {
      before = setLauncherMode(mode);
    });
    afterAll(() => {
      setLauncherMode(before);
    });
    describe('ending', () => {
      it('reports a clean exit with its code and output', async () => {
        const result = await runProcess(request("console.log('hello'); process.exit(3)"));
        expect(result).toMatchObject({ exitCode: 3, signal: null, timedOut: false, aborted: false, overflowed: false, startError: null, truncated: false });
        expect(result.output.toString('utf8')).toBe('hello\n');
      });

      it('on timeout sends SIGTERM to the whole group: the program and what it started', async () => {
        const result = await runProcess(shell('sleep 300 & echo $!; wait', { timeoutMs: READY_MS }));
        expect(result).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGTERM' });
        const sleeper = Number(result.output.toString('utf8').trim());
        expect(sleeper).toBeGreaterThan(0);
        expect(await eventuallyDead(sleeper)).toBe(true);
      });

      it('sends SIGKILL after the grace period when SIGTERM is ignored', async () => {
        // The shell outlives SIGTERM (its `sleep` does not: the signal goes to the whole group), says so, and waits again;
        // its own stderr is muted, where it would report the killed sleep. It is stopped once it said it is ready (an
        // event, not a time), and the grace is long enough for even a loaded machine to run its trap.
        const script = "exec 2>/dev/null; trap 'echo ignored' TERM; echo ready; while :; do sleep 1; done";
        const result = await runProcess(stopWhenReady(shell(script, { killGraceMs: 3_000 })));
        expect(result).toMatchObject({ aborted: true, signal: 'SIGKILL' });
        // SIGTERM came first and was ignored; only then did SIGKILL end it.
        expect(result.output.toString('utf8')).toBe('ready\nignored\n');
      });

      it('with a grace of 0 sends SIGKILL at once', async () => {
        // SIGTERM would only be ignored: with no grace, SIGKILL is the first and only signal.
        const script = "exec 2>/dev/null; trap 'echo ignored' TERM; echo ready; while :; do sleep 1; done";
        const result = await runProcess(stopWhenReady(shell(script, { killGraceMs: 0 })));
        expect(result).toMatchObject({ aborted: true, signal: 'SIGKILL' });
        expect(result.output.toString('utf8')).toBe('ready\n');
      });

      it('kills what the program left running in its group when it exits', async () => {
        const result = await runProcess(request(SPAWN_SLEEPER));
        expect(result).toMatchObject({ exitCode: 0, timedOut: false });
        expect(await eventuallyDead(Number(result.output.toString('utf8').trim()))).toBe(true);
      });

      it('settles after the drain time when a process that left the group holds the pipes open', async () => {
        const script =
          "const c = require('node:child_process').spawn('sleep', ['300'], { detached: true, stdio: ['ignore', 'inherit', 'inherit'] }); c.unref(); console.log(c.pid);";
        const result = await runProcess(request(script, { drainMs: 200 }));
        const escaped = Number(result.output.toString('utf8').trim());
        try {
          expect(result).toMatchObject({ exitCode: 0, timedOut: false });
          // It settled while the escaped process still held the pipes open (it never closes them on its own in time).
          expect(escaped).toBeGreaterThan(0);
          expect(alive(escaped)).toBe(true);
        } finally {
          if (escaped > 0) process.kill(escaped, 'SIGKILL');
        }
      });

      it('reports a program that cannot start, and an empty argv, without throwing', async () => {
        const missing = await runProcess({ ...request(''), argv: ['/nonexistent/proofgate-program'] });
        expect(missing).toMatchObject({ exitCode: null, timedOut: false });
        expect(missing.startError).toContain('ENOENT');
        const empty = await runProcess({ ...request(''), argv: [] });
        expect(empty.startError).toBe('empty command');
      });
    });

    describe('abort signal', () => {
      it('an abort mid-run kills the group and says so', async () => {
        const controller = new AbortController();
        const started = join(scratch, 'abort-sleeper-started');
        // The sleeper's pid, written (then renamed, so it appears whole) once the sleeper runs.
        const running = runProcess(shell(`sleep 300 & echo $! > ${started}.tmp && mv ${started}.tmp ${started}; wait`, { signal: controller.signal }));
        expect(await eventually(() => existsSync(started))).toBe(true);
        controller.abort();
        const result = await running;
        expect(result).toMatchObject({ aborted: true, timedOut: false, signal: 'SIGTERM' });
        const sleeper = Number(readFileSync(started, 'utf8').trim());
        expect(sleeper).toBeGreaterThan(0);
        expect(await eventuallyDead(sleeper)).toBe(true);
      });

      it('a signal aborted before the start runs nothing', async () => {
        const marker = join(scratch, 'should-not-exist');
        const result = await runProcess(request(`require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'x')`, { signal: AbortSignal.abort() }));
        expect(result).toMatchObject({ aborted: true, exitCode: null, startError: null });
        expect(existsSync(marker)).toBe(false);
      });
    });

    describe('output', () => {
      const chatty = "for (let i = 0; i < 5000; i += 1) console.log('line ' + i); console.log('the end');";

      it('keeps the head within the cap', async () => {
        const result = await runProcess(request(chatty, { output: { maxBytes: 100 } }));
        expect(result).toMatchObject({ exitCode: 0, truncated: true, overflowed: false });
        expect(result.output.length).toBe(100);
        expect(result.output.toString('utf8').startsWith('line 0\nline 1\n')).toBe(true);
      });

      it('keeps the tail within the cap', async () => {
        const result = await runProcess(request(chatty, { output: { maxBytes: 100, keep: 'tail' } }));
        expect(result).toMatchObject({ exitCode: 0, truncated: true });
        expect(result.output.length).toBe(100);
        expect(result.output.toString('utf8').endsWith('line 4999\nthe end\n')).toBe(true);
      });

      it('keeps everything under the cap, untruncated', async () => {
        const result = await runProcess(request("console.log('short')", { output: { maxBytes: 6, keep: 'tail' } }));
        expect(result).toMatchObject({ truncated: false });
        expect(result.output.toString('utf8')).toBe('short\n');
      });

      it('a cap set to kill stops an endless writer at once', async () => {
        const result = await runProcess(
          request("const s = 'x'.repeat(4096); for (;;) process.stdout.write(s);", { output: { maxBytes: 10_000, onOverflow: 'kill' } }),
        );
        expect(result).toMatchObject({ overflowed: true, timedOut: false, signal: 'SIGKILL', truncated: true });
        expect(result.output.length).toBe(10_000);
      });

      it('merges stderr into the output by default, or keeps it apart under its own cap', async () => {
        const script = "process.stdout.write('out;'); process.stderr.write('err-err-err');";
        const merged = await runProcess(request(script));
        // Two pipes: which one the parent reads first is up to the scheduler; each small write arrives whole.
        expect(['out;err-err-err', 'err-err-errout;']).toContain(merged.output.toString('utf8'));
        expect(merged.stderr.length).toBe(0);
        const apart = await runProcess(request(script, { stderr: { maxBytes: 7 } }));
        expect(apart.output.toString('utf8')).toBe('out;');
        expect(apart.stderr.toString('utf8')).toBe('err-err');
      });

      it('writes stdin, then closes it', async () => {
        const script = "let s = ''; process.stdin.on('data', (d) => { s += d; }).on('end', () => console.log(s.toUpperCase()));";
        const result = await runProcess(request(script, { stdin: 'request body' }));
        expect(result.output.toString('utf8')).toBe('REQUEST BODY\n');
      });
    });

    describe('environment', () => {
      it('gives the program exactly the environment it was handed, nothing inherited', async () => {
        process.env.PROOFGATE_HOST_TEST_SECRET = 'must-not-pass';
        try {
          const result = await runProcess(request('console.log(JSON.stringify(process.env))', { env: { ...ENV, ONLY_THIS: 'yes' } }));
          expect(JSON.parse(result.output.toString('utf8'))).toEqual({ ...ENV, ONLY_THIS: 'yes' });
        } finally {
          delete process.env.PROOFGATE_HOST_TEST_SECRET;
        }
      });
    });
  });
}
