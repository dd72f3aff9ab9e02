import { Command, CommanderError } from 'commander';
import { readFileSync } from 'node:fs';
import { registerAutomergeCommands } from './commands/automerge.js';
import { registerCanonicalCommands } from './commands/canonical.js';
import { registerChangeCommands } from './commands/change.js';
import { registerChecksCommands } from './commands/checks.js';
import { registerDemoCommands } from './commands/demo.js';
import { registerReviewCommands } from './commands/review.js';
import { registerRunsCommands } from './commands/runs.js';
import { EXIT, commandExit, reportError } from './io.js';

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
  registerAutomergeCommands(program);
  registerCanonicalCommands(program);
  registerChangeCommands(program);
  registerChecksCommands(program);
  registerDemoCommands(program);
  registerReviewCommands(program);
  registerRunsCommands(program);
  for (const command of program.commands) command.exitOverride();
  return program;
}

/** Run the CLI and return the exit code (never throws). */
export async function runCli(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  commandExit.status = EXIT.ok;
  // Known once the arguments parsed: whether the command that runs was given --json.
  let json = false;
  program.hook('preAction', (_program, actionCommand) => {
    json = actionCommand.opts<{ json?: unknown }>().json === true;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return commandExit.status;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version') return EXIT.ok;
      // 'commander.help': no command was given, so help went to stderr as a usage error.
      return EXIT.usage;
    }
    return reportError(error, { json });
  }
}
