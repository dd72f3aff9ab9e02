/**
 * proofgate: the library. Subpaths: `proofgate/storage/local` (SQLite) and
 * `proofgate/storage/postgres` (PostgreSQL).
 */
export * from './core/index.js';
export * from './storage/index.js';
