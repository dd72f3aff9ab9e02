import { Command, CommanderError } from 'commander';
import { readFileSync } from 'node:fs';
import { registerAutomergeCommands } from './commands/automerge.js';
import { registerCanonicalCommands } from './commands/canonical.js';
import { registerChangeCommands } from './commands/change.js';
import { registerChecksCommands } from './commands/checks.js';
import { registerConfigCommands } from './commands/config.js';
import { registerDemoCommands } from './commands/demo.js';
import { registerEvidenceCommands } from './commands/evidence.js';
import { registerGitHubCommands } from './commands/github.js';
import { registerReviewCommands } from './commands/review.js';
import { registerQueueCommands } from './commands/queue.js';
import { registerRunsCommands } from './commands/runs.js';
import { registerServeCommands } from './commands/serve.js';
import { registerTokenCommands } from './commands/token.js';
import { EXIT, commandExit, reportError } from './io.js';

function packageVersion(): string {
  const url = new URL('../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

/** The trust model in a few lines; docs/trust.md says it in full. */
const TRUST_HELP = `
Trust:
  Trusted: the maintainers, through .proofgate.yml on the trusted branch (main,
  else master; see 'proofgate config trusted-branch') and on a change's base,
  which must be one of its protectedBranches; proofgate's own data dir.
  Untrusted: a change's head and every program that runs on it. Checks,
  command reviewer lanes, the repair gate and agent-fix run jailed (bubblewrap:
  own uid, namespaces and limits, no network, an export of the exact sha as the
  only writable tree); without bwrap they are refused unless the trusted config
  says 'sandbox: none'. Reviewer and repair programs come from the base tree.
  This CLI is single-user: whoever can write its data dir is trusted, and
  --as names a login, it does not authenticate one.
`;

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
  program.addHelpText('after', TRUST_HELP);
  program.exitOverride();
  registerAutomergeCommands(program);
  registerCanonicalCommands(program);
  registerChangeCommands(program);
  registerChecksCommands(program);
  registerConfigCommands(program);
  registerDemoCommands(program);
  registerEvidenceCommands(program);
  registerGitHubCommands(program);
  registerReviewCommands(program);
  registerRunsCommands(program);
  registerQueueCommands(program);
  registerServeCommands(program);
  registerTokenCommands(program);
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
