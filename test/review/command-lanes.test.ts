import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runReview, type ReviewOutcome } from '../../src/review/index.js';
import { makeRepo, writeScript, type TestRepo } from './repo-fixture.js';

// A reviewer program whose behaviour is chosen by its first argument.
const REVIEWER = `
import { readFileSync, writeFileSync, statSync, symlinkSync, mkdirSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
const mode = process.argv[2];
const request = JSON.parse(readFileSync(0, 'utf8'));
const evidence = process.env.PROOFGATE_EVIDENCE_PATH;
const result = (extra = {}) => ({
  schema: 'review-lane-result.v1', lane_id: process.env.PROOFGATE_LANE_ID, family: process.env.PROOFGATE_REVIEW_FAMILY,
  context_id: process.env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: request.nonce, read_only: true, evidence_path: evidence,
  findings: [], disposition: 'CONFIRMED', ...extra });
const notes = [];
if (mode === 'inspect') {
  notes.push('cwd=' + process.cwd());
  notes.push('calc=' + readFileSync('src/calc.ts', 'utf8'));
  notes.push('mode=' + (statSync('src/calc.ts').mode & 0o777).toString(8));
  notes.push('env=' + JSON.stringify(process.env));
  notes.push('request-file-nonce=' + JSON.parse(readFileSync(process.env.PROOFGATE_REVIEW_REQUEST, 'utf8')).nonce);
}
if (mode === 'write-snapshot') {
  try { writeFileSync('src/calc.ts', 'export const add = () => 42;\\n'); notes.push('wrote=yes'); } catch { notes.push('wrote=no'); }
}
if (mode === 'write-repo') writeFileSync(join(process.argv[3], 'README.md'), 'planted\\n');
if (mode === 'hang') {
  const child = spawn('sleep', ['300'], { stdio: 'ignore' });
  writeFileSync(join(process.env.PROOFGATE_EVIDENCE_DIR, 'child.pid'), String(child.pid));
  setInterval(() => {}, 1000);
} else {
  if (mode === 'symlink-out') symlinkSync(process.argv[3], evidence);
  else writeFileSync(evidence, 'reviewed ' + request.head_sha + '\\n' + notes.join('\\n') + '\\n');
  if (mode === 'megabytes') { process.stdout.write('x'.repeat(3 * 1024 * 1024)); }
  else if (mode === 'exit-nonzero') { process.stderr.write('reviewer crashed\\n'); process.exit(7); }
  else if (mode === 'not-json') process.stdout.write('LGTM!\\n');
  else if (mode === 'wrong-nonce') process.stdout.write(JSON.stringify(result({ nonce: 'ab'.repeat(16) })));
  else if (mode === 'refute') process.stdout.write(JSON.stringify(result({ disposition: 'REFUTED', findings: [{ title: 'add is wrong', evidence: 'adds zero', path: 'src/calc.ts', line: 1 }] })));
  else process.stdout.write(JSON.stringify(result()));
}
`;

const SECRETS = {
  GITHUB_TOKEN: 'ghp_secretsecretsecretsecretsecretsecret01',
  AWS_SECRET_ACCESS_KEY: 'aws-secret-value-that-must-not-leak-1234567',
  PROOFGATE_GITHUB_APP_PRIVATE_KEY: 'proofgate-app-key-must-not-leak',
  PROOFGATE_DATA_DIR: '/should/not/leak',
  OPENAI_API_KEY: 'sk-openai-value-that-must-not-leak-0000000000',
};

let repo: TestRepo;
let script: { path: string; dir: string };
let stateBefore: string;

beforeAll(() => {
  repo = makeRepo();
  repo.branch('feature');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => b + a;\n', 'test/calc.test.ts': 'add commutes\n' }, 'commute');
  repo.switchTo('main');
  script = writeScript('reviewer.mjs', REVIEWER);
  stateBefore = repo.state();
});

afterAll(() => {
  repo.remove();
  rmSync(script.dir, { recursive: true, force: true });
});

async function reviewWith(lanes: { id: string; args: string[]; timeoutSeconds?: number; family?: string }[], mode = 'fresh-context'): Promise<ReviewOutcome> {
  const config = join(script.dir, `config-${Math.random().toString(16).slice(2)}.yml`);
  const yaml = [`review:`, `  mode: ${mode}`, `  lanes:`];
  for (const lane of lanes) {
    yaml.push(`    - id: ${lane.id}`);
    yaml.push(`      command: ${JSON.stringify([process.execPath, script.path, ...lane.args])}`);
    if (lane.timeoutSeconds) yaml.push(`      timeoutSeconds: ${lane.timeoutSeconds}`);
    if (lane.family) yaml.push(`      family: ${lane.family}`);
  }
  writeFileSync(config, `${yaml.join('\n')}\n`);
  const saved: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(SECRETS)) {
    saved[key] = process.env[key];
    process.env[key] = value;
  }
  try {
    return await runReview({ repoDir: repo.dir, base: 'main', head: 'feature', configFile: config });
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
}

function evidenceText(outcome: ReviewOutcome, lane = 0): string {
  const path = outcome.lanes[lane]?.result?.evidence_path;
  if (path === undefined) throw new Error('no evidence');
  return readFileSync(path, 'utf8');
}

describe('command reviewer lanes', () => {
  it('runs in a read-only snapshot of the exact head with no secret in its environment', async () => {
    const outcome = await reviewWith([{ id: 'inspect', args: ['inspect'] }]);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.verdict).toBe('CONFIRMED');
    const text = evidenceText(outcome);
    expect(text).toContain('calc=export const add = (a: number, b: number) => b + a;');
    expect(text).toMatch(/mode=(444|555)/);
    for (const value of Object.values(SECRETS)) expect(text).not.toContain(value);
    const env = JSON.parse(/env=(.*)/.exec(text)?.[1] ?? '{}') as Record<string, string>;
    expect(Object.keys(env).sort()).toEqual(expect.arrayContaining(['HOME', 'PATH', 'PROOFGATE_EVIDENCE_DIR', 'PROOFGATE_REVIEW_REQUEST']));
    for (const key of Object.keys(env)) expect(['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'HOME', 'TMPDIR'].includes(key) || key.startsWith('PROOFGATE_REVIEW') || key.startsWith('PROOFGATE_EVIDENCE') || key === 'PROOFGATE_LANE_ID').toBe(true);
    expect(env.HOME).not.toBe(process.env.HOME);
    expect(text).toContain(`request-file-nonce=${outcome.lanes[0]?.request.nonce ?? 'none'}`);
    const cwd = /cwd=(.*)/.exec(text)?.[1] ?? '';
    expect(cwd).not.toBe('');
    expect(existsSync(cwd)).toBe(false);
    expect(repo.state()).toBe(stateBefore);
  });

  it('a REFUTED lane refutes the review with its findings', async () => {
    const outcome = await reviewWith([{ id: 'critic', args: ['refute'] }]);
    expect(outcome.verdict).toBe('REFUTED');
    expect(outcome.lanes[0]?.result?.findings[0]?.title).toBe('add is wrong');
  });

  it('hostile: writing into its snapshot is refused or detected, never counted', async () => {
    const outcome = await reviewWith([{ id: 'writer', args: ['write-snapshot'] }]);
    const wrote = evidenceText(outcome).includes('wrote=yes');
    if (wrote) expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'READ_ONLY_VIOLATED' });
    else expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    if (wrote) expect(outcome.verdict).toBe('HOLD');
    expect(repo.state()).toBe(stateBefore);
  });

  it('hostile: editing a tracked file of the repository is detected and the lane does not count', async () => {
    const outcome = await reviewWith([{ id: 'planter', args: ['write-repo', repo.dir] }]);
    expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'REPOSITORY_MODIFIED' });
    expect(outcome.verdict).toBe('HOLD');
    writeFileSync(join(repo.dir, 'README.md'), '# demo\n');
    expect(repo.state()).toBe(stateBefore);
  });

  it('hostile: a symlink pointing outside as evidence is invalid', async () => {
    const outside = join(script.dir, 'outside.txt');
    writeFileSync(outside, 'outside the evidence dir\n');
    const outcome = await reviewWith([{ id: 'linker', args: ['symlink-out', outside] }]);
    expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'EVIDENCE_OUTSIDE' });
    expect(outcome.verdict).toBe('HOLD');
    expect(repo.state()).toBe(stateBefore);
  });

  it('hostile: printing megabytes is a transport failure (output too large)', async () => {
    const outcome = await reviewWith([{ id: 'loud', args: ['megabytes'] }]);
    const result = outcome.lanes[0]?.result;
    expect(result && 'failure' in result ? result.failure.reason : '').toMatch(/output too large/);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.verdict).toBe('HOLD');
  });

  it('hostile: never exiting times out and the whole process group is killed', async () => {
    const started = Date.now();
    const outcome = await reviewWith([{ id: 'stuck', args: ['hang'], timeoutSeconds: 1 }]);
    expect(Date.now() - started).toBeLessThan(15_000);
    const result = outcome.lanes[0]?.result;
    expect(result && 'failure' in result ? result.failure.reason : '').toMatch(/timed out after 1s/);
    expect(result && 'disposition' in result).toBe(false);
    expect(outcome.verdict).toBe('HOLD');
    const pid = Number(readFileSync(join(outcome.lanes[0]?.request.evidence_dir ?? '', 'child.pid'), 'utf8'));
    expect(pid).toBeGreaterThan(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const alive = (() => {
      try {
        process.kill(pid, 0);
      } catch {
        return false;
      }
      const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
      return !/\) Z /.test(stat);
    })();
    expect(alive).toBe(false);
  });

  it('hostile: a non-zero exit is a transport failure', async () => {
    const outcome = await reviewWith([{ id: 'crash', args: ['exit-nonzero'] }]);
    const result = outcome.lanes[0]?.result;
    expect(result && 'failure' in result ? result.failure.reason : '').toBe('reviewer exited with code 7: reviewer crashed');
    expect(outcome.verdict).toBe('HOLD');
  });

  it('hostile: output that is not JSON is a transport failure', async () => {
    const outcome = await reviewWith([{ id: 'chatty', args: ['not-json'] }]);
    const result = outcome.lanes[0]?.result;
    expect(result && 'failure' in result ? result.failure.reason : '').toBe('reviewer output is not JSON');
    expect(outcome.verdict).toBe('HOLD');
  });

  it('hostile: echoing the wrong nonce is invalid', async () => {
    const outcome = await reviewWith([{ id: 'replay', args: ['wrong-nonce'] }]);
    expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'NONCE_MISMATCH' });
    expect(outcome.verdict).toBe('HOLD');
    expect(repo.state()).toBe(stateBefore);
  });

  it('multi-model needs two families: two command lanes of distinct families confirm', async () => {
    const one = await reviewWith([{ id: 'a', args: ['ok'], family: 'x' }, { id: 'b', args: ['ok'], family: 'x' }], 'multi-model');
    expect(one.verdict).toBe('HOLD');
    const two = await reviewWith([{ id: 'a', args: ['ok'], family: 'x' }, { id: 'b', args: ['ok'], family: 'y' }], 'multi-model');
    expect(two.verdict).toBe('CONFIRMED');
    expect(repo.state()).toBe(stateBefore);
  });
});
