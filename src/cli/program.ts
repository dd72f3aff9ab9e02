import { Command, CommanderError } from 'commander';
import { readFileSync } from 'node:fs';
import { registerCanonicalCommands } from './commands/canonical.js';
import { EXIT, reportError } from './io.js';

function packageVersion(): string {
  const url = new URL('../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

/** Build the `proofgate` command tree. Each command module registers itself here. */
export function buildProgram(): Command {
  const program = new Command('proofgate')
    .description('Review, prove and merge code changes; every decision is bound to the exact bytes it covered.')
    .version(packageVersion(), '-V, --version')
    .showHelpAfterError(false)
    .configureOutput({
      // Commander's own usage errors become one line; help goes to stdout.
      outputError: (text, write) => write(`proofgate: ${text.replace(/^error: /, '').trim()}\n`),
    });
  program.exitOverride();
  registerCanonicalCommands(program);
  for (const command of program.commands) command.exitOverride();
  return program;
}

/** Run the CLI and return the exit code (never throws). */
export async function runCli(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help') return EXIT.ok;
      if (error.code === 'commander.executeSubCommandAsync') return error.exitCode;
      return EXIT.usage;
    }
    return reportError(error);
  }
}
