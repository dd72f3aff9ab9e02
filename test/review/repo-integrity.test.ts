import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { parseRepoConfigYaml } from '../../src/contracts/repo-config.js';
import { fingerprintRefs, rulesReviewer, runReview, type LaneSpec, type ReviewOutcome } from '../../src/review/index.js';
import { makeRepo, sh, writeScript, type TestRepo } from './repo-fixture.js';

// A command reviewer that does one thing to the repository it is reviewing, then answers CONFIRMED.
// It is told the repository's path (its last argument): a lane sees nothing of proofgate's data dir to find it by.
const REVIEWER = `
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
const [mode, marker] = process.argv.slice(2);
const request = JSON.parse(readFileSync(0, 'utf8'));
const repo = process.argv[process.argv.length - 1];
const gitDir = join(repo, '.git');
const git = (...args) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' }).trim();
if (mode === 'plant') {
  git('config', '-f', join(gitDir, 'config'), 'core.fsmonitor', 'env > ' + marker + '; false #');
  for (const hook of ['post-checkout', 'reference-transaction', 'post-index-change', 'post-merge']) {
    writeFileSync(join(gitDir, 'hooks', hook), '#!/bin/sh\\nenv >> ' + marker + '\\n');
    chmodSync(join(gitDir, 'hooks', hook), 0o755);
  }
}
if (mode === 'untracked') writeFileSync(join(repo, 'notes-' + process.pid + '.txt'), 'a user was here\\n');
if (mode === 'branch') git('branch', 'other-agent-' + process.pid, 'main');
if (mode === 'tracked') writeFileSync(join(repo, 'README.md'), 'changed during the lane\\n');
if (mode === 'move-base') git('update-ref', 'refs/heads/main', 'feature');
if (mode !== 'no-evidence') writeFileSync(process.env.PROOFGATE_EVIDENCE_PATH, 'reviewed ' + request.head_sha + '\\n');
process.stdout.write(JSON.stringify({
  schema: 'review-lane-result.v1', lane_id: process.env.PROOFGATE_LANE_ID, family: process.env.PROOFGATE_REVIEW_FAMILY,
  context_id: process.env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: request.nonce, read_only: true,
  evidence_path: process.env.PROOFGATE_EVIDENCE_PATH, findings: [], disposition: 'CONFIRMED' }));
`;

const TOKEN = 'ghp_integritytokenintegritytoken0123456';

let script: { path: string; dir: string };
const repos: TestRepo[] = [];

beforeAll(() => {
  script = writeScript('reviewer.mjs', REVIEWER);
});
afterAll(() => {
  rmSync(script.dir, { recursive: true, force: true });
  for (const repo of repos) repo.remove();
});

/** A fresh repository with `main` and a `feature` branch one commit ahead; HEAD on main. */
function freshRepo(): TestRepo {
  const repo = makeRepo();
  repos.push(repo);
  repo.branch('feature');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => b + a;\n', 'test/calc.test.ts': 'add commutes\n' }, 'commute');
  repo.switchTo('main');
  return repo;
}

function configFor(args: string[]): string {
  const path = join(script.dir, `config-${Math.random().toString(16).slice(2)}.yml`);
  // Unjailed (`sandbox: none`): what the repository fingerprint detects when no jail contains the reviewer.
  writeFileSync(
    path,
    `sandbox: none\nreview:\n  mode: fresh-context\n  lanes:\n    - id: probe\n      command: ${JSON.stringify([process.execPath, script.path, ...args])}\n`,
  );
  return path;
}

async function review(repo: TestRepo, args: string[]): Promise<ReviewOutcome> {
  process.env.GITHUB_TOKEN = TOKEN;
  try {
    return await runReview({ repoDir: repo.dir, base: 'main', head: 'feature', configFile: configFor([...args, repo.dir]) });
  } finally {
    delete process.env.GITHUB_TOKEN;
  }
}

describe('a hostile reviewer that plants git config and hooks', () => {
  it('runs nothing it planted, leaks no token, and its lane is invalid (HOLD)', async () => {
    const repo = freshRepo();
    const marker = join(mkdtempSync(join(tmpdir(), 'pg-leak-')), 'leak.txt');
    const outcome = await review(repo, ['plant', marker]);
    expect(sh(repo.dir, ['config', '--get', 'core.fsmonitor'])).toContain(marker);
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : 'absent').toBe('absent');
    expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'REPOSITORY_MODIFIED' });
    expect(outcome.verdict).toBe('HOLD');
  });
});

describe('the repository fingerprint covers what a reviewer could use, nothing else', () => {
  it.each([['untracked'], ['branch']])('unrelated activity (%s) during a lane still confirms', async (mode) => {
    const repo = freshRepo();
    const outcome = await review(repo, [mode]);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.verdict).toBe('CONFIRMED');
  });

  it.each([['tracked'], ['move-base']])('a change a reviewer could use (%s) makes the lane invalid', async (mode) => {
    const repo = freshRepo();
    const outcome = await review(repo, [mode]);
    expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'REPOSITORY_MODIFIED' });
    expect(outcome.verdict).toBe('HOLD');
  });
});

describe('the reviewed refs moving by someone else during a lane', () => {
  // A builtin lane runs only proofgate's code, and a jailed program sees no repository: while they run, the base and
  // head move only by others (proofgate landing another change, a push by hand). The review is bound to the commits.
  const builtinConfig = (sandbox: string): string => {
    const path = join(script.dir, `config-${Math.random().toString(16).slice(2)}.yml`);
    writeFileSync(path, `sandbox: ${sandbox}\nreview:\n  mode: fresh-context\n  lanes:\n    - id: rules\n      builtin: rules\n`);
    return path;
  };

  const lane = (config: Record<string, unknown>) => ({ id: 'l', family: 'f', timeoutMs: 1000, config }) as unknown as LaneSpec;
  it.each([
    ['a command lane, unjailed', lane({ command: ['x'] }), 'none', false, true],
    ['a proof lane, unjailed', lane({ builtin: 'proof' }), 'none', false, true],
    ['an openai lane offered tools, unjailed', lane({ openai: {} }), 'none', true, true],
    ['an openai lane without tools, unjailed', lane({ openai: {} }), 'none', false, false],
    ['a rules lane, unjailed', lane({ builtin: 'rules' }), 'none', false, false],
    ['a command lane, jailed', lane({ command: ['x'] }), 'jail', false, false],
    ['a proof lane offered tools, jailed', lane({ builtin: 'proof' }), 'jail', true, false],
  ] as const)('%s: the names count only when it could have moved them', (_name, spec, sandbox, tools, counted) => {
    expect(fingerprintRefs(spec, { sha: 'a'.repeat(40), sandbox }, tools, ['main', 'feature'])).toEqual(counted ? ['main', 'feature'] : []);
  });

  it.each([['jail'], ['none']])('the base moving while a builtin lane runs (sandbox: %s) still confirms', async (sandbox) => {
    const repo = freshRepo();
    const before = sh(repo.dir, ['rev-parse', 'main']).trim();
    let moved = '';
    const outcome = await runReview({
      repoDir: repo.dir,
      base: 'main',
      head: 'feature',
      configFile: builtinConfig(sandbox),
      adapters: {
        rules: async (context) => {
          // Another change lands on main while this lane reads the one under review.
          moved = repo.commit({ 'NOTES.md': 'landed meanwhile\n' }, 'another change');
          return rulesReviewer(context);
        },
      },
    });
    expect(moved).not.toBe(before);
    expect(sh(repo.dir, ['rev-parse', 'main']).trim()).toBe(moved);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.verdict).toBe('CONFIRMED');
  });
});

describe('review input checks', () => {
  it('CONFIRMED without an evidence file is a transport failure, and the review holds', async () => {
    const repo = freshRepo();
    const outcome = await review(repo, ['no-evidence']);
    const result = outcome.lanes[0]?.result;
    expect(result).toMatchObject({ failure: { class: 'transport' } });
    expect(result && 'disposition' in result).toBe(false);
    expect(result && 'failure' in result ? result.failure.reason : '').toMatch(/^missing evidence/);
    expect(outcome.verdict).toBe('HOLD');
  });

  it.each([
    ['feature', 'main'],
    ['feature', 'feature'],
  ])('an empty change (base %s, head %s) is one INVALID_INPUT error', async (base, head) => {
    const repo = freshRepo();
    const error = await runReview({ repoDir: repo.dir, base, head, configFile: configFor([]) }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(isProofgateError(error, 'INVALID_INPUT')).toBe(true);
    expect((error as Error).message).toBe(`nothing to review: ${head} has no commits that ${base} lacks`);
  });

  it('a misspelled top-level key of the config file is the same CONFIG error change open gives', async () => {
    const repo = freshRepo();
    const path = join(script.dir, 'typo.yml');
    const text = 'reveiw:\n  mode: fresh-context\n';
    writeFileSync(path, text);
    const error = await runReview({ repoDir: repo.dir, base: 'main', head: 'feature', configFile: path }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(isProofgateError(error, 'CONFIG')).toBe(true);
    expect(() => parseRepoConfigYaml(text, path)).toThrow((error as Error).message);
    expect((error as Error).message).toContain('reveiw');
  });
});
