// The live-proof round trip for a trivial scenario: a reviewer's tool call over
// the lane's socket (plain protocol) -> the proof session -> the local producer
// (export of the trusted tree and the head, the scenario program jailed, its
// output packed) -> the bundle verified -> the observations back as the call's
// answer. Reported with its parts, and against a baseline measured in the same
// run: the same scenario program run jailed by itself (no export, no packing,
// no verification, no socket), which is what any producer must at least spend.
// No target is set; the figures show where the time goes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { jailStatus, makeJobDir, runUntrusted } from '../dist/host/index.js';
import { localProducer, openProofSession, PROOF_ADMISSION_SCHEMA, verifyEvidenceBundle } from '../dist/proof/index.js';
import { serveLaneTools } from '../dist/review/index.js';

const ROUNDS = 6;
const SCENARIO = `import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
writeFileSync(join(process.env.PROOFGATE_PROOF_OUTPUT, 'observed.json'), JSON.stringify({ ok: true }) + '\\n');
`;

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function git(dir, args) {
  return execFileSync('git', args, { cwd: dir, encoding: 'utf8' }).trim();
}

function repository() {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-bench-proof-'));
  git(dir, ['init', '-q', '-b', 'main']);
  git(dir, ['config', 'user.name', 'Bench']);
  git(dir, ['config', 'user.email', 'bench@example.invalid']);
  writeFileSync(join(dir, 'prove.mjs'), SCENARIO);
  writeFileSync(join(dir, 'lib.mjs'), 'export const x = 1;\n');
  git(dir, ['add', '-A']);
  git(dir, ['commit', '-q', '-m', 'trusted']);
  const trusted = git(dir, ['rev-parse', 'HEAD']);
  writeFileSync(join(dir, 'lib.mjs'), 'export const x = 2;\n');
  git(dir, ['commit', '-qam', 'head']);
  return { dir, trusted, head: git(dir, ['rev-parse', 'HEAD']) };
}

/** One call over the plain protocol: handshake, call, wait for the result line. */
function callOverSocket(server, plan) {
  return new Promise((resolve, reject) => {
    const socket = connect(server.socketPath);
    let text = '';
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
      for (const line of text.split('\n').slice(0, -1)) {
        const message = JSON.parse(line);
        if (message.result !== undefined || message.error !== undefined) {
          socket.end();
          resolve(message);
        }
      }
    });
    socket.write(`${JSON.stringify({ token: server.token, protocol: 'proofgate-tools.v1' })}\n`);
    socket.write(`${JSON.stringify({ id: 1, op: 'call', tool: 'proof_trivial', arguments: { plan } })}\n`);
  });
}

export default async function bench(report) {
  const status = await jailStatus();
  if (!status.available) {
    console.log(`  skipped: the jail does not work here (${status.reason})`);
    return;
  }
  const repo = repository();
  const scenario = {
    id: 'trivial',
    description: 'writes one observation',
    producer: { kind: 'local', command: ['node', 'prove.mjs'] },
    timeoutSeconds: 60,
    evidence: { requiredFiles: ['observed.json'], maxBytes: 1024 * 1024, maxEntries: 16 },
  };
  const settings = { scenarios: [scenario], ceilingSeconds: 600, reserveSeconds: 10 };
  const admission = {
    schema: PROOF_ADMISSION_SCHEMA,
    changeId: '1',
    commentId: 'c1',
    requestedBy: 'bench',
    headSha: repo.head,
    selection: 'named',
    allowlist: ['trivial'],
    command: { scenarios: ['trivial'], sha: null },
    admittedAt: new Date().toISOString(),
  };
  const totals = [];
  const producing = [];
  const verifying = [];
  const bare = [];
  const socketDir = mkdtempSync(join(tmpdir(), 'proofgate-bench-sock-'));
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      // Baseline: the scenario program alone, jailed, on a prepared job directory.
      const jobDir = await makeJobDir('proofgate-bench-bare-');
      writeFileSync(join(jobDir, 'prove.mjs'), SCENARIO);
      const started = performance.now();
      const run = await runUntrusted({
        argv: ['node', 'prove.mjs'],
        sandbox: 'jail',
        jobDir,
        cwd: jobDir,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PROOFGATE_PROOF_OUTPUT: jobDir },
        timeoutMs: 60_000,
        output: { maxBytes: 4096, keep: 'tail' },
      });
      bare.push(performance.now() - started);
      rmSync(jobDir, { recursive: true, force: true });
      if (run.exitCode !== 0) throw new Error(`the bare scenario run failed: ${run.stderr.toString()}`);

      // The round trip, its producer and verification timed from inside.
      const local = localProducer({ repoDir: repo.dir, sandbox: 'jail' });
      let produced = 0;
      let verified = 0;
      const timed = {
        async run(job) {
          const start = performance.now();
          const answer = await local.run(job);
          produced = performance.now() - start;
          if (answer.kind === 'bundle') {
            const check = performance.now();
            await verifyEvidenceBundle(answer.bytes, { scenario: 'trivial', planDigest: job.planDigest, headSha: job.headSha });
            verified = performance.now() - check;
          }
          return answer;
        },
      };
      const session = openProofSession({
        admission,
        settings,
        producers: { local: timed },
        reviewId: `bench-${round}`,
        headSha: repo.head,
        trustedSha: repo.trusted,
        lease: { owner: 'bench', epoch: 1 },
        reviewStartMs: Date.now(),
        reviewBudgetMs: 600_000,
      });
      const toolbox = session.open({ laneId: 'bench', contextId: `ctx-${round}`, attempt: 1 });
      const server = await serveLaneTools(toolbox, { dir: socketDir });
      try {
        const start = performance.now();
        const answer = await callOverSocket(server, { round });
        totals.push(performance.now() - start);
        if (answer.result?.status !== 'verified') throw new Error(`the round trip did not verify: ${JSON.stringify(answer).slice(0, 300)}`);
      } finally {
        await server.close();
        session.close();
      }
      producing.push(produced);
      verifying.push(verified);
    }
  } finally {
    rmSync(repo.dir, { recursive: true, force: true });
    rmSync(socketDir, { recursive: true, force: true });
  }
  const total = median(totals);
  const baseline = median(bare);
  report({
    name: 'proof round trip (tool call -> jailed scenario -> verified observations)',
    value: total,
    unit: 'ms',
    baseline,
    baselineUnit: 'ms (the scenario jailed alone)',
    ratio: total / baseline,
    note: `median of ${ROUNDS}; no target`,
  });
  report({ name: '  producer: exports, jailed scenario, pack', value: median(producing), unit: 'ms' });
  report({ name: '  bundle verification (repeated outside the session)', value: median(verifying), unit: 'ms' });
  report({
    name: '  the rest: socket, session, budget, answer text',
    value: total - median(producing),
    unit: 'ms',
    note: 'includes the verification the session does',
  });
}
