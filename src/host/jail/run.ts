import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { ProofgateError } from '../../core/index.js';
import { runProcess, type ProcessRequest, type ProcessResult } from '../process.js';
import { assertReachable, runsAsRoot } from './jobdir.js';
import { BWRAP_ENV, checkRequest, jailArgv, jobBinds, type JailTools, type SystemLayout } from './plan.js';
import { jailTools, requireJail, systemLayout } from './status.js';
import type { UntrustedRequest, UntrustedResult } from './types.js';

/**
 * Run code proofgate did not write. `sandbox: 'jail'` runs it under
 * bubblewrap (see plan.ts for the namespaces, mounts and limits); `none` runs
 * it plainly and only the trusted config may ask for that. Either way the
 * program sees exactly `request.env`, and every process it started is gone
 * when the promise resolves. Plainly, the process group is killed. Jailed,
 * everything the job started lives in its own pid namespace, and bubblewrap
 * returns as soon as the job's *first* process ends while the namespace's
 * init (pid 1 inside) is still tearing the rest down; so, once bubblewrap has
 * returned, the init (its host pid from `--info-fd`) is killed and waited
 * for: the kernel marks it dead only after every other process of the
 * namespace is gone. Nothing of a job can then still write into its job
 * directory while proofgate reads it.
 */

const INFO_FD = 3;
const BLOCK_FD = 4;
/** slirp4netns's built-in DNS forwarder inside the job's network. */
const SLIRP_DNS = '10.0.2.3';
/** How often, and for how long at most, the job's loopback is looked for before slirp4netns starts. */
const LOOPBACK_POLL_MS = 2;
const LOOPBACK_BOUND_MS = 60_000;
/** How long at most the job's namespace may take to die once its init was killed (only a process stuck in the kernel takes long). */
const NAMESPACE_END_BOUND_MS = 60_000;

function commonRequest(request: UntrustedRequest): Omit<ProcessRequest, 'argv' | 'cwd' | 'env'> {
  return {
    timeoutMs: request.timeoutMs,
    output: request.output,
    ...(request.stderr === undefined ? {} : { stderr: request.stderr }),
    ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
    ...(request.signal === undefined ? {} : { signal: request.signal }),
    ...(request.killGraceMs === undefined ? {} : { killGraceMs: request.killGraceMs }),
  };
}

export async function runUntrusted(request: UntrustedRequest): Promise<UntrustedResult> {
  if (request.sandbox === 'none') {
    const cwd = checkRequest(request);
    const result = await runProcess({ argv: request.argv, cwd, env: { ...request.env }, ...commonRequest(request) });
    return { ...result, sandbox: 'none' };
  }
  if (request.sandbox !== 'jail') throw new ProofgateError('INVALID_INPUT', `jail: unknown sandbox ${String(request.sandbox)}`);
  await requireJail();
  const dropRoot = runsAsRoot();
  if (dropRoot) for (const bind of jobBinds(request)) await assertReachable(bind.path);
  const layout = await systemLayout();
  const tools = await jailTools();
  if (request.network !== true) {
    const argv = jailArgv({ request, layout, tools, dropRoot, infoFd: INFO_FD });
    return { ...(await runJailed(request, argv, 1)), sandbox: 'jail' };
  }
  return runWithNetwork(request, dropRoot, layout, tools);
}

/** The job's namespace init as the host sees it; its start time tells it apart from a later process given the same pid. */
interface NamespaceInit {
  readonly pid: number;
  readonly startTime: string | null;
}

/**
 * Run a jail argv whose bubblewrap reports on INFO_FD, and return only once
 * the job's whole pid namespace is gone. `onInit` hears the init's host pid
 * as soon as bubblewrap reports it (the network set-up needs it).
 */
async function runJailed(
  request: UntrustedRequest,
  argv: readonly string[],
  extraPipes: number,
  onInit?: (pid: number, child: ChildProcess) => void,
): Promise<ProcessResult> {
  let init: NamespaceInit | null = null;
  const onSpawn = (child: ChildProcess) => {
    // The extra pipes only ever fail because bubblewrap is gone, which its exit reports.
    for (const pipe of child.stdio.slice(INFO_FD)) (pipe as Readable | Writable | null)?.on('error', () => undefined);
    const info = child.stdio[INFO_FD] as Readable | null | undefined;
    let text = '';
    info?.on('data', (chunk: Buffer) => {
      if (init !== null) return;
      text += chunk.toString('utf8');
      const match = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (match === null) return;
      const pid = Number(match[1]);
      init = { pid, startTime: processStart(pid) };
      onInit?.(pid, child);
    });
  };
  const result = await runProcess({ argv, cwd: '/', env: BWRAP_ENV, extraPipes, onSpawn, ...commonRequest(request) });
  if (init !== null) await namespaceEnded(init);
  return setupFailure(result);
}

/** Field 22 of /proc/PID/stat (start time in clock ticks since boot), or null when there is no such process. */
function processStart(pid: number): string | null {
  const fields = statFields(pid);
  return fields === null ? null : (fields[19] ?? null);
}

/** The fields of /proc/PID/stat after the command name (state first), or null when there is no such process. */
function statFields(pid: number): string[] | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/**
 * Kill the namespace's init and wait until the kernel reports it dead (a
 * zombie, or no longer there): it becomes a zombie only after every other
 * process of its namespace has been killed and reaped. Neither the init nor
 * its namespace is proofgate's child and Node has no process handle for
 * them, so there is no event to wait on; /proc is looked at with a growing
 * interval instead (the first looks usually find it gone).
 */
async function namespaceEnded(init: NamespaceInit): Promise<void> {
  const ended = (): boolean => {
    const fields = statFields(init.pid);
    return fields === null || fields[19] !== init.startTime || fields[0] === 'Z' || fields[0] === 'X';
  };
  if (init.startTime === null || ended()) return;
  try {
    process.kill(init.pid, 'SIGKILL');
  } catch {
    // Gone in the meantime.
  }
  const deadline = Date.now() + NAMESPACE_END_BOUND_MS;
  for (let wait = 1; !ended(); wait = Math.min(wait * 2, 50)) {
    if (Date.now() > deadline) {
      throw new ProofgateError(
        'INTERNAL',
        `jail: the job's processes were still running ${NAMESPACE_END_BOUND_MS} ms after it ended (namespace init, host pid ${init.pid})`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/**
 * bubblewrap reports a program it could not start (or a mount it could not
 * make) as one `bwrap: ...` line and exit code 1; report that as a start
 * failure, as the plain runner does for a spawn error.
 */
function setupFailure(result: ProcessResult): ProcessResult {
  if (result.exitCode !== 1) return result;
  const text = (result.stderr.length > 0 ? result.stderr : result.output).toString('utf8').trim();
  if (!text.startsWith('bwrap: ') || text.includes('\n')) return result;
  return { ...result, exitCode: null, startError: text.slice('bwrap: '.length) };
}

async function runWithNetwork(request: UntrustedRequest, dropRoot: boolean, layout: SystemLayout, tools: JailTools): Promise<UntrustedResult> {
  const netDir = await mkdtemp(join(tmpdir(), 'proofgate-net-'));
  let slirp: ChildProcess | undefined;
  let networkError: string | null = null;
  try {
    await chmod(netDir, 0o711);
    const resolvConf = join(netDir, 'resolv.conf');
    await writeFile(resolvConf, `nameserver ${SLIRP_DNS}\n`, { mode: 0o644 });
    const argv = jailArgv({ request, layout, tools, dropRoot, infoFd: INFO_FD, network: { resolvConf, blockFd: BLOCK_FD } });
    const onInit = (pid: number, child: ChildProcess) => {
      const block = child.stdio[BLOCK_FD] as Writable | null | undefined;
      const fail = (why: string) => {
        networkError ??= `network: ${why}`;
        child.kill('SIGKILL');
      };
      void loopbackReady(pid).then((ready) => {
        if (ready === 'gone') return;
        if (ready === 'timeout') return fail(`the job's loopback was not set up within ${LOOPBACK_BOUND_MS} ms`);
        slirp = startSlirp(tools.slirp4netns, pid, dropRoot, () => block?.end('go'), fail);
      });
    };
    const checked = await runJailed(request, argv, 2, onInit);
    return { ...checked, startError: networkError ?? checked.startError, sandbox: 'jail' };
  } finally {
    slirp?.kill('SIGKILL');
    await rm(netDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Whether bubblewrap finished setting up the job's loopback (127.0.0.1 on an
 * up `lo` shows as a local route in the namespace's FIB). slirp4netns brings
 * `lo` up itself, and the kernel then gives it 127.0.0.1: started before
 * bubblewrap's own setup, it makes that setup fail ("loopback: Failed
 * RTM_NEWADDR", the address exists) and the job never starts. Neither program
 * reports the moment in between, so the namespace is looked at every few
 * milliseconds (bubblewrap then waits on its block fd until slirp4netns is
 * ready). 'gone': the process ended first (its own failure is reported).
 */
async function loopbackReady(pid: number): Promise<'ready' | 'gone' | 'timeout'> {
  const deadline = Date.now() + LOOPBACK_BOUND_MS;
  for (;;) {
    let fib: string;
    try {
      fib = await readFile(`/proc/${pid}/net/fib_trie`, 'utf8');
    } catch {
      return 'gone';
    }
    if (fib.includes('127.0.0.1')) return 'ready';
    if (Date.now() > deadline) return 'timeout';
    await new Promise((resolve) => setTimeout(resolve, LOOPBACK_POLL_MS));
  }
}

/**
 * slirp4netns gives the job's network namespace a user-mode uplink:
 * `--disable-host-loopback` so the host's 127.0.0.1 services (PostgreSQL,
 * `proofgate serve`) stay out of reach. It exits when its exit pipe closes
 * (proofgate died) and is killed when the job ends.
 */
function startSlirp(slirp4netns: string, pid: number, dropRoot: boolean, ready: () => void, fail: (why: string) => void): ChildProcess {
  const args = ['--configure', '--mtu=65520', '--disable-host-loopback', '--ready-fd=3', '--exit-fd=4'];
  // By pid, slirp4netns would join the job's user namespace, which under --disable-userns is a nested one without
  // rights over the network namespace. As root, join the network namespace by path alone; otherwise name the pid
  // (not verified on this machine, where proofgate runs as root).
  if (dropRoot) args.push('--netns-type=path', `/proc/${pid}/ns/net`, 'tap0');
  else args.push(String(pid), 'tap0');
  const slirp = spawn(slirp4netns, args, { env: { ...BWRAP_ENV }, stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
  let stderr = '';
  slirp.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-2000);
  });
  const readyPipe = slirp.stdio[3] as Readable | null;
  readyPipe?.once('data', ready);
  slirp.on('error', (error) => fail(`slirp4netns could not start (${error.message}): install the Debian package slirp4netns`));
  slirp.on('exit', (code) => {
    if (code !== null && code !== 0) fail(`slirp4netns exited with ${code}: ${stderr.trim().split('\n').pop() ?? ''}`);
  });
  return slirp;
}
