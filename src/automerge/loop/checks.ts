/**
 * The check runs one loop starts. On a forge without CI of its own (the
 * local forge) the loop runs a head's configured checks itself, once per
 * head, in the background while it keeps deciding; `checks-started` and
 * `checks-finished` steps let a restarted job see a run that a crash cut
 * short. When the loop ends stopped or interrupted, its runs are cancelled
 * (recorded as cancelled); otherwise they finish, awaited or handed to the
 * caller.
 */
import { errorMessage, isProofgateError } from '../../core/index.js';
import type { Iteration } from './iteration.js';
import type { AutomergeEnvironment } from './types.js';

export class LoopCheckRuns {
  readonly #env: AutomergeEnvironment;
  readonly #changeId: string;
  readonly #progress: (text: string) => void;
  readonly #rerun: Set<string> | undefined;
  readonly #runs = new Map<string, Promise<void>>();
  readonly #running = new Set<string>();
  readonly #cancel = new AbortController();
  #refused: unknown;

  /** `rerun`: heads whose earlier run was interrupted; their checks run once more (a head leaves the set when they start). */
  constructor(env: AutomergeEnvironment, changeId: string, progress: (text: string) => void, rerun?: Set<string>) {
    this.#env = env;
    this.#changeId = changeId;
    this.#progress = progress;
    this.#rerun = rerun;
  }

  /** A refusal no retry can cure (no working jail), once a run met one: the loop ends with it. */
  get refused(): unknown {
    return this.#refused;
  }

  /** Start the configured checks of the head when a configured check has no run on it (none yet, or one cancelled). */
  start(it: Iteration): void {
    const env = this.#env;
    const head = it.snapshot.head.sha;
    const run = env.startChecks;
    if (run === undefined || it.config.checks.length === 0 || it.snapshot.state !== 'open') return;
    if (this.#runs.has(head)) return;
    const rerun = this.#rerun?.has(head) === true;
    const onHead = it.snapshot.checks.filter((check) => check.headSha === head);
    if (!rerun && it.config.checks.every((configured) => onHead.some((check) => check.name === configured.name))) return;
    this.#rerun?.delete(head);
    this.#progress(`${rerun ? 'running again (the earlier run was interrupted)' : 'running'} ${it.config.checks.length} check(s) on ${head.slice(0, 12)}`);
    const changeId = this.#changeId;
    this.#running.add(head);
    const work = env.store
      .step(changeId, 'checks-started', { head })
      .then(() => run(changeId, head, this.#cancel.signal))
      .then(() => env.store.step(changeId, 'checks-finished', { head }))
      .catch(async (error: unknown) => {
        if (isProofgateError(error, 'JAIL_UNAVAILABLE')) this.#refused ??= error;
        this.#progress(`checks on ${head.slice(0, 12)} could not run: ${errorMessage(error)}`);
        await env.store.step(changeId, 'checks-failed-to-run', { head, reason: errorMessage(error) }).catch(() => undefined);
        await env.store.step(changeId, 'checks-finished', { head }).catch(() => undefined);
      })
      .finally(() => {
        this.#running.delete(head);
        env.signals.notify(changeId);
      });
    this.#runs.set(head, work);
  }

  /** Resolves when the run this loop started on `head` ended (at once when none did). */
  async settled(head: string): Promise<void> {
    await this.#runs.get(head);
  }

  /**
   * The loop ended: `cancel` (a stopped change, or an interrupted loop) cuts
   * its running checks short; they are recorded cancelled and run again when
   * a loop next needs them. The rest finish: awaited here, or given to
   * `background` so the outcome returns at once.
   */
  async end(cancel: boolean, background?: (work: Promise<void>) => void): Promise<void> {
    if (cancel && this.#running.size > 0) {
      this.#progress(`cancelling the checks running on ${[...this.#running].map((head) => head.slice(0, 12)).join(', ')}`);
      this.#cancel.abort();
    }
    if (background === undefined) await Promise.allSettled([...this.#runs.values()]);
    else for (const work of this.#runs.values()) background(work);
  }
}
