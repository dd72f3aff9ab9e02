/**
 * A source of time that tests can replace: what time it is, and a timer that
 * fires after a span of that same time. Code that waits (the automerge wait
 * windows) takes its timer from here, so a test moves a manual clock forward
 * instead of sleeping.
 */
export interface Clock {
  now(): Date;
  /** Calls `fire` once, when `ms` have passed on this clock; the returned function cancels it. */
  timer(ms: number, fire: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => new Date(),
  timer(ms, fire) {
    const handle = setTimeout(fire, Math.max(0, ms));
    return () => clearTimeout(handle);
  },
};

/** A clock that moves only when told to: `advance` fires the timers that fall due, in order. */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  /** Timers set and neither fired nor cancelled. */
  pendingTimers(): number;
  /** Resolves when at least `count` timers are pending (at once if they are): how a test knows a waiter waits. */
  whenPending(count?: number): Promise<void>;
}

export function fixedClock(iso: string): ManualClock {
  let current = new Date(iso).getTime();
  let sequence = 0;
  const timers = new Map<number, { readonly due: number; readonly fire: () => void }>();
  const watchers: { readonly count: number; readonly resolve: () => void }[] = [];
  const notifyWatchers = (): void => {
    for (let i = watchers.length - 1; i >= 0; i -= 1) {
      const watcher = watchers[i]!;
      if (timers.size >= watcher.count) {
        watchers.splice(i, 1);
        watcher.resolve();
      }
    }
  };
  return {
    now: () => new Date(current),
    timer(ms, fire) {
      const id = (sequence += 1);
      timers.set(id, { due: current + Math.max(0, ms), fire });
      notifyWatchers();
      return () => {
        timers.delete(id);
      };
    },
    advance(ms) {
      const target = current + ms;
      for (;;) {
        // The earliest due timer first (ties in the order they were set); time stops at each.
        let next: [number, { due: number; fire: () => void }] | null = null;
        for (const entry of timers) if (entry[1].due <= target && (next === null || entry[1].due < next[1].due)) next = entry;
        if (next === null) break;
        timers.delete(next[0]);
        current = Math.max(current, next[1].due);
        next[1].fire();
      }
      current = target;
    },
    pendingTimers: () => timers.size,
    whenPending(count = 1) {
      if (timers.size >= count) return Promise.resolve();
      return new Promise<void>((resolve) => watchers.push({ count, resolve }));
    },
  };
}
