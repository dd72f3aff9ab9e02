/**
 * Where a review or a repair gets a local git repository holding the exact
 * base and head of a change, and how a repair publishes a new head: the
 * forge's change workspace (`Forge.workspace`, src/forge/port.ts). The local
 * forge's is the repository itself; GitHub's is a clone per change, published
 * with a git push with lease. The loop never chooses how to publish: a repair
 * prepares and publishes through `env.forge.workspace`.
 */
export type { ChangeWorkspace as Workspace } from '../../forge/port.js';
