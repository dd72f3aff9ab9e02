import type { Command } from 'commander';
import { resolve } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { renderDemoTable, runDemo } from '../demo/run.js';
import { emit, setExitStatus } from '../io.js';

interface DemoFlags {
  data?: string;
  keep?: boolean;
  json?: boolean;
}

export function registerDemoCommands(program: Command): void {
  program
    .command('demo')
    .description('create a temporary git repository with six changes and take each through review, live proof, repair and merge on the local forge')
    .option('--data <dir>', 'state directory (default: ./.proofgate of the current directory); each run gets demo/<run id>/ inside')
    .option('--keep', 'keep the temporary repository (its path is printed)')
    .option('--json', 'print the result as JSON')
    .addHelpText('after', '\nProgress goes to stderr, the table to stdout. Exit status: 0 when every change ended as expected, 1 otherwise.')
    .action(async (flags: DemoFlags) => {
      const dataRoot = resolve(flags.data ?? '.proofgate');
      const result = await runDemo({ dataRoot, keep: Boolean(flags.keep), onProgress: (line) => process.stderr.write(`${line}\n`) });
      await emit(Boolean(flags.json), result, () =>
        [
          '',
          renderDemoTable(result.rows),
          '',
          `${result.rows.length} changes in ${result.seconds.toFixed(1)} s; state in ${result.dataDir}${flags.keep ? `; repository kept in ${result.repoDir}` : ''}`,
          result.sandboxLine,
        ].join('\n'),
      );
      if (!result.ok) {
        const wrong = result.rows
          .filter((row) => row.outcome !== row.expected)
          .map((row) => `change ${row.change} ${row.outcome} (expected ${row.expected}): ${row.reason}`);
        throw new ProofgateError('INTERNAL', `the demo did not end as expected: ${wrong.join('; ')}`);
      }
      setExitStatus(0);
    });
}
