import { lazyModule } from '../../core/index.js';

/**
 * The ZIP packages of evidence bundles, loaded by the first command that
 * reads or writes one: both load node:zlib as they load, which every other
 * command would pay for at its start (src/host/node-modules.ts). Their types
 * stay out of the declarations other modules export, so a library user needs
 * no @types for them.
 */
export const loadYauzl = lazyModule<typeof import('yauzl')>('yauzl');
export const loadYazl = lazyModule<typeof import('yazl')>('yazl');
