import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yazl from 'yazl';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { canonicalJson, fixedClock, type ManualClock } from '../../src/core/index.js';
import { createGitHubClient } from '../../src/forge/github/index.js';
import { BUNDLE_ENTRY_NAME, githubWorkflowProducer, proofRunName, type GitHubWorkflowProducerOptions } from '../../src/proof/producers/github-workflow.js';
import type { ProducerAnswer, ProducerJob } from '../../src/proof/producers/types.js';
import { packEvidenceBundle, planDigest, verifyEvidenceBundle, type ProofScenario } from '../../src/proof/index.js';
import { startGitHubServer, type DispatchDecision, type GitHubTestServer, type ModelWorkflowRun } from '../support/github-server/index.js';
import { FLAG_ENCRYPTED, FLAG_UTF8, MADE_BY_UNIX, forgeZip, unixAttributes } from './zip-forge.js';

const WORKFLOW = '.github/workflows/proof.yml';
const ARTIFACT = 'proof-bundle';
const INPUTS = ['plan_digest', 'head_sha', 'correlation_id', 'scenario', 'plan'];
const POLL_MS = 10_000;
const MAX_BYTES = 256 * 1024;
const PLAN = { steps: [{ open: '/chat' }, { send: 'hello' }], expect: 'a reply' };

const SCENARIO: ProofScenario = {
  id: 'web-chat',
  description: 'chat send and reply',
  producer: { kind: 'github-workflow', workflow: WORKFLOW, ref: 'main', artifact: ARTIFACT },
  timeoutSeconds: 1200,
  evidence: { requiredFiles: ['reply.json'], maxBytes: MAX_BYTES, maxEntries: 16 },
};
const DIGEST = planDigest(SCENARIO.id, PLAN);
const CORRELATION = 'rev_0123abcd.5f2e9c1d00aa77bb';

const scratch = mkdtempSync(join(tmpdir(), 'pg-gh-producer-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A real evidence bundle for the head: what `proofgate evidence pack` writes in the workflow. */
async function bundleFor(headSha: string): Promise<Buffer> {
  const dir = mkdtempSync(join(scratch, 'obs-'));
  mkdirSync(join(dir, 'obs'));
  writeFileSync(join(dir, 'obs', 'reply.json'), JSON.stringify({ reply: 'hi there', ms: 41 }));
  const out = join(dir, 'bundle.zip');
  await packEvidenceBundle({ dir: join(dir, 'obs'), scenario: SCENARIO.id, planDigest: DIGEST, headSha, out });
  return readFileSync(out);
}

/** A zip as actions/upload-artifact makes one: the uploaded files, deflated. */
function artifactZip(entries: readonly { name: string; data: Buffer; compress?: boolean }[]): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const entry of entries) zip.addBuffer(entry.data, entry.name, { compress: entry.compress ?? true, mtime: new Date(2026, 0, 1) });
  zip.end();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    zip.outputStream.on('data', (c: Buffer) => chunks.push(c));
    zip.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
    zip.outputStream.on('error', reject);
  });
}

interface Rig {
  readonly server: GitHubTestServer;
  readonly clock: ManualClock;
  readonly progress: string[];
  readonly controller: AbortController;
  readonly headSha: string;
  /** Runs the producer for the standard job (deadline in 10 minutes unless told). */
  run(job?: Partial<ProducerJob>): Promise<ProducerAnswer>;
  /** How many dispatch requests reached the server (answered, failed or dropped). */
  dispatchRequests(): number;
}

interface RigOptions {
  /** What GitHub does with the dispatch. */
  readonly onDispatch?: (run: { headSha: string }) => DispatchDecision | void;
  /** Called at each of the producer's waits, with its count (1 for the first): how a test moves GitHub along. */
  readonly onWait?: (n: number, rig: Rig) => void | Promise<void>;
  readonly producer?: Partial<GitHubWorkflowProducerOptions>;
}

const open: GitHubTestServer[] = [];
afterEach(async () => {
  for (const server of open.splice(0)) {
    await server.close();
    const broken = server.schemaChecks.filter((c) => c.violations.length > 0);
    expect(broken, 'REST answers broke the published schema').toEqual([]);
  }
});

async function rig(options: RigOptions = {}): Promise<Rig> {
  const server = await startGitHubServer();
  open.push(server);
  const { model } = server;
  const clock = fixedClock(model.latest());
  const progress: string[] = [];
  const controller = new AbortController();
  const headSha = model.openPullRequest({ author: 'ann' }) && model.headSha(1);
  const octokit = createGitHubClient({
    auth: { kind: 'token', token: 'test-token' },
    baseUrl: server.baseUrl,
    retry: { retries: 2, baseDelayMs: 1 },
    throttle: { secondMs: 1, writeIntervalMs: 0, notificationIntervalMs: 0 },
  });
  model.actions.addWorkflow({
    path: WORKFLOW,
    name: 'Proof',
    inputs: INPUTS,
    runName: (inputs) => `proof ${inputs.correlation_id ?? ''}`,
    onDispatch: (dispatch) => options.onDispatch?.({ headSha: model.resolve(dispatch.ref) ?? '' }),
  });
  let waits = 0;
  const self: Rig = {
    server,
    clock,
    progress,
    controller,
    headSha,
    run(job = {}) {
      const producer = githubWorkflowProducer({
        octokit,
        owner: model.owner,
        repo: model.repo,
        clock,
        pollIntervalMs: POLL_MS,
        // The producer's waits move the manual clock; the test moves GitHub at each.
        wait: async (ms) => {
          clock.advance(ms);
          await options.onWait?.(++waits, self);
        },
        ...options.producer,
      });
      return producer.run({
        scenario: SCENARIO,
        plan: PLAN,
        planDigest: DIGEST,
        headSha,
        trustedSha: model.resolve('main') ?? '',
        correlationId: CORRELATION,
        deadlineMs: clock.now().getTime() + 10 * 60_000,
        signal: controller.signal,
        onProgress: (message) => progress.push(message),
        ...job,
      });
    },
    dispatchRequests: () => server.requests.filter((r) => r.operation === 'actions/create-workflow-dispatch').length,
  };
  return self;
}

/** The one run of the workflow (the test fails if there is not exactly one). */
function onlyRun(server: GitHubTestServer): ModelWorkflowRun {
  expect(server.model.actions.runs).toHaveLength(1);
  return server.model.actions.runs[0] as ModelWorkflowRun;
}

/** At the first wait the run starts, at the second it completes with `conclusion` and the artifact(s) `attach` gives. */
function progressTo(conclusion: string, attach: (rig: Rig, run: ModelWorkflowRun) => Promise<void>): RigOptions['onWait'] {
  return async (n, r) => {
    const run = r.server.model.actions.runs[0];
    if (run === undefined) return;
    if (n === 1 && run.status === 'queued') r.server.model.actions.startRun(run.id);
    if (n === 2) {
      await attach(r, run);
      r.server.model.actions.completeRun(run.id, conclusion);
    }
  };
}

/** The artifact a correct workflow uploads: GitHub's zip holding bundle.zip. */
const goodArtifact = async (r: Rig, run: ModelWorkflowRun) => {
  const zip = await artifactZip([{ name: BUNDLE_ENTRY_NAME, data: await bundleFor(r.headSha) }]);
  r.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: zip });
};

function expectAnswer(answer: ProducerAnswer, kind: 'incomplete' | 'unverifiable', pattern: RegExp): void {
  expect(answer.kind, JSON.stringify(answer)).toBe(kind);
  const message = (answer as { message: string }).message;
  expect(message).toMatch(pattern);
  expect(message).not.toMatch(/[\n\r]/);
}

describe('GitHub workflow producer over the test server', () => {
  it('pins, dispatches once, follows the run and returns a bundle that verifies; the storage gets no token', async () => {
    const r = await rig({ onWait: progressTo('success', goodArtifact) });
    const pinned = r.server.model.resolve('main');
    const answer = await r.run();
    expect(answer.kind, JSON.stringify(answer)).toBe('bundle');
    const bytes = (answer as { bytes: Buffer }).bytes;
    const verified = await verifyEvidenceBundle(bytes, {
      scenario: SCENARIO.id,
      planDigest: DIGEST,
      headSha: r.headSha,
      limits: { maxArchiveBytes: MAX_BYTES, maxEntries: 16 },
    });
    expect(verified.observations.map((o) => o.path)).toEqual(['reply.json']);

    const { actions } = r.server.model;
    expect(r.dispatchRequests()).toBe(1);
    expect(actions.dispatches).toEqual([
      {
        workflowId: actions.workflows[0]?.id,
        ref: 'main',
        returnRunDetails: true,
        actor: 'proofgate-bot',
        inputs: { plan_digest: DIGEST, head_sha: r.headSha, correlation_id: CORRELATION, scenario: SCENARIO.id, plan: canonicalJson(PLAN) },
      },
    ]);
    const run = onlyRun(r.server);
    expect([run.headSha, run.displayTitle]).toEqual([pinned, proofRunName(CORRELATION)]);
    // The pin was read before the dispatch.
    const ops = r.server.requests.map((q) => q.operation);
    expect(ops.indexOf('git/get-ref')).toBeLessThan(ops.indexOf('actions/create-workflow-dispatch'));
    expect(r.progress).toEqual(
      expect.arrayContaining([`workflow run ${run.id}: queued`, `workflow run ${run.id}: in_progress`, `workflow run ${run.id}: completed`]),
    );
    // One storage request, signed by its URL alone: no Authorization header reached the other origin.
    expect(r.server.storage.requests).toHaveLength(1);
    expect(r.server.storage.requests[0]?.status).toBe(200);
    expect(r.server.storage.requests[0]?.headers.authorization).toBeUndefined();
    expect(new URL(r.server.storage.url).origin).not.toBe(new URL(r.server.baseUrl).origin);
    // Every answer was held to its published schema (afterEach fails on a violation), these among them.
    const checked = new Set(r.server.schemaChecks.filter((c) => c.checkedBy?.source === 'own').map((c) => `${c.operationId} ${c.status}`));
    expect([...checked].sort()).toEqual([
      'actions/create-workflow-dispatch 200',
      'actions/download-artifact 302',
      'actions/get-workflow-run 200',
      'actions/list-workflow-run-artifacts 200',
      'actions/list-workflow-runs 200',
      'git/get-ref 200',
    ]);
  });

  it("waits on the clock's own timers when given no wait: each poll is one timer the test fires", async () => {
    const r = await rig({ producer: { wait: undefined } });
    let settled = false;
    const answer = r.run().finally(() => (settled = true));
    const { actions } = r.server.model;
    for (let n = 1; !settled; n++) {
      await Promise.race([r.clock.whenPending(), answer]);
      if (settled) break;
      const run = onlyRun(r.server);
      if (n === 1) actions.startRun(run.id);
      if (n === 2) {
        await goodArtifact(r, run);
        actions.completeRun(run.id);
      }
      r.clock.advance(POLL_MS);
    }
    expect((await answer).kind).toBe('bundle');
    expect(r.clock.pendingTimers()).toBe(0);
  });

  it('accepts a run whose path carries the ref (newer runs) and a dispatch that names no run (204), found by its name', async () => {
    const r = await rig({
      onDispatch: () => ({ run: { path: `${WORKFLOW}@main` } }),
      onWait: progressTo('success', goodArtifact),
      producer: { returnRunDetails: false },
    });
    const answer = await r.run();
    expect(answer.kind, JSON.stringify(answer)).toBe('bundle');
    expect(r.server.model.actions.dispatches[0]?.returnRunDetails).toBe(false);
    expect(r.server.requests.find((q) => q.operation === 'actions/create-workflow-dispatch')?.status).toBe(204);
  });

  it.each<['reset' | 502]>([['reset'], [502]])(
    'a lost dispatch answer (%s, the run created) is not retried: the run is found by its correlation id',
    async (lost) => {
      const r = await rig({ onDispatch: () => ({ answer: lost }), onWait: progressTo('success', goodArtifact) });
      const answer = await r.run();
      expect(answer.kind, JSON.stringify(answer)).toBe('bundle');
      expect(r.dispatchRequests()).toBe(1);
      expect(r.server.model.actions.dispatches).toHaveLength(1);
      expect(r.progress.some((m) => m.startsWith('dispatch answer lost'))).toBe(true);
    },
  );

  it('a lost dispatch answer with no run ever appearing is unverifiable at the deadline, after one dispatch', async () => {
    const r = await rig();
    r.server.failNext({ method: 'POST', pathPrefix: `/repos/octo-org/demo/actions/workflows/`, status: 502 });
    const answer = await r.run();
    expectAnswer(answer, 'unverifiable', /^dispatch answer lost and no run named "proof rev_0123abcd\.5f2e9c1d00aa77bb" found before the deadline$/);
    expect(r.dispatchRequests()).toBe(1);
    expect(r.server.model.actions.runs).toHaveLength(0);
  });

  it('a dispatch GitHub accepted whose run never appears is incomplete at the deadline', async () => {
    const r = await rig({ onDispatch: () => ({ runs: 0 }) });
    const answer = await r.run();
    expectAnswer(answer, 'incomplete', /^deadline passed before the dispatched run appeared$/);
    expect(r.dispatchRequests()).toBe(1);
  });

  it('a refused dispatch (422: the workflow does not declare the inputs) is incomplete and not retried', async () => {
    const r = await rig();
    const workflow = r.server.model.actions.workflows[0];
    if (workflow === undefined) throw new Error('no workflow');
    r.server.model.actions.workflows.splice(0, 1, { ...workflow, inputs: ['plan_digest'] });
    const answer = await r.run();
    expectAnswer(answer, 'incomplete', /^dispatch of \.github\/workflows\/proof\.yml refused: HTTP 422: Unexpected inputs provided/);
    expect(r.dispatchRequests()).toBe(1);
  });

  it("a plan too large for GitHub's dispatch inputs is incomplete without a dispatch", async () => {
    const r = await rig();
    const plan = { text: 'x'.repeat(65_400) };
    const answer = await r.run({ plan, planDigest: planDigest(SCENARIO.id, plan) });
    expectAnswer(answer, 'incomplete', /^nothing dispatched: the workflow inputs would be \d+ characters, more than GitHub's 65535$/);
    expect(r.dispatchRequests()).toBe(0);
  });

  it.each<[string, boolean]>([
    ['the run id from the dispatch answer', true],
    ['the run found by its name', false],
  ])('the trusted branch moving between pin and dispatch is unverifiable, never rebound (%s)', async (_how, details) => {
    let pinned = '';
    const r = await rig({
      producer: { returnRunDetails: details },
      onDispatch: () => {
        const { model } = r.server;
        pinned = model.resolve('main') ?? '';
        model.setBranch('main', model.commit({ parent: pinned, files: { 'moved.txt': 'moved\n' } }));
      },
      onWait: progressTo('success', goodArtifact),
    });
    const answer = await r.run();
    const run = onlyRun(r.server);
    expect(run.headSha).not.toBe(pinned);
    expectAnswer(
      answer,
      'unverifiable',
      new RegExp(`^trusted branch moved: main was ${pinned} before the dispatch, workflow run ${run.id} ran ${run.headSha}$`),
    );
    expect(r.dispatchRequests()).toBe(1);
    expect(r.server.requests.some((q) => q.operation === 'actions/download-artifact')).toBe(false);
  });

  const identityCases: [string, DispatchDecision, RegExp][] = [
    ['another workflow file', { run: { path: '.github/workflows/other.yml' } }, /ran \.github\/workflows\/other\.yml, not \.github\/workflows\/proof\.yml$/],
    ['the path of another repository', { run: { path: `evil/demo/${WORKFLOW}@main` } }, /ran evil\/demo\/\.github\/workflows\/proof\.yml@main, not/],
    ['another event', { run: { event: 'push' } }, /was triggered by push, not workflow_dispatch$/],
    ['another branch', { run: { headBranch: 'dev' } }, /ran on dev, not main$/],
    [
      'two runs with the same correlation id',
      { runs: 2 },
      /^two runs are named "proof rev_0123abcd\.5f2e9c1d00aa77bb" \(\d+, \d+\); cannot tell which is ours$/,
    ],
  ];
  describe.each<[string, boolean]>([
    ['run id from the dispatch', true],
    ['run found by name', false],
  ])('a run that is not what was dispatched is unverifiable (%s)', (_how, details) => {
    it.each(identityCases)('%s', async (_what, decision, pattern) => {
      const r = await rig({ onDispatch: () => decision, onWait: progressTo('success', goodArtifact), producer: { returnRunDetails: details } });
      const answer = await r.run();
      expectAnswer(answer, 'unverifiable', pattern);
      expect(r.dispatchRequests()).toBe(1);
      expect(r.server.requests.some((q) => q.operation === 'actions/download-artifact')).toBe(false);
    });
  });

  it('a second run with our name appearing while ours ran makes it unverifiable', async () => {
    const r = await rig({
      onWait: async (n, rr) => {
        const { actions } = rr.server.model;
        const run = actions.runs[0];
        if (run === undefined) return;
        if (n === 1) {
          // Someone dispatches the same workflow with our correlation id.
          const workflow = actions.workflows[0];
          if (workflow !== undefined) actions.dispatch(workflow, { ref: 'main', inputs: { ...run.inputs }, returnRunDetails: false, actor: 'mallory' });
          await goodArtifact(rr, run);
          actions.completeRun(run.id);
        }
      },
    });
    const answer = await r.run();
    expectAnswer(answer, 'unverifiable', /^two runs are named/);
  });

  it.each(['failure', 'cancelled', 'timed_out'])('a run concluding %s is incomplete, and nothing is downloaded', async (conclusion) => {
    const r = await rig({ onWait: progressTo(conclusion, goodArtifact) });
    const answer = await r.run();
    const run = onlyRun(r.server);
    expectAnswer(answer, 'incomplete', new RegExp(`^workflow run ${run.id} concluded ${conclusion}; a failed run is not evidence$`));
    expect(r.server.requests.some((q) => q.operation.startsWith('actions/list-workflow-run-artifacts'))).toBe(false);
    expect(r.server.storage.requests).toHaveLength(0);
  });

  it('a run still queued at the deadline is incomplete', async () => {
    const r = await rig();
    const answer = await r.run({ deadlineMs: r.clock.now().getTime() + 5 * POLL_MS });
    const run = onlyRun(r.server);
    expectAnswer(answer, 'incomplete', new RegExp(`^deadline passed while workflow run ${run.id} was queued$`));
    expect(run.status).toBe('queued');
    expect(r.progress.filter((m) => m === `workflow run ${run.id}: queued`).length).toBeGreaterThanOrEqual(4);
  });

  it("the scenario's own timeout ends the wait when it comes before the plan's deadline", async () => {
    const r = await rig();
    const start = r.clock.now().getTime();
    const answer = await r.run({ scenario: { ...SCENARIO, timeoutSeconds: 30 } });
    expectAnswer(answer, 'incomplete', /^deadline passed while workflow run \d+ was queued$/);
    expect(r.clock.now().getTime() - start).toBe(30_000);
  });

  it('an abort while the run is queued is incomplete at once, and nothing more is asked of GitHub', async () => {
    let requestsAtAbort = 0;
    const r = await rig({
      onWait: (n, rr) => {
        if (n !== 2) return;
        requestsAtAbort = rr.server.requests.length;
        rr.controller.abort();
      },
    });
    const answer = await r.run();
    expectAnswer(answer, 'incomplete', /^aborted while workflow run \d+ was queued$/);
    expect(r.server.requests.length).toBe(requestsAtAbort);
    expect(onlyRun(r.server).status).toBe('queued');
  });

  describe('the artifact', () => {
    /** The producer's answer when the run succeeds with the artifacts `attach` makes. */
    async function withArtifacts(attach: (r: Rig, run: ModelWorkflowRun) => Promise<void>, producer: Partial<GitHubWorkflowProducerOptions> = {}) {
      const r = await rig({ onWait: progressTo('success', attach), producer });
      return { r, answer: await r.run() };
    }
    const bundleZip = async (r: Rig) => artifactZip([{ name: BUNDLE_ENTRY_NAME, data: await bundleFor(r.headSha) }]);

    it('missing: unverifiable', async () => {
      const { answer } = await withArtifacts(async (r, run) => {
        r.server.model.actions.addArtifact(run.id, { name: 'other-name', bytes: await bundleZip(r) });
      });
      expectAnswer(answer, 'unverifiable', /^workflow run \d+ has no artifact named proof-bundle$/);
    });

    it('two by that name: unverifiable', async () => {
      const { answer } = await withArtifacts(async (r, run) => {
        const bytes = await bundleZip(r);
        r.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes });
        r.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes });
      });
      expectAnswer(answer, 'unverifiable', /^workflow run \d+ has 2 artifacts named proof-bundle$/);
    });

    it('expired in the listing: unverifiable, not downloaded', async () => {
      const { r, answer } = await withArtifacts(async (rr, run) => {
        rr.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: await bundleZip(rr), expired: true });
      });
      expectAnswer(answer, 'unverifiable', /^artifact proof-bundle of workflow run \d+ has expired$/);
      expect(r.server.storage.requests).toHaveLength(0);
    });

    it('expired by the time it is downloaded (410): unverifiable', async () => {
      const r = await rig({ onWait: progressTo('success', goodArtifact) });
      // The listing still shows it; the download answers 410.
      r.server.failNext({
        method: 'GET',
        pathPrefix: '/repos/octo-org/demo/actions/artifacts/',
        status: 410,
        body: { message: 'Artifact has expired', documentation_url: 'https://docs.github.com/rest', status: '410' },
      });
      const answer = await r.run();
      expectAnswer(answer, 'unverifiable', /^artifact proof-bundle has expired \(HTTP 410\)$/);
      expect(r.server.storage.requests).toHaveLength(0);
    });

    it('declared larger than the cap: unverifiable, not downloaded', async () => {
      const { r, answer } = await withArtifacts(async (rr, run) => {
        rr.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: await bundleZip(rr), sizeInBytes: MAX_BYTES + 64 * 1024 + 1 });
      });
      expectAnswer(
        answer,
        'unverifiable',
        new RegExp(`^artifact proof-bundle is ${MAX_BYTES + 64 * 1024 + 1} bytes, more than the ${MAX_BYTES + 64 * 1024} allowed$`),
      );
      expect(r.server.storage.requests).toHaveLength(0);
    });

    it.each<[string, boolean]>([
      ['with a content-length', false],
      ['chunked, counted while streaming', true],
    ])('larger than declared and than the cap (%s): unverifiable', async (_how, chunked) => {
      const cap = MAX_BYTES + 1;
      let size = 0;
      const { r, answer } = await withArtifacts(
        async (rr, run) => {
          // Stored, so the download is larger than the cap; GitHub declares 1000 bytes.
          const big = await artifactZip([{ name: BUNDLE_ENTRY_NAME, data: Buffer.alloc(MAX_BYTES + 4096, 7), compress: false }]);
          size = big.length;
          rr.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: big, sizeInBytes: 1000, chunked });
        },
        { zipOverheadBytes: 1 },
      );
      const pattern = chunked
        ? new RegExp(`^artifact proof-bundle download passed the ${cap} bytes allowed$`)
        : new RegExp(`^artifact proof-bundle download is ${size} bytes, more than the ${cap} allowed$`);
      expect(size).toBeGreaterThan(cap);
      expectAnswer(answer, 'unverifiable', pattern);
      expect(r.server.storage.requests).toHaveLength(1);
    });

    it('not matching its sha256 digest: unverifiable', async () => {
      const { answer } = await withArtifacts(async (r, run) => {
        r.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: await bundleZip(r), digest: `sha256:${'0'.repeat(64)}` });
      });
      expectAnswer(answer, 'unverifiable', /^artifact proof-bundle does not match its sha256 digest$/);
    });

    it('without a digest (older artifacts): accepted on its bytes', async () => {
      const { answer } = await withArtifacts(async (r, run) => {
        r.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: await bundleZip(r), digest: null });
      });
      expect(answer.kind).toBe('bundle');
    });

    it('behind a second redirect: unverifiable (one redirect is followed)', async () => {
      const { r, answer } = await withArtifacts(async (rr, run) => {
        rr.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: await bundleZip(rr), redirectAgain: true });
      });
      expectAnswer(answer, 'unverifiable', /^artifact storage answered HTTP 302 \(another redirect: only one is followed\)$/);
      expect(r.server.storage.requests).toHaveLength(1);
    });

    const zips: [string, (r: Rig) => Promise<Buffer>, RegExp][] = [
      [
        'two entries',
        async (r) =>
          artifactZip([
            { name: BUNDLE_ENTRY_NAME, data: await bundleFor(r.headSha) },
            { name: 'notes.txt', data: Buffer.from('x') },
          ]),
        /^artifact proof-bundle holds 2 entries; expected only bundle\.zip$/,
      ],
      ['no entry', async () => artifactZip([]), /^artifact proof-bundle holds 0 entries; expected only bundle\.zip$/],
      [
        'another name',
        async (r) => artifactZip([{ name: 'evidence/bundle.zip', data: await bundleFor(r.headSha) }]),
        /^artifact proof-bundle holds "evidence\/bundle\.zip"; expected only bundle\.zip$/,
      ],
      [
        'an unsafe name',
        async (r) => Promise.resolve(forgeZip([{ name: '../bundle.zip', data: Buffer.from(r.headSha) }])),
        /^artifact proof-bundle has no readable entry: invalid relative path: \.\.\/bundle\.zip$/,
      ],
      [
        'an absolute name',
        async (r) => Promise.resolve(forgeZip([{ name: '/bundle.zip', data: Buffer.from(r.headSha) }])),
        /^artifact proof-bundle has no readable entry: absolute path: \/bundle\.zip$/,
      ],
      [
        'a symbolic link named bundle.zip',
        async () =>
          Promise.resolve(forgeZip([{ name: 'bundle.zip', data: '/etc/passwd', versionMadeBy: MADE_BY_UNIX, externalAttributes: unixAttributes(0o120777) }])),
        /^artifact proof-bundle holds bundle\.zip as something other than a file$/,
      ],
      [
        'a wrong CRC-32',
        async (r) => Promise.resolve(forgeZip([{ name: 'bundle.zip', data: await bundleFor(r.headSha), crc32: 1 }])),
        /^artifact proof-bundle holds a bundle\.zip that fails its CRC-32$/,
      ],
      [
        'an encrypted entry',
        async () => Promise.resolve(forgeZip([{ name: 'bundle.zip', data: 'secret', flags: FLAG_ENCRYPTED | FLAG_UTF8 }])),
        /^artifact proof-bundle holds an encrypted bundle\.zip$/,
      ],
      [
        'another compression method',
        async () => Promise.resolve(forgeZip([{ name: 'bundle.zip', data: 'bz', method: 12 }])),
        /^artifact proof-bundle stores bundle\.zip with method 12$/,
      ],
      ['not a zip', async () => Promise.resolve(Buffer.from('not a zip at all, but long enough to look')), /^artifact proof-bundle is not a readable zip: /],
    ];
    it.each(zips)('a zip with %s: unverifiable', async (_what, make, pattern) => {
      const { answer } = await withArtifacts(async (r, run) => {
        r.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: await make(r) });
      });
      expectAnswer(answer, 'unverifiable', pattern);
    });

    it('a bundle.zip larger than the scenario allows: unverifiable before it is inflated', async () => {
      const { answer } = await withArtifacts(async (r, run) => {
        // Deflates to a few hundred bytes: only the entry's own size gives it away.
        const zip = await artifactZip([{ name: BUNDLE_ENTRY_NAME, data: Buffer.alloc(MAX_BYTES + 1, 0) }]);
        r.server.model.actions.addArtifact(run.id, { name: ARTIFACT, bytes: zip });
      });
      expectAnswer(
        answer,
        'unverifiable',
        new RegExp(`^artifact proof-bundle holds a bundle\\.zip of ${MAX_BYTES + 1} bytes, more than the ${MAX_BYTES} allowed$`),
      );
    });
  });
});
