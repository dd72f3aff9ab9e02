import type { Command } from 'commander';
import pino, { type Logger } from 'pino';
import { ProofgateError } from '../../core/index.js';
import { GitRepository, defaultLocalDataDir } from '../../forge/local/index.js';
import { SETTING, serveOptionsFrom, startLocalService, type ServeOptions } from '../../service/index.js';
import { resolveDataDir } from '../data-dir.js';
import { usageError } from '../io.js';

interface ServeCommandFlags {
  repo?: string;
  data?: string;
  port?: string;
  host?: string;
  http?: boolean;
  graceSeconds?: string;
}

export const DEFAULT_GRACE_SECONDS = 30;
const MAX_GRACE_SECONDS = 3600;

const SERVE_HELP = `
This version serves one local repository (--repo DIR): it routes the
proofgate commands of comments posted by any process (e.g. 'proofgate change
comment' in another terminal), and a push to a change's branch or to its base
wakes that change, or starts its automerge again when automerge is on. Serving
a GitHub App is not available in this version.

Logs are JSON lines (pino) on stderr: a "listening" line with the URL (useful
with --port 0, which picks a free port), a "progress" line per step of an
automerge job (changeId, text), and lines for the start and the end of jobs
and of the service. HTTP: GET /healthz (the process answers) and GET /readyz
(the store answers and the service is not stopping); there is no webhook route.

SIGTERM or SIGINT: no new job starts, running jobs get --grace-seconds to end,
the rest are interrupted (each stops at its next safe point and releases its
lease), the stores close and the exit status is 0. A second signal interrupts
the running jobs at once. Several 'serve --repo' processes on one repository
share its store: a change's job runs in one process at a time (a lease).
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
  return pino({ name: 'proofgate', base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ fd: 2, sync: true }));
}

export function registerServeCommands(program: Command): void {
  program
    .command('serve')
    .description('serve a local repository: route comment commands and follow branch moves, until SIGTERM or SIGINT; JSON logs on stderr')
    .option('--repo <dir>', 'the local git repository to serve (required in this version)')
    .option('--data <dir>', 'state directory (default: $PROOFGATE_DATA_DIR, else .git/proofgate/ of the repository)')
    .option('--port <n>', 'HTTP port for /healthz and /readyz; 0 picks a free one (default 8080)')
    .option('--host <host>', 'address to listen on (default 127.0.0.1)')
    .option('--no-http', 'listen on nothing')
    .option(
      '--grace-seconds <n>',
      `on SIGTERM or SIGINT, how long running jobs may take to end before they are interrupted, 0 to ${MAX_GRACE_SECONDS} (default ${DEFAULT_GRACE_SECONDS})`,
    )
    .addHelpText('after', SERVE_HELP)
    .action(async (flags: ServeCommandFlags) => {
      const graceSeconds = graceSecondsFrom(flags.graceSeconds);
      const options = serveOptionsFrom({ port: flags.port, host: flags.host, data: flags.data, http: flags.http, repo: flags.repo }, process.env);
      if (options.repo === null) {
        if (options.settings.github !== null) {
          throw new ProofgateError(
            'CONFIG',
            'the PROOFGATE_GITHUB_* settings are set, but serving a GitHub App is not available in this version; proofgate serve --repo DIR serves a local repository',
          );
        }
        throw usageError('proofgate serve needs --repo DIR, the local repository to serve (serving a GitHub App is not available in this version)');
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
      const onSignal = (signal: NodeJS.Signals): void => {
        logger.info({ signal, graceSeconds }, 'signal received');
        void service.stop(graceSeconds * 1000).catch(() => undefined);
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
      try {
        await service.stopped;
      } finally {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
    });
}
