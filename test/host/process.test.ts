import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runProcess, type ProcessRequest } from '../../src/host/index.js';

const scratch = mkdtempSync(join(tmpdir(), 'proofgate-host-process-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const NODE = process.execPath;
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

function request(script: string, extra: Partial<ProcessRequest> = {}): ProcessRequest {
  return { argv: [NODE, '-e', script], cwd: scratch, env: ENV, timeoutMs: 20_000, output: { maxBytes: 64 * 1024 }, ...extra };
}

/** A process counts as alive while /proc lists it and it is not a zombie waiting to be reaped. */
function alive(pid: number): boolean {
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return false;
  try {
    const state = readFileSync(stat, 'utf8').split(') ')[1]?.[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

async function eventuallyDead(pid: number): Promise<boolean> {
  for (let i = 0; i < 50 && alive(pid); i += 1) await new Promise((done) => setTimeout(done, 20));
  return !alive(pid);
}

/** A script that starts `sleep 30` in its own process group and prints the sleeper's pid. */
const SPAWN_SLEEPER = "const c = require('node:child_process').spawn('sleep', ['30'], { stdio: 'ignore' }); c.unref(); console.log(c.pid);";

describe('runProcess: ending', () => {
  it('reports a clean exit with its code and output', async () => {
    const result = await runProcess(request("console.log('hello'); process.exit(3)"));
    expect(result).toMatchObject({ exitCode: 3, signal: null, timedOut: false, aborted: false, overflowed: false, startError: null, truncated: false });
    expect(result.output.toString('utf8')).toBe('hello\n');
  });

  it('on timeout sends SIGTERM to the whole group: the program and what it started', async () => {
    const result = await runProcess(request(`${SPAWN_SLEEPER} setInterval(() => {}, 1000);`, { timeoutMs: 500 }));
    expect(result).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGTERM' });
    const sleeper = Number(result.output.toString('utf8').trim());
    expect(sleeper).toBeGreaterThan(0);
    expect(await eventuallyDead(sleeper)).toBe(true);
  });

  it('sends SIGKILL after the grace period when SIGTERM is ignored', async () => {
    const script = "process.on('SIGTERM', () => console.log('ignored')); console.log('ready'); setInterval(() => {}, 1000);";
    const result = await runProcess(request(script, { timeoutMs: 500, killGraceMs: 300 }));
    expect(result).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
    expect(result.output.toString('utf8')).toBe('ready\nignored\n');
    expect(result.durationMs).toBeGreaterThanOrEqual(750);
  });

  it('with a grace of 0 sends SIGKILL at once', async () => {
    const script = "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);";
    const result = await runProcess(request(script, { timeoutMs: 300, killGraceMs: 0 }));
    expect(result).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
  });

  it('kills what the program left running in its group when it exits', async () => {
    const result = await runProcess(request(SPAWN_SLEEPER));
    expect(result).toMatchObject({ exitCode: 0, timedOut: false });
    expect(await eventuallyDead(Number(result.output.toString('utf8').trim()))).toBe(true);
  });

  it('settles after the drain time when a process that left the group holds the pipes open', async () => {
    const script = "const c = require('node:child_process').spawn('sleep', ['30'], { detached: true, stdio: ['ignore', 'inherit', 'inherit'] }); c.unref(); console.log(c.pid);";
    const result = await runProcess(request(script, { drainMs: 200 }));
    const escaped = Number(result.output.toString('utf8').trim());
    try {
      expect(result).toMatchObject({ exitCode: 0, timedOut: false });
      expect(result.durationMs).toBeLessThan(10_000);
    } finally {
      process.kill(escaped, 'SIGKILL');
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

describe('runProcess: abort signal', () => {
  it('an abort mid-run kills the group and says so', async () => {
    const controller = new AbortController();
    const running = runProcess(request(`${SPAWN_SLEEPER} setInterval(() => {}, 1000);`, { signal: controller.signal }));
    setTimeout(() => controller.abort(), 400);
    const result = await running;
    expect(result).toMatchObject({ aborted: true, timedOut: false, signal: 'SIGTERM' });
    expect(await eventuallyDead(Number(result.output.toString('utf8').trim()))).toBe(true);
  });

  it('a signal aborted before the start runs nothing', async () => {
    const marker = join(scratch, 'should-not-exist');
    const result = await runProcess(request(`require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'x')`, { signal: AbortSignal.abort() }));
    expect(result).toMatchObject({ aborted: true, exitCode: null, startError: null });
    expect(existsSync(marker)).toBe(false);
  });
});

describe('runProcess: output', () => {
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
    const result = await runProcess(request("const s = 'x'.repeat(4096); for (;;) process.stdout.write(s);", { output: { maxBytes: 10_000, onOverflow: 'kill' } }));
    expect(result).toMatchObject({ overflowed: true, timedOut: false, signal: 'SIGKILL', truncated: true });
    expect(result.output.length).toBe(10_000);
  });

  it('merges stderr into the output by default, or keeps it apart under its own cap', async () => {
    const script = "process.stdout.write('out;'); setTimeout(() => process.stderr.write('err-err-err'), 50);";
    const merged = await runProcess(request(script));
    expect(merged.output.toString('utf8')).toBe('out;err-err-err');
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

describe('runProcess: environment', () => {
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
