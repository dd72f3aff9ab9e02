import { lazyModule } from '../core/index.js';

/**
 * Node's own modules that only some commands need, loaded on first use:
 * node:https (which brings TLS), node:http and node:zlib are among the
 * costlier to load, and every command would otherwise pay for them at its
 * start (bench/cli-startup.bench.mjs).
 */
export const loadHttp = lazyModule<typeof import('node:http')>('node:http');
export const loadHttps = lazyModule<typeof import('node:https')>('node:https');
export const loadZlib = lazyModule<typeof import('node:zlib')>('node:zlib');
