import type { ChangeSnapshot, ForgeCheck, PushRequest } from '../../forge/port.js';
import type { RepairKind } from '../ledger.js';
import type { RepairConfig } from './config.js';
import type { ResolvedFile } from './rebase.js';

export interface RepairFinding {
  readonly title: string;
  readonly evidence: string;
  readonly path?: string;
  readonly line?: number;
}

export interface FailingCheck {
  readonly check: ForgeCheck;
  /** The check's log (its output), or null when none could be read. */
  readonly log: string | null;
}

export interface RepairContext {
  /** A local git repository holding the base and head commits (for the local forge: the repository itself). */
  readonly repoDir: string;
  /**
   * Publishes the result, a commit in `repoDir`: one compare-and-swap of the
   * change's head branch (a moved branch is `HEAD_MOVED`, nothing changed).
   * The loop's goes through the forge's change workspace
   * (`forge.workspace.publish`); see docs/forge.md.
   */
  readonly publish: (request: PushRequest) => Promise<void>;
  /** The live change the decision was made on. */
  readonly snapshot: ChangeSnapshot;
  /** From `decideAutomerge`. */
  readonly repair: RepairKind;
  readonly reason: string;
  /** Logs of terminal failures (may be null). */
  readonly failingChecks: readonly FailingCheck[];
  readonly findings: readonly RepairFinding[];
  /** Gate command, agent-fix command, time limits, from the trusted config's `automerge:` section. */
  readonly config: RepairConfig;
  /** Committer identity for repair commits. */
  readonly identity: { readonly name: string; readonly email: string };
  readonly signal?: AbortSignal;
  readonly onProgress?: (line: string) => void;
  /**
   * For `rebase`: when the mechanical resolvers cannot finish the rebase, hand
   * the conflict to the agent-fix command in the same call (default false:
   * the outcome is `no-change` naming the conflicted paths).
   */
  readonly agentFixConflicts?: boolean;
  /** Secret values to blank out of everything the agent sees and of every reason (with the storage free-text rules). */
  readonly knownSecrets?: readonly string[];
}

export type RepairOutcome =
  | {
      readonly kind: 'pushed';
      readonly method: 'rebase' | 'agent-fix';
      readonly oldHead: string;
      readonly newHead: string;
      /** The new commits on the branch (neither in the old head nor in the base), oldest first. */
      readonly commits: readonly string[];
      /** Paths a mechanical resolver merged, e.g. 'CHANGELOG.md'. */
      readonly resolved: readonly string[];
      /** Each resolution: path, resolver and the change's commit it was made for. */
      readonly resolutions: readonly ResolvedFile[];
      /** True when the configured gate ran and passed on `newHead` before the push. */
      readonly gated: boolean;
    }
  | {
      readonly kind: 'no-change';
      readonly reason: string;
      /** Paths that conflicted when the rebase stopped (empty otherwise). */
      readonly conflicts: readonly string[];
    }
  | { readonly kind: 'failed'; readonly reason: string; readonly transient: boolean };
