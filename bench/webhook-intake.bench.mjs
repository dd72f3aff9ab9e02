// Webhook intake (issue 12): deliveries per second answered 202 by the
// service's HTTP server (signature check, record and claims committed in
// groups on the embedded SQLite store, hand-off to a sink), against a bare
// node:http server that only reads the body and checks its HMAC, measured in
// the same run. Target: at least 0.5x the bare server.
//
// Each server runs in a child process of its own (this file, started with
// --webhook-intake-server); this process is the load: CLIENTS concurrent
// keep-alive connections on loopback, each sending the next signed delivery
// as soon as its last one is answered. Payloads are real GitHub payloads from
// @octokit/webhooks-examples (pull_request opened, issue_comment created on a
// pull request, check_run completed), each made distinct so none is a
// duplicate. Rounds alternate the servers; the median of each is kept. A
// third server is the same intake writing one append per delivery
// (maxGroupSize 1), to show what group commit buys; the mean number of
// deliveries per commit is reported with the rounds. The servers' own CPU
// time per delivery is reported too: it does not depend on what else the
// machine is running, where throughput does.
//
// Also: the time from a request's start (here) to the sink being called (in
// the server; both read the system's monotonic clock), p50 and p99, on an
// idle service (one client, one delivery at a time) and under the load above.
import { fork } from 'node:child_process';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SECRET = 'bench-webhook-secret';
const CLIENTS = Number(process.env.PROOFGATE_BENCH_WEBHOOK_CLIENTS ?? 32);
const PER_ROUND = 2000;
const WARMUP = 300;
const ROUNDS = 3;
const IDLE_DELIVERIES = 300;
const SERVER_FLAG = '--webhook-intake-server';

const sign = (body) => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

// ---- the servers (child processes) ----

async function serveIntake(maxGroupSize) {
  const [{ createWebhookIntake }, { createServiceServer }, { createLocalRunStorage }, { defaultStoragePolicy }, { default: pino }] = await Promise.all([
    import('../dist/service/intake.js'),
    import('../dist/service/http.js'),
    import('../dist/storage/sqlite/index.js'),
    import('../dist/storage/policy.js'),
    import('pino'),
  ]);
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-bench-intake-'));
  const storage = createLocalRunStorage({ directory: dir, namespace: 'service', policy: defaultStoragePolicy, knownSecrets: [SECRET] });
  const sunk = [];
  // Groups committed since the last report: how many, and the deliveries in them.
  const groups = { count: 0, deliveries: 0 };
  // Logs as in production (JSON lines at info), written where they cost their formatting but no terminal.
  const logger = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false }));
  const intake = createWebhookIntake({
    events: storage.eventStore,
    secret: SECRET,
    logger,
    maxGroupSize,
    observe: (o) => {
      if (o.kind !== 'committed') return;
      groups.count += 1;
      groups.deliveries += o.size;
    },
    sink: (accepted) => sunk.push([accepted.deliveryId, process.hrtime.bigint().toString()]),
  });
  const server = await createServiceServer({ host: '127.0.0.1', port: 0, intake, ready: async () => true, logger });
  return {
    url: server.url,
    takeSunk: () => sunk.splice(0),
    takeGroups: () => {
      const taken = { ...groups };
      groups.count = 0;
      groups.deliveries = 0;
      return taken;
    },
    async close() {
      await server.close();
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function serveBare() {
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const given = Buffer.from(String(req.headers['x-hub-signature-256'] ?? ''), 'utf8');
      const expected = Buffer.from(sign(body), 'utf8');
      const ok = given.length === expected.length && timingSafeEqual(given, expected);
      const text = JSON.stringify(ok ? { accepted: true } : { accepted: false });
      res.writeHead(ok ? 202 : 401, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    takeSunk: () => [],
    takeGroups: () => ({ count: 0, deliveries: 0 }),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function childMain(kind) {
  const served = kind === 'bare' ? await serveBare() : await serveIntake(kind === 'intake-single' ? 1 : undefined);
  let cpu = process.cpuUsage();
  process.on('message', async (message) => {
    if (message === 'sunk') {
      const used = process.cpuUsage(cpu);
      cpu = process.cpuUsage();
      process.send({ sunk: served.takeSunk(), groups: served.takeGroups(), cpuMicros: used.user + used.system });
    }
    if (message === 'stop') {
      await served.close();
      process.disconnect();
    }
  });
  process.send({ url: served.url });
}

if (process.argv[2] === SERVER_FLAG) await childMain(process.argv[3]);

// ---- the load (this process) ----

function startServer(kind) {
  const child = fork(fileURLToPath(import.meta.url), [SERVER_FLAG, kind], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const next = () =>
    new Promise((resolve, reject) => {
      const onMessage = (message) => {
        child.off('exit', onExit);
        resolve(message);
      };
      const onExit = (code) => {
        child.off('message', onMessage);
        reject(new Error(`the ${kind} server exited (${code})`));
      };
      child.once('message', onMessage);
      child.once('exit', onExit);
    });
  return {
    async start() {
      return (await next()).url;
    },
    /** What the sink saw since the last call, and the server's CPU time since then. */
    async sunk() {
      const reply = next();
      child.send('sunk');
      return await reply;
    },
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send('stop');
      await exited;
    },
  };
}

/** Real payloads, each made distinct (its own number or id), as signed bodies. */
function payloads(count) {
  const file = createRequire(import.meta.url).resolve('@octokit/webhooks-examples/api.github.com/index.json');
  const catalog = JSON.parse(readFileSync(file, 'utf8'));
  const example = (name, action) => catalog.find((e) => e.name === name).examples.find((p) => p.action === action);
  const pr = example('pull_request', 'opened');
  const comment = example('issue_comment', 'created');
  const check = example('check_run', 'completed');
  const out = [];
  for (let i = 0; i < count; i += 1) {
    let eventName;
    let payload;
    if (i % 3 === 0) {
      eventName = 'pull_request';
      payload = { ...pr, number: 10_000 + i, pull_request: { ...pr.pull_request, number: 10_000 + i } };
    } else if (i % 3 === 1) {
      eventName = 'issue_comment';
      payload = {
        ...comment,
        issue: { ...comment.issue, number: 10_000 + i, pull_request: { url: 'https://api.github.com/repos/o/r/pulls/1' } },
        comment: { ...comment.comment, id: 10_000_000 + i, body: '/proofgate automerge' },
      };
    } else {
      eventName = 'check_run';
      payload = { ...check, check_run: { ...check.check_run, id: 20_000_000 + i } };
    }
    const body = Buffer.from(JSON.stringify(payload), 'utf8');
    out.push({ eventName, body, signature: sign(body) });
  }
  return out;
}

function post(url, agent, delivery, deliveryId) {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/webhooks`,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': String(delivery.body.length),
          'x-github-event': delivery.eventName,
          'x-github-delivery': deliveryId,
          'x-hub-signature-256': delivery.signature,
          'user-agent': 'GitHub-Hookshot/bench',
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      },
    );
    req.on('error', reject);
    req.end(delivery.body);
  });
}

/** Send deliveries[from, to) with `clients` concurrent connections; per delivery: its id and the time its request started. */
async function load(url, deliveries, from, to, clients) {
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const started = new Map();
  let next = from;
  let wrong = 0;
  const t0 = process.hrtime.bigint();
  const client = async () => {
    while (next < to) {
      const delivery = deliveries[next];
      next += 1;
      const id = randomUUID();
      started.set(id, process.hrtime.bigint());
      if ((await post(url, agent, delivery, id)) !== 202) wrong += 1;
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  if (wrong > 0) throw new Error(`${wrong} deliveries were not answered 202`);
  return { rate: (to - from) / seconds, started };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

/** Milliseconds from each request's start to the sink seeing its delivery. */
function sinkDelays(started, sunk) {
  const delays = [];
  for (const [id, at] of sunk) {
    const start = started.get(id);
    if (start !== undefined) delays.push(Number(BigInt(at) - start) / 1e6);
  }
  if (delays.length !== started.size) throw new Error(`the sink saw ${delays.length} of ${started.size} deliveries`);
  return delays;
}

async function round(kind, deliveries) {
  const server = startServer(kind);
  const url = await server.start();
  try {
    await load(url, deliveries, 0, WARMUP, CLIENTS);
    await server.sunk();
    const { rate, started } = await load(url, deliveries, WARMUP, WARMUP + PER_ROUND, CLIENTS);
    const { sunk, groups, cpuMicros } = await server.sunk();
    const delays = kind === 'bare' ? [] : sinkDelays(started, sunk);
    return { rate, delays, cpuPerDelivery: cpuMicros / PER_ROUND, meanGroup: groups.count === 0 ? 0 : groups.deliveries / groups.count };
  } finally {
    await server.stop();
  }
}

export default async function run(report) {
  const deliveries = payloads(WARMUP + PER_ROUND);
  const bare = [];
  const intake = [];
  const bareCpu = [];
  const intakeCpu = [];
  const single = [];
  const loaded = [];
  const meanGroups = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    single.push((await round('intake-single', deliveries)).rate);
    const plain = await round('bare', deliveries);
    bare.push(plain.rate);
    bareCpu.push(plain.cpuPerDelivery);
    const measured = await round('intake', deliveries);
    intake.push(measured.rate);
    intakeCpu.push(measured.cpuPerDelivery);
    meanGroups.push(measured.meanGroup);
    loaded.push(...measured.delays);
  }
  // Idle: one client, one delivery at a time.
  const server = startServer('intake');
  const url = await server.start();
  let idle;
  try {
    await load(url, deliveries, 0, 50, 1);
    await server.sunk();
    const { started } = await load(url, deliveries, 50, 50 + IDLE_DELIVERIES, 1);
    idle = sinkDelays(started, (await server.sunk()).sunk);
  } finally {
    await server.stop();
  }
  const intakeRate = median(intake);
  const bareRate = median(bare);
  report({
    name: `webhook intake, ${CLIENTS} clients on loopback, SQLite store, group commit`,
    value: intakeRate,
    unit: 'deliveries/s answered 202',
    baseline: bareRate,
    baselineUnit: 'deliveries/s, bare node:http checking the HMAC only',
    ratio: intakeRate / bareRate,
    target: 0.5,
    note: `rounds: intake ${intake.map((r) => r.toFixed(0)).join(', ')}; bare ${bare.map((r) => r.toFixed(0)).join(', ')}; deliveries per commit ${meanGroups.map((g) => g.toFixed(1)).join(', ')}`,
  });
  // The server's own CPU time per delivery: what the throughput would be on a machine with nothing else running.
  report({
    name: `webhook intake without group commit (one append per delivery), ${CLIENTS} clients`,
    value: median(single),
    unit: 'deliveries/s answered 202',
    baseline: bareRate,
    baselineUnit: 'deliveries/s, bare node:http checking the HMAC only',
    ratio: median(single) / bareRate,
    note: `group commit is ${(intakeRate / median(single)).toFixed(2)}x this`,
  });
  report({
    name: 'webhook intake server CPU per delivery (user + system)',
    value: median(intakeCpu),
    unit: 'us',
    baseline: median(bareCpu),
    baselineUnit: 'us, bare node:http checking the HMAC only',
    ratio: median(bareCpu) / median(intakeCpu),
    note: 'ratio: bare CPU / intake CPU (the throughput ratio when the server is the bottleneck)',
  });
  report({
    name: 'webhook request start -> sink called, idle service (1 client)',
    value: percentile(idle, 50),
    unit: 'ms p50',
    note: `p99 ${percentile(idle, 99).toFixed(2)} ms over ${idle.length} deliveries`,
  });
  report({
    name: `webhook request start -> sink called, under load (${CLIENTS} clients)`,
    value: percentile(loaded, 50),
    unit: 'ms p50',
    note: `p99 ${percentile(loaded, 99).toFixed(2)} ms over ${loaded.length} deliveries`,
  });
}
