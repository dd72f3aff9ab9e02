/**
 * The jail for code proofgate did not write: checks, command reviewer lanes,
 * repairs, fixers and scenarios run through `runUntrusted` on a job directory
 * filled by `exportCommit`. See docs/forge.md for what a job sees.
 */
export type { SandboxMode, JailMount, JailLimits, UntrustedRequest, UntrustedResult, JailStatus } from './jail/types.js';
export { runUntrusted } from './jail/run.js';
export { prepareJobDir, makeJobDir } from './jail/jobdir.js';
export { prepareCacheDir } from './jail/shared-dir.js';
export { jailStatus } from './jail/status.js';
export { exportCommit } from './jail/export.js';
export { DEFAULT_LIMITS, JAIL_UID, JAIL_GID, ETC_ALLOW } from './jail/plan.js';
