/**
 * `proofgate demo --serve` (the built CLI): the demo runs, then the demo
 * repository's service stays up on the printed URL (the dashboard, the read
 * API, /metrics) until SIGTERM; it then exits 0 and removes the temporary
 * repository. The process is started in a group of its own and stopped with
 * the test whatever happens.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { rawRequest } from '../support/http.js';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { demoPortFrom } from '../../src/cli/demo/serve.js';
import { CLI, runCliAsync } from '../cli/helpers.js';
import { startTestProcess, stopTestProcess } from '../support/processes.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function get(url: string): Promise<{ status: number; type: string; text: string }> {
  const target = new URL(url);
  const answer = await rawRequest(url, `${target.pathname}${target.search}`);
  return { status: answer.status, type: String(answer.headers['content-type']), text: answer.text };
}

describe('demoPortFrom', () => {
  it.each([
    [undefined, 0],
    ['0', 0],
    ['8080', 8080],
    ['65535', 65535],
  ])('%s is %d', (text, port) => expect(demoPortFrom(text)).toBe(port));
  it.each(['65536', '-1', 'http', '80.5', ''])('%s is a usage error', (text) => expect(() => demoPortFrom(text)).toThrow(/--port/));
});

describe('proofgate demo --serve (built CLI)', { timeout: 480_000 }, () => {
  it('--port without --serve is a usage error', async () => {
    const result = await runCliAsync(['demo', '--port', '1234']);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--port needs --serve');
  });

  it('a port in use is one line and exit 1 before the demo runs', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => busy.close(() => resolve())));
    const port = (busy.address() as AddressInfo).port;
    const cwd = mkdtempSync(join(tmpdir(), 'proofgate-demo-busy-'));
    cleanups.push(() => rmSync(cwd, { recursive: true, force: true }));
    const result = await runCliAsync(['demo', '--serve', '--port', String(port)], { cwd });
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toBe(`proofgate: cannot listen on 127.0.0.1:${port}: the address is in use [IO]`);
    expect(existsSync(join(cwd, '.proofgate'))).toBe(false);
  });

  it('runs the demo, serves the dashboard, the API and /metrics on the printed URL, and ends on SIGTERM', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'proofgate-demo-serve-'));
    cleanups.push(() => rmSync(cwd, { recursive: true, force: true }));
    const child = startTestProcess(process.execPath, [CLI, 'demo', '--serve', '--port', '0'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    cleanups.push(() => stopTestProcess(child));
    let stdout = '';
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString('utf8');
        const match = /^dashboard: (http:\/\/127\.0\.0\.1:\d+)\/ /m.exec(stdout);
        if (match !== null) resolve(match[1] as string);
      });
      child.once('exit', (code) => reject(new Error(`the demo exited (${String(code)}) before serving: ${stderr.slice(-2000)}`)));
    });
    expect(stdout).toContain('6 changes in');
    const repoDir = /repository in (\S+)/.exec(stderr)?.[1] ?? /creating the demo repository in (\S+)/.exec(stderr)?.[1];
    expect(repoDir).toBeDefined();
    expect(existsSync(repoDir as string)).toBe(true);

    const page = await get(`${url}/`);
    expect(page.status).toBe(200);
    expect(page.type).toBe('text/html; charset=utf-8');
    expect((await get(`${url}/assets/vendor/uPlot.esm.js`)).status).toBe(200);
    const changes = JSON.parse((await get(`${url}/api/changes?limit=10`)).text) as { changes: { stage: string }[] };
    expect(changes.changes).toHaveLength(6);
    expect(changes.changes.filter((change) => change.stage === 'merged')).toHaveLength(4);
    const metrics = await get(`${url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('proofgate_merges_total');

    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(existsSync(repoDir as string)).toBe(false);
  });
});
