export * from './port.js';
export * from './local/index.js';
export * from './github/index.js';
export * from './protection.js';
