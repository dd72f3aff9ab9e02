import type { Command } from 'commander';
import { canonicalJson, decodeUtf8, parseJson, sha256Digest } from '../../core/index.js';
import { emit, readInput, writeOut } from '../io.js';

async function canonicalOf(file: string): Promise<string> {
  const bytes = await readInput(file);
  const label = file === '-' ? 'standard input' : file;
  return canonicalJson(parseJson(decodeUtf8(bytes, label), label));
}

export function registerCanonicalCommands(program: Command): void {
  program
    .command('canonicalize')
    .description('write the RFC 8785 canonical bytes of a JSON document to stdout (no trailing newline)')
    .argument('<file>', 'JSON file, or - for standard input')
    .action(async (file: string) => {
      await writeOut(await canonicalOf(file));
    });

  program
    .command('digest')
    .description('print sha256:<hex> of the canonical bytes of a JSON document')
    .argument('<file>', 'JSON file, or - for standard input')
    .option('--json', 'print {"digest","byteLength"} as JSON')
    .action(async (file: string, options: { json?: boolean }) => {
      const text = await canonicalOf(file);
      const digest = sha256Digest(text);
      await emit(Boolean(options.json), { digest, byteLength: Buffer.byteLength(text) }, () => digest);
    });
}
