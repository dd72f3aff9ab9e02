/**
 * Automerge, the effects: the comment router, the ledger store, one job per
 * change, the review, repair and merge steps, event-driven waits and the loop
 * that joins them.
 */
export * from './types.js';
export * from './ledger-store.js';
export * from './waits.js';
export * from './policy.js';
export * from './status.js';
export * from './review-step.js';
export * from './facts.js';
export * from './approval.js';
export * from './repair-step.js';
export * from './merge-step.js';
export * from './loop.js';
export * from './job.js';
export * from './fence.js';
export * from './router.js';
export * from './secret.js';
export * from './local.js';
export * from './repair-module.js';
export * from './recover.js';
export * from './crash-seam.js';
