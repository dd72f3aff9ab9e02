import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGraphExecutor, persistRunDefinition } from '../../src/runtime/index.js';
import { defaultStoragePolicy, type StoragePolicy } from '../../src/storage/index.js';
import { DATABASE_FILE, createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { runCli } from '../cli/helpers.js';
import { dag, node, planFor, required, startRun } from './fixtures.js';

const directories: string[] = [];
function tempDir(): string {
  const directory = mkdtempSync(join(tmpdir(), 'proofgate-runs-cli-'));
  directories.push(directory);
  return directory;
}
afterAll(() => {
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

const hashOf = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');
/** One line on stderr, ending with the error's code when the CLI prints it. */
const oneLine = (stderr: string, text: string) => expect(stderr).toMatch(new RegExp(`^proofgate: [^\\n]*${text}[^\\n]*\\n$`));

describe('proofgate runs (built CLI)', () => {
  let data = '';
  beforeAll(async () => {
    data = tempDir();
    const storage = createLocalRunStorage({ directory: data, namespace: 'default', policy: defaultStoragePolicy });
    const graph = dag([required('a'), required('b')], [{ from: 'a', to: 'b' }]);
    await startRun(storage, 'cli-run', graph);
    await (
      await createGraphExecutor({
        runId: 'cli-run',
        graph,
        storage,
        nodes: {
          a: node(() => 1),
          b: node(() => {
            throw new Error('bad b');
          }),
        },
        engines: [],
      })
    ).run();
    await storage.close();
  });

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
      'run-started',
      'dispatch-decided',
      'attempt-started',
      'attempt-completed',
      'dispatch-decided',
      'attempt-started',
      'attempt-failed',
      'run-failed',
    ]);
  });

  it('reports a missing run on one line with exit 1 and bad ids with exit 1', () => {
    const missing = runCli(['runs', 'show', 'nope', '--data', data]);
    expect(missing.status).toBe(1);
    oneLine(missing.stderr, 'run nope not found');
    const empty = runCli(['runs', 'list', '--data', join(data, 'absent')]);
    expect(empty.stdout.trim()).toBe('no runs');
    expect(() => statSync(join(data, 'absent'))).toThrow();
    expect(runCli(['runs', 'show', 'a/b', '--data', data]).status).toBe(1);
    expect(runCli(['runs', 'show']).status).toBe(2);
  });
});

describe('proofgate runs inspects without writing', () => {
  const customPolicy: StoragePolicy = { ...defaultStoragePolicy, maxEventPayloadBytes: 200_000, maxArtifactBytes: 2048 };

  it("reads a namespace made with another storage policy, and leaves the file's bytes as they were", async () => {
    const directory = tempDir();
    const storage = createLocalRunStorage({ directory, namespace: 'custom', policy: customPolicy });
    await startRun(storage, 'custom-run', dag([required('a')], []));
    await storage.close();
    const file = join(directory, DATABASE_FILE);
    const before = hashOf(file);
    const list = runCli(['runs', 'list', '--namespace', 'custom', '--data', directory]);
    expect(list.stderr).toBe('');
    expect(list.status).toBe(0);
    expect(list.stdout).toMatch(/custom-run\s+started\s+graph test-graph/);
    const show = runCli(['runs', 'show', 'custom-run', '--namespace', 'custom', '--data', directory]);
    expect(show.status).toBe(0);
    expect(show.stdout).toContain('run custom-run: started');
    const brandNew = runCli(['runs', 'list', '--namespace', 'brandnew', '--data', directory]);
    expect([brandNew.status, brandNew.stdout]).toEqual([0, 'no runs\n']);
    const showNew = runCli(['runs', 'show', 'custom-run', '--namespace', 'brandnew', '--data', directory]);
    expect(showNew.status).toBe(1);
    oneLine(showNew.stderr, 'run custom-run not found');
    expect(showNew.stderr).toContain('NOT_FOUND');
    expect(hashOf(file)).toBe(before);
  });

  it('an empty database file stays empty: no runs, no schema written', () => {
    const directory = tempDir();
    writeFileSync(join(directory, DATABASE_FILE), '');
    const list = runCli(['runs', 'list', '--data', directory]);
    expect([list.status, list.stdout]).toEqual([0, 'no runs\n']);
    expect(runCli(['runs', 'show', 'r1', '--data', directory]).status).toBe(1);
    expect(statSync(join(directory, DATABASE_FILE)).size).toBe(0);
  });

  it('a file that is not a database, or is damaged inside, is one typed line with exit 1', async () => {
    const garbage = tempDir();
    writeFileSync(join(garbage, DATABASE_FILE), 'plain text, not SQLite\n'.repeat(10));
    const damaged = tempDir();
    const storage = createLocalRunStorage({ directory: damaged, namespace: 'default', policy: defaultStoragePolicy });
    for (let batch = 0; batch < 20; batch += 1) {
      await storage.eventStore.append(
        'run/filler',
        batch * 50,
        Array.from({ length: 50 }, (_, i) => ({ id: `f-${batch}-${i}`, type: 't', data: 'x'.repeat(200) })),
      );
    }
    await storage.close();
    const bytes = readFileSync(join(damaged, DATABASE_FILE));
    const third = Math.floor(bytes.length / 3);
    writeFileSync(join(damaged, DATABASE_FILE), bytes.fill(0xa5, third, third * 2));
    for (const directory of [garbage, damaged]) {
      for (const args of [
        ['runs', 'list'],
        ['runs', 'show', 'filler'],
      ]) {
        const result = runCli([...args, '--data', directory]);
        expect(result.status).toBe(1);
        oneLine(result.stderr, `${join(directory, DATABASE_FILE)} is not a readable SQLite database`);
        expect(result.stderr).not.toContain('internal error');
      }
    }
  });
});

describe('proofgate runs with a stream it cannot read', () => {
  it('lists the other runs by start time and marks that one unreadable; show says why with exit 1', async () => {
    const directory = tempDir();
    const storage = createLocalRunStorage({ directory, namespace: 'default', policy: defaultStoragePolicy });
    const graph = dag([required('a')], []);
    const start = (runId: string, timestamp: string) =>
      persistRunDefinition(storage, {
        runId,
        eventId: `${runId}-started`,
        timestamp,
        graphDefinition: graph.definition,
        resolvedPlan: planFor(graph),
        resolvedInputs: {},
        workspaceBinding: null,
        hostBinding: null,
      });
    await start('b-early', '2026-01-01T00:00:00.000Z');
    await start('a-late', '2026-03-01T00:00:00.000Z');
    await start('c-middle', '2026-02-01T00:00:00.000Z');
    await storage.eventStore.append('run/foreign', 0, [{ id: 'e1', type: 't', data: {} }]);
    await storage.close();

    const json = runCli(['runs', 'list', '--json', '--data', directory]);
    expect(json.status).toBe(0);
    const runs = JSON.parse(json.stdout) as { runId: string; status: string; reason?: string }[];
    expect(runs.map((run) => [run.runId, run.status])).toEqual([
      ['b-early', 'started'],
      ['c-middle', 'started'],
      ['a-late', 'started'],
      ['foreign', 'unreadable'],
    ]);
    expect(runs[3]?.reason).toBe('run event e1 has unknown type t');
    const human = runCli(['runs', 'list', '--data', directory]);
    expect(human.status).toBe(0);
    expect(human.stdout).toMatch(/^foreign\s+unreadable\s+1 events: run event e1 has unknown type t$/m);

    const show = runCli(['runs', 'show', 'foreign', '--data', directory]);
    expect(show.status).toBe(1);
    expect(show.stdout).toBe('');
    oneLine(show.stderr, 'run foreign is unreadable: run event e1 has unknown type t');
  });
});
