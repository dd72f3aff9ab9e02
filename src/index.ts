/**
 * proofgate: the library. Subpaths: `proofgate/storage/local` (SQLite) and
 * `proofgate/storage/postgres` (PostgreSQL).
 */
export * from './core/index.js';
export * from './host/index.js';
export * from './storage/index.js';
export * from './runtime/index.js';
export * from './contracts/index.js';
export * from './forge/index.js';
export * from './review/index.js';
export * from './automerge/index.js';
