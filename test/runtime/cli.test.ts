import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGraphExecutor } from '../../src/runtime/index.js';
import { defaultStoragePolicy } from '../../src/storage/index.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { runCli } from '../cli/helpers.js';
import { dag, node, required, startRun } from './fixtures.js';

describe('proofgate runs (built CLI)', () => {
  let data = '';
  beforeAll(async () => {
    data = mkdtempSync(join(tmpdir(), 'proofgate-runs-cli-'));
    const storage = createLocalRunStorage({ directory: data, namespace: 'default', policy: defaultStoragePolicy });
    const graph = dag([required('a'), required('b')], [{ from: 'a', to: 'b' }]);
    await startRun(storage, 'cli-run', graph);
    await (await createGraphExecutor({ runId: 'cli-run', graph, storage, nodes: { a: node(() => 1), b: node(() => { throw new Error('bad b'); }) }, engines: [] })).run();
    await storage.close();
  });
  afterAll(() => rmSync(data, { recursive: true, force: true }));

  it('lists runs with their status', () => {
    const human = runCli(['runs', 'list', '--data', data]);
    expect(human.status).toBe(0);
    expect(human.stdout).toMatch(/cli-run\s+failed\s+graph test-graph/);
    const json = runCli(['runs', 'list', '--json'], { env: { PROOFGATE_DATA_DIR: data } });
    expect(JSON.parse(json.stdout)).toEqual([expect.objectContaining({ runId: 'cli-run', status: 'failed', events: 8 })]);
  });

  it('shows a timeline, or the raw events with --json', () => {
    const human = runCli(['runs', 'show', 'cli-run', '--data', data]);
    expect(human.status).toBe(0);
    expect(human.stdout).toContain('run cli-run: failed');
    expect(human.stdout).toMatch(/attempt-failed\s+dag\/b\/1 error: bad b/);
    const json = JSON.parse(runCli(['runs', 'show', 'cli-run', '--json', '--data', data]).stdout) as { type: string }[];
    expect(json.map((event) => event.type)).toEqual([
      'run-started', 'dispatch-decided', 'attempt-started', 'attempt-completed', 'dispatch-decided', 'attempt-started', 'attempt-failed', 'run-failed',
    ]);
  });

  it('reports a missing run on one line with exit 1 and bad ids with exit 1', () => {
    const missing = runCli(['runs', 'show', 'nope', '--data', data]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toBe('proofgate: run nope not found\n');
    const empty = runCli(['runs', 'list', '--data', join(data, 'absent')]);
    expect(empty.stdout.trim()).toBe('no runs');
    expect(runCli(['runs', 'show', 'a/b', '--data', data]).status).toBe(1);
    expect(runCli(['runs', 'show']).status).toBe(2);
  });
});
