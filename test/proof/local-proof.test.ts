/**
 * Live proof end to end on the local forge: a maintainer's `@proofgate proof`
 * is admitted, the review's builtin proof lane asks the local producer to run
 * the trusted scenario jailed on the exact head, and the verified
 * observations come back into the same review turn.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { finished, loopFixture, MAINTAINER, type LoopFixture } from '../automerge/loop/local-support.js';
import { sandboxForTests } from '../support/jail.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

const sandbox = await sandboxForTests();

/** The trusted scenario: calls the head's greet() and writes what it returned next to what the contract expects. */
const PROVE = `import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
const plan = JSON.parse(readFileSync(process.env.PROOFGATE_PROOF_PLAN, 'utf8'));
const out = process.env.PROOFGATE_PROOF_OUTPUT;
const { greet } = await import(pathToFileURL(join(process.env.PROOFGATE_HEAD_DIR, 'greet.mjs')).href);
const cases = ['Ada', 'Grace'];
writeFileSync(join(out, 'expectations.json'), JSON.stringify(cases.map((name) => ({ name: 'greet(' + name + ')', expected: 'Hello, ' + name + '!', actual: greet(name) }))));
writeFileSync(join(out, 'plan.json'), JSON.stringify({ plan, head: process.env.PROOFGATE_HEAD_SHA, env: Object.keys(process.env).sort() }));
`;

function config(extraScenario = ''): string {
  return [
    `sandbox: ${sandbox}`,
    'maintainers:',
    `  - login: ${MAINTAINER}`,
    '    permission: admin',
    'checks:',
    '  - name: test',
    '    run: node check.mjs',
    'review:',
    '  transportRetries: 0',
    '  lanes:',
    '    - id: rules',
    '      builtin: rules',
    '    - id: proof',
    '      builtin: proof',
    'proof:',
    '  scenarios:',
    '    - id: greet',
    '      description: calls greet() of the head and compares it with the contract',
    '      producer: { kind: local, command: [node, prove.mjs] }',
    '      timeoutSeconds: 60',
    '      evidence: { requiredFiles: [expectations.json] }',
    extraScenario,
  ].join('\n');
}

const GREET = 'export function greet(name) {\n  return `Hello, ${name}!`;\n}\n';

async function setup(extraScenario = ''): Promise<LoopFixture> {
  const f = await loopFixture({ config: config(extraScenario) });
  f.repo.commit('main', { 'prove.mjs': PROVE, 'greet.mjs': GREET }, 'add the greet scenario');
  return f;
}

interface StoredReview {
  verdict: string;
  reasons: string[];
  proofs: { tool: string; lane_id: string; subject_digest: string; artifact_digest: string | null; status: string; reason: string | null }[];
  lanes: { lane_id: string; result: { disposition?: string; failure?: { reason: string }; evidence_path?: string } | null }[];
}

function reviews(f: LoopFixture): { dir: string; review: StoredReview }[] {
  const root = join(f.dataDir, 'reviews');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((name) => existsSync(join(root, name, 'review.json')))
    .map((name) => ({ dir: join(root, name), review: JSON.parse(readFileSync(join(root, name, 'review.json'), 'utf8')) as StoredReview }));
}

describe('live proof on the local forge', () => {
  it('a change that keeps the behaviour is proven in its review turn, the record binds plan and bundle, and it merges', async () => {
    const f = (fixture = await setup());
    const id = await f.openChange('polite', { 'greet.mjs': 'export function greet(name) {\n  const who = name;\n  return `Hello, ${who}!`;\n}\n' });
    await finished((await f.command(id, '@proofgate proof greet')).dispatch?.done);
    const [stored] = reviews(f);
    expect(stored?.review.verdict).toBe('CONFIRMED');
    const proofs = stored?.review.proofs ?? [];
    expect(proofs).toHaveLength(1);
    expect(proofs[0]).toMatchObject({ tool: 'proof_greet', lane_id: 'proof', status: 'verified', reason: null });
    expect(proofs[0]?.subject_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    // The bundle the verdict is bound to is kept by its digest in the review directory.
    const bundle = join(stored?.dir ?? '', 'proof', `${(proofs[0]?.artifact_digest ?? '').slice('sha256:'.length)}.zip`);
    expect(existsSync(bundle)).toBe(true);
    // The proof lane's evidence quotes the observations, between boundaries, as untrusted data.
    const lane = stored?.review.lanes.find((entry) => entry.lane_id === 'proof');
    const evidence = readFileSync(lane?.result?.evidence_path ?? '', 'utf8');
    expect(evidence).toContain('greet(Ada): expected "Hello, Ada!", observed "Hello, Ada!": as expected');
    expect(evidence).toMatch(/<<<proofgate-untrusted-[0-9a-f]{24} path="plan.json"/);
    // The scenario saw the plan, the exact head, and none of proofgate's own environment.
    const seen = JSON.parse(/path="plan.json"[^\n]*\n(.*)\n/.exec(evidence)?.[1] ?? '{}') as { plan: { paths: string[] }; head: string; env: string[] };
    expect(seen.plan.paths).toEqual(['greet.mjs']);
    expect(seen.head).toBe(f.repo.git(['rev-parse', 'polite']));
    expect(seen.env.filter((name) => !/^(PATH|PWD|LANG|LC_ALL|LC_CTYPE|TZ|HOME|TMPDIR|PROOFGATE_.*)$/.test(name))).toEqual([]);
    expect(seen.env).not.toContain('PROOFGATE_GITHUB_PRIVATE_KEY');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind).toBe('merged');
    // The admitted decision was stored and the reply names the tool.
    const comments = (await f.forge.snapshot(id)).comments.map((comment) => comment.body);
    expect(comments.some((body) => body.includes('Proof-focused review of head') && body.includes('`proof_greet`'))).toBe(true);
  });

  it('a change whose behaviour differs is refuted with the observation as the finding', async () => {
    const f = (fixture = await setup());
    const id = await f.openChange('rude', { 'greet.mjs': 'export function greet(name) {\n  return `Go away, ${name}.`;\n}\n' });
    await finished((await f.command(id, '@proofgate proof')).dispatch?.done);
    const [stored] = reviews(f);
    expect(stored?.review.verdict).toBe('REFUTED');
    expect(stored?.review.proofs[0]?.status).toBe('verified');
    const lane = stored?.review.lanes.find((entry) => entry.lane_id === 'proof');
    expect(lane?.result?.disposition).toBe('REFUTED');
  });

  it('a head whose code cannot even load leaves the proof inconclusive: the review holds and the change does not merge', async () => {
    const f = (fixture = await setup());
    const id = await f.openChange('broken-load', { 'greet.mjs': 'throw new Error("not today");\n' });
    await finished((await f.command(id, '@proofgate proof greet')).dispatch?.done);
    const [stored] = reviews(f);
    expect(stored?.review.verdict).toBe('HOLD');
    expect(stored?.review.proofs[0]).toMatchObject({ status: 'inconclusive', reason: 'INCOMPLETE', artifact_digest: null });
    const lane = stored?.review.lanes.find((entry) => entry.lane_id === 'proof');
    expect(lane?.result?.failure?.reason).toContain('proof inconclusive');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind).not.toBe('merged');
  });

  it('evidence the scenario cannot pack (a symlink to a host file) is rejected and holds the review on its own', async () => {
    const f = (fixture = await setup());
    // The head's code runs inside the scenario and plants a link in the output before the scenario writes its files.
    const hostile = [
      "import { symlinkSync } from 'node:fs';",
      "import { join } from 'node:path';",
      "symlinkSync('/etc/passwd', join(process.env.PROOFGATE_PROOF_OUTPUT, 'passwd.txt'));",
      GREET,
    ].join('\n');
    const id = await f.openChange('link', { 'greet.mjs': hostile });
    await finished((await f.command(id, '@proofgate proof greet')).dispatch?.done);
    const [stored] = reviews(f);
    expect(stored?.review.verdict).toBe('HOLD');
    expect(stored?.review.proofs[0]).toMatchObject({ status: 'rejected', reason: 'SYMLINK' });
    expect(stored?.review.reasons.join('\n')).toContain('evidence rejected (SYMLINK)');
  });

  it('proof asked for only a scenario this host cannot run: no tool is offered, and the proof lane holds instead of confirming', async () => {
    const web = [
      '    - id: web',
      '      description: a browser check that runs as a GitHub workflow',
      '      producer: { kind: github-workflow, workflow: .github/workflows/proof.yml, artifact: proof-bundle }',
      '      timeoutSeconds: 60',
    ].join('\n');
    const f = (fixture = await setup(web));
    const id = await f.openChange('web-only', { 'greet.mjs': GREET + '// same\n' });
    await finished((await f.command(id, '@proofgate proof web')).dispatch?.done);
    const [stored] = reviews(f);
    expect(stored?.review.verdict).toBe('HOLD');
    expect(stored?.review.proofs).toEqual([]);
    const lane = stored?.review.lanes.find((entry) => entry.lane_id === 'proof');
    expect(lane?.result?.failure?.reason).toContain('no proof tool could be offered');
    expect(lane?.result?.failure?.reason).toContain('web (UNAVAILABLE');
  });

  it('a proof command from someone without write permission, or naming another head, is refused and runs nothing', async () => {
    const f = (fixture = await setup());
    const id = await f.openChange('polite2', { 'greet.mjs': GREET.replace('Hello', 'Hello') + '// same\n' });
    await f.command(id, '@proofgate proof greet', 'Mallory Outsider');
    await f.command(id, `@proofgate proof greet ${'a'.repeat(40)}`);
    expect(reviews(f)).toEqual([]);
    const comments = (await f.forge.snapshot(id)).comments.map((comment) => comment.body);
    expect(comments.some((body) => body.includes('refused (PERMISSION)') || body.includes('refused (SHA_MISMATCH)'))).toBe(true);
    expect(comments.some((body) => body.includes('refused (SHA_MISMATCH)'))).toBe(true);
  });
});
