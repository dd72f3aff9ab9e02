/**
 * The visible state of a change: one status comment per change and intent,
 * edited in place (found again by its signed marker), and three labels.
 * `labelPlan` is pure; `StatusWriter` performs the edits, one at a time per
 * change, and skips writes that would not change anything; `DecisionPresenter`
 * shows each new decision of a loop once (progress line, ledger step and note,
 * comment, labels). The loop writes every status comment and label; the
 * router only records commands and starts the loop, so all of them are made
 * under the change's lease.
 */
import { newId } from '../../core/index.js';
import type { ChangeSnapshot, Forge, ForgeComment } from '../../forge/port.js';
import type { AutomergeDecision } from '../decide.js';
import type { MarkerSecret } from '../markers.js';
import { DEFAULT_STATUS_INTENT, findStatusComment, renderStatusComment } from '../status-comment.js';
import { crashPoint } from './crash-seam.js';
import type { Iteration } from './iteration.js';
import { writeOwnComment } from './own-comment.js';
import type { AutomergeEnvironment } from './types.js';

export const LABELS = {
  automerge: 'proofgate:automerge',
  humanReview: 'proofgate:human-review',
  mergeReady: 'proofgate:merge-ready',
} as const;

export type LabelPhase = AutomergeDecision['kind'] | 'merged';

export interface LabelPlan {
  readonly add: readonly string[];
  readonly remove: readonly string[];
}

/**
 * Which labels to add and remove for a phase (pure): `proofgate:automerge`
 * while automerge is on (the loop's first decision adds it), dropped on a stop
 * or a merge; `proofgate:human-review` on a block; `proofgate:merge-ready`
 * while every gate is open but the forge refused the merge (the loop tries
 * again). A merge that goes through at once never shows it: the label would
 * cost two requests for a moment nobody sees.
 */
export function labelPlan(phase: LabelPhase, present: readonly string[]): LabelPlan {
  const want = new Set<string>();
  const drop = new Set<string>();
  switch (phase) {
    case 'merge':
      want.add(LABELS.automerge);
      want.add(LABELS.mergeReady);
      drop.add(LABELS.humanReview);
      break;
    case 'block':
      want.add(LABELS.automerge);
      want.add(LABELS.humanReview);
      drop.add(LABELS.mergeReady);
      break;
    case 'stop':
    case 'merged':
      drop.add(LABELS.automerge);
      drop.add(LABELS.mergeReady);
      break;
    case 'wait':
    case 'review':
    case 'repair':
      want.add(LABELS.automerge);
      drop.add(LABELS.mergeReady);
      drop.add(LABELS.humanReview);
      break;
  }
  const has = new Set(present.map((label) => label.toLowerCase()));
  return {
    add: [...want].filter((label) => !has.has(label.toLowerCase())),
    remove: [...drop].filter((label) => has.has(label.toLowerCase())),
  };
}

/** Serializes status writes per change and remembers what it last wrote. */
export class StatusWriter {
  readonly #forge: Forge;
  readonly #secret: MarkerSecret;
  readonly #intent: string;
  #chains = new Map<string, Promise<unknown>>();
  #written = new Map<string, ForgeComment>();
  #labels = new Map<string, readonly string[]>();

  constructor(forge: Forge, secret: MarkerSecret, intent: string = DEFAULT_STATUS_INTENT) {
    this.#forge = forge;
    this.#secret = secret;
    this.#intent = intent;
  }

  /**
   * This writer, writing through `forge` (a job's fenced forge): the same
   * queue of writes per change and the same memory of the comment and labels
   * written, so the router's writes and the job's edit one status comment.
   */
  through(forge: Forge): StatusWriter {
    const view = new StatusWriter(forge, this.#secret, this.#intent);
    view.#chains = this.#chains;
    view.#written = this.#written;
    view.#labels = this.#labels;
    return view;
  }

  get intent(): string {
    return this.#intent;
  }

  #serial<T>(changeId: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#chains.get(changeId) ?? Promise.resolve();
    const next = previous.then(task, task);
    this.#chains.set(
      changeId,
      next.catch(() => undefined),
    );
    return next;
  }

  /**
   * Write `body` into the change's status comment: edit the one this writer
   * wrote last, else the one `snapshot.comments` holds (by proofgate's own
   * login, compared case-insensitively, with a verified status marker; unless
   * it already says exactly this), else create it. A found comment the forge
   * refuses to let proofgate edit (a look-alike that is not proofgate's own)
   * is left alone, and a fresh status comment is written instead.
   */
  writeComment(snapshot: Pick<ChangeSnapshot, 'id' | 'comments'>, body: string): Promise<ForgeComment | null> {
    return this.#serial(snapshot.id, async () => {
      const known = this.#written.get(snapshot.id);
      const existing =
        known ?? findStatusComment(snapshot.comments, { selfLogin: this.#forge.selfLogin, secret: this.#secret, changeId: snapshot.id, intent: this.#intent });
      if (existing !== null && existing.body === body) return null;
      const { comment: written, created } = await writeOwnComment(this.#forge, snapshot.id, existing, body);
      if (created) crashPoint('status-comment-created');
      this.#written.set(snapshot.id, written);
      return written;
    });
  }

  /** Forget what this writer remembers of a change (call with a fresh snapshot). */
  refresh(snapshot: Pick<ChangeSnapshot, 'id' | 'labels'>): void {
    this.#labels.set(snapshot.id, snapshot.labels);
  }

  /** Apply a label plan against the labels last seen (the latest snapshot, or this writer's own last write). */
  applyLabels(snapshot: Pick<ChangeSnapshot, 'id' | 'labels'>, phase: LabelPhase): Promise<LabelPlan> {
    return this.#serial(snapshot.id, async () => {
      const present = this.#labels.get(snapshot.id) ?? snapshot.labels;
      const plan = labelPlan(phase, present);
      if (plan.add.length > 0) {
        await this.#forge.addLabels(snapshot.id, plan.add);
        crashPoint('label-added');
      }
      for (const label of plan.remove) await this.#forge.removeLabel(snapshot.id, label);
      const next = [...present.filter((label) => !plan.remove.includes(label)), ...plan.add];
      this.#labels.set(snapshot.id, next);
      return plan;
    });
  }
}

/**
 * Shows a loop's decisions. A decision is shown once while it stays the same
 * for the same head: a progress line and a `decision` step in the ledger;
 * a block, stop or wait also a note in the timeline; then the status comment
 * and the labels of its kind. A merge shows nothing here (the merge step
 * writes the rest), and a stop of a change automerge never ran on, or one
 * already merged, writes nothing visible.
 */
export class DecisionPresenter {
  readonly #env: AutomergeEnvironment;
  readonly #writer: StatusWriter;
  readonly #changeId: string;
  readonly #progress: (text: string) => void;
  #last = '';

  constructor(env: AutomergeEnvironment, writer: StatusWriter, changeId: string, progress: (text: string) => void) {
    this.#env = env;
    this.#writer = writer;
    this.#changeId = changeId;
    this.#progress = progress;
  }

  async show(it: Iteration, decision: AutomergeDecision): Promise<void> {
    const { store, secret } = this.#env;
    const changeId = this.#changeId;
    const key = `${decision.kind}|${decision.reason}|${it.snapshot.head.sha}`;
    if (key === this.#last) return;
    this.#last = key;
    this.#progress(`${decision.kind}: ${decision.reason}`);
    await store.step(changeId, 'decision', { kind: decision.kind, code: decision.code, reason: decision.reason, head: it.snapshot.head.sha });
    if (decision.kind === 'stop' && (it.state.automerge === null || it.state.merged !== null)) return;
    // A merge is tried at once: its labels are set only if the forge refuses it (loop.ts).
    if (decision.kind === 'merge') return;
    let state = it.state;
    if (decision.kind === 'block' || decision.kind === 'stop' || decision.kind === 'wait') {
      state = await store.record(changeId, { type: 'note', id: newId('note'), text: `${decision.kind}: ${decision.reason}`, at: store.now() });
    }
    await this.#writer.writeComment(
      it.snapshot,
      renderStatusComment({ changeId, intent: this.#writer.intent, head: it.snapshot.head.sha, decision, timeline: state.timeline }, secret),
    );
    await this.#writer.applyLabels(it.snapshot, decision.kind);
  }
}
