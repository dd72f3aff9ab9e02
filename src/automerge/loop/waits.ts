/**
 * Event-driven waits. A forge event (a local check finishing, a push, a
 * comment, a webhook delivery) calls `signals.notify(changeId)` and the
 * change's loop wakes at once; the poll interval is only a fallback for
 * events nobody delivered. Two wait windows bound how long a loop keeps
 * waiting: the shepherd window after a repair push, the transient window
 * before a merge and the review window while a change waits for required
 * approvals (each 600000 ms by default, polled every 15000 ms). The first two
 * end the loop as waiting; the review window ends it blocked, since only a
 * person can approve (an approval restarts the change).
 *
 * A loop run with `park` (a service's worker) does not wait in its process:
 * it records the open window in the ledger (a `wait-parked` step) and ends,
 * and the next run of the change takes the window back from that step
 * (`parkedWindow`), so a window's deadline holds however many runs it spans.
 */
import { systemClock, type Clock } from '../../core/index.js';
import { knownStepSchema } from '../../contracts/automerge-steps.js';
import type { AutomergeConfig } from '../../contracts/repo-config.js';
import type { AutomergeDecision } from '../decide.js';
import type { AutomergeLedgerState } from '../ledger.js';
import type { StepEvent } from './ledger-store.js';

export interface WaitSettings {
  /** Window after a repair push (default 600000 ms). */
  readonly shepherdWaitMs: number;
  readonly shepherdPollMs: number;
  /** Window before a merge while checks or mergeability settle (default 600000 ms). */
  readonly transientWaitMs: number;
  readonly transientPollMs: number;
  /** Window while required approvals are missing (default 600000 ms); its expiry ends the loop blocked. */
  readonly reviewWaitMs: number;
  readonly reviewPollMs: number;
}

export const DEFAULT_WAIT_SETTINGS: WaitSettings = {
  shepherdWaitMs: 600_000,
  shepherdPollMs: 15_000,
  transientWaitMs: 600_000,
  transientPollMs: 15_000,
  reviewWaitMs: 600_000,
  reviewPollMs: 15_000,
};

/** The wait settings: explicit overrides, then the trusted `automerge:` section, then the defaults. */
export function waitSettings(config: AutomergeConfig | undefined, overrides: Partial<WaitSettings> = {}): WaitSettings {
  return {
    shepherdWaitMs: overrides.shepherdWaitMs ?? config?.shepherdWaitMs ?? DEFAULT_WAIT_SETTINGS.shepherdWaitMs,
    shepherdPollMs: overrides.shepherdPollMs ?? config?.shepherdPollMs ?? DEFAULT_WAIT_SETTINGS.shepherdPollMs,
    transientWaitMs: overrides.transientWaitMs ?? config?.transientWaitMs ?? DEFAULT_WAIT_SETTINGS.transientWaitMs,
    transientPollMs: overrides.transientPollMs ?? config?.transientPollMs ?? DEFAULT_WAIT_SETTINGS.transientPollMs,
    reviewWaitMs: overrides.reviewWaitMs ?? config?.reviewWaitMs ?? DEFAULT_WAIT_SETTINGS.reviewWaitMs,
    reviewPollMs: overrides.reviewPollMs ?? config?.reviewPollMs ?? DEFAULT_WAIT_SETTINGS.reviewPollMs,
  };
}

export type WaitKind = 'shepherd' | 'transient' | 'review';

export interface WaitWindow {
  readonly kind: WaitKind;
  readonly head: string;
  readonly openedAt: number;
  readonly deadline: number;
  readonly pollMs: number;
}

/**
 * Which window a wait on `head` belongs to (pure): the review window while
 * required approvals are missing (`review-required`), the shepherd window
 * when the head is what a repair pushed, else the transient window.
 */
export function waitKindFor(ledger: AutomergeLedgerState, head: string, code?: string): WaitKind {
  if (code === 'review-required') return 'review';
  return ledger.repairs.some((repair) => repair.status === 'pushed' && repair.newHead === head) ? 'shepherd' : 'transient';
}

/** Keep an open window for the same head and kind; otherwise open a new one (pure). */
export function nextWindow(current: WaitWindow | null, kind: WaitKind, head: string, now: number, settings: WaitSettings): WaitWindow {
  if (current !== null && current.kind === kind && current.head === head) return current;
  const waitMs = kind === 'shepherd' ? settings.shepherdWaitMs : kind === 'review' ? settings.reviewWaitMs : settings.transientWaitMs;
  const pollMs = kind === 'shepherd' ? settings.shepherdPollMs : kind === 'review' ? settings.reviewPollMs : settings.transientPollMs;
  return { kind, head, openedAt: now, deadline: now + waitMs, pollMs };
}

/**
 * The window a parked run left open (pure): the window of the last
 * `wait-parked` step, unless a later step closed it (a decision other than a
 * wait, as a loop that keeps running forgets its window then, or the window's
 * expiry). `nextWindow` keeps it only for the same head and kind.
 */
export function parkedWindow(steps: readonly StepEvent[]): WaitWindow | null {
  for (let index = steps.length - 1; index >= 0; index -= 1) {
    const step = steps[index];
    if (step === undefined) continue;
    if (step.step === 'wait-expired' || (step.step === 'decision' && step.kind !== 'wait')) return null;
    if (step.step !== 'wait-parked') continue;
    const parsed = knownStepSchema.safeParse(step);
    if (!parsed.success || parsed.data.step !== 'wait-parked') return null;
    const { window, head, openedAt, deadline, pollMs } = parsed.data;
    return { kind: window, head, openedAt: Date.parse(openedAt), deadline: Date.parse(deadline), pollMs };
  }
  return null;
}

/** When a parked change should run again (pure): after its poll interval, or at its window's deadline when that comes first. */
export function parkedWakeAt(window: WaitWindow, now: number): number {
  return now + Math.max(0, Math.min(window.pollMs, window.deadline - now));
}

/** How a wait whose window has expired ends (pure). */
export type ExpiredWindow = { readonly kind: 'waiting'; readonly reason: string } | { readonly kind: 'blocked'; readonly decision: AutomergeDecision };

/**
 * The end of an expired window (pure): the review window blocks, since only
 * a person can give a missing approval (the approval restarts the change);
 * the others end the loop as waiting.
 */
export function expiredWindow(window: WaitWindow, decision: AutomergeDecision): ExpiredWindow {
  const span = window.deadline - window.openedAt;
  if (window.kind === 'review') {
    return {
      kind: 'blocked',
      decision: { kind: 'block', code: decision.code, reason: `no required approval within the ${span} ms review window: ${decision.reason}` },
    };
  }
  return { kind: 'waiting', reason: `${window.kind} wait window of ${span} ms expired: ${decision.reason}` };
}

/**
 * Wake-ups per change. `notify` wakes every waiter of the change at once; a
 * notification that arrives while nobody waits is kept, so the next wait
 * returns immediately (no event is lost between a snapshot and a wait). A
 * wait's timeout runs on the clock given here (a test's manual clock moves
 * it; nothing sleeps).
 */
export class ChangeSignals {
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #pending = new Set<string>();
  readonly #clock: Clock;

  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  notify(changeId: string): void {
    const waiters = this.#waiters.get(changeId);
    if (waiters === undefined || waiters.size === 0) {
      this.#pending.add(changeId);
      return;
    }
    for (const wake of [...waiters]) wake();
  }

  /** Wake every change that has a waiter (an event that names no change, e.g. a base push). */
  notifyAll(): void {
    for (const changeId of this.#waiters.keys()) this.notify(changeId);
  }

  /** Forget a kept notification (call right before reading fresh state). */
  clear(changeId: string): void {
    this.#pending.delete(changeId);
  }

  /** Take a kept notification: true when one arrived since the last `clear` (a loop that parks looks again instead). */
  take(changeId: string): boolean {
    return this.#pending.delete(changeId);
  }

  /** Resolve on the next notification of `changeId`, after `timeoutMs`, or on abort: says which. */
  wait(changeId: string, timeoutMs: number, signal?: AbortSignal): Promise<'notified' | 'timeout' | 'aborted'> {
    if (this.#pending.delete(changeId)) return Promise.resolve('notified');
    if (signal?.aborted === true) return Promise.resolve('aborted');
    return new Promise((resolve) => {
      const waiters = this.#waiters.get(changeId) ?? new Set<() => void>();
      this.#waiters.set(changeId, waiters);
      const done = (how: 'notified' | 'timeout' | 'aborted'): void => {
        cancelTimer();
        waiters.delete(wake);
        if (waiters.size === 0) this.#waiters.delete(changeId);
        signal?.removeEventListener('abort', onAbort);
        resolve(how);
      };
      const wake = (): void => done('notified');
      const onAbort = (): void => done('aborted');
      const cancelTimer = this.#clock.timer(Math.max(0, timeoutMs), () => done('timeout'));
      waiters.add(wake);
      signal?.addEventListener('abort', onAbort);
    });
  }
}
