/**
 * `proofgate demo --serve`: after the demo, the local service for the demo's
 * repository (the observer dashboard, `/api/`, `/metrics`) until SIGINT or
 * SIGTERM; then the temporary repository is removed unless it is kept.
 */
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { ProofgateError } from '../../core/index.js';
import { startLocalService } from '../../service/index.js';
import { usageError } from '../io.js';
import { stderrLogger } from '../../host/index.js';

/** `--port`: an integer from 0 to 65535 (0: a free port). Pure. */
export function demoPortFrom(text: string | undefined): number {
  if (text === undefined) return 0;
  const value = /^[0-9]{1,5}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isInteger(value) || value > 65535) throw usageError('--port must be an integer from 0 to 65535');
  return value;
}

/** Fail before the demo runs when `port` cannot be listened on (0 always can). */
export async function checkDemoPort(port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      const why = error.code === 'EADDRINUSE' ? 'the address is in use' : error.code === 'EACCES' ? 'permission denied' : error.message;
      reject(new ProofgateError('IO', `cannot listen on 127.0.0.1:${port}: ${why}`));
    });
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
}

export interface DemoServeOptions {
  readonly repoDir: string;
  readonly dataDir: string;
  readonly port: number;
  /** Keep the repository after the service stops. */
  readonly keep: boolean;
  /** Told the URL once the service listens. */
  readonly onListening: (url: string) => Promise<void> | void;
}

/** Serve the demo's repository until a signal; a second signal interrupts running jobs at once. */
export async function serveDemo(options: DemoServeOptions): Promise<void> {
  const logger = stderrLogger({ level: 'warn' });
  try {
    const service = await startLocalService({ repoDir: options.repoDir, dataDir: options.dataDir, host: '127.0.0.1', port: options.port, http: true, logger });
    let signals = 0;
    const onSignal = (): void => {
      signals += 1;
      void service.stop(signals === 1 ? 5000 : 0).catch(() => undefined);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      await options.onListening(service.url ?? '');
      await service.stopped;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  } finally {
    if (!options.keep) await rm(options.repoDir, { recursive: true, force: true });
  }
}
