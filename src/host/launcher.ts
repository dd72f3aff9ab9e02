import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { killGroup } from './group.js';

/**
 * The launcher: a small node process that starts programs for a large one,
 * whose own fork() would copy all the memory it has touched (why, and what
 * it keeps the same: docs/design.md, "src/host/"). `runProcess` decides when
 * to use it (`launcherWanted`) and drives what `launch` returns as it drives
 * a spawned child.
 */

/** Past this resident size, plain starts go through the launcher. */
export const LAUNCHER_RSS_BYTES = 192 * 1024 * 1024;

/** `auto`: by resident size; `always`/`never`: tests pin the path they exercise. */
export type LauncherMode = 'auto' | 'always' | 'never';
let mode: LauncherMode = 'auto';

/** Pin how plain starts are made (tests); returns the mode before. */
export function setLauncherMode(next: LauncherMode): LauncherMode {
  const before = mode;
  mode = next;
  return before;
}

/** Whether a plain start should go through the launcher now. */
export function launcherWanted(): boolean {
  if (mode !== 'auto') return mode === 'always';
  return process.memoryUsage.rss() >= LAUNCHER_RSS_BYTES;
}

/** The launcher's own program (CommonJS, run with `node -e`): no file of its own, so the bundled CLI needs none. */
const LAUNCHER_SOURCE = `
'use strict';
const { spawn } = require('node:child_process');
const kids = new Map();
const send = (message) => { if (process.connected) process.send(message); };
process.on('message', (m) => {
  if (m.t === 'release') {
    const kid = kids.get(m.id);
    kids.delete(m.id);
    if (kid !== undefined) { kid.stdout?.destroy(); kid.stderr?.destroy(); }
    return;
  }
  if (m.t !== 'run') return;
  const id = m.id;
  let child;
  try {
    child = spawn(m.file, m.args, { cwd: m.cwd, env: m.env, detached: true, windowsHide: true, stdio: [m.stdin === null ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  } catch (error) {
    send({ t: 'error', id, message: String(error && error.message) });
    send({ t: 'close', id, code: null, signal: null });
    return;
  }
  kids.set(id, child);
  send({ t: 'spawned', id, pid: child.pid === undefined ? null : child.pid });
  child.stdout.on('data', (data) => send({ t: 'out', id, data }));
  child.stderr.on('data', (data) => send({ t: 'err', id, data }));
  child.on('error', (error) => send({ t: 'error', id, message: String(error && error.message) }));
  child.on('exit', (code, signal) => send({ t: 'exit', id, code, signal }));
  child.on('close', (code, signal) => { kids.delete(id); send({ t: 'close', id, code, signal }); });
  if (child.stdin !== null) { child.stdin.on('error', () => undefined); child.stdin.end(m.stdin); }
});
process.on('disconnect', () => process.exit(0));
`;

type LauncherMessage =
  | { readonly t: 'spawned'; readonly id: number; readonly pid: number | null }
  | { readonly t: 'out' | 'err'; readonly id: number; readonly data: Uint8Array }
  | { readonly t: 'error'; readonly id: number; readonly message: string }
  | { readonly t: 'exit' | 'close'; readonly id: number; readonly code: number | null; readonly signal: NodeJS.Signals | null };

/** What `runProcess` uses of a started program: its pid (once known), output streams, stdin-less, and its events. */
export interface LaunchedProcess extends EventEmitter {
  readonly stdout: PassThrough;
  readonly stderr: PassThrough;
  readonly stdin: null;
  /** Signal the program's process group, now or as soon as its pid is known. */
  signalGroup(signal: NodeJS.Signals): void;
  /** Stop relaying its output (the caller has what it wants). */
  release(): void;
}

interface Launched {
  readonly process: LaunchedProcess;
  pid: number | null;
  /** A signal asked for before the pid came back. */
  pendingSignal: NodeJS.Signals | null;
  closed: boolean;
}

/** The launcher process and the programs it is running, by id. */
interface Launcher {
  readonly child: ChildProcess;
  readonly running: Map<number, Launched>;
}

let launcher: Launcher | null = null;
let nextId = 1;

function startLauncher(): Launcher {
  const child = spawn(process.execPath, ['-e', LAUNCHER_SOURCE], {
    // Nothing of this process's environment or node options: the launcher needs none, and each program gets its own
    // (and its working directory, as every program's, is given with it: the launcher's own holds no folder busy).
    env: {},
    cwd: '/',
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    serialization: 'advanced',
    windowsHide: true,
  });
  const running = new Map<number, Launched>();
  const self: Launcher = { child, running };
  child.on('message', (message: LauncherMessage) => {
    const entry = running.get(message.id);
    if (entry === undefined) return;
    const { process: launched } = entry;
    switch (message.t) {
      case 'spawned':
        entry.pid = message.pid;
        if (message.pid !== null && entry.pendingSignal !== null) killGroup(message.pid, entry.pendingSignal);
        // As a spawned child's 'spawn': from here on, the launcher's death kills the program's group.
        if (message.pid !== null) launched.emit('spawn');
        break;
      case 'out':
      case 'err': {
        const stream = message.t === 'out' ? launched.stdout : launched.stderr;
        if (!stream.destroyed) stream.write(Buffer.from(message.data.buffer, message.data.byteOffset, message.data.byteLength));
        break;
      }
      case 'error':
        launched.emit('error', new Error(message.message));
        break;
      case 'exit':
        launched.emit('exit', message.code, message.signal);
        break;
      case 'close':
        finish(self, message.id, entry, message.code, message.signal);
        break;
    }
  });
  // The launcher died (killed, or out of memory): what it was running can no longer be followed, so it is stopped.
  const lost = () => {
    if (launcher === self) launcher = null;
    for (const [id, entry] of running) {
      if (entry.pid !== null) killGroup(entry.pid, 'SIGKILL');
      entry.process.emit('error', new Error('the process launcher exited'));
      finish(self, id, entry, null, null);
    }
  };
  // Node may report the exit before the last messages the launcher sent (a program's pid) are read: the groups
  // are killed once the channel has closed, when every message it sent has been read, so no pid is missed.
  child.on('exit', () => {
    if (launcher === self) launcher = null;
    if (child.connected) child.once('disconnect', lost);
    else lost();
  });
  child.on('error', lost);
  child.unref();
  child.channel?.unref();
  return self;
}

function finish(self: Launcher, id: number, entry: Launched, code: number | null, signal: NodeJS.Signals | null): void {
  if (entry.closed) return;
  entry.closed = true;
  self.running.delete(id);
  if (self.running.size === 0) self.child.channel?.unref();
  for (const stream of [entry.process.stdout, entry.process.stderr]) if (!stream.destroyed) stream.end();
  entry.process.emit('close', code, signal);
}

export interface LaunchRequest {
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** Bytes for stdin (then closed); null: no stdin. */
  readonly stdin: string | Uint8Array | null;
}

/** Start a program through the launcher; it behaves as a detached `spawn` with piped output. */
export function launch(request: LaunchRequest): LaunchedProcess {
  if (launcher !== null && !launcher.child.connected) launcher = null;
  const self = launcher ?? (launcher = startLauncher());
  const id = nextId;
  nextId += 1;
  const emitter = new EventEmitter();
  const entry: Launched = {
    process: Object.assign(emitter, {
      stdout: new PassThrough(),
      stderr: new PassThrough(),
      stdin: null,
      signalGroup(signal: NodeJS.Signals) {
        if (entry.closed) return;
        if (entry.pid === null) entry.pendingSignal = signal;
        else killGroup(entry.pid, signal);
      },
      release() {
        if (!entry.closed && launcher === self && self.child.connected) self.child.send({ t: 'release', id });
      },
    }) as LaunchedProcess,
    pid: null,
    pendingSignal: null,
    closed: false,
  };
  self.running.set(id, entry);
  self.child.channel?.ref();
  const message = {
    t: 'run',
    id,
    file: request.file,
    args: [...request.args],
    cwd: request.cwd,
    env: { ...request.env },
    stdin: request.stdin === null ? null : typeof request.stdin === 'string' ? Buffer.from(request.stdin, 'utf8') : request.stdin,
  };
  // A launcher that could not start, or whose channel just closed: this start fails as a spawn that failed does
  // (an error, then close, after the caller has its handle), and the next start makes a new launcher.
  const unreachable = (): void => {
    if (launcher === self) launcher = null;
    setImmediate(() => {
      if (entry.closed) return;
      entry.process.emit('error', new Error('the process launcher could not be reached'));
      finish(self, id, entry, null, null);
    });
  };
  try {
    self.child.send(message, (error) => {
      if (error !== null && error !== undefined) unreachable();
    });
  } catch {
    unreachable();
  }
  return entry.process;
}
