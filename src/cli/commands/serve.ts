import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import type { Logger } from 'pino';
import { GitRepository, defaultLocalDataDir } from '../../forge/local/index.js';
import { stderrLogger } from '../../host/index.js';
import { SETTING, serveOptionsFrom, startGitHubService, startLocalService, type ServeOptions } from '../../service/index.js';
import { resolveDataDir } from '../data-dir.js';
import { usageError } from '../io.js';

interface ServeCommandFlags {
  repo?: string;
  data?: string;
  databaseUrl?: string;
  workers?: string;
  port?: string;
  host?: string;
  http?: boolean;
  graceSeconds?: string;
}

export const DEFAULT_GRACE_SECONDS = 30;
const MAX_GRACE_SECONDS = 3600;

const SERVE_HELP = `
Two ways to run:

  proofgate serve --repo DIR     one local repository: routes the proofgate
      commands of comments posted by any process (e.g. 'proofgate change
      comment' in another terminal); a push to a change's branch or to its
      base wakes that change, or starts its automerge again when it is on.
      HTTP: GET /healthz, GET /readyz, GET /metrics, the observer
      dashboard at GET / (board, a change's timeline, charts), the read API
      (GET /api/changes, /api/changes/ID, ...: a token from 'proofgate
      token create' as 'Authorization: Bearer ...'; not needed while the
      server listens on loopback only), the write API (POST /api/changes,
      /api/changes/ID/comments, /checks, /close: always a token, a JSON
      body, made as the token's identity, its permission capped by the
      token), and the repository over git at /git/NAME.git (NAME: the
      repository directory's name; HTTP Basic with the token as password;
      fetch needs read, push write, and an identity pushes only to
      refs/heads/LOGIN/..., never to a protected branch, a tag or another
      identity's branch). No webhooks. Every request must name this server
      in its Host header. Agents then need no access to the repository or
      the data directory: they set PROOFGATE_URL and PROOFGATE_TOKEN and
      use the CLI in client mode (docs/cli.md, "Client mode").

  proofgate serve                a GitHub App, from the PROOFGATE_GITHUB_*
      settings (docs/service.md): POST /webhooks takes signed deliveries
      (202 once recorded; a delivery seen before is 200 and does nothing);
      jobs go to a queue in the store (--data, the embedded SQLite store) or
      in PostgreSQL (--database-url or PROOFGATE_DATABASE_URL), where several
      processes on several machines share the work: one job per pull request
      at a time, a change that waits frees its worker, a dead worker's jobs
      are taken over. A reconciliation pass at start and every 10 minutes
      finds what missed deliveries left behind.

Both answer GET /metrics with Prometheus text (no secret asked, like
/healthz): reviews, repairs and merges, and for the GitHub App webhook
deliveries, queue depth, job durations and GitHub requests (docs/service.md,
"Metrics"). Keep the port off the internet, or put a proxy in front.

Logs are JSON lines (pino) on stderr: a "listening" line with the URL (useful
with --port 0, which picks a free port), a line per step of an automerge job,
and lines for jobs and for the service.

SIGTERM or SIGINT: no new job starts, running jobs get --grace-seconds to end,
the rest are interrupted (each stops at its next safe point and releases its
lease; a queued job is released to run again), the stores close and the exit
status is 0. A second signal interrupts the running jobs at once.
`;

/** `--grace-seconds`: an integer from 0 to 3600 (default 30). */
export function graceSecondsFrom(text: string | undefined): number {
  if (text === undefined) return DEFAULT_GRACE_SECONDS;
  const value = /^[0-9]{1,4}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isInteger(value) || value > MAX_GRACE_SECONDS) throw usageError(`--grace-seconds must be an integer from 0 to ${MAX_GRACE_SECONDS}`);
  return value;
}

/** The environment settings a local repository's service does not use, by variable name (pure). */
export function unusedSettings(options: ServeOptions): string[] {
  const unused: string[] = [];
  if (options.settings.github !== null) unused.push('PROOFGATE_GITHUB_*');
  if (options.storage.kind === 'postgres' && options.storage.from === 'env') unused.push(SETTING.databaseUrl);
  if (options.settings.markerSecret !== null) unused.push(SETTING.markerSecret);
  return unused;
}

function serviceLogger(): Logger {
  return stderrLogger({ isoTime: true });
}

/** Run until a signal stops `service` (SIGTERM or SIGINT; a second one interrupts at once). */
async function untilSignal(
  service: { stop(graceMs: number): Promise<void>; readonly stopped: Promise<void> },
  logger: Logger,
  graceSeconds: number,
): Promise<void> {
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    logger.info({ signal, graceSeconds: signals === 1 ? graceSeconds : 0 }, 'signal received');
    void service.stop(signals === 1 ? graceSeconds * 1000 : 0).catch(() => undefined);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    await service.stopped;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

/** `proofgate serve` without --repo: the GitHub App service. */
async function serveGitHubApp(options: ServeOptions, graceSeconds: number): Promise<void> {
  const github = options.settings.github;
  if (github === null) {
    throw usageError('proofgate serve needs the PROOFGATE_GITHUB_* settings (a GitHub App: see docs/service.md), or --repo DIR to serve a local repository');
  }
  const logger = serviceLogger();
  const dataDir = resolveDataDir(options.storage.kind === 'sqlite' ? (options.storage.dataDir ?? undefined) : undefined, join(homedir(), '.proofgate'));
  const service = await startGitHubService({
    app: github,
    storage: options.storage.kind === 'postgres' ? { kind: 'postgres', url: options.storage.url, workDir: dataDir } : { kind: 'sqlite', dataDir },
    markerSecret: options.settings.markerSecret,
    host: options.host,
    port: options.port,
    http: options.http,
    workers: options.workers,
    logger,
  });
  await untilSignal(service, logger, graceSeconds);
}

export function registerServeCommands(program: Command): void {
  program
    .command('serve')
    .description('serve a GitHub App (webhooks, job queue, workers) or, with --repo, a local repository, until SIGTERM or SIGINT; JSON logs on stderr')
    .option('--repo <dir>', 'serve this local git repository instead of a GitHub App')
    .option('--data <dir>', 'state directory (default: $PROOFGATE_DATA_DIR, else .git/proofgate/ of the repository with --repo, else ~/.proofgate)')
    .option('--database-url <url>', 'PostgreSQL for the GitHub App service, shared by several processes (default: $PROOFGATE_DATABASE_URL)')
    .option('--workers <n>', 'jobs run at once in this process, 1 to 64 (default 1)')
    .option('--port <n>', 'HTTP port (/webhooks, /healthz, /readyz, /metrics; /api and /git with --repo); 0 picks a free one (default 8080)')
    .option('--host <host>', 'address to listen on (default 127.0.0.1)')
    .option('--no-http', 'listen on nothing')
    .option(
      '--grace-seconds <n>',
      `on SIGTERM or SIGINT, how long running jobs may take to end before they are interrupted, 0 to ${MAX_GRACE_SECONDS} (default ${DEFAULT_GRACE_SECONDS})`,
    )
    .addHelpText('after', SERVE_HELP)
    .action(async (flags: ServeCommandFlags) => {
      const graceSeconds = graceSecondsFrom(flags.graceSeconds);
      const options = serveOptionsFrom(
        { port: flags.port, host: flags.host, data: flags.data, databaseUrl: flags.databaseUrl, workers: flags.workers, http: flags.http, repo: flags.repo },
        process.env,
      );
      if (options.repo === null) {
        await serveGitHubApp(options, graceSeconds);
        return;
      }
      const repo = await GitRepository.open(options.repo);
      const dataDir = resolveDataDir(flags.data, defaultLocalDataDir(repo));
      const logger = serviceLogger();
      const unused = unusedSettings(options);
      if (unused.length > 0) logger.warn({ settings: unused }, 'settings not used when serving a local repository');
      const service = await startLocalService({
        repoDir: repo.root,
        dataDir,
        host: options.host,
        port: options.port,
        http: options.http,
        logger,
      });
      await untilSignal(service, logger, graceSeconds);
    });
}
