import { once } from 'node:events';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestProcess } from './processes.js';
import { findRunProcesses, killProcesses } from './strays.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe.runIf(process.platform === 'linux')('the stray-process check at the end of a run', () => {
  it('finds a process by the run marker in its environment or by its working directory, and kills it', async () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), 'proofgate-strays-')));
    dirs.push(root);
    const marker = `PROOFGATE_TEST_RUN=${root.split('/').pop() ?? ''}`;
    const [name, value] = marker.split('=') as [string, string];
    // One carries the marker and works elsewhere; one has an empty environment and works inside the run's folder.
    const byEnv = startTestProcess('sleep', ['60'], { cwd: '/', env: { PATH: process.env.PATH ?? '', [name]: value }, stdio: 'ignore' });
    const byCwd = startTestProcess('/bin/sleep', ['61'], { cwd: root, env: {}, stdio: 'ignore' });
    const bystander = startTestProcess('sleep', ['62'], { cwd: '/', env: { PATH: process.env.PATH ?? '' }, stdio: 'ignore' });
    await Promise.all([byEnv, byCwd, bystander].map((child) => once(child, 'spawn')));
    const found = findRunProcesses({ marker, root, exclude: () => false });
    expect(found.map((stray) => stray.pid).sort()).toEqual([byEnv.pid, byCwd.pid].sort());
    expect(found.find((stray) => stray.pid === byCwd.pid)).toMatchObject({ command: '/bin/sleep 61', cwd: root, pgid: byCwd.pid });
    const exited = Promise.all([once(byEnv, 'exit'), once(byCwd, 'exit')]);
    killProcesses(found);
    await exited;
    expect(findRunProcesses({ marker, root, exclude: () => false })).toEqual([]);
    expect(bystander.exitCode).toBeNull();
  });
});
