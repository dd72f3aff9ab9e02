export type * from './ports.js';
export type * from './policy-types.js';
export * from './policy.js';
export { decideAppend, type AppendDecision, type ExistingEvent } from './append-decision.js';
export { findFreeTextSecret, redactFreeText } from './free-text.js';
export { SENSITIVE_MARKER_KEY, REDACTED_MARKED } from './sensitive.js';
export { MIN_KNOWN_SECRET_LENGTH } from './known-secrets.js';
