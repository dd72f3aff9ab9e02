import { randomBytes, timingSafeEqual } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { chmod } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { CallToolResult, JSONRPCMessage, Tool } from '@modelcontextprotocol/sdk/types.js';
import { ProofgateError, lazyModule } from '../../core/index.js';
import type { LaneToolbox, LaneToolProgress, LaneToolResult } from './port.js';

/**
 * The MCP SDK, loaded when a connection first asks for `mcp`: it builds a few
 * hundred schemas as it loads, which every command would otherwise pay at its
 * start, and few commands serve MCP (docs/cli.md; scripts/bundle-cli.mjs
 * leaves it out of the CLI bundle).
 */
const loadMcpServer = lazyModule<typeof import('@modelcontextprotocol/sdk/server/index.js')>('@modelcontextprotocol/sdk/server/index.js');
const loadMcpStdio = lazyModule<typeof import('@modelcontextprotocol/sdk/server/stdio.js')>('@modelcontextprotocol/sdk/server/stdio.js');
const loadMcpTypes = lazyModule<typeof import('@modelcontextprotocol/sdk/types.js')>('@modelcontextprotocol/sdk/types.js');

/**
 * One lane's tools on a Unix socket inside its jail. The socket lives in a
 * directory the jail binds; only a connection whose first line carries this
 * lane's capability token is served, with the protocol that line names:
 *
 * - `mcp`: the Model Context Protocol (newline-delimited JSON-RPC, as over
 *   stdio), answered by the SDK's low-level `Server`: `tools/list` and
 *   `tools/call`. The relay in relay.ts is how a stock MCP client reaches it.
 * - `proofgate-tools.v1`: one JSON object per line each way, for programs
 *   that are not MCP clients (see `PLAIN_PROTOCOL`).
 *
 * The jailed side is never trusted: lines are bounded, every request is
 * checked, a connection's requests are read only while its client reads
 * the answers (see `lineIntake`), calls running at once are bounded per
 * connection and per server (more are answered BUSY), and closing the
 * server ends every connection and aborts every running call.
 */

/** The protocol names a handshake may ask for. */
export const MCP_PROTOCOL = 'mcp';
export const PLAIN_PROTOCOL = 'proofgate-tools.v1';
export type LaneToolProtocol = typeof MCP_PROTOCOL | typeof PLAIN_PROTOCOL;

/** The socket's file name inside the directory it is served from. */
export const LANE_TOOLS_SOCKET_NAME = 'tools.sock';
/** Longest handshake line (bytes, newline excluded). */
export const HANDSHAKE_MAX_BYTES = 4096;
/** Longest request line after the handshake, either protocol (bytes). */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
/** How often a running call reports that it still runs, besides the toolbox's own progress. */
export const DEFAULT_HEARTBEAT_MS = 10_000;
/** How long a connection may take to send its handshake. */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
/** Connections served at once, calls running at once on one connection, and on all of them together. */
const MAX_CONNECTIONS = 16;
const MAX_CALLS_PER_CONNECTION = 16;
const MAX_CALLS_RUNNING = 32;
/** Requests one connection may have sent that are read and not yet answered: past it, the server stops reading it. */
const MAX_UNANSWERED = 64;
/** Answers a client may leave unread (bytes proofgate holds for it): past it, the server stops reading its requests. */
const OUTPUT_HIGH_WATER_BYTES = 1024 * 1024;
/** Longest string id a plain request may carry. */
const MAX_ID_CHARS = 200;
/** A Unix socket path must fit in sockaddr_un (108 bytes with its NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

export interface ServeLaneToolsOptions {
  /** A directory the jail binds (inside the lane's job dir), proofgate's own: the socket is created here. */
  readonly dir: string;
  readonly heartbeatMs?: number;
  readonly handshakeTimeoutMs?: number;
  readonly maxLineBytes?: number;
}

export interface LaneToolServer {
  readonly socketPath: string;
  /** The lane's capability token (64 hex digits): a connection's handshake must carry it. */
  readonly token: string;
  /** End every connection, abort every running call, remove the socket (Node unlinks it on close). */
  close(): Promise<void>;
}

type CallOutcome = { readonly result: LaneToolResult } | { readonly error: string };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 300);
}

function describeError(error: unknown): string {
  return oneLine(error instanceof Error ? error.message : String(error)) || 'unknown error';
}

/** A plain request's id: an integer or a short string. */
function validId(id: unknown): id is number | string {
  return Number.isSafeInteger(id) || (typeof id === 'string' && id.length <= MAX_ID_CHARS);
}

function wellFormedResult(result: unknown): result is LaneToolResult {
  return (
    isRecord(result) && (result.status === 'verified' || result.status === 'inconclusive' || result.status === 'rejected') && typeof result.text === 'string'
  );
}

/**
 * An MCP tool result: the reviewer reads `text`; `structuredContent` carries
 * `{status, data}`. Verified and inconclusive are answers (isError false: an
 * inconclusive check is something the reviewer weighs, not a failed call);
 * `rejected` (evidence that failed verification) is flagged isError.
 */
export function mcpToolResult(result: LaneToolResult): CallToolResult {
  return {
    content: [{ type: 'text', text: result.text }],
    structuredContent: { status: result.status, data: result.data ?? null },
    isError: result.status === 'rejected',
  };
}

/** How a connection's requests are read: see `lineIntake`. */
interface LineIntake {
  /** Start reading (and hand on what is already read). */
  start(): void;
  /** A line handed on is a request that will be answered once. */
  asked(): void;
  /** One request was answered. */
  answered(): void;
  /** Something was written: stop reading if the client leaves too much unread. */
  wrote(): void;
}

/**
 * A connection's requests, one line at a time and in order, handed on only
 * while the connection has fewer than MAX_UNANSWERED requests unanswered and
 * its client has read its answers down to OUTPUT_HIGH_WATER_BYTES; otherwise
 * the socket is paused until the answers are read (the kernel's buffer then
 * stops the client's writes). A client that floods requests, or never reads
 * what it asked for, costs a bounded amount of memory. A line longer than
 * `maxLineBytes` stops the intake and calls `tooLong`.
 */
function lineIntake(socket: Socket, maxLineBytes: number, deliver: (line: Buffer) => void, tooLong: () => void): LineIntake {
  let pending: Buffer = Buffer.alloc(0);
  let unanswered = 0;
  let pumping = false;
  let draining = false;
  let stopped = false;
  const congested = () => socket.writableLength > OUTPUT_HIGH_WATER_BYTES;
  const stop = () => {
    stopped = true;
    socket.off('data', onData);
    tooLong();
  };
  const pump = () => {
    if (pumping || stopped || socket.destroyed) return;
    pumping = true;
    try {
      for (;;) {
        if (stopped || socket.destroyed) return;
        if (congested()) {
          if (!draining) {
            draining = true;
            socket.once('drain', () => {
              draining = false;
              pump();
            });
          }
          break;
        }
        if (unanswered >= MAX_UNANSWERED) break;
        const newline = pending.indexOf(0x0a);
        if (newline === -1) break;
        if (newline > maxLineBytes) return stop();
        const line = pending.subarray(0, newline);
        pending = pending.subarray(newline + 1);
        deliver(line);
      }
      const whole = pending.indexOf(0x0a) !== -1;
      if (!whole && pending.length > maxLineBytes) return stop();
      if (whole || congested() || unanswered >= MAX_UNANSWERED) socket.pause();
      else socket.resume();
    } finally {
      pumping = false;
    }
  };
  const onData = (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    pump();
  };
  return {
    start() {
      socket.on('data', onData);
      pump();
    },
    asked() {
      unanswered += 1;
    },
    answered() {
      unanswered = Math.max(0, unanswered - 1);
      pump();
    },
    wrote() {
      if (congested()) pump();
    },
  };
}

/** Whether an MCP message the server sends answers a request (a result or an error with the request's id). */
function answersRequest(message: JSONRPCMessage): message is JSONRPCMessage & { id: string | number } {
  return 'id' in message && ('result' in message || 'error' in message);
}

/** The id of an MCP request line that the SDK will answer (valid JSON-RPC request shape), else null. */
function requestId(line: Buffer): string | null {
  let message: unknown;
  try {
    message = JSON.parse(line.toString('utf8')) as unknown;
  } catch {
    return null;
  }
  if (!isRecord(message) || message.jsonrpc !== '2.0' || typeof message.method !== 'string') return null;
  if (!(typeof message.id === 'string' || Number.isInteger(message.id))) return null;
  if (message.params !== undefined && !isRecord(message.params)) return null;
  return JSON.stringify(message.id);
}

/** Serve `toolbox` on a fresh Unix socket in `options.dir` with a fresh capability token. */
export async function serveLaneTools(toolbox: LaneToolbox, options: ServeLaneToolsOptions): Promise<LaneToolServer> {
  const socketPath = join(options.dir, LANE_TOOLS_SOCKET_NAME);
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw new ProofgateError('INVALID_INPUT', `lane tools: socket path ${socketPath} is longer than ${MAX_SOCKET_PATH_BYTES} bytes`);
  }
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const handshakeTimeoutMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const token = randomBytes(32).toString('hex');
  const tokenBytes = Buffer.from(token, 'utf8');
  const toolNames = new Set(toolbox.tools.map((tool) => tool.name));
  const listing: Tool[] = toolbox.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: JSON.parse(JSON.stringify(tool.inputSchema)) as Tool['inputSchema'],
  }));
  const sockets = new Set<Socket>();
  const calls = new Set<AbortController>();
  let closed = false;

  /**
   * Run one call: its signal aborts when `signal` does or the server closes;
   * the toolbox's progress and a heartbeat every `heartbeatMs` go to
   * `onProgress` until the call ends. A throwing toolbox or a malformed
   * answer is an error outcome, never a result.
   */
  async function runCall(
    name: string,
    args: unknown,
    signal: AbortSignal,
    onProgress: ((progress: LaneToolProgress) => void) | undefined,
  ): Promise<CallOutcome> {
    const controller = new AbortController();
    const abort = () => controller.abort();
    calls.add(controller);
    if (signal.aborted || closed) abort();
    else signal.addEventListener('abort', abort, { once: true });
    const started = performance.now();
    let running = true;
    const forward = (progress: LaneToolProgress) => {
      if (running) onProgress?.({ elapsedMs: Math.max(0, Math.round(progress.elapsedMs)), message: oneLine(String(progress.message)) });
    };
    const heartbeat =
      onProgress === undefined
        ? undefined
        : setInterval(() => {
            const elapsedMs = Math.round(performance.now() - started);
            forward({ elapsedMs, message: `still running after ${Math.round(elapsedMs / 1000)} s` });
          }, heartbeatMs);
    try {
      const result: unknown = await toolbox.call({ name, arguments: args, signal: controller.signal, onProgress: forward });
      if (!wellFormedResult(result)) return { error: 'the tool gave a malformed answer' };
      return { result: { status: result.status, text: result.text, data: result.data ?? null } };
    } catch (error) {
      return { error: `the tool failed: ${describeError(error)}` };
    } finally {
      running = false;
      if (heartbeat !== undefined) clearInterval(heartbeat);
      signal.removeEventListener('abort', abort);
      calls.delete(controller);
    }
  }

  /** Why another call may not start now (too many running on this connection, or on the whole server), or null. */
  function busy(runningHere: number): string | null {
    if (runningHere >= MAX_CALLS_PER_CONNECTION) return `at most ${MAX_CALLS_PER_CONNECTION} calls run at once on one connection`;
    if (calls.size >= MAX_CALLS_RUNNING) return `at most ${MAX_CALLS_RUNNING} calls run at once`;
    return null;
  }

  function serveMcp(socket: Socket): void {
    const { Server } = loadMcpServer();
    const { StdioServerTransport } = loadMcpStdio();
    const { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } = loadMcpTypes();
    const server = new Server({ name: 'proofgate', version: '1.0.0' }, { capabilities: { tools: {} }, instructions: toolbox.instructions });
    let runningHere = 0;
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listing }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
      const { name } = request.params;
      if (!toolNames.has(name)) throw new McpError(ErrorCode.InvalidParams, `unknown tool: ${oneLine(name)}`);
      const refusal = busy(runningHere);
      if (refusal !== null) return { content: [{ type: 'text', text: `BUSY: ${refusal}; ask again when one has ended` }], isError: true };
      const progressToken = request.params._meta?.progressToken;
      let progress = 0;
      const onProgress =
        progressToken === undefined
          ? undefined
          : (update: LaneToolProgress) => {
              progress += 1;
              extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, message: update.message } }).catch(() => undefined);
            };
      runningHere += 1;
      let outcome: CallOutcome;
      try {
        outcome = await runCall(name, request.params.arguments ?? {}, extra.signal, onProgress);
      } finally {
        runningHere -= 1;
      }
      if ('error' in outcome) return { content: [{ type: 'text', text: outcome.error }], isError: true };
      return mcpToolResult(outcome.result);
    });
    server.onerror = () => undefined;
    server.onclose = () => socket.destroy();
    socket.once('close', () => void server.close().catch(() => undefined));
    // The SDK's transport reads from an emitter the intake feeds one line at a time (see lineIntake), and writes to the socket.
    const input = Object.assign(new EventEmitter(), { pause: () => undefined });
    const transport = new StdioServerTransport(input as unknown as Readable, socket, { maxBufferSize: maxLineBytes + 1 });
    const unanswered = new Map<string, number>();
    const intake = lineIntake(
      socket,
      maxLineBytes,
      (line) => {
        if (line.toString('utf8').trim() === '') return;
        const id = requestId(line);
        if (id !== null) {
          unanswered.set(id, (unanswered.get(id) ?? 0) + 1);
          intake.asked();
        }
        input.emit('data', Buffer.concat([line, Buffer.from('\n')]));
      },
      () => socket.destroy(),
    );
    const send = transport.send.bind(transport);
    transport.send = (message: JSONRPCMessage) => {
      const sent = send(message);
      const id = answersRequest(message) ? JSON.stringify(message.id) : null;
      const owed = id === null ? undefined : unanswered.get(id);
      if (id !== null && owed !== undefined) {
        if (owed <= 1) unanswered.delete(id);
        else unanswered.set(id, owed - 1);
        intake.answered();
      } else intake.wrote();
      return sent;
    };
    void server.connect(transport).then(
      () => intake.start(),
      () => socket.destroy(),
    );
  }

  function servePlain(socket: Socket): void {
    const running = new Map<string, AbortController>();
    const send = (message: unknown) => {
      if (!socket.destroyed && socket.writable) socket.write(`${JSON.stringify(message)}\n`);
      intake.wrote();
    };
    // Every request line gets exactly one answer (a result or an error); progress is not one.
    const answer = (message: unknown) => {
      send(message);
      intake.answered();
    };
    const fail = (id: number | string | null, code: string, message: string) => answer({ id, error: { code, message: oneLine(message) } });
    const keyOf = (id: number | string) => JSON.stringify(id);
    socket.once('close', () => {
      for (const controller of running.values()) controller.abort();
    });

    const handle = (line: string) => {
      let request: unknown;
      try {
        request = JSON.parse(line) as unknown;
      } catch {
        return fail(null, 'BAD_JSON', 'the request line is not JSON');
      }
      if (!isRecord(request)) return fail(null, 'BAD_REQUEST', 'a request is a JSON object');
      const { id } = request;
      if (!validId(id)) return fail(null, 'BAD_REQUEST', `id must be an integer or a string of at most ${MAX_ID_CHARS} characters`);
      switch (request.op) {
        case 'list':
          return answer({ id, tools: listing });
        case 'call': {
          const tool = request.tool;
          if (typeof tool !== 'string' || !toolNames.has(tool)) return fail(id, 'UNKNOWN_TOOL', `no tool named ${JSON.stringify(String(tool)).slice(0, 80)}`);
          const args = request.arguments ?? {};
          if (!isRecord(args)) return fail(id, 'BAD_REQUEST', 'arguments must be a JSON object');
          const key = keyOf(id);
          if (running.has(key)) return fail(id, 'DUPLICATE_ID', 'a call with this id is still running');
          const refusal = busy(running.size);
          if (refusal !== null) return fail(id, 'BUSY', refusal);
          const controller = new AbortController();
          running.set(key, controller);
          void runCall(tool, args, controller.signal, (progress) => send({ id, progress })).then((outcome) => {
            running.delete(key);
            if ('error' in outcome) fail(id, 'TOOL_FAILED', outcome.error);
            else answer({ id, result: outcome.result });
          });
          return;
        }
        case 'cancel': {
          if (!validId(request.target)) return fail(id, 'BAD_REQUEST', 'target must be the id of a call');
          const controller = running.get(keyOf(request.target));
          controller?.abort();
          return answer({ id, cancelled: controller !== undefined });
        }
        default:
          return fail(id, 'UNKNOWN_OP', 'op must be list, call or cancel');
      }
    };

    const intake = lineIntake(
      socket,
      maxLineBytes,
      (bytes) => {
        const line = bytes.toString('utf8');
        if (line.trim() === '') return;
        intake.asked();
        handle(line);
      },
      () => {
        fail(null, 'LINE_TOO_LONG', `a request line is longer than ${maxLineBytes} bytes`);
        socket.end();
        socket.destroySoon();
      },
    );
    intake.start();
  }

  /** The protocol a handshake line admits, or null: exactly `{token, protocol}`, this lane's token, a known protocol. */
  function admit(line: Buffer): LaneToolProtocol | null {
    let handshake: unknown;
    try {
      handshake = JSON.parse(line.toString('utf8')) as unknown;
    } catch {
      return null;
    }
    if (!isRecord(handshake) || Object.keys(handshake).length !== 2 || typeof handshake.token !== 'string') return null;
    const offered = Buffer.from(handshake.token, 'utf8');
    if (offered.length !== tokenBytes.length || !timingSafeEqual(offered, tokenBytes)) return null;
    return handshake.protocol === MCP_PROTOCOL || handshake.protocol === PLAIN_PROTOCOL ? handshake.protocol : null;
  }

  const server = createServer((socket) => {
    if (closed) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    const timer = setTimeout(() => socket.destroy(), handshakeTimeoutMs);
    let received: Buffer = Buffer.alloc(0);
    const onHandshake = (chunk: Buffer) => {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
      const newline = received.indexOf(0x0a);
      if (newline === -1 ? received.length > HANDSHAKE_MAX_BYTES : newline > HANDSHAKE_MAX_BYTES) {
        clearTimeout(timer);
        socket.destroy();
        return;
      }
      if (newline === -1) return;
      clearTimeout(timer);
      socket.pause();
      socket.off('data', onHandshake);
      const protocol = admit(received.subarray(0, newline));
      if (protocol === null) {
        socket.destroy();
        return;
      }
      const rest = received.subarray(newline + 1);
      if (rest.length > 0) socket.unshift(rest);
      if (protocol === MCP_PROTOCOL) serveMcp(socket);
      else servePlain(socket);
    };
    socket.once('close', () => clearTimeout(timer));
    socket.on('data', onHandshake);
  });
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  try {
    // The jail's uid (not proofgate's) connects; the directory, the jail's own mount, keeps everyone else out, and the token
    // everything that is not this lane.
    await chmod(socketPath, 0o666);
  } catch (error) {
    server.close();
    throw error;
  }

  let closing: Promise<void> | undefined;
  return {
    socketPath,
    token,
    close() {
      closing ??= (async () => {
        closed = true;
        for (const controller of calls) controller.abort();
        for (const socket of sockets) socket.destroy();
        // Node removes the socket file itself once the server is closed.
        await new Promise<void>((resolve) => server.close(() => resolve()));
      })();
      return closing;
    },
  };
}
