/**
 * What one turn of the loop reads before it decides: the change's snapshot,
 * the trusted config of its base, its ledger and the trusted verdicts of its
 * comments. Rejected markers are logged once each; a merge the loop attempted
 * and the forge shows as landed (a crash between the two) is recorded.
 */
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, ForgeComment } from '../../forge/port.js';
import { outcomeKey, type AutomergeLedgerState } from '../ledger.js';
import { collectVerdicts, type TrustedVerdict } from '../markers.js';
import { enqueuedHead, queueRemovalRecords } from './forge-queue.js';
import type { LoadedLedger } from './ledger-store.js';
import { trustedConfig, withoutCancelledRuns } from './policy.js';
import type { AutomergeEnvironment } from './types.js';

export interface Iteration {
  readonly snapshot: ChangeSnapshot;
  /** The snapshot is the previous turn's, with proofgate's own write since (see `IterationReader.reuse`), not read afresh. */
  readonly reused: boolean;
  readonly config: RepoConfig;
  readonly loaded: LoadedLedger;
  readonly state: AutomergeLedgerState;
  readonly verdicts: readonly TrustedVerdict[];
}

/** The latest trusted verdict of `head`, else of any head (pure). */
export function latestVerdict(verdicts: readonly TrustedVerdict[], head: string): string | null {
  const forHead = verdicts.filter((v) => v.fields.head === head);
  const pick = forHead[forHead.length - 1] ?? verdicts[verdicts.length - 1];
  return pick?.fields.verdict ?? null;
}

/** Reads iterations of one change; remembers configs per base sha and the rejected markers already logged. */
export class IterationReader {
  readonly #env: AutomergeEnvironment;
  readonly #changeId: string;
  readonly #progress: (text: string) => void;
  readonly #configs = new Map<string, RepoConfig>();
  readonly #seenRejected = new Set<string>();

  constructor(env: AutomergeEnvironment, changeId: string, progress: (text: string) => void) {
    this.#env = env;
    this.#changeId = changeId;
    this.#progress = progress;
  }

  /** Read the change afresh; `refresh` sees each snapshot (the status writer's labels). */
  async read(refresh: (snapshot: ChangeSnapshot) => void): Promise<Iteration> {
    const env = this.#env;
    const changeId = this.#changeId;
    env.signals.clear(changeId);
    const current = await env.forge.snapshot(changeId);
    // Checks this process runs itself: a run a stop cancelled is run again rather than read as a failure.
    const snapshot = env.startChecks === undefined ? current : withoutCancelledRuns(current);
    refresh(snapshot);
    return this.#complete(snapshot, false);
  }

  /**
   * The previous turn's snapshot with `written` (a comment proofgate just
   * wrote, as the forge answered the write) in place of its older version,
   * when no event about the change arrived since that snapshot was read (an
   * event makes it null: read afresh). The ledger and the stored records are
   * read afresh as always. A decision made on it may only wait: the loop
   * reads afresh before anything else (loop.ts).
   */
  async reuse(previous: Iteration, written: ForgeComment): Promise<Iteration | null> {
    if (this.#env.signals.take(this.#changeId)) return null;
    const comments = [...previous.snapshot.comments.filter((comment) => comment.id !== written.id), written];
    return this.#complete({ ...previous.snapshot, comments }, true);
  }

  async #complete(snapshot: ChangeSnapshot, reused: boolean): Promise<Iteration> {
    const env = this.#env;
    const changeId = this.#changeId;
    // The trusted config is bound to the base sha: read it once per base.
    const config = this.#configs.get(snapshot.base.sha) ?? (await trustedConfig(env.forge, snapshot));
    this.#configs.set(snapshot.base.sha, config);
    const loaded = await env.store.load(changeId);
    const { verdicts, rejected } = collectVerdicts(snapshot.comments, { selfLogin: env.forge.selfLogin, secret: env.secret, changeId });
    for (const marker of rejected) {
      const key = `${marker.commentId}#${marker.index}`;
      if (this.#seenRejected.has(key)) continue;
      this.#seenRejected.add(key);
      this.#progress(`ignored a marker in comment ${marker.commentId}: ${marker.reason} (${marker.detail})`);
      await env.store.step(changeId, 'marker-rejected', { comment: marker.commentId, reason: marker.reason, detail: marker.detail });
    }
    let state = loaded.state;
    // A merge this loop attempted may have landed right before a crash, or GitHub's merge queue merged the head this loop
    // queued: the forge knows, the ledger catches up.
    const attempted = loaded.typedSteps.some((step) => step.step === 'merge-attempt' && step.head === snapshot.head.sha);
    if (snapshot.state === 'merged' && state.merged === null && snapshot.mergeCommitSha !== null && attempted) {
      const queued = enqueuedHead(loaded.steps, snapshot.head.sha);
      state = await env.store.record(changeId, {
        type: 'merged',
        id: `${queued ? 'forge-queue' : 'recovered'}-${snapshot.mergeCommitSha}`,
        head: snapshot.head.sha,
        mergeCommit: snapshot.mergeCommitSha,
        at: env.store.now(),
      });
      if (queued) env.observe?.({ kind: 'merge', outcome: 'merged' });
    }
    // GitHub's merge queue let the queued head go: why goes into the ledger (once; the records' keys come from the removal).
    for (const record of queueRemovalRecords(snapshot, loaded.steps)) {
      if (!state.processed.has(outcomeKey(record))) state = await env.store.record(changeId, record);
    }
    return { snapshot, reused, config, loaded, state, verdicts };
  }
}
