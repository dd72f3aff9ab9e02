/**
 * The server secret that signs proofgate's markers on a local installation:
 * 32 random bytes generated once, kept in the data directory in a file only
 * its owner can read (0600). The value is never logged or stored anywhere else.
 */
import { chmod, link, mkdir, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ProofgateError, randomHex } from '../../core/index.js';

export const SECRET_FILE = 'automerge-secret';

async function readSecret(path: string): Promise<string> {
  const info = await stat(path);
  if ((info.mode & 0o077) !== 0) await chmod(path, 0o600);
  const text = (await readFile(path, 'utf8')).trim();
  if (!/^[0-9a-f]{64}$/.test(text))
    throw new ProofgateError('CONFIG', `${path} does not hold a proofgate secret (64 hex digits); remove it to generate a new one`);
  return text;
}

/** The secret of `dataDir`, created on first use. */
export async function loadOrCreateSecret(dataDir: string): Promise<string> {
  await mkdir(dataDir, { recursive: true });
  const path = join(dataDir, SECRET_FILE);
  // Written whole under a temporary name, then linked into place (create-if-absent, atomic): a process starting at
  // the same moment never reads a half-written secret.
  const temporary = `${path}.${randomHex(8)}.tmp`;
  try {
    await writeFile(temporary, `${randomHex(32)}\n`, { flag: 'wx', mode: 0o600 });
    await link(temporary, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new ProofgateError('IO', `cannot create ${path}: ${(error as Error).message}`);
  } finally {
    await unlink(temporary).catch(() => undefined);
  }
  return readSecret(path);
}
