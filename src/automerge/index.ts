/**
 * Automerge, the pure parts: command parsing, trust, signed markers, the check
 * summarizer, the decision, the ledger reducer and status rendering.
 */
export * from './commands.js';
export * from './trust.js';
export * from './markers.js';
export * from './checks.js';
export * from './ledger.js';
export * from './decide.js';
export * from './trusted-paths.js';
export * from './status-comment.js';
export * from './repair/index.js';
export * from './loop/index.js';
