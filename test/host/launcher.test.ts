import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runProcess, type ProcessRequest } from '../../src/host/index.js';
import { LAUNCHER_RSS_BYTES, launch, launcherWanted, setLauncherMode } from '../../src/host/launcher.js';
import { alive, until } from '../support/wait.js';

const scratch = mkdtempSync(join(tmpdir(), 'proofgate-host-launcher-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
afterEach(() => {
  setLauncherMode('auto');
});

const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
const DIST_HOST = fileURLToPath(new URL('../../dist/host/index.js', import.meta.url));
const DIST_LAUNCHER = fileURLToPath(new URL('../../dist/host/launcher.js', import.meta.url));

function shell(script: string, extra: Partial<ProcessRequest> = {}): ProcessRequest {
  return { argv: ['/bin/sh', '-c', script], cwd: scratch, env: ENV, timeoutMs: 60_000, output: { maxBytes: 64 * 1024 }, killGraceMs: 0, ...extra };
}

describe('the process launcher', () => {
  it('is chosen by resident size unless pinned', () => {
    expect(launcherWanted()).toBe(process.memoryUsage.rss() >= LAUNCHER_RSS_BYTES);
    setLauncherMode('always');
    expect(launcherWanted()).toBe(true);
    setLauncherMode('never');
    expect(launcherWanted()).toBe(false);
  });

  it('starts the program from another process, which is all that changes', async () => {
    setLauncherMode('never');
    const here = await runProcess(shell('echo $PPID'));
    expect(Number(here.output.toString('utf8'))).toBe(process.pid);
    setLauncherMode('always');
    const launched = await runProcess(shell('echo $PPID; echo out; echo err >&2; exit 4', { stderr: { maxBytes: 1024 } }));
    const [parent, out] = launched.output.toString('utf8').trim().split('\n');
    expect(Number(parent)).not.toBe(process.pid);
    expect(out).toBe('out');
    expect(launched.stderr.toString('utf8')).toBe('err\n');
    expect(launched.exitCode).toBe(4);
  });

  it('relays megabytes of output byte for byte, and stdin in', async () => {
    setLauncherMode('always');
    const input = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < input.length; i += 1) input[i] = (i * 7919) % 251;
    const result = await runProcess(shell('cat; cat', { stdin: input, output: { maxBytes: 16 * 1024 * 1024 } }));
    expect(result.exitCode).toBe(0);
    expect(result.output.length).toBe(input.length);
    expect(createHash('sha256').update(result.output).digest('hex')).toBe(createHash('sha256').update(input).digest('hex'));
  });

  it('an abort mid-run kills the whole group of a launched program', async () => {
    setLauncherMode('always');
    const pids = join(scratch, 'abort-pids');
    const stop = new AbortController();
    const running = runProcess(shell(`sleep 300 & echo $! > ${pids}.tmp; mv ${pids}.tmp ${pids}; wait`, { signal: stop.signal }));
    await until(() => existsSync(pids), 'the program did not start');
    const sleeper = Number(readFileSync(pids, 'utf8'));
    stop.abort();
    const result = await running;
    expect(result.aborted).toBe(true);
    await until(() => !alive(sleeper), 'the program outlived its group');
  });

  it('a launcher that dies fails what it was running, kills those groups, and the next start gets a new one', async () => {
    setLauncherMode('always');
    const pids = join(scratch, 'lost-pids');
    const program = launch({
      file: '/bin/sh',
      args: ['-c', `sleep 300 & echo "$PPID $!" > ${pids}.tmp; mv ${pids}.tmp ${pids}; wait`],
      cwd: scratch,
      env: ENV,
      stdin: null,
    });
    const errors: string[] = [];
    program.on('error', (error: Error) => errors.push(error.message));
    const closed = new Promise<unknown[]>((resolve) => program.once('close', (...args: unknown[]) => resolve(args)));
    // Its pid has reached this process ('spawn'): a launcher killed in the instant before that could not say which
    // group to kill (docs/design.md, src/host/).
    await new Promise((resolve) => program.once('spawn', resolve));
    await until(() => existsSync(pids), 'the program did not start');
    const [launcherPid, sleeper] = readFileSync(pids, 'utf8').trim().split(' ').map(Number) as [number, number];
    expect(launcherPid).not.toBe(process.pid);
    process.kill(launcherPid, 'SIGKILL');
    expect(await closed).toEqual([null, null]);
    expect(errors).toEqual(['the process launcher exited']);
    await until(() => !alive(sleeper), 'the program outlived its launcher');
    const next = await runProcess(shell('echo $PPID'));
    expect(next.exitCode).toBe(0);
    const nextLauncher = Number(next.output.toString('utf8'));
    expect(nextLauncher).not.toBe(launcherPid);
    expect(nextLauncher).not.toBe(process.pid);
  });

  it('attack: a launched program cannot reach the launcher channel to forge another program’s result', async () => {
    setLauncherMode('always');
    // The program looks for every way in: its own open descriptors, and the variables node would use to find a channel.
    const result = await runProcess(shell('echo $PPID; ls -l /proc/$$/fd; env'));
    const [launcherLine = '', ...rest] = result.output.toString('utf8').split('\n');
    const launcherPid = Number(launcherLine);
    expect(launcherPid).not.toBe(process.pid);
    const seen = rest.join('\n');
    // The launcher's channel is the socket its node names in NODE_CHANNEL_FD.
    const channelFd = readFileSync(`/proc/${launcherPid}/environ`, 'latin1')
      .split('\0')
      .find((entry) => entry.startsWith('NODE_CHANNEL_FD='))
      ?.split('=')[1];
    expect(channelFd).toMatch(/^\d+$/);
    const channel = readlinkSync(`/proc/${launcherPid}/fd/${channelFd}`);
    expect(channel).toMatch(/^socket:\[\d+\]$/);
    expect(seen).not.toContain(channel);
    expect(seen).not.toMatch(/NODE_CHANNEL/);
    // Only what it was given: PATH (the environment is the caller's, exactly).
    expect(seen).toMatch(/^PATH=/m);
  });

  it('a start sent to a launcher that was just killed fails (never hangs, never throws), and the next start works', async () => {
    setLauncherMode('always');
    const first = await runProcess(shell('echo $PPID'));
    const launcherPid = Number(first.output.toString('utf8'));
    expect(launcherPid).not.toBe(process.pid);
    // Killed, and a start sent before this process has heard of it.
    process.kill(launcherPid, 'SIGKILL');
    const lost = await runProcess(shell('echo never'));
    expect(lost.exitCode).toBeNull();
    expect(lost.startError).toMatch(/^the process launcher (exited|could not be reached)$/);
    const next = await runProcess(shell('echo $PPID'));
    expect(next.exitCode).toBe(0);
    expect(Number(next.output.toString('utf8'))).not.toBe(launcherPid);
  });

  it('a program that cannot start is reported as with spawn', async () => {
    setLauncherMode('always');
    const result = await runProcess({ ...shell(''), argv: ['/nonexistent/program'] });
    expect(result.exitCode).toBeNull();
    expect(result.startError).toMatch(/ENOENT/);
  });

  it('does not keep node alive once idle, and ends with the process that started it', async () => {
    const script = join(scratch, 'uses-launcher.mjs');
    writeFileSync(
      script,
      [
        `const { runProcess } = await import(${JSON.stringify(DIST_HOST)});`,
        `const { setLauncherMode } = await import(${JSON.stringify(DIST_LAUNCHER)});`,
        `setLauncherMode('always');`,
        `const r = await runProcess({ argv: ['/bin/sh', '-c', 'echo $PPID'], cwd: '/', env: { PATH: '/usr/bin:/bin' }, timeoutMs: 60000, output: { maxBytes: 1024 } });`,
        `process.stdout.write(r.output);`,
      ].join('\n'),
    );
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    // The script ends by itself: an idle launcher holds nothing open. (A held-open script would time this test out.)
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(0);
    const launcherPid = Number(out.trim());
    expect(launcherPid).toBeGreaterThan(0);
    expect(launcherPid).not.toBe(child.pid);
    // Its channel closed with the script: the launcher is gone too.
    await until(() => !alive(launcherPid), 'the launcher outlived the script');
  });
});
