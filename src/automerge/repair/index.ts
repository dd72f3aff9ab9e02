/**
 * The automerge repair path: the deterministic rebase fast path with
 * mechanical conflict resolvers, the agent-fix adapter, the gate (a failed
 * gate goes back to the agent for one validation pass), and one
 * compare-and-swap push per call.
 */
export { runRepair, VALIDATION_PASSES } from './run.js';
export type { RepairContext, RepairOutcome, RepairFinding, FailingCheck } from './types.js';
export type { RepairKind } from '../ledger.js';
export {
  repairConfigFrom,
  validateRepairConfig,
  DEFAULT_AGENT_FIX_TIMEOUT_SECONDS,
  DEFAULT_GATE_TIMEOUT_SECONDS,
  DEFAULT_REPAIR_OUTPUT_BYTES,
  type RepairConfig,
} from './config.js';
export type { ResolvedFile } from './rebase.js';
export { CONTEXT_FILE_ENV, GATE_OUTPUT_ENV } from './agent-fix.js';
export { REPAIR_CONTEXT_VERSION, GATE_OUTPUT_MAX_BYTES } from './context-file.js';
export { ALLOWED_ENVIRONMENT, commandEnvironment } from './process.js';
export {
  resolveConflict,
  resolveChangelog,
  resolveChecksums,
  parseChecksumLine,
  isChecksumFileName,
  type ConflictResolution,
  type ConflictVersions,
  type ResolverName,
  type ChecksumEntry,
} from './resolvers/index.js';
