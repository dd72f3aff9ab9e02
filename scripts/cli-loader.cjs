// The `proofgate` command (dist/cli/main.cjs, the package's bin, written from
// this file by scripts/bundle-cli.mjs): it runs the bundled command,
// dist/cli/proofgate.cjs, with V8's code cache for it,
// dist/cli/proofgate.cjs.cache. It is CommonJS because Node starts a
// CommonJS entry faster than an ES module one (no module loader to set up);
// dist/cli/main.js, for those who run that path, only requires this file.
//
// Why: each command is a new Node process, and compiling the bundle (a few
// megabytes of JavaScript) is the largest part of a short command's start-up.
// Node 20 keeps no compile cache of its own, so the build runs the bundle
// once and saves what V8 compiled; here V8 takes that instead of compiling.
// The cache is only used when its header is the SHA-256 of the bundle as it
// is now (V8's own check covers its version and flags and the source's
// length, not its bytes); V8 compiles as usual without it, so a stale or
// missing cache costs time, never correctness.
//
// The bundle is CommonJS run as a strict-mode function (ES modules are
// always strict, so the code behaves as the ES module it was built from),
// with `require` for Node's modules and the packages left outside the bundle.
'use strict';
const { isAscii } = require('node:buffer');
const { createHash } = require('node:crypto');
const { readFileSync, writeFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const { join } = require('node:path');
const { Script, constants } = require('node:vm');

const here = __dirname;
const file = join(here, 'proofgate.cjs');
const cacheFile = `${file}.cache`;
const bundle = readFileSync(file);
const header = Buffer.from(`${createHash('sha256').update(bundle).digest('hex')}\n`, 'latin1');
// Set only by code already running in this process (the build, the start-up bench, tests): 'write' compiles afresh and
// saves the cache at exit, 'off' compiles afresh, 'report' says on stderr at exit whether the cache was used.
const mode = globalThis[Symbol.for('proofgate.cli.codeCache')];

function cached() {
  if (mode === 'write' || mode === 'off') return undefined;
  let bytes;
  try {
    bytes = readFileSync(cacheFile);
  } catch {
    return undefined;
  }
  return bytes.length > header.length && bytes.subarray(0, header.length).equals(header) ? bytes.subarray(header.length) : undefined;
}

// The build makes the bundle ASCII (non-ASCII text escaped, JSDoc comments dropped), which reads as Latin-1 at a
// fraction of UTF-8's cost and gives V8 a one-byte source; a bundle edited since is read as UTF-8.
function source() {
  return bundle.toString(isAscii(bundle) ? 'latin1' : 'utf8');
}

const given = cached();
const script = new Script(`(function (exports, require, module, __filename, __dirname) {"use strict";${source()}\n})`, {
  filename: file,
  cachedData: given,
  importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
if (mode === 'report') {
  process.once('exit', () => process.stderr.write(`code cache: ${given === undefined ? 'none' : script.cachedDataRejected ? 'refused' : 'used'}\n`));
}
if (mode === 'write') {
  process.once('exit', () => writeFileSync(cacheFile, Buffer.concat([header, script.createCachedData()])));
}
const bundled = { exports: {} };
script.runInThisContext()(bundled.exports, createRequire(file), bundled, file, here);
