/**
 * Commands a human gave (`/proofgate review`, `/proofgate rebase`) that the
 * router queued for a change: the loop performs them between its own steps,
 * on the snapshot it just read.
 */
import type { ProofAdmission } from '../../proof/index.js';
import type { Iteration } from './iteration.js';
import { policyFromConfig } from './policy.js';
import { runRepairStep } from './repair-step.js';
import { runReviewStep } from './review-step.js';
import type { AutomergeEnvironment } from './types.js';

/** A command a human gave that the loop performs between its own steps. */
export type ManualCommand =
  | { readonly kind: 'review'; readonly actor: string }
  | { readonly kind: 'rebase'; readonly actor: string }
  /** A proof-focused review of the admitted head (`@proofgate proof`). */
  | { readonly kind: 'proof'; readonly actor: string; readonly admission: ProofAdmission };

/** Perform `commands` in order while the change is open; true when there were any (the loop then reads the change again). */
export async function runManualCommands(
  env: AutomergeEnvironment,
  it: Iteration,
  commands: readonly ManualCommand[],
  progress: (text: string) => void,
  signal?: AbortSignal,
): Promise<boolean> {
  for (const command of commands) {
    if (it.snapshot.state !== 'open') break;
    if (command.kind === 'review') {
      progress(`review of ${it.snapshot.head.sha.slice(0, 12)} asked by ${command.actor}`);
      await runReviewStep(env, it.snapshot, signal);
    } else if (command.kind === 'proof') {
      // The admitted head only: a change that moved on gets no proof tools from this decision (the session offers none).
      progress(`proof-focused review of ${it.snapshot.head.sha.slice(0, 12)} asked by ${command.actor}`);
      await runReviewStep(env, it.snapshot, signal, command.admission);
    } else {
      progress(`rebase asked by ${command.actor}`);
      const policy = policyFromConfig(it.config, env.forge.kind, it.snapshot);
      await runRepairStep(
        env,
        it.snapshot,
        { repair: 'rebase', reason: `rebase asked by ${command.actor}`, automatic: false },
        { config: it.config, checkPolicy: policy.checks, steps: it.loaded.steps, ...(signal === undefined ? {} : { signal }) },
      );
    }
  }
  return commands.length > 0;
}
