/**
 * Live proof on the GitHub side, through `proofgate serve`: a maintainer's
 * `@proofgate proof` on a pull request is admitted by the router, the review
 * of that head offers the builtin proof lane a GitHub workflow scenario, the
 * workflow is dispatched on the protected branch, its artifact downloaded and
 * verified, and the verdict written, all against the GitHub API test server.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yazl from 'yazl';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BUNDLE_ENTRY_NAME, packEvidenceBundle, planDigest } from '../../src/proof/index.js';
import { BOT, startServiceHarness, type ServiceHarness } from './github-service-support.js';
import { until } from '../support/wait.js';

let harness: ServiceHarness | null = null;
afterEach(async () => {
  await harness?.cleanup();
  harness = null;
});
const scratch = mkdtempSync(join(tmpdir(), 'proofgate-gh-proof-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const WORKFLOW = '.github/workflows/proof.yml';
const ARTIFACT = 'proof-bundle';
const CONFIG = [
  'review:',
  '  transportRetries: 0',
  '  lanes:',
  '    - id: rules',
  '      builtin: rules',
  '    - id: proof',
  '      builtin: proof',
  'proof:',
  '  scenarios:',
  '    - id: web',
  '      description: sends a chat message in the browser and records the reply',
  `      producer: { kind: github-workflow, workflow: ${WORKFLOW}, artifact: ${ARTIFACT} }`,
  '      timeoutSeconds: 600',
  '      evidence: { requiredFiles: [expectations.json] }',
  '',
].join('\n');
const INPUTS = ['plan_digest', 'head_sha', 'correlation_id', 'scenario', 'plan'];

/** What the workflow uploads for `head`: GitHub's zip holding the bundle `proofgate evidence pack` made. */
async function artifactFor(head: string, actual: string): Promise<Buffer> {
  const dir = mkdtempSync(join(scratch, 'obs-'));
  mkdirSync(join(dir, 'obs'));
  writeFileSync(join(dir, 'obs', 'expectations.json'), JSON.stringify([{ name: 'reply to "hi"', expected: 'hello', actual }]));
  // The builtin proof reviewer's plan: the paths the change touches.
  const digest = planDigest('web', { paths: ['feature.txt'] });
  await packEvidenceBundle({ dir: join(dir, 'obs'), scenario: 'web', planDigest: digest, headSha: head, out: join(dir, 'bundle.zip') });
  const zip = new yazl.ZipFile();
  zip.addBuffer(readFileSync(join(dir, 'bundle.zip')), BUNDLE_ENTRY_NAME);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const botBodies = (h: ServiceHarness, pr: number) =>
  h.server.model
    .commentsOf(pr)
    .filter((c) => c.author === BOT)
    .map((c) => c.body);

async function settled(h: ServiceHarness): Promise<void> {
  await until(() => h.events.some((e) => e.kind === 'completed' && e.job.task === 'comment'), 'the comment job did not end');
  await until(() => h.service.runningLoops() === 0, 'the loop the command started did not end');
}

describe('@proofgate proof through proofgate serve', () => {
  it('dispatches the workflow on main once, verifies its artifact and confirms in the same review; nothing merges', async () => {
    const h = (harness = await startServiceHarness({ proofPollMs: 20 }, { config: CONFIG }));
    const { number, head } = h.openPullRequest();
    const artifact = await artifactFor(head, 'hello');
    h.server.model.actions.addWorkflow({
      path: WORKFLOW,
      name: 'Proof',
      inputs: INPUTS,
      runName: (inputs) => `proof ${inputs.correlation_id ?? ''}`,
      onDispatch: () => ({
        then: (run, actions) => {
          actions.addArtifact(run.id, { name: ARTIFACT, bytes: artifact });
          actions.completeRun(run.id, 'success');
        },
      }),
    });
    expect((await h.comment(number, '@proofgate proof web')).status).toBe(202);
    await settled(h);
    const { dispatches } = h.server.model.actions;
    expect(dispatches).toHaveLength(1);
    expect(dispatches[0]?.ref).toBe('main');
    expect(dispatches[0]?.inputs).toMatchObject({ head_sha: head, scenario: 'web', plan_digest: planDigest('web', { paths: ['feature.txt'] }) });
    const bodies = botBodies(h, number);
    expect(bodies.some((body) => body.includes('Proof-focused review of head') && body.includes('`proof_web`'))).toBe(true);
    expect(bodies.some((body) => body.includes('CONFIRMED'))).toBe(true);
    // Nothing was merged: proof never grants merge, and automerge was not asked for.
    expect(h.server.model.pull(number).merged).toBe(false);
    expect(h.server.schemaChecks.filter((c) => c.violations.length > 0)).toEqual([]);
  });

  it('observations that contradict the contract refute the change', async () => {
    const h = (harness = await startServiceHarness({ proofPollMs: 20 }, { config: CONFIG }));
    const { number, head } = h.openPullRequest();
    const artifact = await artifactFor(head, 'go away');
    h.server.model.actions.addWorkflow({
      path: WORKFLOW,
      name: 'Proof',
      inputs: INPUTS,
      runName: (inputs) => `proof ${inputs.correlation_id ?? ''}`,
      onDispatch: () => ({
        then: (run, actions) => {
          actions.addArtifact(run.id, { name: ARTIFACT, bytes: artifact });
          actions.completeRun(run.id, 'success');
        },
      }),
    });
    await h.comment(number, '@proofgate proof');
    await settled(h);
    expect(botBodies(h, number).some((body) => body.includes('REFUTED'))).toBe(true);
  });

  it('a locked conversation or a fork head is refused with the reason, and nothing is dispatched', async () => {
    const h = (harness = await startServiceHarness({ proofPollMs: 20 }, { config: CONFIG }));
    const { number } = h.openPullRequest();
    h.server.model.pull(number).locked = true;
    await h.comment(number, '@proofgate proof web');
    await settled(h);
    expect(botBodies(h, number).some((body) => body.includes('refused (LOCKED)'))).toBe(true);
    const fork = h.openPullRequest('from-fork', { crossRepository: true });
    await h.comment(fork.number, '@proofgate proof web');
    await until(() => botBodies(h, fork.number).some((body) => body.includes('refused (FORK_HEAD)')), 'the fork head was not refused');
    expect(h.server.model.actions.dispatches).toEqual([]);
  });
});
