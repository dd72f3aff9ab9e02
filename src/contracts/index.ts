export * from './review-config.js';
export * from './review-request.js';
export * from './review-lane-result.js';
export * from './json-schemas.js';
export * from './automerge-steps.js';
