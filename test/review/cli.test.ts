import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/helpers.js';
import { makeRepo, writeScript, type TestRepo } from './repo-fixture.js';

let repo: TestRepo;
let scratch: { dir: string };

beforeAll(() => {
  repo = makeRepo();
  repo.branch('untested');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => a + b + 1;\n' }, 'off by one');
  repo.switchTo('main');
  repo.branch('tested');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => b + a;\n', 'test/calc.test.ts': 'commutes\n' }, 'commute');
  repo.switchTo('main');
  scratch = writeScript('noop.txt', '');
});

afterAll(() => {
  repo.remove();
  rmSync(scratch.dir, { recursive: true, force: true });
});

describe('proofgate review (built CLI)', () => {
  it('exit 0 and a human report for a CONFIRMED change', () => {
    const out = runCli(['review', '--repo', repo.dir, '--base', 'main', '--head', 'tested']);
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^review review_[0-9a-f]+: CONFIRMED \(fresh-context\)/);
    expect(out.stdout).toMatch(/lane rules \[proofgate-builtin\]: CONFIRMED\n {4}evidence: .*review-evidence-[0-9a-f]{16}\.txt/);
    expect(out.stdout).toContain(join(repo.dir, '.git', 'proofgate', 'reviews'));
  });

  it('exit 3 with findings for a REFUTED change, and --json for machines', () => {
    const out = runCli(['review', '--repo', repo.dir, '--base', 'main', '--head', 'untested', '--json']);
    expect(out.status).toBe(3);
    const outcome = JSON.parse(out.stdout) as { verdict: string; lanes: { lane_id: string; result: { findings: { title: string }[] } }[] };
    expect(outcome.verdict).toBe('REFUTED');
    expect(outcome.lanes.find((lane) => lane.lane_id === 'tests')?.result.findings[0]?.title).toBe('source changed without any test changed');
  });

  it('exit 5 for HOLD (multi-model with one family)', () => {
    const data = join(scratch.dir, 'data');
    const out = runCli(['review', '--repo', repo.dir, '--base', 'main', '--head', 'tested', '--mode', 'multi-model', '--data', data]);
    expect(out.status).toBe(5);
    expect(out.stdout).toContain('multi-model needs 2 distinct families, got 1 (proofgate-builtin)');
    expect(out.stdout).toContain(join(data, 'reviews'));
  });

  it('runs the review as a graph run in the repository store, visible to proofgate runs', () => {
    const out = runCli(['review', '--repo', repo.dir, '--base', 'main', '--head', 'tested', '--json']);
    expect(out.status).toBe(0);
    const outcome = JSON.parse(out.stdout) as { run_id: string; accepted_result: { position: string; record_digest: string } };
    expect(outcome.run_id).toMatch(/^review_/);
    expect(outcome.accepted_result.position).toBe('dag/panel/1');
    expect(outcome.accepted_result.record_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const list = runCli(['runs', 'list', '--repo', repo.dir, '--namespace', 'reviews', '--json']);
    expect(list.status).toBe(0);
    const runs = JSON.parse(list.stdout) as { runId: string; status: string; graphId: string }[];
    expect(runs).toContainEqual(expect.objectContaining({ runId: outcome.run_id, status: 'complete', graphId: 'proofgate-review' }));
    const show = runCli(['runs', 'show', outcome.run_id, '--repo', repo.dir, '--namespace', 'reviews']);
    expect(show.status).toBe(0);
    expect(show.stdout).toContain('dag/panel/1');
  });

  it('PROOFGATE_DATA_DIR places the review files', () => {
    const data = join(scratch.dir, 'env-data');
    const out = runCli(['review', '--repo', repo.dir, '--base', 'main', '--head', 'tested', '--json'], { env: { PROOFGATE_DATA_DIR: data } });
    expect((JSON.parse(out.stdout) as { dir: string }).dir.startsWith(join(data, 'reviews'))).toBe(true);
  });

  it('exit 2 for usage errors, exit 1 with one line for bad config or refs', () => {
    expect(runCli(['review', '--mode', 'solo', '--repo', repo.dir]).status).toBe(2);
    expect(runCli(['review', 'extra-arg', '--repo', repo.dir]).status).toBe(2);
    const bad = join(scratch.dir, 'bad.yml');
    writeFileSync(bad, 'review:\n  lanes:\n    - { id: x, builtin: rules, timeoutSeconds: "soon" }\n');
    const config = runCli(['review', '--repo', repo.dir, '--head', 'tested', '--config', bad]);
    expect(config.status).toBe(1);
    expect(config.stderr).toBe(`proofgate: ${bad}: review.lanes[0].timeoutSeconds: expected a positive integer [CONFIG]\n`);
    const ref = runCli(['review', '--repo', repo.dir, '--head', 'no-such-branch']);
    expect(ref.status).toBe(1);
    expect(ref.stderr).toMatch(/^proofgate: not a commit in .*: no-such-branch \[GIT\]\n$/);
  });

  it('exit 1 with one line for an empty change (swapped --base/--head) and for a misspelled top-level config key', () => {
    const swapped = runCli(['review', '--repo', repo.dir, '--base', 'tested', '--head', 'main']);
    expect(swapped.status).toBe(1);
    expect(swapped.stdout).toBe('');
    expect(swapped.stderr).toBe('proofgate: nothing to review: main has no commits that tested lacks [INVALID_INPUT]\n');
    const typo = join(scratch.dir, 'typo.yml');
    writeFileSync(typo, 'reveiw:\n  mode: fresh-context\n');
    const config = runCli(['review', '--repo', repo.dir, '--head', 'tested', '--config', typo]);
    expect(config.status).toBe(1);
    expect(config.stderr).toBe(`proofgate: ${typo}: unknown key reveiw [CONFIG]\n`);
  });

  it('review validate-result prints valid or the typed reason', () => {
    const out = runCli(['review', '--repo', repo.dir, '--base', 'main', '--head', 'tested', '--json']);
    const outcome = JSON.parse(out.stdout) as { lanes: { request_file: string; result_file: string }[] };
    const lane = outcome.lanes[0];
    if (!lane) throw new Error('no lane');
    // The review removed its byte-exact diff copy when it ended: the request's inputs can no longer be checked...
    const gone = runCli(['review', 'validate-result', lane.result_file, '--request', lane.request_file]);
    expect(gone.stdout).toMatch(/^invalid: MUTABLE_INPUT: diff .*change\.diff cannot be read\n$/);
    // ...until the exact bytes the request binds by digest are put back.
    const request = JSON.parse(readFileSync(lane.request_file, 'utf8')) as { diff: { path: string } };
    const mergeBase = execFileSync('git', ['-C', repo.dir, 'merge-base', 'main', 'tested'], { encoding: 'utf8' }).trim();
    const diffArgs = [
      'diff',
      '--no-color',
      '--no-ext-diff',
      '--no-textconv',
      '--binary',
      '--full-index',
      '--no-renames',
      '--src-prefix=a/',
      '--dst-prefix=b/',
      mergeBase,
      'tested',
    ];
    writeFileSync(request.diff.path, execFileSync('git', ['-C', repo.dir, ...diffArgs]));
    const ok = runCli(['review', 'validate-result', lane.result_file, '--request', lane.request_file]);
    expect(ok.stdout).toBe('valid\n');
    expect(ok.status).toBe(0);
    const result = JSON.parse(readFileSync(lane.result_file, 'utf8')) as Record<string, unknown>;
    const forged = join(scratch.dir, 'forged.json');
    writeFileSync(forged, JSON.stringify({ ...result, nonce: 'ab'.repeat(16) }));
    const bad = runCli(['review', 'validate-result', forged, '--request', lane.request_file]);
    expect(bad.status).toBe(1);
    expect(bad.stdout).toBe('invalid: NONCE_MISMATCH: the result does not echo the request nonce\n');
    const json = runCli(['review', 'validate-result', forged, '--request', lane.request_file, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ valid: false, code: 'NONCE_MISMATCH' });
    expect(runCli(['review', 'validate-result', forged]).status).toBe(2);
  });

  it('--help lists the options', () => {
    const out = runCli(['review', '--help']);
    expect(out.status).toBe(0);
    for (const flag of ['--repo', '--base', '--head', '--config', '--mode', '--data', '--json']) expect(out.stdout).toContain(flag);
  });
});
