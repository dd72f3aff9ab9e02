import type { Command } from 'commander';
import { ProofgateError } from '../../core/index.js';
import { parseOutputUrl, type CheckProgress, type CheckRunResult, type LocalForge } from '../../forge/local/index.js';
import type { ForgeCheck } from '../../forge/port.js';
import { EXIT, emit, setExitStatus, writeOut } from '../io.js';
import { untrustedText } from '../untrusted-text.js';
import { addLocalForgeOptions, changeIdPath, withLocalForge, type LocalForgeFlags } from './change.js';
import { notRemote, remoteCall, remoteTarget } from '../remote.js';

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

function progressLine(progress: CheckProgress, tty: boolean): string | null {
  if (progress.phase === 'started') return tty ? `check ${untrustedText(progress.name)}: running at ${progress.headSha.slice(0, 12)}` : null;
  if (progress.phase === 'completed') {
    const { result } = progress;
    const truncated = result.outputTruncated ? ', output truncated' : '';
    return `check ${untrustedText(result.name)}: ${result.conclusion} (${seconds(result.durationMs)}, ${sandboxWord(result)}${truncated})`;
  }
  return null;
}

/** How a check ran, in the words the output uses: `jailed`, or `UNJAILED (sandbox: none)`. */
function sandboxWord(result: CheckRunResult): string {
  return result.sandbox === 'jail' ? 'jailed' : 'UNJAILED (sandbox: none)';
}

function renderResults(changeId: string, headSha: string, results: readonly CheckRunResult[]): string {
  if (results.length === 0) return `change ${changeId}: no checks configured on the base branch`;
  const lines = [`change ${changeId} at ${headSha}:`];
  for (const result of results) {
    lines.push(
      `  ${result.conclusion.padEnd(15)} ${untrustedText(result.name)} (${seconds(result.durationMs)}, ${sandboxWord(result)})${result.outputUrl === null ? '' : `  ${untrustedText(result.outputUrl)}`}`,
    );
  }
  if (results.some((result) => result.sandbox === 'none')) {
    lines.push("warning: checks ran UNJAILED: the trusted config says sandbox: none, so the head's code ran with your user's rights");
  }
  return lines.join('\n');
}

/** What `checks log` found: the newest run of one check on the change's current head and its stored output. */
interface CheckLog {
  readonly changeId: string;
  readonly headSha: string;
  readonly name: string;
  readonly status: ForgeCheck['status'];
  readonly conclusion: ForgeCheck['conclusion'];
  readonly outputUrl: string | null;
  readonly output: string;
}

async function readCheckLog(forge: LocalForge, changeId: string, name: string): Promise<CheckLog> {
  const snapshot = await forge.snapshot(changeId);
  const headSha = snapshot.head.sha;
  // The snapshot holds the newest run of each check name on the current head.
  const check = snapshot.checks.find((entry) => entry.name === name);
  if (check === undefined) throw new ProofgateError('NOT_FOUND', `change ${changeId}: no run of check "${name}" at head ${headSha}`);
  if (check.status !== 'completed')
    throw new ProofgateError('NOT_FOUND', `change ${changeId}: check "${name}" is ${check.status} at head ${headSha}; it has no output yet`);
  let output = '';
  if (check.url !== null) {
    const { namespace, runId, digest } = parseOutputUrl(check.url);
    output = Buffer.from(await forge.store.storage.artifactStore.read({ namespace, runId }, digest)).toString('utf8');
  }
  return { changeId, headSha, name, status: check.status, conclusion: check.conclusion, outputUrl: check.url, output };
}

/** `checks run` in client mode: the server runs them; each completed line is printed on stderr as direct mode does. */
async function remoteChecks(remote: NonNullable<ReturnType<typeof remoteTarget>>, id: string): Promise<{ headSha: string; results: CheckRunResult[] }> {
  const run = await remoteCall<{ headSha: string; results: CheckRunResult[] }>(remote, 'POST', `/api/changes/${changeIdPath(id)}/checks`, {});
  for (const result of run.results) {
    const line = progressLine({ phase: 'completed', result } as CheckProgress, false);
    if (line !== null) process.stderr.write(`${line}\n`);
  }
  return run;
}

export function registerChecksCommands(program: Command): void {
  const checks = program.command('checks').description('checks of the local forge, configured in .proofgate.yml of the base branch');

  addLocalForgeOptions(
    checks
      .command('run')
      .description('run every configured check at the exact head of a change, each jailed on its own export of that head (exit 1 when one does not pass)')
      .argument('<id>', 'change id')
      .option('--json', 'print {"changeId","headSha","results"} as JSON'),
  ).action(async (id: string, flags: LocalForgeFlags) => {
    const tty = process.stderr.isTTY === true;
    const remote = remoteTarget();
    const { headSha, results } =
      remote !== null
        ? await remoteChecks(remote, id)
        : await withLocalForge(flags, (forge) =>
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
      process.stderr.write(
        `proofgate: ${failed.length} of ${results.length} checks did not pass: ${failed.map((result) => `${untrustedText(result.name)} (${result.conclusion})`).join(', ')}\n`,
      );
      setExitStatus(EXIT.failure);
    }
  });

  addLocalForgeOptions(
    checks
      .command('log')
      .description("print the stored output of the newest run of check NAME on the change's current head")
      .argument('<id>', 'change id')
      .argument('<name>', 'check name, as in .proofgate.yml of the base branch')
      .option('--json', 'print {"changeId","headSha","name","status","conclusion","outputUrl","output"} as JSON')
      .addHelpText(
        'after',
        '\nThe output is printed as stored: stdout and stderr interleaved, the tail kept under the output cap (a cut output starts with a "(first bytes dropped ...)" line), secret-looking text redacted; control characters other than newlines (escape sequences, tabs, carriage returns, bidi controls) are shown escaped, as \\x1b, \\t, \\r, \\u202e (--json has the exact text). A check that printed nothing prints nothing. Exit 1 with one line on stderr when the change has no completed run of NAME at its current head.',
      ),
  ).action(async (id: string, name: string, flags: LocalForgeFlags) => {
    if (remoteTarget() !== null) throw notRemote('checks log');
    const log = await withLocalForge(flags, (forge) => readCheckLog(forge, id, name));
    if (flags.json === true) await emit(true, log, () => log.output);
    // Every line of the output is the check's own (nothing of proofgate's is on stdout here), so no prefix.
    else await writeOut(log.output === '' ? '' : `${untrustedText(log.output, { prefix: '' })}\n`);
  });
}
