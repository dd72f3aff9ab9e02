/**
 * One `proofgate serve` worker process for the race attacks (bundled from
 * the current source by github-races-workers.ts, run as a child process):
 * the GitHub App service on a shared PostgreSQL database with the test's
 * short settings. It prints one JSON line per job event and per log line on
 * stdout. With `pause`, the first log line (of any worker sharing the claim
 * directory) that matches makes this process stop itself (SIGSTOP) or kill
 * itself (SIGKILL) right there, in the middle of what it was doing: the
 * line is written synchronously from inside the code that logs it.
 */
import { mkdirSync, writeSync } from 'node:fs';
import pino from 'pino';
import { startGitHubService } from '../../src/service/index.js';

export interface RaceWorkerConfig {
  readonly appId: number;
  readonly privateKey: string;
  readonly webhookSecret: string;
  readonly apiUrl: string;
  readonly databaseUrl: string;
  readonly workDir: string;
  readonly remote: string;
  readonly retakeMs: number;
  readonly leaseMs: number;
  readonly pollMs: number;
  readonly pause?: { readonly pattern: string; readonly action: 'stop' | 'kill'; readonly claim: string };
}

const NEVER_MS = 3_600_000;
const config = JSON.parse(process.env.PROOFGATE_RACES_WORKER ?? '{}') as RaceWorkerConfig;

function line(value: Record<string, unknown>): void {
  const bytes = Buffer.from(`${JSON.stringify({ ...value, pid: process.pid })}\n`, 'utf8');
  for (let at = 0; at < bytes.length;) {
    try {
      at += writeSync(1, bytes, at);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
    }
  }
}

/** The first worker to take the claim pauses; the others go on. */
function claim(directory: string): boolean {
  try {
    mkdirSync(directory);
    return true;
  } catch {
    return false;
  }
}

const pause = config.pause;
const pattern = pause === undefined ? null : new RegExp(pause.pattern);
const destination = {
  write(text: string): void {
    let entry: { msg?: unknown; change?: unknown };
    try {
      entry = JSON.parse(text) as { msg?: unknown; change?: unknown };
    } catch {
      return;
    }
    const msg = typeof entry.msg === 'string' ? entry.msg : '';
    line({ kind: 'log', msg, change: typeof entry.change === 'string' ? entry.change : null });
    if (pause !== undefined && pattern !== null && pattern.test(msg) && claim(pause.claim)) {
      line({ kind: 'pausing', msg, action: pause.action });
      process.kill(process.pid, pause.action === 'kill' ? 'SIGKILL' : 'SIGSTOP');
      line({ kind: 'continued', msg });
    }
  },
};

const service = await startGitHubService({
  app: { appId: config.appId, privateKey: config.privateKey, privateKeySource: { kind: 'env' }, webhookSecret: config.webhookSecret, apiUrl: config.apiUrl },
  storage: { kind: 'postgres', url: config.databaseUrl, workDir: config.workDir },
  markerSecret: null,
  host: '127.0.0.1',
  port: 0,
  http: true,
  workers: 1,
  logger: pino({ level: 'info' }, destination),
  remoteUrl: () => config.remote,
  retry: { retries: 2, baseDelayMs: 1 },
  throttle: { secondMs: 1, writeIntervalMs: 0, notificationIntervalMs: 0, maxRetries: 2 },
  waits: { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS },
  pollMs: config.pollMs,
  retakeMs: config.retakeMs,
  leaseMs: config.leaseMs,
  observe: (event) =>
    line({
      kind: event.kind,
      ...(event.kind === 'unlocked' ? { workerIds: event.workerIds, jobs: event.jobs } : { task: event.job.task, queue: event.job.queue, key: event.job.key }),
      ...(event.kind === 'failed' ? { error: event.error, final: event.final } : {}),
    }),
});
line({ kind: 'ready', url: service.url, workerIds: service.runner.workerIds });
process.on('SIGTERM', () => {
  void service.stop(2_000).then(() => process.exit(0));
});
