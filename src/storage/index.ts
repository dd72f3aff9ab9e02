export type * from './ports.js';
export type * from './policy-types.js';
