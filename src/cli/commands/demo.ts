import type { Command } from 'commander';
import { resolve } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { renderDemoTable, runDemo } from '../demo/run.js';
import { checkDemoPort, demoPortFrom, serveDemo } from '../demo/serve.js';
import { emit, setExitStatus, writeOut } from '../io.js';

interface DemoFlags {
  data?: string;
  keep?: boolean;
  json?: boolean;
  serve?: boolean;
  port?: string;
}

export function registerDemoCommands(program: Command): void {
  program
    .command('demo')
    .description('create a temporary git repository with six changes and take each through review, live proof, repair and merge on the local forge')
    .option('--data <dir>', 'state directory (default: ./.proofgate of the current directory); each run gets demo/<run id>/ inside')
    .option('--keep', 'keep the temporary repository (its path is printed)')
    .option('--json', 'print the result as JSON')
    .option('--serve', 'then serve the demo repository (dashboard, /api, /metrics) on 127.0.0.1 until SIGINT or SIGTERM, printing its URL')
    .option('--port <n>', 'with --serve: the port, 0 to 65535 (default 0: a free one)')
    .addHelpText(
      'after',
      '\nProgress goes to stderr, the table to stdout. Exit status: 0 when every change ended as expected, 1 otherwise.\nWith --serve, a line "dashboard: URL" follows the table, and the command ends on SIGINT or SIGTERM.',
    )
    .action(async (flags: DemoFlags) => {
      const dataRoot = resolve(flags.data ?? '.proofgate');
      if (flags.port !== undefined && flags.serve !== true) throw new ProofgateError('USAGE', '--port needs --serve');
      const port = demoPortFrom(flags.port);
      const serve = flags.serve === true;
      if (serve) await checkDemoPort(port);
      const result = await runDemo({ dataRoot, keep: Boolean(flags.keep) || serve, onProgress: (line) => process.stderr.write(`${line}\n`) });
      await emit(Boolean(flags.json), result, () =>
        [
          '',
          renderDemoTable(result.rows),
          '',
          `${result.rows.length} changes in ${result.seconds.toFixed(1)} s; state in ${result.dataDir}${flags.keep ? `; repository kept in ${result.repoDir}` : ''}`,
          result.sandboxLine,
        ].join('\n'),
      );
      if (serve) {
        await serveDemo({
          repoDir: result.repoDir,
          dataDir: result.dataDir,
          port,
          keep: Boolean(flags.keep),
          // With --json, stdout holds the JSON only: the line goes to stderr.
          onListening: (url) => {
            const line = `dashboard: ${url}/  (API ${url}/api/changes, metrics ${url}/metrics); Ctrl-C stops\n`;
            return flags.json ? void process.stderr.write(line) : writeOut(line);
          },
        });
      }
      if (!result.ok) {
        const wrong = result.rows
          .filter((row) => row.outcome !== row.expected)
          .map((row) => `change ${row.change} ${row.outcome} (expected ${row.expected}): ${row.reason}`);
        throw new ProofgateError('INTERNAL', `the demo did not end as expected: ${wrong.join('; ')}`);
      }
      setExitStatus(0);
    });
}
