import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CHECKOUT_GUARD_DIR, beginCheckoutMove, readBetweenCheckoutMoves, type CheckoutMove } from '../../src/host/index.js';
import { startTestProcess, stopTestProcess } from '../support/processes.js';
import { within } from '../support/wait.js';

const DIST_GUARD = fileURLToPath(new URL('../../dist/host/checkout-guard.js', import.meta.url));

/** A stand-in for a common git directory: the guard only uses its own folder inside it. */
let commonDir: string;
beforeEach(() => {
  commonDir = mkdtempSync(join(tmpdir(), 'proofgate-checkout-guard-'));
});
afterEach(() => rmSync(commonDir, { recursive: true, force: true }));

/** A promise that resolves the first time `signal` is called. */
function firstCall(): { signal: () => void; called: Promise<'waiting'>; count: () => number } {
  let count = 0;
  let resolve: (value: 'waiting') => void = () => undefined;
  const called = new Promise<'waiting'>((done) => (resolve = done));
  return {
    signal: () => {
      count += 1;
      resolve('waiting');
    },
    called,
    count: () => count,
  };
}

/** What the guard folder holds: move files and their content. */
function guardFiles(): Record<string, string> {
  const dir = join(commonDir, CHECKOUT_GUARD_DIR);
  return Object.fromEntries(
    readdirSync(dir)
      .filter((name) => name.startsWith('move.'))
      .map((name) => [name, readFileSync(join(dir, name), 'utf8').trim()]),
  );
}

/** Another node process that begins a move with the built guard, says so, and ends it when its input closes. */
function holderProcess() {
  const script = [
    `import { beginCheckoutMove } from ${JSON.stringify(DIST_GUARD)};`,
    `const move = await beginCheckoutMove(${JSON.stringify(commonDir)});`,
    `process.stdout.write('held\\n');`,
    `process.stdin.resume();`,
    `process.stdin.on('end', () => move.end().then(() => process.stdout.write('ended\\n')));`,
  ].join('\n');
  const child = startTestProcess(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  let text = '';
  child.stdout?.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  const said = (word: string) =>
    new Promise<void>((resolve) => {
      const look = () => {
        if (text.includes(`${word}\n`)) resolve();
      };
      child.stdout?.on('data', look);
      look();
    });
  return { child, held: said('held'), ended: said('ended') };
}

describe('the checkout guard (one process)', () => {
  it('keeps no read that overlapped a move still in progress: it waits for the move to end and reads again', async () => {
    const wait = firstCall();
    let move: CheckoutMove | null = null;
    let reads = 0;
    const result = readBetweenCheckoutMoves(
      commonDir,
      async () => {
        reads += 1;
        // The first read happens while a move begins (its ref moved, its work trees not yet).
        if (reads === 1) move = await beginCheckoutMove(commonDir);
        return reads === 1 ? 'during the move' : 'after the move';
      },
      { onWait: wait.signal },
    );
    expect(await within(Promise.race([result, wait.called]), 'the reader waits for the move')).toBe('waiting');
    await (move as CheckoutMove | null)?.end();
    expect(await result).toBe('after the move');
    expect(reads).toBe(2);
  });

  it('keeps no read during which a whole move began and ended (the generation moved)', async () => {
    const wait = firstCall();
    let reads = 0;
    const result = await readBetweenCheckoutMoves(
      commonDir,
      async () => {
        reads += 1;
        if (reads === 1) await (await beginCheckoutMove(commonDir)).end();
        return reads;
      },
      { onWait: wait.signal },
    );
    expect(result).toBe(2);
    expect(wait.count()).toBe(0);
  });

  it('lets a second mover begin only after the first ended', async () => {
    const first = await beginCheckoutMove(commonDir);
    const wait = firstCall();
    const second = beginCheckoutMove(commonDir, { onWait: wait.signal });
    expect(await within(Promise.race([second, wait.called]), 'the second mover waits')).toBe('waiting');
    expect(Object.values(guardFiles())).toEqual([String(process.pid)]);
    await first.end();
    await (await second).end();
    // The first move's file was cleaned up by the second; the second's says it is done.
    expect(guardFiles()).toEqual({ 'move.2': 'done' });
  });

  it('bounds the wait: past it a reader reads as without the guard', async () => {
    const move = await beginCheckoutMove(commonDir);
    let reads = 0;
    expect(await readBetweenCheckoutMoves(commonDir, () => Promise.resolve((reads += 1)), { waitMs: 0 })).toBe(1);
    await move.end();
  });
});

describe('the checkout guard across processes', () => {
  it('a reader waits for a move another process holds, and reads once it ended', async () => {
    const holder = holderProcess();
    await within(holder.held, 'the other process begins a move');
    const wait = firstCall();
    let reads = 0;
    const result = readBetweenCheckoutMoves(commonDir, () => Promise.resolve((reads += 1)), { onWait: wait.signal });
    expect(await within(Promise.race([result, wait.called]), 'the reader waits')).toBe('waiting');
    expect(reads).toBe(0);
    holder.child.stdin?.end();
    await within(holder.ended, 'the other process ends its move');
    expect(await result).toBe(1);
    await stopTestProcess(holder.child);
  });

  it('a mover that died holding the guard blocks no reader and no mover, and its file is cleaned up', async () => {
    const holder = holderProcess();
    await within(holder.held, 'the other process begins a move');
    const pid = holder.child.pid;
    expect(guardFiles()).toEqual({ 'move.1': String(pid) });
    await stopTestProcess(holder.child);

    const wait = firstCall();
    expect(await readBetweenCheckoutMoves(commonDir, () => Promise.resolve('read'), { onWait: wait.signal })).toBe('read');
    const move = await beginCheckoutMove(commonDir, { onWait: wait.signal });
    expect(guardFiles()).toEqual({ 'move.1': String(pid), 'move.2': String(process.pid) });
    await move.end();
    expect(wait.count()).toBe(0);
    expect(guardFiles()).toEqual({ 'move.2': 'done' });
  });
});
