import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode, McpError, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  LANE_TOOLS_ENV,
  MCP_PROTOCOL,
  PLAIN_PROTOCOL,
  RELAY_SOURCE,
  mcpConfig,
  relayNodeCommand,
  serveLaneTools,
  type LaneToolCall,
  type LaneToolResult,
  type LaneToolServer,
  type LaneToolbox,
  type McpServersConfig,
  type ServeLaneToolsOptions,
} from '../../../src/review/index.js';
import { within } from '../../support/wait.js';

/** A promise and the functions that settle it. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

const VERIFIED: LaneToolResult = {
  status: 'verified',
  text: '<observations untrusted="true">add(2, 3) printed 5</observations>',
  data: { observations: [{ name: 'stdout.txt', sha256: 'ab'.repeat(32) }] },
};

interface FakeToolbox {
  readonly toolbox: LaneToolbox;
  /** Every call the toolbox got, in order. */
  readonly calls: LaneToolCall[];
}

/** A toolbox with two tools; `answer` decides each call (default: VERIFIED at once). */
function fakeToolbox(answer: (call: LaneToolCall) => Promise<LaneToolResult> = () => Promise.resolve(VERIFIED)): FakeToolbox {
  const calls: LaneToolCall[] = [];
  return {
    calls,
    toolbox: {
      tools: [
        {
          name: 'prove_add',
          description: 'Run the add scenario on the head',
          inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'], additionalProperties: false },
        },
        { name: 'prove_cli', description: 'Run the CLI scenario on the head', inputSchema: { type: 'object', properties: {} } },
      ],
      instructions: 'Ask for proof of the behaviour the change claims; judge what comes back.',
      call(call) {
        calls.push(call);
        return answer(call);
      },
    },
  };
}

const dirs: string[] = [];
const servers: LaneToolServer[] = [];
const clients: Client[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(servers.splice(0).map((server) => server.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function serve(toolbox: LaneToolbox, options: Partial<ServeLaneToolsOptions> = {}): Promise<LaneToolServer> {
  const dir = mkdtempSync(join(tmpdir(), 'pg-lane-tools-'));
  dirs.push(dir);
  const server = await serveLaneTools(toolbox, { dir, ...options });
  servers.push(server);
  return server;
}

/** The SDK's own client, started from the config file's command, args and env: the relay process. */
async function mcpClient(server: LaneToolServer): Promise<{ client: Client; transport: StdioClientTransport }> {
  const file = join(dirs[dirs.length - 1] ?? tmpdir(), 'mcp.json');
  writeFileSync(file, JSON.stringify(mcpConfig(server.socketPath, server.token)));
  const config = JSON.parse(readFileSync(file, 'utf8')) as McpServersConfig;
  const entry = config.mcpServers.proofgate;
  const transport = new StdioClientTransport({ command: entry.command, args: [...entry.args], env: { ...entry.env }, stderr: 'pipe' });
  const client = new Client({ name: 'socket-test', version: '1.0.0' });
  clients.push(client);
  await client.connect(transport);
  return { client, transport };
}

/** A raw connection that writes `bytes` and collects everything until the server closes it. */
function rawExchange(path: string, bytes: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(path);
    sockets.push(socket);
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('utf8');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(received));
    socket.on('connect', () => {
      if (bytes.length > 0) socket.write(bytes);
    });
  });
}

/** A client of the plain protocol: send request lines, wait for answer lines. */
class PlainClient {
  readonly messages: Record<string, unknown>[] = [];
  private readonly waiters: { test: (message: Record<string, unknown>) => boolean; resolve: (message: Record<string, unknown>) => void }[] = [];
  private buffered = '';
  readonly closed: Promise<void>;

  constructor(readonly socket: Socket) {
    const closed = deferred();
    this.closed = closed.promise;
    socket.on('close', () => closed.resolve());
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      this.buffered += chunk.toString('utf8');
      for (let newline = this.buffered.indexOf('\n'); newline !== -1; newline = this.buffered.indexOf('\n')) {
        const message = JSON.parse(this.buffered.slice(0, newline)) as Record<string, unknown>;
        this.buffered = this.buffered.slice(newline + 1);
        this.messages.push(message);
        for (const waiter of [...this.waiters]) {
          if (waiter.test(message)) {
            this.waiters.splice(this.waiters.indexOf(waiter), 1);
            waiter.resolve(message);
          }
        }
      }
    });
  }

  static async open(server: LaneToolServer, handshake: Record<string, unknown> = { token: server.token, protocol: PLAIN_PROTOCOL }): Promise<PlainClient> {
    const socket = connect(server.socketPath);
    sockets.push(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    socket.write(`${JSON.stringify(handshake)}\n`);
    return new PlainClient(socket);
  }

  send(request: unknown): void {
    this.socket.write(`${typeof request === 'string' ? request : JSON.stringify(request)}\n`);
  }

  /** The first message (already received or still to come) that passes `test`. */
  next(test: (message: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>> {
    const seen = this.messages.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    const waiter = deferred<Record<string, unknown>>();
    this.waiters.push({ test, resolve: waiter.resolve });
    return within(waiter.promise, what);
  }

  answer(id: unknown): Promise<Record<string, unknown>> {
    return this.next(
      (message) => message.id === id && ('result' in message || 'error' in message || 'tools' in message || 'cancelled' in message),
      `answer to ${String(id)}`,
    );
  }
}

describe('lane tools over MCP (the SDK client through the relay)', () => {
  it('lists and calls the tools; the config is the standard mcpServers shape naming the relay', async () => {
    const fake = fakeToolbox();
    const server = await serve(fake.toolbox);
    expect(server.token).toMatch(/^[0-9a-f]{64}$/);
    const config = mcpConfig(server.socketPath, server.token);
    expect(config.mcpServers.proofgate).toEqual({
      command: relayNodeCommand(),
      args: ['-e', RELAY_SOURCE],
      env: { [LANE_TOOLS_ENV.socket]: server.socketPath, [LANE_TOOLS_ENV.token]: server.token },
    });
    const { client } = await mcpClient(server);
    expect(client.getInstructions()).toBe(fake.toolbox.instructions);
    const listed = await client.listTools();
    expect(listed.tools.map((tool) => tool.name)).toEqual(['prove_add', 'prove_cli']);
    expect(listed.tools[0]?.inputSchema).toEqual(fake.toolbox.tools[0]?.inputSchema);
    const result = await client.callTool({ name: 'prove_add', arguments: { a: 2, b: 3 } });
    expect(result).toMatchObject({
      content: [{ type: 'text', text: VERIFIED.text }],
      structuredContent: { status: 'verified', data: VERIFIED.data },
      isError: false,
    });
    expect(fake.calls).toHaveLength(1);
    expect(fake.calls[0]).toMatchObject({ name: 'prove_add', arguments: { a: 2, b: 3 } });
  });

  it('an inconclusive answer is an answer (isError false); rejected evidence and a throwing toolbox are errors; an unknown tool is refused', async () => {
    const answers: LaneToolResult[] = [
      { status: 'inconclusive', text: 'inconclusive: the deadline passed', data: { reason: 'deadline' } },
      { status: 'rejected', text: 'rejected: CRC_MISMATCH', data: { reason: 'CRC_MISMATCH' } },
    ];
    const fake = fakeToolbox(() => {
      const next = answers.shift();
      return next === undefined ? Promise.reject(new Error('producer\nexploded')) : Promise.resolve(next);
    });
    const server = await serve(fake.toolbox);
    const { client } = await mcpClient(server);
    expect(await client.callTool({ name: 'prove_cli', arguments: {} })).toMatchObject({
      isError: false,
      structuredContent: { status: 'inconclusive', data: { reason: 'deadline' } },
    });
    expect(await client.callTool({ name: 'prove_cli', arguments: {} })).toMatchObject({ isError: true, structuredContent: { status: 'rejected' } });
    expect(await client.callTool({ name: 'prove_cli', arguments: {} })).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'the tool failed: producer exploded' }],
    });
    const unknown = await client.callTool({ name: 'rm_rf', arguments: {} }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(unknown).toBeInstanceOf(McpError);
    expect((unknown as McpError).code).toBe(ErrorCode.InvalidParams);
    expect(fake.calls.map((call) => call.name)).toEqual(['prove_cli', 'prove_cli', 'prove_cli']);
  });

  it("sends the toolbox's progress and a heartbeat while a call runs, so a client that resets its timeout on progress waits past it", async () => {
    const release = deferred<LaneToolResult>();
    const started = deferred<LaneToolCall>();
    const fake = fakeToolbox((call) => {
      started.resolve(call);
      call.onProgress?.({ elapsedMs: 3, message: 'scenario started\non the head' });
      return release.promise;
    });
    const server = await serve(fake.toolbox, { heartbeatMs: 20 });
    const { client } = await mcpClient(server);
    const seen: Progress[] = [];
    const firstHeartbeat = deferred();
    const pastTimeout = deferred();
    const TIMEOUT_MS = 1000;
    // The heartbeat comes every 20 ms at the soonest: 60 of them take longer than the client's 1 s timeout.
    const BEATS_PAST_TIMEOUT = Math.ceil(TIMEOUT_MS / 20) + 10;
    let beats = 0;
    const call = client.callTool({ name: 'prove_add', arguments: { a: 1, b: 1 } }, undefined, {
      timeout: TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      onprogress: (progress) => {
        seen.push(progress);
        if (progress.message?.startsWith('still running') === true) {
          beats += 1;
          firstHeartbeat.resolve();
          if (beats >= BEATS_PAST_TIMEOUT) pastTimeout.resolve();
        }
      },
    });
    await within(started.promise, 'the toolbox got the call');
    await within(firstHeartbeat.promise, 'a heartbeat progress notification');
    expect(seen[0]?.message).toBe('scenario started on the head');
    expect(seen.map((progress) => progress.progress)).toEqual(seen.map((_progress, index) => index + 1));
    await within(pastTimeout.promise, 'heartbeats past the client timeout');
    release.resolve(VERIFIED);
    expect(await call).toMatchObject({ isError: false, structuredContent: { status: 'verified' } });
  });

  it("the client's cancellation, and its timeout without progress, abort the toolbox call's signal", async () => {
    const aborted: Promise<void>[] = [];
    const started = [deferred(), deferred()];
    const fake = fakeToolbox((call) => {
      const signal = call.signal;
      if (signal === undefined) return Promise.reject(new Error('no signal'));
      const abort = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      aborted.push(abort);
      started[aborted.length - 1]?.resolve();
      return abort.then(() => ({ status: 'inconclusive', text: 'inconclusive: cancelled', data: null }));
    });
    const server = await serve(fake.toolbox);
    const { client } = await mcpClient(server);
    const cancel = new AbortController();
    const cancelled = client.callTool({ name: 'prove_cli', arguments: {} }, undefined, { signal: cancel.signal }).then(
      () => 'answered',
      () => 'cancelled',
    );
    await within(started[0]?.promise ?? Promise.resolve(), 'the first call started');
    cancel.abort('the reviewer gave up');
    await within(aborted[0] ?? Promise.resolve(), "the first call's signal aborted");
    expect(await cancelled).toBe('cancelled');
    // No progress was asked for (no onprogress): the client's own timeout cancels, and that aborts the call too.
    const timedOut = await client.callTool({ name: 'prove_cli', arguments: {} }, undefined, { timeout: 50 }).then(
      () => null,
      (error: unknown) => error,
    );
    expect((timedOut as McpError).code).toBe(ErrorCode.RequestTimeout);
    await within(started[1]?.promise ?? Promise.resolve(), 'the second call started');
    await within(aborted[1] ?? Promise.resolve(), "the timed-out call's signal aborted");
    expect(fake.calls).toHaveLength(2);
  });

  it('closing the server aborts running calls and ends the relay', async () => {
    const started = deferred<LaneToolCall>();
    const fake = fakeToolbox((call) => {
      started.resolve(call);
      return new Promise<LaneToolResult>(() => undefined);
    });
    const server = await serve(fake.toolbox);
    const { client, transport } = await mcpClient(server);
    const ended = deferred();
    client.onclose = () => ended.resolve();
    const call = client.callTool({ name: 'prove_cli', arguments: {} }).then(
      () => 'answered',
      () => 'failed',
    );
    const running = await within(started.promise, 'the call started');
    const relayPid = transport.pid;
    expect(relayPid).not.toBeNull();
    await server.close();
    expect(running.signal?.aborted).toBe(true);
    await within(ended.promise, 'the relay ended when the server closed');
    expect(await call).toBe('failed');
    expect(() => process.kill(relayPid ?? 0, 0)).toThrow();
  });
});

describe('lane tools refuse what does not start with this lane’s handshake', () => {
  const initialize = `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } })}\n`;
  const list = `${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' })}\n${JSON.stringify({ id: 3, op: 'list' })}\n`;

  it.each([
    [
      'a wrong token',
      (token: string) => `${JSON.stringify({ token: token.replace(/^./, (c) => (c === '0' ? '1' : '0')), protocol: MCP_PROTOCOL })}\n${initialize}${list}`,
    ],
    ['a token of another length', (token: string) => `${JSON.stringify({ token: `${token}00`, protocol: PLAIN_PROTOCOL })}\n${list}`],
    ['no handshake (MCP straight away)', () => `${initialize}${list}`],
    ['an unknown protocol', (token: string) => `${JSON.stringify({ token, protocol: 'http' })}\n${list}`],
    ['extra handshake fields', (token: string) => `${JSON.stringify({ token, protocol: PLAIN_PROTOCOL, admin: true })}\n${list}`],
    ['malformed JSON', () => `{"token": oops\n${list}`],
    ['a handshake line over 4 KiB', (token: string) => `${JSON.stringify({ token, protocol: PLAIN_PROTOCOL, pad: 'x'.repeat(5000) })}\n${list}`],
    ['4 KiB and more without a newline', () => 'x'.repeat(6000)],
  ])('%s: the connection is closed and nothing is served', async (_what, bytes) => {
    const fake = fakeToolbox();
    const server = await serve(fake.toolbox);
    expect(await within(rawExchange(server.socketPath, bytes(server.token)), 'the server closed the connection')).toBe('');
    expect(fake.calls).toEqual([]);
  });

  it('a connection that sends nothing is closed after the handshake timeout', async () => {
    const fake = fakeToolbox();
    const server = await serve(fake.toolbox, { handshakeTimeoutMs: 50 });
    expect(await within(rawExchange(server.socketPath, ''), 'the server closed the silent connection')).toBe('');
  });

  it('past the handshake, an MCP message over the line cap ends the connection; the toolbox is never called', async () => {
    const fake = fakeToolbox();
    const server = await serve(fake.toolbox, { maxLineBytes: 1024 });
    const call = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'prove_cli', arguments: { pad: 'y'.repeat(4096) } } });
    const socket = connect(server.socketPath);
    sockets.push(socket);
    let received = '';
    const answered = deferred();
    const closed = deferred();
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('utf8');
      if (received.includes('"id":1')) answered.resolve();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => closed.resolve());
    socket.write(`${JSON.stringify({ token: server.token, protocol: MCP_PROTOCOL })}\n${initialize}`);
    // The initialize line fits and is answered; the oversize call is not, and the connection ends.
    await within(answered.promise, 'initialize answered');
    socket.write(`${call}\n`);
    await within(closed.promise, 'the server closed the connection');
    expect(received).not.toContain('"id":2');
    expect(fake.calls).toEqual([]);
  });
});

describe('the plain protocol (proofgate-tools.v1)', () => {
  it('lists, calls with progress, answers concurrent calls by id, and cancels', async () => {
    const releases = new Map<string, ReturnType<typeof deferred<LaneToolResult>>>();
    const started = new Map<string, ReturnType<typeof deferred<LaneToolCall>>>();
    const gate = (key: string) => {
      if (!releases.has(key)) releases.set(key, deferred<LaneToolResult>());
      if (!started.has(key)) started.set(key, deferred<LaneToolCall>());
      return { release: releases.get(key) ?? deferred<LaneToolResult>(), started: started.get(key) ?? deferred<LaneToolCall>() };
    };
    const fake = fakeToolbox((call) => {
      const key = JSON.stringify(call.arguments);
      const { release, started: begun } = gate(key);
      begun.resolve(call);
      call.onProgress?.({ elapsedMs: 7, message: `working on ${key}` });
      call.signal?.addEventListener('abort', () => release.resolve({ status: 'inconclusive', text: 'inconclusive: cancelled', data: { cancelled: key } }));
      return release.promise;
    });
    const server = await serve(fake.toolbox);
    const client = await PlainClient.open(server);

    client.send({ id: 'l', op: 'list' });
    expect((await client.answer('l')).tools).toEqual(fake.toolbox.tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema })));

    // Two calls at once, ids 1 and "1" (distinct), answered in the order they finish.
    client.send({ id: 1, op: 'call', tool: 'prove_add', arguments: { a: 1, b: 2 } });
    client.send({ id: '1', op: 'call', tool: 'prove_add', arguments: { a: 3, b: 4 } });
    await within(gate('{"a":1,"b":2}').started.promise, 'call 1 started');
    await within(gate('{"a":3,"b":4}').started.promise, 'call "1" started');
    expect(await client.next((message) => message.id === 1 && 'progress' in message, 'progress of call 1')).toEqual({
      id: 1,
      progress: { elapsedMs: 7, message: 'working on {"a":1,"b":2}' },
    });
    gate('{"a":3,"b":4}').release.resolve(VERIFIED);
    expect(await client.answer('1')).toEqual({ id: '1', result: VERIFIED });
    expect(client.messages.some((message) => message.id === 1 && 'result' in message)).toBe(false);

    // A running id cannot be reused; cancelling it aborts the toolbox call, which answers inconclusive.
    client.send({ id: 1, op: 'call', tool: 'prove_cli', arguments: {} });
    expect(await client.next((message) => message.id === 1 && 'error' in message, 'duplicate id refused')).toMatchObject({ error: { code: 'DUPLICATE_ID' } });
    client.send({ id: 'c', op: 'cancel', target: 1 });
    expect(await client.answer('c')).toEqual({ id: 'c', cancelled: true });
    expect(await client.next((message) => message.id === 1 && 'result' in message, 'the cancelled call answers')).toEqual({
      id: 1,
      result: { status: 'inconclusive', text: 'inconclusive: cancelled', data: { cancelled: '{"a":1,"b":2}' } },
    });
    expect(fake.calls.find((call) => JSON.stringify(call.arguments) === '{"a":1,"b":2}')?.signal?.aborted).toBe(true);
    client.send({ id: 'c2', op: 'cancel', target: 'nothing-running' });
    expect(await client.answer('c2')).toEqual({ id: 'c2', cancelled: false });
    expect(fake.calls).toHaveLength(2);
  });

  it('answers malformed requests with one-line errors and keeps serving; a throwing toolbox is TOOL_FAILED', async () => {
    const fake = fakeToolbox((call) =>
      JSON.stringify(call.arguments) === '{"boom":true}' ? Promise.reject(new Error('disk\nfull')) : Promise.resolve(VERIFIED),
    );
    const server = await serve(fake.toolbox);
    const client = await PlainClient.open(server);
    const cases: [unknown, unknown, string][] = [
      ['this is not json', null, 'BAD_JSON'],
      [[1, 2], null, 'BAD_REQUEST'],
      [{ op: 'list' }, null, 'BAD_REQUEST'],
      [{ id: 1.5, op: 'list' }, null, 'BAD_REQUEST'],
      [{ id: 'x'.repeat(201), op: 'list' }, null, 'BAD_REQUEST'],
      [{ id: 2, op: 'delete' }, 2, 'UNKNOWN_OP'],
      [{ id: 3, op: 'call', tool: 'rm_rf' }, 3, 'UNKNOWN_TOOL'],
      [{ id: 4, op: 'call', tool: 'prove_cli', arguments: [1] }, 4, 'BAD_REQUEST'],
      [{ id: 5, op: 'cancel', target: { id: 1 } }, 5, 'BAD_REQUEST'],
      [{ id: 6, op: 'call', tool: 'prove_cli', arguments: { boom: true } }, 6, 'TOOL_FAILED'],
    ];
    for (const [request, id, code] of cases) {
      const before = client.messages.length;
      client.send(request);
      const answer = await client.next((message) => client.messages.indexOf(message) >= before && 'error' in message, `error ${code}`);
      expect(answer.id).toBe(id);
      expect((answer.error as { code: string }).code).toBe(code);
      expect((answer.error as { message: string }).message).not.toContain('\n');
    }
    client.send({ id: 7, op: 'call', tool: 'prove_cli' });
    expect(await client.answer(7)).toEqual({ id: 7, result: VERIFIED });
    expect(fake.calls.map((call) => call.arguments)).toEqual([{ boom: true }, {}]);
  });

  it('a line over the cap is refused (LINE_TOO_LONG) and the connection ends; the toolbox is never called', async () => {
    const fake = fakeToolbox();
    const server = await serve(fake.toolbox, { maxLineBytes: 1024 });
    const client = await PlainClient.open(server);
    client.send({ id: 1, op: 'call', tool: 'prove_cli', arguments: { pad: 'z'.repeat(2048) } });
    expect(await client.next((message) => 'error' in message, 'the oversize line is refused')).toMatchObject({ id: null, error: { code: 'LINE_TOO_LONG' } });
    await within(client.closed, 'the connection ended');
    expect(fake.calls).toEqual([]);
  });

  it('closing the server aborts running calls and ends every connection', async () => {
    const started = deferred<LaneToolCall>();
    const fake = fakeToolbox((call) => {
      started.resolve(call);
      return new Promise<LaneToolResult>(() => undefined);
    });
    const server = await serve(fake.toolbox);
    const one = await PlainClient.open(server);
    const two = await PlainClient.open(server);
    two.send({ id: 1, op: 'list' });
    await two.answer(1);
    one.send({ id: 1, op: 'call', tool: 'prove_cli', arguments: {} });
    const running = await within(started.promise, 'the call started');
    await server.close();
    expect(running.signal?.aborted).toBe(true);
    await within(Promise.all([one.closed, two.closed]), 'both connections ended');
    // The socket is gone: nothing connects any more.
    const refused = await new Promise<string>((resolve) => {
      const socket = connect(server.socketPath);
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      socket.on('connect', () => {
        socket.destroy();
        resolve('connected');
      });
    });
    expect(refused).toBe('ENOENT');
  });
});

describe('the relay command', () => {
  it("uses proofgate's node when the jail shows it, else node on PATH", () => {
    expect(relayNodeCommand('/usr/bin/node')).toBe('/usr/bin/node');
    expect(relayNodeCommand('/usr/local/bin/node')).toBe('/usr/local/bin/node');
    expect(relayNodeCommand('/root/.nvm/versions/node/v20.0.0/bin/node')).toBe('node');
    expect(relayNodeCommand('/opt/node/bin/node')).toBe('node');
    expect(relayNodeCommand('/usr/../root/node')).toBe('node');
  });
});
