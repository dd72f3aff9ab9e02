import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeJobDir, type SandboxMode } from '../../../src/host/index.js';
import {
  LANE_TOOLS_ENV,
  mcpConfig,
  runReview,
  serveLaneTools,
  type LaneToolCall,
  type LaneToolLease,
  type LaneToolPort,
  type LaneToolServer,
  type ReviewOutcome,
} from '../../../src/review/index.js';
import { jailSkipReason, sandboxForTests } from '../../support/jail.js';
import { makeRepo, type TestRepo } from '../repo-fixture.js';

// The reviewer, committed on main as tools/review.mjs (the trusted tree): it asks for proof inside its own turn, over MCP
// through the relay named by PROOFGATE_MCP_CONFIG (JSON-RPC by hand), or over the plain protocol on the socket, and
// answers CONFIRMED with evidence quoting the tool's answer. `snoop` looks for what it must not reach.
const REVIEWER = `
import { readFileSync, writeFileSync, readdirSync, renameSync, mkdirSync, symlinkSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { dirname } from 'node:path';
const [mode] = process.argv.slice(2);
const request = JSON.parse(readFileSync(0, 'utf8'));
const env = process.env;
const notes = [];
const attempt = (name, fn) => { try { notes.push(name + '=' + fn()); } catch (error) { notes.push(name + '=failed:' + (error.code || error.message)); } };
const readLines = (stream, onMessage) => createInterface({ input: stream }).on('line', (line) => { if (line.trim() !== '') onMessage(JSON.parse(line)); });

async function viaMcp() {
  const server = JSON.parse(readFileSync(env.PROOFGATE_MCP_CONFIG, 'utf8')).mcpServers.proofgate;
  const relay = spawn(server.command, server.args, { env: { ...env, ...server.env }, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => relay.on('exit', (code) => resolve(code)));
  const waiting = new Map();
  const progress = [];
  readLines(relay.stdout, (message) => {
    if (message.method === 'notifications/progress') progress.push(message.params.progressToken + ':' + message.params.message);
    else if (waiting.has(message.id)) { waiting.get(message.id)(message); waiting.delete(message.id); }
  });
  const send = (message) => relay.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...message }) + '\\n');
  const ask = (id, method, params) => new Promise((resolve) => { waiting.set(id, resolve); send({ id, method, params }); });
  const init = await ask(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'jailed-reviewer', version: '1.0.0' } });
  send({ method: 'notifications/initialized' });
  const listed = await ask(2, 'tools/list', {});
  const called = await ask(3, 'tools/call', { name: 'prove_add', arguments: { lane: env.PROOFGATE_LANE_ID }, _meta: { progressToken: 'p7' } });
  relay.stdin.end();
  notes.push('server=' + init.result.serverInfo.name);
  notes.push('instructions=' + init.result.instructions);
  notes.push('tools=' + listed.result.tools.map((tool) => tool.name).join(','));
  notes.push('progress=' + progress.join('|'));
  notes.push('status=' + called.result.structuredContent.status + ' isError=' + called.result.isError);
  notes.push('answer=' + called.result.content[0].text);
  notes.push('relay-exit=' + (await exited));
}

async function viaPlain() {
  const socket = connect(env.PROOFGATE_TOOLS_SOCKET);
  await new Promise((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
  socket.write(JSON.stringify({ token: env.PROOFGATE_TOOLS_TOKEN, protocol: 'proofgate-tools.v1' }) + '\\n');
  const waiting = new Map();
  const progress = [];
  readLines(socket, (message) => {
    if ('progress' in message) progress.push(message.id + ':' + message.progress.message);
    else if (waiting.has(message.id)) { waiting.get(message.id)(message); waiting.delete(message.id); }
  });
  const ask = (message) => new Promise((resolve) => { waiting.set(message.id, resolve); socket.write(JSON.stringify(message) + '\\n'); });
  const listed = await ask({ id: 1, op: 'list' });
  const called = await ask({ id: 2, op: 'call', tool: 'prove_add', arguments: { lane: env.PROOFGATE_LANE_ID } });
  socket.end();
  notes.push('instructions=' + readFileSync(env.PROOFGATE_REVIEW_INSTRUCTIONS, 'utf8').trim());
  notes.push('tools=' + listed.tools.map((tool) => tool.name).join(','));
  notes.push('progress=' + progress.join('|'));
  notes.push('status=' + called.result.status);
  notes.push('answer=' + called.result.text);
}

/** Connect, hand over \`token\`, ask for the tool list: what came back before the server closed, or why it failed. */
function tryTools(path, token) {
  return new Promise((resolve) => {
    const socket = connect(path);
    let received = '';
    socket.on('error', (error) => resolve('failed:' + error.code));
    socket.on('data', (chunk) => { received += chunk; });
    socket.on('close', () => resolve('closed:' + (received === '' ? 'nothing' : received.trim())));
    socket.on('connect', () => socket.write(JSON.stringify({ token, protocol: 'proofgate-tools.v1' }) + '\\n' + JSON.stringify({ id: 1, op: 'list' }) + '\\n'));
  });
}

async function snoop() {
  notes.push('socket=' + env.PROOFGATE_TOOLS_SOCKET);
  notes.push('own-token=' + env.PROOFGATE_TOOLS_TOKEN);
  attempt('config-token', () => JSON.parse(readFileSync(env.PROOFGATE_MCP_CONFIG, 'utf8')).mcpServers.proofgate.env.PROOFGATE_TOOLS_TOKEN);
  notes.push('env-names=' + Object.keys(env).sort().join(','));
  attempt('environ1', () => readFileSync('/proc/1/environ', 'utf8'));
  attempt('environParent', () => readFileSync('/proc/' + process.ppid + '/environ', 'utf8'));
  attempt('processes', () => readdirSync('/proc').filter((name) => /^[0-9]+$/.test(name)).length);
  // The lane's job dir sits in proofgate's job base beside every other lane's: what of that base is there in here?
  if (env.PROOFGATE_TOOLS_SOCKET) attempt('job-base', () => readdirSync(dirname(dirname(dirname(dirname(env.PROOFGATE_TOOLS_SOCKET))))).join(','));
  attempt('other-config', () => readFileSync(env.OTHER_MCP_CONFIG, 'utf8'));
  if (env.OTHER_TOOLS_SOCKET) notes.push('other-socket=' + (await tryTools(env.OTHER_TOOLS_SOCKET, env.PROOFGATE_TOOLS_TOKEN)));
  if (env.PROOFGATE_TOOLS_SOCKET) notes.push('own-socket-guessed-token=' + (await tryTools(env.PROOFGATE_TOOLS_SOCKET, '0'.repeat(64))));
  if (env.PROOFGATE_TOOLS_SOCKET) {
    // Swap the socket's directory for a link elsewhere, so that what proofgate removes at the end is not its own: refused.
    const toolsDir = dirname(env.PROOFGATE_TOOLS_SOCKET);
    attempt('plant-in-tools', () => { writeFileSync(toolsDir + '/planted', 'x'); return 'yes'; });
    attempt('move-tools', () => { renameSync(toolsDir, toolsDir + '.moved'); mkdirSync(env.HOME + '/elsewhere'); symlinkSync(env.HOME + '/elsewhere', toolsDir); return 'yes'; });
  }
}

if (mode === 'mcp') await viaMcp();
if (mode === 'plain') await viaPlain();
if (mode === 'snoop') await snoop();
writeFileSync(env.PROOFGATE_EVIDENCE_PATH, 'reviewed ' + request.head_sha + '\\n' + notes.join('\\n') + '\\n');
process.stdout.write(JSON.stringify({
  schema: 'review-lane-result.v1', lane_id: env.PROOFGATE_LANE_ID, family: env.PROOFGATE_REVIEW_FAMILY,
  context_id: env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: request.nonce, read_only: true, evidence_path: env.PROOFGATE_EVIDENCE_PATH,
  findings: [], disposition: 'CONFIRMED' }));
`;

const SECRETS = {
  GITHUB_TOKEN: 'ghp_secretsecretsecretsecretsecretsecret02',
  PROOFGATE_GITHUB_APP_PRIVATE_KEY: 'proofgate-app-key-must-not-leak-2',
  OPENAI_API_KEY: 'sk-openai-value-that-must-not-leak-2222222222',
};

interface FakePort {
  readonly port: LaneToolPort;
  readonly leases: LaneToolLease[];
  readonly calls: { readonly lease: LaneToolLease; readonly call: LaneToolCall }[];
  closed: boolean;
}

/** A review's tools that need no proof code: one tool per lane run, answering at once with a text naming `tag` and the lane. */
function fakePort(tag: string): FakePort {
  const fake: FakePort = {
    leases: [],
    calls: [],
    closed: false,
    port: {
      open(lease) {
        fake.leases.push(lease);
        return {
          tools: [
            { name: 'prove_add', description: 'Run the add scenario on the head', inputSchema: { type: 'object', properties: { lane: { type: 'string' } } } },
          ],
          instructions: `Prove add before you confirm (${tag}).`,
          call(call) {
            fake.calls.push({ lease, call });
            call.onProgress?.({ elapsedMs: 1, message: `${tag}: scenario add started` });
            return Promise.resolve({
              status: 'verified',
              text: `<observations untrusted="true">${tag}: add(2, 3) printed 5 for ${lease.laneId}</observations>`,
              data: { tag },
            });
          },
        };
      },
      receipts: () => [],
      close() {
        fake.closed = true;
      },
    },
  };
  return fake;
}

let repo: TestRepo;
let scratch: string;
let sandbox: SandboxMode = 'jail';
let skipJail: string | null = null;
const servers: LaneToolServer[] = [];
const jobDirs: string[] = [];

beforeAll(async () => {
  sandbox = await sandboxForTests();
  skipJail = await jailSkipReason();
  repo = makeRepo();
  repo.commit({ 'tools/review.mjs': REVIEWER }, 'the reviewer');
  repo.branch('feature');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => b + a;\n' }, 'commute');
  repo.switchTo('main');
  scratch = mkdtempSync(join(tmpdir(), 'pg-jailed-tools-'));
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  for (const dir of jobDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

afterAll(() => {
  repo.remove();
  rmSync(scratch, { recursive: true, force: true });
});

function review(
  lane: { id: string; mode: string; env?: readonly string[] },
  port: LaneToolPort,
  extraEnv: Record<string, string> = {},
): Promise<ReviewOutcome> {
  const configFile = join(scratch, `config-${lane.id}-${Math.random().toString(16).slice(2)}.yml`);
  const yaml = [
    `sandbox: ${sandbox}`,
    'review:',
    '  mode: fresh-context',
    '  lanes:',
    `    - id: ${lane.id}`,
    `      command: ${JSON.stringify(['node', 'tools/review.mjs', lane.mode])}`,
    '      timeoutSeconds: 120',
    ...(lane.env === undefined ? [] : [`      env: ${JSON.stringify(lane.env)}`]),
  ];
  writeFileSync(configFile, `${yaml.join('\n')}\n`);
  return runReview({
    repoDir: repo.dir,
    base: 'main',
    head: 'feature',
    configFile,
    dataDir: mkdtempSync(join(scratch, 'data-')),
    env: { ...process.env, ...SECRETS, ...extraEnv },
    tools: () => port,
  });
}

function evidence(outcome: ReviewOutcome): string {
  const path = outcome.lanes[0]?.result?.evidence_path;
  if (path === undefined) throw new Error(`no evidence: ${JSON.stringify(outcome.lanes[0]?.result)}`);
  return readFileSync(path, 'utf8');
}

function note(text: string, name: string): string {
  return new RegExp(`^${name}=(.*)$`, 'm').exec(text)?.[1] ?? `(no ${name})`;
}

describe('a command lane calls its tools inside its turn', () => {
  it('two lanes at once, one over MCP through the relay and one over the plain protocol, each reach only their own toolbox', async () => {
    const mcp = fakePort('alpha');
    const plain = fakePort('beta');
    const [viaMcp, viaPlain] = await Promise.all([review({ id: 'mcp-lane', mode: 'mcp' }, mcp.port), review({ id: 'plain-lane', mode: 'plain' }, plain.port)]);

    for (const outcome of [viaMcp, viaPlain]) {
      expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
      expect(outcome.lanes[0]?.result && 'failure' in outcome.lanes[0].result ? outcome.lanes[0].result.failure.reason : null).toBeNull();
      expect(outcome.verdict).toBe('CONFIRMED');
      expect(outcome.lanes[0]?.attempts).toHaveLength(1);
    }
    const mcpText = evidence(viaMcp);
    expect(note(mcpText, 'server')).toBe('proofgate');
    expect(note(mcpText, 'instructions')).toBe('Prove add before you confirm (alpha).');
    expect(note(mcpText, 'tools')).toBe('prove_add');
    expect(note(mcpText, 'progress')).toBe('p7:alpha: scenario add started');
    expect(note(mcpText, 'status')).toBe('verified isError=false');
    expect(note(mcpText, 'answer')).toBe('<observations untrusted="true">alpha: add(2, 3) printed 5 for mcp-lane</observations>');
    expect(note(mcpText, 'relay-exit')).toBe('0');

    const plainText = evidence(viaPlain);
    expect(note(plainText, 'instructions')).toBe('Prove add before you confirm (beta).');
    expect(note(plainText, 'tools')).toBe('prove_add');
    expect(note(plainText, 'progress')).toBe('2:beta: scenario add started');
    expect(note(plainText, 'status')).toBe('verified');
    expect(note(plainText, 'answer')).toBe('<observations untrusted="true">beta: add(2, 3) printed 5 for plain-lane</observations>');

    // Each toolbox saw exactly its own lane's one call, with the arguments the jailed program sent.
    expect(mcp.calls.map(({ lease, call }) => [lease.laneId, call.name, call.arguments])).toEqual([['mcp-lane', 'prove_add', { lane: 'mcp-lane' }]]);
    expect(plain.calls.map(({ lease, call }) => [lease.laneId, call.name, call.arguments])).toEqual([['plain-lane', 'prove_add', { lane: 'plain-lane' }]]);
    expect(mcp.closed && plain.closed).toBe(true);
    for (const text of [mcpText, plainText]) for (const value of Object.values(SECRETS)) expect(text).not.toContain(value);
  });

  it('a lane offered no tools gets no socket and no tool variables', async () => {
    const none: LaneToolPort = { open: () => null, receipts: () => [], close: () => undefined };
    const empty: LaneToolPort = {
      open: () => ({ tools: [], instructions: 'nothing', call: () => Promise.reject(new Error('no tools')) }),
      receipts: () => [],
      close: () => undefined,
    };
    for (const port of [none, empty]) {
      const outcome = await review({ id: 'snoop', mode: 'snoop' }, port);
      expect(outcome.verdict).toBe('CONFIRMED');
      const text = evidence(outcome);
      expect(note(text, 'socket')).toBe('undefined');
      expect(note(text, 'env-names')).not.toMatch(/PROOFGATE_(MCP_CONFIG|TOOLS_|REVIEW_INSTRUCTIONS)/);
    }
  });
});

describe('a jailed lane with tools', () => {
  it("attack: sees only its own token; cannot read proofgate's environment, another lane's config or socket, or use a guessed token", async (test) => {
    if (skipJail !== null) test.skip(skipJail);
    // Another lane's tools, served the way the command adapter serves them: a socket and a config in that lane's job dir.
    const otherJob = await makeJobDir('proofgate-lane-');
    jobDirs.push(otherJob);
    const other = fakePort('other');
    const otherToolbox = other.port.open({ laneId: 'victim', contextId: 'ctx_victim', attempt: 1 });
    if (otherToolbox === null) throw new Error('no toolbox');
    const otherServer = await serveLaneTools(otherToolbox, { dir: otherJob });
    servers.push(otherServer);
    const otherConfig = join(otherJob, 'mcp.json');
    writeFileSync(otherConfig, JSON.stringify(mcpConfig(otherServer.socketPath, otherServer.token)), { mode: 0o444 });

    const own = fakePort('own');
    const outcome = await review({ id: 'snoop', mode: 'snoop', env: ['OTHER_TOOLS_SOCKET', 'OTHER_MCP_CONFIG'] }, own.port, {
      OTHER_TOOLS_SOCKET: otherServer.socketPath,
      OTHER_MCP_CONFIG: otherConfig,
    });
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.verdict).toBe('CONFIRMED');
    const text = evidence(outcome);

    // Its token is its own (the one in its own config), never the other lane's.
    const ownToken = note(text, 'own-token');
    expect(ownToken).toMatch(/^[0-9a-f]{64}$/);
    expect(note(text, 'config-token')).toBe(ownToken);
    expect(ownToken).not.toBe(otherServer.token);
    expect(text).not.toContain(otherServer.token);
    // The other lane's job dir is not in the jail: neither its config nor its socket is there.
    expect(note(text, 'other-config')).toBe('failed:ENOENT');
    expect(note(text, 'other-socket')).toBe('failed:ENOENT');
    // Of the job base, the jail shows only this lane's own directory; the host has the other lane's beside it.
    const socketPath = note(text, 'socket');
    const ownRoot = dirname(dirname(dirname(socketPath)));
    expect(note(text, 'job-base')).toBe(ownRoot.split('/').pop());
    expect(readdirSync(dirname(ownRoot))).toContain(otherJob.split('/').pop());
    // Its own socket with a guessed token: closed, nothing served.
    expect(note(text, 'own-socket-guessed-token')).toBe('closed:nothing');
    // The socket's directory is a read-only mount point: nothing is planted in it and it cannot be swapped for a link.
    expect(note(text, 'plant-in-tools')).toBe('failed:EROFS');
    expect(note(text, 'move-tools')).toMatch(/^failed:(EBUSY|EROFS|EPERM)$/);
    // proofgate's environment is nowhere: /proc/1 is the jail's first process, and the program's own variables are the allow-list.
    for (const name of ['environ1', 'environParent']) expect(note(text, name)).not.toMatch(/TOKEN|SECRET|KEY|PROOFGATE/);
    expect(note(text, 'env-names').split(',')).toEqual(
      expect.arrayContaining([LANE_TOOLS_ENV.mcpConfig, LANE_TOOLS_ENV.socket, LANE_TOOLS_ENV.token, LANE_TOOLS_ENV.instructions]),
    );
    for (const value of Object.values(SECRETS)) expect(text).not.toContain(value);
    for (const name of Object.keys(SECRETS)) expect(note(text, 'env-names').split(',')).not.toContain(name);
    // Nobody called either toolbox, and the lane's socket went with its job dir.
    expect(other.calls).toEqual([]);
    expect(own.calls).toEqual([]);
    expect(existsSync(socketPath)).toBe(false);
  });
});
