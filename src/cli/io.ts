import { readFile } from 'node:fs/promises';
import { ProofgateError, errorMessage, isProofgateError } from '../core/index.js';
import { jsonForTerminal, untrustedText } from './untrusted-text.js';

/** Exit codes shared by every command. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/**
 * The exit status a command asks for when its outcome is not plain success or
 * failure (e.g. `proofgate review`: 3 REFUTED, 5 HOLD). The command's output is
 * written first; runCli returns this status once the command has finished.
 */
export const commandExit = { status: EXIT.ok as number };

export function setExitStatus(status: number): void {
  commandExit.status = status;
}

/** A usage error: wrong arguments. Exit 2. */
export function usageError(message: string): ProofgateError {
  return new ProofgateError('USAGE', message);
}

/** Read a whole file, or standard input for `-`; a missing file is a one-line IO error. */
export async function readInput(file: string): Promise<Buffer> {
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }
  try {
    return await readFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : errorMessage(error);
    throw new ProofgateError('IO', `cannot read ${file}: ${why}`);
  }
}

/** Write text to stdout and wait for it to drain (so piped output is complete before exit). */
export function writeOut(text: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(text, (error) => (error ? reject(error) : resolve()));
  });
}

/**
 * Print a value: JSON (one line, the exact value) when asked, else the human
 * rendering, which shows every untrusted field through `untrustedText`.
 */
export async function emit(json: boolean, value: unknown, human: () => string): Promise<void> {
  await writeOut(json ? `${jsonForTerminal(value)}\n` : `${human()}\n`);
}

/** What `reportError` needs to know about the command that failed. */
export interface ErrorReportOptions {
  /** The command was given `--json`: also print the error as JSON on stdout. */
  readonly json?: boolean;
}

/** The machine-readable form of a failure, printed on stdout under `--json`. */
export interface ErrorDocument {
  readonly error: { readonly code: string; readonly message: string };
}

/**
 * Turn any thrown value into one line on stderr and an exit code. A typed
 * error's line ends with its code in brackets (`proofgate: <message> [CODE]`)
 * so scripts can branch on it; under `--json` the same code and message are
 * also printed on stdout as one `{"error":{"code","message"}}` line. User
 * errors (typed) never show a stack trace; an unexpected error is reported
 * with code INTERNAL and shows its stack only when PROOFGATE_DEBUG is set.
 */
export async function reportError(error: unknown, options: ErrorReportOptions = {}): Promise<number> {
  const typed = isProofgateError(error);
  const message = errorMessage(error);
  const code = typed ? error.code : 'INTERNAL';
  // A message may quote a change (a ref, a check name, git's stderr): one line, nothing raw.
  const shown = untrustedText(message);
  process.stderr.write(typed ? `proofgate: ${shown} [${code}]\n` : `proofgate: internal error: ${shown}\n`);
  if (!typed && process.env.PROOFGATE_DEBUG && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  if (options.json === true) {
    const document: ErrorDocument = { error: { code, message } };
    await writeOut(`${jsonForTerminal(document)}\n`);
  }
  return typed && error.code === 'USAGE' ? EXIT.usage : EXIT.failure;
}
