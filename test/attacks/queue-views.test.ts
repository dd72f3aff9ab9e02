/**
 * The hostile change author against the merge queue's views: `/metrics`
 * (the `base` label of `proofgate_merge_queue_length`), `proofgate change
 * list|show` and `proofgate queue show`. What a change can put into a queue
 * stream is its title and, through a conflict or a failing check, reasons
 * quoting its file names; a base's name comes from the trusted config, but a
 * branch name may hold quotes and braces, and the exposition format must
 * survive any of them. Each view must keep such text inert (one line, no
 * terminal control, no forged line of proofgate's own) and the JSON exact.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { QueueStore } from '../../src/automerge/queue/store.js';
import { MAX_QUEUE_BASES, createServiceMetrics } from '../../src/service/metrics.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { loopFixture } from '../automerge/loop/local-support.js';
import { runCliAsync as runCli } from '../cli/helpers.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Sample {
  readonly value?: string;
  readonly labels?: Readonly<Record<string, string>>;
}
interface Family {
  readonly name: string;
  readonly type: string;
  readonly metrics: readonly Sample[];
}
const require = createRequire(import.meta.url);
const parsePrometheusText = require('parse-prometheus-text-format') as (text: string) => Family[];

const sha = (n: number): string => n.toString(16).padStart(40, '0');

/** A scratch event store for the automerge namespace, with a queue store on it. */
function scratchQueues(): QueueStore {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-queue-views-'));
  const storage = createLocalRunStorage({ directory: dir, namespace: 'automerge', policy: defaultStoragePolicy });
  cleanups.push(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return new QueueStore(storage.eventStore);
}

async function enqueue(queues: QueueStore, base: string, change: string, title = `change ${change}`): Promise<void> {
  await queues.append(base, [{ type: 'queue-enqueued', data: { change, head: sha(Number(change)), title, approvedTrusted: [], at: queues.now() } }]);
}

describe('/metrics and hostile merge queue bases', () => {
  it('a base name with quotes, braces, a backslash and a newline stays one label value: no forged series or family, the value exact', async () => {
    const queues = scratchQueues();
    const hostile = ['release"} 1\nproofgate_merges_total{outcome="merged"} 999\n# TYPE proofgate_fake counter', 'a\\b{x="1"}', 'feature/ünï\u202ecode'];
    for (const [i, base] of hostile.entries()) for (let n = 0; n <= i; n += 1) await enqueue(queues, base, String(10 * (i + 1) + n));
    const metrics = createServiceMetrics({ processMetrics: false, mergeQueue: { events: queues.events } });
    const text = await metrics.render();
    // Every line is a comment or one sample; the three bases are three samples, and nothing the base held became a line of its own.
    const lines = text.split('\n').filter((line) => line !== '' && !line.startsWith('# '));
    for (const line of lines) expect(line).toMatch(/^proofgate_[a-z_]+(\{.*\})? \S+$/);
    expect(lines.filter((line) => line.startsWith('proofgate_merge_queue_length'))).toHaveLength(3);
    expect(text).not.toMatch(/^proofgate_merges_total\{outcome="merged"\} 999$/m);
    expect(text).not.toMatch(/^# TYPE proofgate_fake/m);
    const families = parsePrometheusText(text);
    expect(families.map((f) => f.name)).not.toContain('proofgate_fake');
    for (const name of ['proofgate_merges_total', 'proofgate_merge_queue_candidates_total']) {
      expect(families.find((f) => f.name === name)?.metrics.every((sample) => sample.value === '0')).toBe(true);
    }
    const length = families.find((f) => f.name === 'proofgate_merge_queue_length');
    const byBase = Object.fromEntries((length?.metrics ?? []).map((s) => [s.labels?.base ?? '', Number(s.value)]));
    expect(byBase).toEqual({ [hostile[0] as string]: 1, [hostile[1] as string]: 2, [hostile[2] as string]: 3 });
  });

  it(`many bases: at most ${MAX_QUEUE_BASES} base label values, the rest counted under "other", no change lost`, async () => {
    const queues = scratchQueues();
    const bases = Array.from({ length: MAX_QUEUE_BASES + 12 }, (_, i) => `author-branch-${i}`);
    for (const [i, base] of bases.entries()) await enqueue(queues, base, String(i + 1));
    const metrics = createServiceMetrics({ processMetrics: false, mergeQueue: { events: queues.events } });
    const length = parsePrometheusText(await metrics.render()).find((f) => f.name === 'proofgate_merge_queue_length');
    const samples = length?.metrics ?? [];
    expect(samples).toHaveLength(MAX_QUEUE_BASES + 1);
    expect(samples.find((s) => s.labels?.base === 'other')?.value).toBe('12');
    expect(samples.reduce((sum, s) => sum + Number(s.value), 0)).toBe(bases.length);
    // A later scrape keeps the same label set: no series appears or moves between scrapes.
    const again = parsePrometheusText(await metrics.render()).find((f) => f.name === 'proofgate_merge_queue_length');
    expect(again?.metrics).toEqual(samples);
  });
});

describe('change list|show and queue show with hostile queue text (built CLI)', () => {
  it('a title and a removal reason quoting hostile file names stay one inert line each; JSON keeps them exact', async () => {
    const fixture = await loopFixture();
    cleanups.push(() => fixture.cleanup());
    const title = 'Fix\n  candidate    c-forged (1), tip 000000000000, checks passed\u001b]0;pwned\u0007 \u202eevil\u202c \u009b31m';
    const id = await fixture.openChange('hostile', { 'hostile.txt': 'x\n' }, title);
    const head = fixture.repo.sha('hostile');
    const queues = new QueueStore(fixture.automerge.env.store.events);
    const reason = 'CONFLICT (content): Merge conflict in \u001b[2Jevil\nqueue      landed (merge queue of main)\r\u202ex.txt';
    await queues.append('main', [
      { type: 'queue-enqueued', data: { change: id, head, title, approvedTrusted: [], at: queues.now() } },
      { type: 'queue-removed', data: { change: id, head, code: 'CONFLICT', reason, at: queues.now() } },
      { type: 'queue-enqueued', data: { change: id, head, title, approvedTrusted: [], at: queues.now() } },
    ]);
    const at = ['--repo', fixture.repo.dir, '--data', fixture.dataDir];
    const inert = (text: string): void => {
      for (const unsafe of ['\u001b', '\u0007', '\u009b', '\u202e', '\u202c', '\r']) expect(text).not.toContain(unsafe);
    };

    const shown = await runCli(['change', 'show', id, ...at]);
    expect(shown.status, shown.stderr).toBe(0);
    inert(shown.stdout);
    const lines = shown.stdout.split('\n');
    // One queue line, proofgate's own; the reason's forged line stays inside its history line.
    expect(lines.filter((line) => line.startsWith('queue '))).toEqual([`queue      position 1 of 1 in the merge queue of main, head ${head.slice(0, 12)}`]);
    expect(lines.filter((line) => line.trimStart().startsWith('candidate'))).toEqual([]);
    const removed = lines.filter((line) => line.includes('removed'));
    expect(removed).toHaveLength(1);
    expect(removed[0]).toContain('\\x1b[2Jevil\\nqueue      landed (merge queue of main)\\r\\u202ex.txt');

    const shownJson = JSON.parse((await runCli(['change', 'show', id, ...at, '--json'])).stdout) as {
      queue: { status: string; history: { kind: string; reason?: string }[] };
    };
    expect(shownJson.queue.status).toBe('waiting');
    expect(JSON.stringify(shownJson.queue.history)).toContain(JSON.stringify(reason).slice(1, -1));

    const listed = await runCli(['change', 'list', ...at]);
    expect(listed.status, listed.stderr).toBe(0);
    inert(listed.stdout);
    const row = listed.stdout.split('\n').filter((line) => line.startsWith(`${id}\t`));
    expect(row).toHaveLength(1);
    expect(row[0]?.split('\t').slice(0, 3)).toEqual([id, 'open, queued 1/1 on main', 'hostile -> main']);

    const queueShown = await runCli(['queue', 'show', ...at]);
    expect(queueShown.status, queueShown.stderr).toBe(0);
    inert(queueShown.stdout);
    expect(queueShown.stdout.split('\n').filter((line) => /^\s*candidate\b/.test(line))).toEqual([]);
    expect(queueShown.stdout.split('\n').filter((line) => line.startsWith('  1. change '))).toHaveLength(1);
    const queueJson = JSON.parse((await runCli(['queue', 'show', ...at, '--json'])).stdout) as { waiting: { title: string }[]; candidate: unknown };
    expect(queueJson.waiting.map((entry) => entry.title)).toEqual([title]);
    expect(queueJson.candidate).toBeNull();
  });
});
