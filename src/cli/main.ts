#!/usr/bin/env node
import { runCli } from './program.js';

// A reader that goes away (`proofgate ... | head`) ends the output, not the process with a stack trace:
// the command stops there with the status it has so far, as with any other Unix tool whose reader left.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(process.exitCode ?? 0);
  });
}

// No top-level await: the build runs this entry as CommonJS (scripts/bundle-cli.mjs).
void runCli(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
