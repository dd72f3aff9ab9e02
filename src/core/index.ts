export * from './errors.js';
export * from './canonical-json.js';
export * from './digest.js';
export * from './ids.js';
export * from './clock.js';
export * from './secrets.js';
export * from './lazy-module.js';
