import { readFile } from 'node:fs/promises';
import { ProofgateError, errorMessage, isProofgateError } from '../core/index.js';

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

/** Print a value: JSON (one line) when asked, else the human rendering. */
export async function emit(json: boolean, value: unknown, human: () => string): Promise<void> {
  await writeOut(json ? `${JSON.stringify(value)}\n` : `${human()}\n`);
}

/**
 * Turn any thrown value into one line on stderr and an exit code. User errors
 * (typed) never show a stack trace; an unexpected error shows one only when
 * PROOFGATE_DEBUG is set.
 */
export function reportError(error: unknown): number {
  if (isProofgateError(error)) {
    process.stderr.write(`proofgate: ${errorMessage(error)}\n`);
    return error.code === 'USAGE' ? EXIT.usage : EXIT.failure;
  }
  process.stderr.write(`proofgate: internal error: ${errorMessage(error)}\n`);
  if (process.env.PROOFGATE_DEBUG && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  return EXIT.failure;
}
