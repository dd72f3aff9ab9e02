import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportCommit, makeJobDir, prepareJobDir, runUntrusted, type UntrustedRequest } from '../../src/host/index.js';
import { makeTempRepo, type TempRepo } from '../forge/git-fixture.js';
import { jailSkipReason } from '../support/jail.js';
import { runningWith } from '../support/wait.js';

// A secret in proofgate's own environment: no job may ever see it.
const FAKE_AWS_SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKEJAILKEY';
process.env.AWS_SECRET_ACCESS_KEY = FAKE_AWS_SECRET;

const skip = await jailSkipReason();
if (skip !== null) console.log(skip);

let scratch = '';
let repo: TempRepo;
let head: string;
let counter = 0;

beforeAll(async () => {
  // A job base the jail's uid can reach (the test run's TMPDIR may not be).
  scratch = await makeJobDir('proofgate-jail-test-');
  execFileSync('chmod', ['755', scratch]);
  repo = makeTempRepo('proofgate-jail-repo-');
  head = repo.commit('main', { 'README.md': 'hello\n', 'src/run.sh': 'echo from the head\n' });
  mkdirSync(join(repo.dir, '.git', 'proofgate'), { recursive: true });
  writeFileSync(join(repo.dir, '.git', 'proofgate', 'secret'), 'marker-secret\n');
});
afterAll(() => {
  repo?.cleanup();
  if (scratch !== '') rmSync(scratch, { recursive: true, force: true });
});

async function jobDir(): Promise<string> {
  counter += 1;
  const dir = join(scratch, `job-${counter}`);
  await prepareJobDir(dir);
  return dir;
}

async function jailed(
  script: string,
  extra: Partial<UntrustedRequest> = {},
): Promise<{ code: number | null; out: string; dir: string; timedOut: boolean; sandbox: string }> {
  const dir = extra.jobDir ?? (await jobDir());
  const result = await runUntrusted({
    argv: ['sh', '-c', script],
    sandbox: 'jail',
    jobDir: dir,
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', HOME: dir, TMPDIR: '/tmp' },
    timeoutMs: 30_000,
    output: { maxBytes: 256 * 1024 },
    killGraceMs: 0,
    ...extra,
  });
  return { code: result.exitCode, out: result.output.toString('utf8'), dir, timedOut: result.timedOut, sandbox: result.sandbox };
}

/** Host pids whose command line contains `marker`. */
describe.skipIf(skip !== null)('the jail: who runs inside', () => {
  it('runs as an unprivileged uid with no capabilities, and says it ran jailed', async () => {
    const { code, out, sandbox } = await jailed('id -u; grep -E "^Cap(Eff|Prm|Bnd)" /proc/self/status');
    expect(code).toBe(0);
    expect(sandbox).toBe('jail');
    expect(out.split('\n')[0]).not.toBe('0');
    expect(out).toMatch(/CapEff:\s+0+\n/);
    expect(out).toMatch(/CapBnd:\s+0+\n/);
  });

  it('shows no secret of proofgate environment in any /proc environ (pid 1, the parent, self)', async () => {
    const { out } = await jailed(
      'for f in /proc/1/environ /proc/$PPID/environ /proc/self/environ /proc/[0-9]*/environ; do echo "== $f"; tr "\\0" "\\n" < $f; done; ls /proc | grep -c "^[0-9]"',
    );
    expect(out).toContain('== /proc/1/environ');
    expect(out).not.toContain(FAKE_AWS_SECRET);
    expect(out).not.toContain('AWS_SECRET_ACCESS_KEY');
    // Only the job's own few processes exist in its pid namespace.
    expect(Number(out.trim().split('\n').pop())).toBeLessThan(10);
  });

  it('cannot read /etc/shadow', async () => {
    const { code, out } = await jailed('cat /etc/shadow');
    expect(code).not.toBe(0);
    expect(out).not.toMatch(/^root:/m);
  });

  it('cannot create a user namespace', async () => {
    const { code, out } = await jailed('unshare -U true && echo CREATED; unshare -r id && echo CREATED');
    expect(out).not.toContain('CREATED');
    expect(code).not.toBe(0);
  });
});

describe.skipIf(skip !== null)('the jail: files', () => {
  it('cannot find or write the real repository, its .git or the data dir', async () => {
    const configBefore = readFileSync(join(repo.dir, '.git', 'config'), 'utf8');
    const mainBefore = repo.sha('main');
    const dir = await jobDir();
    await exportCommit(repo.dir, head, join(dir, 'head'));
    const gitDir = join(repo.dir, '.git');
    const script = [
      `cat ${gitDir}/proofgate/secret && echo READ-SECRET`,
      `printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> ${gitDir}/config && echo WROTE-CONFIG`,
      `echo 0000000000000000000000000000000000000000 > ${gitDir}/refs/heads/main && echo WROTE-REF`,
      `echo x > ${gitDir}/proofgate/planted && echo WROTE-DATA`,
      `ls ${repo.dir} && echo SAW-REPO`,
      `cd head && git rev-parse --git-common-dir && echo FOUND-GIT`,
      'true',
    ].join('; ');
    const { out } = await jailed(script, { jobDir: dir, cwd: dir });
    for (const word of ['READ-SECRET', 'WROTE-CONFIG', 'WROTE-REF', 'WROTE-DATA', 'SAW-REPO', 'FOUND-GIT', 'marker-secret']) expect(out).not.toContain(word);
    expect(readFileSync(join(gitDir, 'config'), 'utf8')).toBe(configBefore);
    expect(repo.sha('main')).toBe(mainBefore);
    expect(existsSync(join(gitDir, 'proofgate', 'planted'))).toBe(false);
  });

  it('writes only into its job directory', async () => {
    // The scratch dir is under /tmp: inside, that path lands in the job's private /tmp, never on the host.
    const outside = join(scratch, 'outside-marker');
    const dir = await jobDir();
    const script = [
      `echo x > ${outside}`,
      'echo x > /var/tmp/pwned && echo WROTE-VAR',
      'echo x > /usr/pwned && echo WROTE-USR',
      'echo x > /etc/pwned && echo WROTE-ETC',
      'echo x > /pwned && echo WROTE-ROOT',
      'mkdir /dev/pwned && echo WROTE-DEV',
      'echo x > /tmp/private && echo WROTE-TMP',
      `echo x > ${dir}/mine && echo WROTE-JOB`,
    ].join('; ');
    const { out } = await jailed(script, { jobDir: dir, cwd: dir });
    for (const word of ['WROTE-VAR', 'WROTE-USR', 'WROTE-ETC', 'WROTE-ROOT', 'WROTE-DEV']) expect(out).not.toContain(word);
    expect(out).toContain('WROTE-TMP');
    expect(out).toContain('WROTE-JOB');
    expect(existsSync(outside)).toBe(false);
    expect(existsSync('/var/tmp/pwned') || existsSync('/usr/pwned') || existsSync('/etc/pwned') || existsSync('/pwned') || existsSync('/tmp/private')).toBe(
      false,
    );
    expect(readFileSync(join(dir, 'mine'), 'utf8')).toBe('x\n');
  });

  it('gets read-only mounts read-only and a writable cache dir', async () => {
    const shared = join(scratch, 'tools');
    const cache = join(scratch, 'cache');
    mkdirSync(shared, { recursive: true });
    writeFileSync(join(shared, 'tool.sh'), 'echo TOOL-RAN\n');
    await prepareJobDir(cache);
    const script = `sh ${shared}/tool.sh; echo x > ${shared}/tool.sh && echo WROTE-TOOL; echo cached > ${cache}/entry && echo WROTE-CACHE`;
    const { out } = await jailed(script, { mounts: [{ path: shared, writable: false }], cacheDir: cache });
    expect(out).toContain('TOOL-RAN');
    expect(out).not.toContain('WROTE-TOOL');
    expect(out).toContain('WROTE-CACHE');
    expect(readFileSync(join(shared, 'tool.sh'), 'utf8')).toBe('echo TOOL-RAN\n');
    expect(readFileSync(join(cache, 'entry'), 'utf8')).toBe('cached\n');
  });
});

describe.skipIf(skip !== null)('the jail: processes end with the job', () => {
  it('leaves no detached setsid process and no double-forked daemon behind', async () => {
    const marker = `${process.pid}${Date.now() % 100000}`;
    // Both escape the job's session; the job ends only once it sees both running.
    const script = `setsid sh -c 'sleep 1000.${marker}' & (setsid sh -c 'trap "" HUP TERM; sleep 1001.${marker}' &) & until pgrep -f "sleep 1000.${marker}" >/dev/null && pgrep -f "sleep 1001.${marker}" >/dev/null; do :; done; echo STARTED`;
    const { code, out } = await jailed(script);
    expect(code).toBe(0);
    expect(out).toContain('STARTED');
    expect(runningWith(`1000.${marker}`)).toEqual([]);
    expect(runningWith(`1001.${marker}`)).toEqual([]);
  });

  it('resolves only once the last process of the job is gone, however slowly the namespace dies', async () => {
    // bubblewrap returns when the job's first process exits; the rest of the pid namespace is torn down after it.
    // Many detached processes holding no pipe, one of them with a large heap to free, make that teardown slow.
    const marker = `${process.pid}${Date.now() % 100000}3`;
    const quiet = '</dev/null >/dev/null 2>&1';
    const script = [
      `for n in $(seq 1 150); do setsid sleep 1004.${marker} ${quiet} & done`,
      `setsid node -e "const b = Buffer.alloc(1 << 30, 1); setInterval(() => b[0]++, 1000)" 1005.${marker} ${quiet} &`,
      `until [ "$(pgrep -fc '${marker}')" -ge 151 ]; do :; done`,
      // Let the heap be filled before the job's first process exits.
      'sleep 0.5; echo STARTED',
    ].join('\n');
    const { code, out } = await jailed(script);
    expect(out).toContain('STARTED');
    expect(code).toBe(0);
    expect(runningWith(marker)).toEqual([]);
  });

  it('kills the whole job on timeout', async () => {
    const marker = `${process.pid}${Date.now() % 100000}9`;
    const { timedOut } = await jailed(`setsid sh -c 'sleep 1002.${marker}' & sleep 1003.${marker}`, { timeoutMs: 1500 });
    expect(timedOut).toBe(true);
    expect(runningWith(`.${marker}`)).toEqual([]);
  });

  it('bounds a fork bomb by the process limit', async () => {
    const script =
      "node -e \"const {spawn}=require('child_process');let ok=0,failed=0;const all=[];for(let i=0;i<400;i++){all.push(new Promise((r)=>{try{const c=spawn('sleep',['60'],{stdio:'ignore'});c.on('spawn',()=>{ok++;r()});c.on('error',()=>{failed++;r()})}catch{failed++;r()}}))}Promise.all(all).then(()=>{console.log('RESULT '+JSON.stringify({ok,failed}));process.exit(0)})\"";
    const { out } = await jailed(script, { limits: { processes: 96 } });
    const result = JSON.parse(/RESULT (.*)/.exec(out)?.[1] ?? '{"ok":999,"failed":0}') as { ok: number; failed: number };
    expect(result.ok).toBeLessThan(96);
    expect(result.failed).toBeGreaterThan(0);
  });

  it('bounds a memory hog by the memory limit', async () => {
    const script =
      "node -e \"const a=[];let mb=0;try{for(;;){a.push(Buffer.alloc(16<<20,1));mb+=16;console.log('MB '+mb)}}catch(e){console.log('REFUSED at '+mb)}\"";
    const { code, out } = await jailed(script, { limits: { memoryBytes: 512 * 1024 ** 2 } });
    const reached = Math.max(0, ...[...out.matchAll(/MB (\d+)/g)].map((match) => Number(match[1])));
    expect(reached).toBeLessThan(512);
    expect(out.includes('REFUSED') || code !== 0).toBe(true);
  });
});

describe.skipIf(skip !== null)('the jail: network', () => {
  let server: Server;
  let port = 0;
  let connections = 0;
  beforeAll(async () => {
    server = createServer((socket) => {
      connections += 1;
      socket.end('HELLO-FROM-HOST\n');
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const address = server.address();
    port = typeof address === 'object' && address !== null ? address.port : 0;
  });
  afterAll(async () => {
    await new Promise<void>((done) => server.close(() => done()));
  });

  const probe = (host: string, target: number) =>
    `node -e "const s=require('net').connect(${target},'${host}');s.setTimeout(3000);s.on('data',d=>{console.log('GOT '+d);process.exit(0)});s.on('error',e=>{console.log('ERR ${host}:${target} '+e.code);process.exit(0)});s.on('timeout',()=>{console.log('TIMEOUT');process.exit(0)})"`;

  it('has no network: the host loopback server and PostgreSQL are unreachable', async () => {
    const { out } = await jailed(`${probe('127.0.0.1', port)}; ${probe('127.0.0.1', 5432)}`);
    expect(out).not.toContain('HELLO-FROM-HOST');
    expect(out).toContain(`ERR 127.0.0.1:${port}`);
    expect(out).toContain('ERR 127.0.0.1:5432');
    expect(connections).toBe(0);
  });

  it('with network: true, reaches out through slirp4netns but never the host loopback', async () => {
    const { out } = await jailed(
      `ip -4 addr show tap0 2>/dev/null | grep -o "inet [0-9.]*" || cat /proc/net/dev | grep -o tap0; ${probe('127.0.0.1', port)}; ${probe('10.0.2.2', port)}; ${probe('10.0.2.2', 5432)}`,
      { network: true },
    );
    expect(out).toMatch(/tap0|inet 10\.0\.2\./);
    expect(out).not.toContain('HELLO-FROM-HOST');
    expect(connections).toBe(0);
  });

  it('with network: true, jobs started together all start: slirp4netns never races bubblewrap for the loopback', async () => {
    // slirp4netns brings `lo` up; had it done so before bubblewrap added 127.0.0.1 itself, bubblewrap would
    // die with "loopback: Failed RTM_NEWADDR" and the job would never start.
    const runs = await Promise.all(Array.from({ length: 12 }, (_, i) => jailed(`echo "job ${i} started"; grep -o tap0 /proc/net/dev`, { network: true })));
    for (const [i, run] of runs.entries()) {
      expect(run.out).toContain(`job ${i} started`);
      expect(run.out).toContain('tap0');
      expect(run.code).toBe(0);
    }
  });
});

describe.skipIf(skip !== null)('exportCommit', () => {
  it('writes the exact tree with no .git', async () => {
    const dir = await jobDir();
    const target = join(dir, 'head');
    await exportCommit(repo.dir, head, target);
    expect(readFileSync(join(target, 'src', 'run.sh'), 'utf8')).toBe('echo from the head\n');
    expect(existsSync(join(target, '.git'))).toBe(false);
    expect(statSync(join(target, 'README.md')).uid).toBe(statSync(dir).uid);
  });

  it('with git: true, makes a standalone clone of that sha that the job can use', async () => {
    const dir = await jobDir();
    const target = join(dir, 'head');
    await exportCommit(repo.dir, head, target, { git: true });
    expect(existsSync(join(target, '.git', 'objects', 'info', 'alternates'))).toBe(false);
    expect(existsSync(join(target, '.git', 'FETCH_HEAD'))).toBe(false);
    expect(readFileSync(join(target, '.git', 'config'), 'utf8')).not.toContain(repo.dir);
    const { out, code } = await jailed('git rev-parse HEAD; git remote -v; git status --porcelain; echo END', { jobDir: dir, cwd: target });
    expect(code).toBe(0);
    expect(out.trim()).toBe(`${head}\nEND`);
  });
});

describe.skipIf(skip !== null)('sandbox: none', () => {
  it('runs plainly with only the given environment and says so', async () => {
    const dir = await jobDir();
    const result = await runUntrusted({
      argv: ['sh', '-c', 'echo "$AWS_SECRET_ACCESS_KEY|$HOME"'],
      sandbox: 'none',
      jobDir: dir,
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', HOME: dir },
      timeoutMs: 10_000,
      output: { maxBytes: 4096 },
    });
    expect(result.sandbox).toBe('none');
    expect(result.output.toString('utf8')).toBe(`|${dir}\n`);
  });
});
