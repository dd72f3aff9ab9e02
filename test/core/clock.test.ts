import { describe, expect, it } from 'vitest';
import { fixedClock, systemClock } from '../../src/core/index.js';

describe('the manual clock (fixedClock)', () => {
  it('moves only when advanced, and fires the timers that fall due in order, each at its own time', () => {
    const clock = fixedClock('2030-01-01T00:00:00.000Z');
    const fired: string[] = [];
    clock.timer(300, () => fired.push(`c@${clock.now().getTime() - Date.parse('2030-01-01T00:00:00.000Z')}`));
    clock.timer(100, () => fired.push(`a@${clock.now().getTime() - Date.parse('2030-01-01T00:00:00.000Z')}`));
    const cancel = clock.timer(200, () => fired.push('cancelled'));
    clock.timer(100, () => fired.push('b'));
    expect(clock.pendingTimers()).toBe(4);
    cancel();
    clock.advance(99);
    expect(fired).toEqual([]);
    clock.advance(250);
    expect(fired).toEqual(['a@100', 'b', 'c@300']);
    expect(clock.now().toISOString()).toBe('2030-01-01T00:00:00.349Z');
    expect(clock.pendingTimers()).toBe(0);
  });

  it('a timer set by a firing timer fires in the same advance when it falls due within it', () => {
    const clock = fixedClock('2030-01-01T00:00:00.000Z');
    const fired: number[] = [];
    const poll = (): void => {
      fired.push(clock.now().getTime());
      if (fired.length < 3) clock.timer(10, poll);
    };
    clock.timer(10, poll);
    clock.advance(25);
    expect(fired.map((at) => at - Date.parse('2030-01-01T00:00:00.000Z'))).toEqual([10, 20]);
    clock.advance(5);
    expect(fired).toHaveLength(3);
  });

  it('whenPending resolves once the asked number of timers is set', async () => {
    const clock = fixedClock('2030-01-01T00:00:00.000Z');
    let seen = false;
    const two = clock.whenPending(2).then(() => (seen = true));
    clock.timer(5, () => undefined);
    await Promise.resolve();
    expect(seen).toBe(false);
    clock.timer(5, () => undefined);
    await two;
    expect(seen).toBe(true);
    await clock.whenPending(1);
  });
});

describe('the system clock', () => {
  it('fires a timer once, and a cancelled timer never', async () => {
    const fired: string[] = [];
    const cancel = systemClock.timer(0, () => fired.push('cancelled'));
    cancel();
    await new Promise<void>((resolve) =>
      systemClock.timer(1, () => {
        fired.push('fired');
        resolve();
      }),
    );
    expect(fired).toEqual(['fired']);
  });
});
