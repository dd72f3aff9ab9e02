/**
 * Small node programs that play the agent-fix and gate commands in the tests.
 * Each is written to the fixture's temp root (outside the repository) and run
 * as `node <script> <report file>`; the report file shows what the agent saw.
 */

/** Passes when value.txt says "ok"; prints why not otherwise. */
export const CHECK = String.raw`
const fs = require('node:fs');
const value = fs.readFileSync('value.txt', 'utf8').trim();
if (value !== 'ok') { console.error('value.txt must say ok, found ' + value); process.exit(1); }
console.log('value.txt is ok');
`;

/** Records its environment and the context file, then runs `ACTION` in its tree (an export: no git repository). */
export function agent(action: string): string {
  return String.raw`
const fs = require('node:fs');
const contextPath = process.env.PROOFGATE_REPAIR_CONTEXT;
const context = JSON.parse(fs.readFileSync(contextPath, 'utf8'));
const report = { env: process.env, contextPath, context, cwd: process.cwd(), hasGit: fs.existsSync('.git') };
const save = () => fs.writeFileSync(process.argv[2], JSON.stringify(report));
save();
${action}
`;
}

/** Fixes value.txt only when the context carries the failing check's log. */
export const FIX_FROM_LOG = agent(String.raw`
const log = (context.failingChecks[0] || {}).log || '';
fs.writeFileSync('value.txt', log.includes('must say ok') ? 'ok\n' : 'no log\n');
`);

export const BAD_FIX = agent(`fs.writeFileSync('value.txt', 'almost\\n');`);

export const NOTHING = agent('');

export const FAILS = agent(`console.error('agent gave up'); process.exit(3);`);

/** Starts a grandchild whose command line carries the marker in argv[3], then never ends. */
export const HANGS = agent(String.raw`
const { spawn } = require('node:child_process');
spawn('sh', ['-c', 'sleep 300; : ' + process.argv[3]], { stdio: 'ignore' });
setInterval(() => {}, 1000);
`);

/** Resolves the conflict markers git left in src/app.txt (the base merged into the head). */
export const RESOLVES_MERGE = agent(String.raw`
report.conflicted = fs.readFileSync('src/app.txt', 'utf8');
save();
fs.writeFileSync('src/app.txt', 'one\nTWO (both)\nthree\n');
`);

/**
 * The hostile agent: argv[3] is the real repository, argv[4] a marker. It
 * tries to plant git config and hooks (in its own tree and in the real
 * repository), to plant symlinks out of the tree, to read proofgate's
 * environment through /proc, and to leave a detached process behind; then it
 * makes the one honest edit (value.txt).
 */
export const HOSTILE_ACTION = String.raw`
const { spawn } = require('node:child_process');
const path = require('node:path');
const [repo, marker] = process.argv.slice(3);
const attempt = (name, fn) => { try { fn(); report[name] = 'done'; } catch (error) { report[name] = 'failed: ' + error.code; } };
attempt('ownGitConfig', () => { fs.mkdirSync('.git/hooks', { recursive: true }); fs.writeFileSync('.git/config', '[core]\n\tfsmonitor = touch /tmp/pwned\n'); fs.writeFileSync('.git/hooks/post-checkout', '#!/bin/sh\ntouch /tmp/pwned\n', { mode: 0o755 }); });
attempt('realGitConfig', () => fs.appendFileSync(path.join(repo, '.git', 'config'), '[core]\n\tfsmonitor = touch ' + marker + '\n'));
attempt('realHook', () => fs.writeFileSync(path.join(repo, '.git', 'hooks', 'post-checkout'), '#!/bin/sh\ntouch ' + marker + '\n', { mode: 0o755 }));
attempt('realFile', () => fs.writeFileSync(path.join(repo, 'value.txt'), 'planted\n'));
attempt('passwdLink', () => fs.symlinkSync('/etc/passwd', 'passwd-link'));
attempt('escapeLink', () => fs.symlinkSync('../../../../etc/shadow', 'src/escape'));
attempt('innerLink', () => fs.symlinkSync('value.txt', 'value-link'));
attempt('nestedGit', () => { fs.mkdirSync('sub/.git', { recursive: true }); fs.writeFileSync('sub/.git/config', '[core]\n'); });
attempt('environ', () => { report.environ = fs.readFileSync('/proc/1/environ', 'utf8'); });
const child = spawn('setsid', ['sh', '-c', 'while :; do sleep 1; done; : ' + marker], { detached: true, stdio: 'ignore' });
child.unref();
fs.writeFileSync('value.txt', 'ok\n');
save();
`;

export const HOSTILE = agent(HOSTILE_ACTION);

/**
 * An agent for a repair with a validation pass: `first` runs on the first
 * pass, `second` on the validation pass (the context's `validation` is set).
 * Each pass saves its own report, `<report>.pass1` and `<report>.pass2`: its
 * environment, the context file and the gate output file exactly as it read
 * them, and the value.txt it started from.
 */
export function twoPass(first: string, second: string): string {
  return String.raw`
const fs = require('node:fs');
const contextPath = process.env.PROOFGATE_REPAIR_CONTEXT;
const contextRaw = fs.readFileSync(contextPath, 'utf8');
const context = JSON.parse(contextRaw);
const outputPath = process.env.PROOFGATE_GATE_OUTPUT;
const gateOutput = outputPath === undefined ? null : fs.readFileSync(outputPath, 'utf8');
const pass = context.validation === null ? 1 : 2;
const report = {
  pass, env: process.env, contextPath, contextRaw, context, outputPath: outputPath === undefined ? null : outputPath, gateOutput,
  outputSize: outputPath === undefined ? null : fs.statSync(outputPath).size,
  cwd: process.cwd(), hasGit: fs.existsSync('.git'), value: fs.readFileSync('value.txt', 'utf8'),
};
const save = () => fs.writeFileSync(process.argv[2] + '.pass' + pass, JSON.stringify(report));
save();
if (pass === 1) {
${first}
} else {
${second}
}
`;
}

/** Validation pass: fixes value.txt only when the gate's output says what is wrong. */
export const FIX_FROM_GATE_OUTPUT = String.raw`fs.writeFileSync('value.txt', (gateOutput || '').includes('value.txt must say ok') ? 'ok\n' : 'no gate output\n');`;

/**
 * The gate: CHECK, and before it one line per run appended to the log file
 * argv[2]: the commit it judged (PROOFGATE_HEAD_SHA) and the value it found.
 */
export const LOGGING_CHECK = String.raw`
const fs = require('node:fs');
const value = fs.readFileSync('value.txt', 'utf8').trim();
fs.appendFileSync(process.argv[2], process.env.PROOFGATE_HEAD_SHA + ' ' + value + '\n');
if (value !== 'ok') { console.error('value.txt must say ok, found ' + value); process.exit(1); }
console.log('value.txt is ok');
`;

/** A gate that prints `lines` (written into the script) and debug.txt when there is one, then runs CHECK. */
export function leakyCheck(lines: readonly string[]): string {
  return (
    String.raw`
for (const line of ${JSON.stringify(lines)}) console.log(line);
if (require('node:fs').existsSync('debug.txt')) console.log('debug: ' + require('node:fs').readFileSync('debug.txt', 'utf8'));
` + CHECK
  );
}

/** A gate that prints about `megabytes` MB of filler lines (waiting for the pipe to drain), then CHECK's verdict as its last line. */
export function floodingCheck(megabytes: number): string {
  return String.raw`
const fs = require('node:fs');
const value = fs.readFileSync('value.txt', 'utf8').trim();
const chunk = ('filler ' + 'x'.repeat(89) + '\n').repeat(1024);
let left = Math.ceil(${megabytes} * 1024 * 1024 / chunk.length);
const end = () => {
  if (value === 'ok') { process.stdout.write('value.txt is ok\n'); return; }
  process.stdout.write('value.txt must say ok, found ' + value + '\n');
  process.exitCode = 1;
};
const pump = () => {
  while (left > 0) {
    left -= 1;
    if (!process.stdout.write(chunk)) { process.stdout.once('drain', pump); return; }
  }
  end();
};
pump();
`;
}

/** A gate that never ends (its time limit stops it). */
export const HANGING_CHECK = String.raw`
console.log('gate started');
setInterval(() => {}, 1000);
`;
