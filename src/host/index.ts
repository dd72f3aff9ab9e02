/**
 * The machine proofgate runs on: child processes and the git binary. One
 * process runner (own process group, time limit, abort, capped output, an
 * environment built from an allow-list), one git runner (with a persistent
 * object reader per repository), the rule for what a
 * child may see of proofgate's environment, and the jail for code proofgate
 * did not write (`runUntrusted`, `exportCommit`), the loggers (pino, loaded
 * on first use), Node's costlier modules (loaded on first use too), and the
 * checkout guard by which proofgate processes sharing a repository see each
 * other's moves of a checked-out branch. Imports only `core`.
 */
export { CREDENTIAL_NAME, PORTABLE_ENV, SESSION_ENV, TOOLCHAIN_ENV, allowListedEnv } from './env.js';
export { processGone, runProcess, type ProcessRequest, type ProcessResult, type OutputCap } from './process.js';
export {
  runGit,
  gitText,
  gitEnvironment,
  gitRedactor,
  hasCommit,
  isAncestor,
  commitOf,
  objectInfo,
  readObject,
  safeGitArgs,
  SAFE_CONFIG,
  GIT_ENV,
  type GitResult,
  type ReadOptions,
  type GitOptions,
} from './git.js';
export {
  GitObjectReader,
  gitObjectReader,
  closeGitObjectReader,
  closeGitObjectReaders,
  readerCanAsk,
  type GitObject,
  type GitObjectInfo,
  type GitObjectType,
} from './git-reader.js';
export {
  runUntrusted,
  prepareJobDir,
  makeJobDir,
  jailStatus,
  exportCommit,
  prepareCacheDir,
  DEFAULT_LIMITS,
  JAIL_UID,
  JAIL_GID,
  type SandboxMode,
  type JailMount,
  type JailLimits,
  type UntrustedRequest,
  type UntrustedResult,
  type JailStatus,
} from './jail.js';
export { loadPino, silentLogger, stderrLogger } from './log.js';
export { loadHttp, loadHttps, loadZlib } from './node-modules.js';
export { beginCheckoutMove, readBetweenCheckoutMoves, CHECKOUT_GUARD_DIR, type CheckoutGuardOptions, type CheckoutMove } from './checkout-guard.js';
