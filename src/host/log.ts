import type { Logger } from 'pino';
import { lazyModule } from '../core/index.js';

/** pino, loaded when a logger is first made (the service's, or a silent default), not at every command's start. */
export const loadPino = lazyModule<typeof import('pino')>('pino');

let silent: Logger | undefined;
/** A logger that writes nothing: the default where a caller passes none. */
export function silentLogger(): Logger {
  return (silent ??= loadPino()({ level: 'silent' }));
}

/** The service's logger: JSON lines on stderr, written synchronously (nothing lost when the process ends). */
export function stderrLogger(options: { readonly level?: string; readonly isoTime?: boolean } = {}): Logger {
  const pino = loadPino();
  return pino(
    {
      name: 'proofgate',
      base: { pid: process.pid },
      ...(options.level === undefined ? {} : { level: options.level }),
      ...(options.isoTime === true ? { timestamp: pino.stdTimeFunctions.isoTime } : {}),
    },
    pino.destination({ fd: 2, sync: true }),
  );
}
