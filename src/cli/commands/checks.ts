import type { Command } from 'commander';
import type { CheckProgress, CheckRunResult } from '../../forge/local/index.js';
import { EXIT, emit, setExitStatus } from '../io.js';
import { addLocalForgeOptions, withLocalForge, type LocalForgeFlags } from './change.js';

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

function progressLine(progress: CheckProgress, tty: boolean): string | null {
  if (progress.phase === 'started') return tty ? `check ${progress.name}: running at ${progress.headSha.slice(0, 12)}` : null;
  if (progress.phase === 'completed') {
    const { result } = progress;
    const truncated = result.outputTruncated ? ', output truncated' : '';
    return `check ${result.name}: ${result.conclusion} (${seconds(result.durationMs)}${truncated})`;
  }
  return null;
}

function renderResults(changeId: string, headSha: string, results: readonly CheckRunResult[]): string {
  if (results.length === 0) return `change ${changeId}: no checks configured on the base branch`;
  const lines = [`change ${changeId} at ${headSha}:`];
  for (const result of results) {
    lines.push(`  ${result.conclusion.padEnd(15)} ${result.name} (${seconds(result.durationMs)})${result.outputUrl === null ? '' : `  ${result.outputUrl}`}`);
  }
  return lines.join('\n');
}

export function registerChecksCommands(program: Command): void {
  const checks = program.command('checks').description('checks of the local forge, configured in .proofgate.yml of the base branch');

  addLocalForgeOptions(
    checks
      .command('run')
      .description('run every configured check at the exact head of a change, each in a disposable worktree (exit 1 when one does not pass)')
      .argument('<id>', 'change id')
      .option('--json', 'print {"changeId","headSha","results"} as JSON'),
  ).action(async (id: string, flags: LocalForgeFlags) => {
    const tty = process.stderr.isTTY === true;
    const { headSha, results } = await withLocalForge(flags, (forge) =>
      forge.runChecks(id, {
        onProgress: (progress) => {
          const line = progressLine(progress, tty);
          if (line !== null) process.stderr.write(`${line}\n`);
        },
      }),
    );
    await emit(Boolean(flags.json), { changeId: id, headSha, results }, () => renderResults(id, headSha, results));
    const failed = results.filter((result) => result.conclusion !== 'success');
    if (failed.length > 0) {
      process.stderr.write(`proofgate: ${failed.length} of ${results.length} checks did not pass: ${failed.map((result) => `${result.name} (${result.conclusion})`).join(', ')}\n`);
      setExitStatus(EXIT.failure);
    }
  });
}
