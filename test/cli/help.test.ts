import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { startTestProcess } from '../support/processes.js';
import { CLI, runCli } from './helpers.js';

describe('proofgate --help', () => {
  it('states the trust model: what is trusted, what runs jailed, what the single-user CLI assumes', () => {
    const help = runCli(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Trust:$/m);
    expect(help.stdout).toContain('protectedBranches');
    expect(help.stdout).toMatch(/run jailed \(bubblewrap/);
    expect(help.stdout).toContain('sandbox: none');
    expect(help.stdout).toMatch(/single-user/);
  });
});

describe('output to a reader that went away', () => {
  it('`proofgate --help | head` ends quietly: no stack trace, the status it had', async () => {
    // The read end of stdout is closed before the command writes anything, so every write meets EPIPE.
    const child = startTestProcess(process.execPath, [CLI, 'serve', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.destroy();
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(stderr).not.toMatch(/EPIPE|Unhandled|at /);
    expect(code).toBe(0);
  });
});
