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

/** Records its environment and the context file, then runs `ACTION` in the worktree. */
export function agent(action: string): string {
  return String.raw`
const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const contextPath = process.env.PROOFGATE_REPAIR_CONTEXT;
const context = JSON.parse(fs.readFileSync(contextPath, 'utf8'));
fs.writeFileSync(process.argv[2], JSON.stringify({ env: process.env, contextPath, context, cwd: process.cwd() }));
const git = (...args) => execFileSync('git', args, { encoding: 'utf8' }).trim();
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

/** Starts a grandchild, records both pids, then never ends. */
export const HANGS = agent(String.raw`
const { spawn } = require('node:child_process');
const child = spawn('sleep', ['60'], { stdio: 'ignore' });
fs.writeFileSync(process.argv[2] + '.pids', JSON.stringify([process.pid, child.pid]));
setInterval(() => {}, 1000);
`);

/** Commits its fix itself, with git, in the worktree. */
export const COMMITS_ITSELF = agent(String.raw`
fs.writeFileSync('value.txt', 'ok\n');
git('add', 'value.txt');
git('commit', '-q', '-m', 'agent: fix value');
`);

/** Checks out a branch in the worktree (not allowed). */
export const CHECKS_OUT_BRANCH = agent(String.raw`
git('checkout', '-q', '-b', 'agent-branch');
fs.writeFileSync('value.txt', 'ok\n');
`);

/** Brings the change up to date by merging the base and settling the conflict in src/app.txt. */
export const MERGES_BASE = agent(String.raw`
try { git('merge', '--no-edit', context.change.base.sha); } catch { /* conflict expected */ }
fs.writeFileSync('src/app.txt', 'one\nTWO (both)\nthree\n');
git('add', 'src/app.txt');
git('commit', '-q', '--no-edit');
`);
