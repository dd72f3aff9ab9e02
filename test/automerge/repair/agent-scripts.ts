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
export const HOSTILE = agent(String.raw`
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
`);
