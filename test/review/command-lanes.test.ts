import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import type { SandboxMode } from '../../src/host/index.js';
import { runReview, type ReviewOutcome } from '../../src/review/index.js';
import { survivors } from '../attacks/support.js';
import { runCliAsync } from '../cli/helpers.js';
import { jailSkipReason, sandboxForTests } from '../support/jail.js';
import { makeRepo, writeScript, type TestRepo } from './repo-fixture.js';

// The reviewer program, committed on main as tools/review.mjs: its behaviour is chosen by its first argument.
const REVIEWER = `
import { readFileSync, writeFileSync, statSync, symlinkSync, readdirSync, unlinkSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
const [mode, ...args] = process.argv.slice(2);
const request = JSON.parse(readFileSync(0, 'utf8'));
const evidence = process.env.PROOFGATE_EVIDENCE_PATH;
const head = process.env.PROOFGATE_HEAD_DIR;
const result = (extra = {}) => ({
  schema: 'review-lane-result.v1', lane_id: process.env.PROOFGATE_LANE_ID, family: process.env.PROOFGATE_REVIEW_FAMILY,
  context_id: process.env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: request.nonce, read_only: true, evidence_path: evidence,
  findings: [], disposition: 'CONFIRMED', ...extra });
const notes = [];
const attempt = (name, fn) => { try { notes.push(name + '=' + fn()); } catch (error) { notes.push(name + '=failed:' + (error.code || error.message)); } };
if (mode === 'inspect') {
  notes.push('cwd=' + process.cwd());
  notes.push('program-calc=' + readFileSync('src/calc.ts', 'utf8'));
  notes.push('head-calc=' + readFileSync(join(head, 'src/calc.ts'), 'utf8'));
  notes.push('mode=' + (statSync(join(head, 'src/calc.ts')).mode & 0o777).toString(8));
  notes.push('env=' + JSON.stringify(process.env));
  notes.push('request-file-nonce=' + JSON.parse(readFileSync(process.env.PROOFGATE_REVIEW_REQUEST, 'utf8')).nonce);
  notes.push('diff-bytes=' + readFileSync(request.diff.path).length);
}
if (mode === 'write-snapshot') attempt('wrote', () => { writeFileSync(join(head, 'src/calc.ts'), 'export const add = () => 42;\\n'); return 'yes'; });
if (mode === 'write-program') attempt('wrote', () => { writeFileSync('tools/review.mjs', '// replaced\\n'); return 'yes'; });
if (mode === 'tamper-diff') attempt('tampered', () => { unlinkSync(request.diff.path); writeFileSync(request.diff.path, 'diff --git a/x b/x\\n'); return 'yes'; });
if (mode === 'write-repo') attempt('wrote', () => { writeFileSync(join(args[0], 'README.md'), 'planted\\n'); return 'yes'; });
if (mode === 'snoop') {
  attempt('environ1', () => readFileSync('/proc/1/environ', 'utf8'));
  attempt('environParent', () => readFileSync('/proc/' + process.ppid + '/environ', 'utf8'));
  attempt('dataDir', () => readFileSync(join(args[0], 'canary.txt'), 'utf8'));
  attempt('otherReviews', () => readdirSync(join(args[0], 'reviews')).length);
  attempt('gitConfig', () => readFileSync(join(args[1], '.git', 'config'), 'utf8'));
  await new Promise((resolve) => {
    const socket = connect(Number(args[2]), '127.0.0.1');
    socket.on('connect', () => { notes.push('net=connected'); socket.destroy(); resolve(); });
    socket.on('error', (error) => { notes.push('net=failed:' + error.code); resolve(); });
  });
}
if (mode === 'hang') {
  spawn('sh', ['-c', 'sleep 300; : ' + args[0]], { stdio: 'ignore' });
  setInterval(() => {}, 1000);
} else {
  if (mode === 'symlink-out') symlinkSync(args[0], evidence);
  else writeFileSync(evidence, 'reviewed ' + request.head_sha + '\\n' + notes.join('\\n') + '\\n');
  if (mode === 'megabytes') { process.stdout.write('x'.repeat(3 * 1024 * 1024)); }
  else if (mode === 'exit-nonzero') { process.stderr.write('reviewer crashed\\n'); process.exit(7); }
  else if (mode === 'not-json') process.stdout.write('LGTM!\\n');
  else if (mode === 'wrong-nonce') process.stdout.write(JSON.stringify(result({ nonce: 'ab'.repeat(16) })));
  else if (mode === 'refute') process.stdout.write(JSON.stringify(result({ disposition: 'REFUTED', findings: [{ title: 'add is wrong', evidence: 'adds zero', path: 'src/calc.ts', line: 1 }] })));
  else process.stdout.write(JSON.stringify(result()));
}
`;

/** The head's edit of the reviewer: it would confirm anything. */
const FORGED_REVIEWER = `
import { readFileSync, writeFileSync } from 'node:fs';
const request = JSON.parse(readFileSync(0, 'utf8'));
writeFileSync(process.env.PROOFGATE_EVIDENCE_PATH, 'FORGED\\n');
process.stdout.write(JSON.stringify({ schema: 'review-lane-result.v1', lane_id: process.env.PROOFGATE_LANE_ID, family: process.env.PROOFGATE_REVIEW_FAMILY,
  context_id: process.env.PROOFGATE_REVIEW_CONTEXT_ID, nonce: request.nonce, read_only: true, evidence_path: process.env.PROOFGATE_EVIDENCE_PATH,
  findings: [], disposition: 'CONFIRMED' }));
`;

const SECRETS = {
  GITHUB_TOKEN: 'ghp_secretsecretsecretsecretsecretsecret01',
  AWS_SECRET_ACCESS_KEY: 'aws-secret-value-that-must-not-leak-1234567',
  PROOFGATE_GITHUB_APP_PRIVATE_KEY: 'proofgate-app-key-must-not-leak',
  PROOFGATE_DATA_DIR: '/should/not/leak',
  OPENAI_API_KEY: 'sk-openai-value-that-must-not-leak-0000000000',
};

/** A repository with the reviewer on main and the change on `feature` (made under `parent`, default the temp dir). */
function reviewedRepo(parent?: string): TestRepo {
  const saved = process.env.TMPDIR;
  if (parent !== undefined) process.env.TMPDIR = parent;
  let made: TestRepo;
  try {
    made = makeRepo();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
  made.commit({ 'tools/review.mjs': REVIEWER }, 'the reviewer');
  made.branch('feature');
  made.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => b + a;\n', 'test/calc.test.ts': 'add commutes\n' }, 'commute');
  return made;
}

let repo: TestRepo;
let scratch: { path: string; dir: string };
let stateBefore: string;
let sandbox: SandboxMode = 'jail';
let skipJail: string | null = null;

beforeAll(async () => {
  sandbox = await sandboxForTests();
  skipJail = await jailSkipReason();
  repo = reviewedRepo();
  // The attacker's head: it edits the reviewer to confirm anything (and breaks add).
  repo.branch('forger');
  repo.commit({ 'tools/review.mjs': FORGED_REVIEWER, 'src/calc.ts': 'export const add = () => 0;\n' }, 'make the reviewer agree');
  repo.switchTo('main');
  scratch = writeScript('placeholder.txt', '');
  stateBefore = repo.state();
});

afterAll(() => {
  repo.remove();
  rmSync(scratch.dir, { recursive: true, force: true });
});

interface Lane {
  readonly id: string;
  readonly args: readonly string[];
  readonly timeoutSeconds?: number;
  readonly family?: string;
  readonly env?: readonly string[];
}

function configFile(lanes: readonly Lane[], mode: string, mustJail = false): string {
  const config = join(scratch.dir, `config-${Math.random().toString(16).slice(2)}.yml`);
  const yaml = [`sandbox: ${mustJail ? 'jail' : sandbox}`, `review:`, `  mode: ${mode}`, `  lanes:`];
  for (const lane of lanes) {
    yaml.push(`    - id: ${lane.id}`);
    yaml.push(`      command: ${JSON.stringify(['node', 'tools/review.mjs', ...lane.args])}`);
    if (lane.timeoutSeconds) yaml.push(`      timeoutSeconds: ${lane.timeoutSeconds}`);
    if (lane.family) yaml.push(`      family: ${lane.family}`);
    if (lane.env) yaml.push(`      env: ${JSON.stringify(lane.env)}`);
  }
  writeFileSync(config, `${yaml.join('\n')}\n`);
  return config;
}

async function reviewWith(lanes: readonly Lane[], options: { mode?: string; head?: string; repoDir?: string } = {}): Promise<ReviewOutcome> {
  const config = configFile(lanes, options.mode ?? 'fresh-context');
  const saved: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(SECRETS)) {
    saved[key] = process.env[key];
    process.env[key] = value;
  }
  try {
    return await runReview({ repoDir: options.repoDir ?? repo.dir, base: 'main', head: options.head ?? 'feature', configFile: config });
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

function failureReason(outcome: ReviewOutcome): string {
  const result = outcome.lanes[0]?.result;
  return result && 'failure' in result ? result.failure.reason : '';
}

describe('command reviewer lanes', () => {
  it('run the trusted program from the base tree, read the head as data, with no secret in their environment', async () => {
    const outcome = await reviewWith([{ id: 'inspect', args: ['inspect'] }]);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.verdict).toBe('CONFIRMED');
    const text = evidenceText(outcome);
    expect(text).toContain('program-calc=export const add = (a: number, b: number) => a + b;');
    expect(text).toContain('head-calc=export const add = (a: number, b: number) => b + a;');
    expect(text).toMatch(/mode=(444|555)/);
    expect(text).toMatch(/diff-bytes=[1-9]/);
    for (const value of Object.values(SECRETS)) expect(text).not.toContain(value);
    const env = JSON.parse(/env=(.*)/.exec(text)?.[1] ?? '{}') as Record<string, string>;
    expect(Object.keys(env)).toEqual(expect.arrayContaining(['HOME', 'PATH', 'PROOFGATE_EVIDENCE_DIR', 'PROOFGATE_REVIEW_REQUEST', 'PROOFGATE_HEAD_DIR']));
    for (const key of Object.keys(env))
      expect(
        ['PATH', 'PWD', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'HOME', 'TMPDIR'].includes(key) ||
          key.startsWith('PROOFGATE_REVIEW') ||
          key.startsWith('PROOFGATE_EVIDENCE') ||
          key === 'PROOFGATE_LANE_ID' ||
          key === 'PROOFGATE_HEAD_DIR',
      ).toBe(true);
    expect(env.HOME).not.toBe(process.env.HOME);
    expect(text).toContain(`request-file-nonce=${outcome.lanes[0]?.request.nonce ?? 'none'}`);
    const cwd = /cwd=(.*)/.exec(text)?.[1] ?? '';
    expect(cwd).not.toBe('');
    expect(existsSync(cwd)).toBe(false);
    expect(repo.state()).toBe(stateBefore);
  });

  it("attack: a head that edits the reviewer to say CONFIRMED still gets the base reviewer's verdict", async () => {
    const outcome = await reviewWith([{ id: 'critic', args: ['refute'] }], { head: 'forger' });
    expect(outcome.verdict).toBe('REFUTED');
    expect(outcome.lanes[0]?.result?.findings[0]?.title).toBe('add is wrong');
    expect(evidenceText(outcome)).not.toContain('FORGED');
    expect(repo.state()).toBe(stateBefore);
  });

  it('passes exactly the provider variables a lane names in env', async () => {
    const outcome = await reviewWith([{ id: 'keyed', args: ['inspect'], env: ['OPENAI_API_KEY'] }]);
    expect(outcome.verdict).toBe('CONFIRMED');
    const env = JSON.parse(/env=(.*)/.exec(evidenceText(outcome))?.[1] ?? '{}') as Record<string, string>;
    expect(env.OPENAI_API_KEY).toBe(SECRETS.OPENAI_API_KEY);
    for (const name of ['GITHUB_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'PROOFGATE_GITHUB_APP_PRIVATE_KEY', 'PROOFGATE_DATA_DIR']) expect(env[name]).toBeUndefined();
  });

  it.each([['GITHUB_TOKEN'], ['GH_TOKEN'], ['PROOFGATE_WEBHOOK_SECRET'], ['GIT_ASKPASS'], ['PATH']])(
    'a lane naming %s in env is a CONFIG error, and nothing runs',
    async (name) => {
      const error = await reviewWith([{ id: 'greedy', args: ['ok'], env: [name] }]).then(
        () => null,
        (caught: unknown) => caught,
      );
      expect(isProofgateError(error, 'CONFIG')).toBe(true);
      expect((error as Error).message).toContain(`review.lanes[0].env[0]: ${name} cannot be passed to a lane`);
      expect(repo.state()).toBe(stateBefore);
    },
  );

  it('a REFUTED lane refutes the review with its findings', async () => {
    const outcome = await reviewWith([{ id: 'critic', args: ['refute'] }]);
    expect(outcome.verdict).toBe('REFUTED');
    expect(outcome.lanes[0]?.result?.findings[0]?.title).toBe('add is wrong');
  });

  it('hostile: writing into its snapshot of the head is refused or detected, never counted', async () => {
    const outcome = await reviewWith([{ id: 'writer', args: ['write-snapshot'] }]);
    const wrote = evidenceText(outcome).includes('wrote=yes');
    if (sandbox === 'jail') expect(wrote).toBe(false);
    if (wrote) expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'READ_ONLY_VIOLATED' });
    else expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(repo.state()).toBe(stateBefore);
  });

  it('hostile: a reviewer that replaces its copy of the diff is not counted (the copy no longer matches the bound digest)', async () => {
    const outcome = await reviewWith([{ id: 'tamper', args: ['tamper-diff'] }]);
    expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'MUTABLE_INPUT' });
    expect(outcome.verdict).toBe('HOLD');
    expect(repo.state()).toBe(stateBefore);
  });

  it.each([
    ['/etc/passwd', '/etc/passwd'],
    ['a file outside the job', 'OUTSIDE'],
    ['its own request, in the job but outside the evidence dir', '../request.json'],
  ])('hostile: evidence that is a symlink to %s is refused, and nothing is copied out', async (_what, target) => {
    const outside = join(scratch.dir, 'outside.txt');
    writeFileSync(outside, 'outside the evidence dir\n');
    const outcome = await reviewWith([{ id: 'linker', args: ['symlink-out', target === 'OUTSIDE' ? outside : target] }]);
    expect(outcome.lanes[0]?.validation).toMatchObject({ valid: false, code: 'EVIDENCE_OUTSIDE' });
    expect(outcome.verdict).toBe('HOLD');
    expect(readdirSync(outcome.lanes[0]?.request.evidence_dir ?? scratch.dir).filter((name) => name.startsWith('review-evidence-'))).toEqual([]);
    expect(readFileSync('/etc/passwd', 'utf8')).toMatch(/^root:/);
    expect(repo.state()).toBe(stateBefore);
  });

  it('hostile: printing megabytes is a transport failure (output too large)', async () => {
    const outcome = await reviewWith([{ id: 'loud', args: ['megabytes'] }]);
    expect(failureReason(outcome)).toMatch(/output too large/);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.verdict).toBe('HOLD');
  });

  it('hostile: never exiting times out and everything it started is killed', async () => {
    const marker = `pglane${process.pid}x${Math.random().toString(36).slice(2, 10)}`;
    const outcome = await reviewWith([{ id: 'stuck', args: ['hang', marker], timeoutSeconds: 1 }]);
    expect(failureReason(outcome)).toBe(`timed out after 1s; ${sandbox === 'jail' ? 'its jail and everything in it killed' : 'process group killed'}`);
    expect(outcome.lanes[0]?.result && 'disposition' in outcome.lanes[0].result).toBe(false);
    expect(outcome.verdict).toBe('HOLD');
    expect(survivors(marker)).toEqual([]);
  });

  it('hostile: a non-zero exit, output that is not JSON and a wrong nonce never count', async () => {
    const crash = await reviewWith([{ id: 'crash', args: ['exit-nonzero'] }]);
    expect(failureReason(crash)).toBe('reviewer exited with code 7: reviewer crashed');
    expect(crash.verdict).toBe('HOLD');
    const chatty = await reviewWith([{ id: 'chatty', args: ['not-json'] }]);
    expect(failureReason(chatty)).toBe('reviewer output is not JSON');
    expect(chatty.verdict).toBe('HOLD');
    const replay = await reviewWith([{ id: 'replay', args: ['wrong-nonce'] }]);
    expect(replay.lanes[0]?.validation).toMatchObject({ valid: false, code: 'NONCE_MISMATCH' });
    expect(replay.verdict).toBe('HOLD');
    expect(repo.state()).toBe(stateBefore);
  });

  it('multi-model needs two families: two command lanes of distinct families confirm', async () => {
    const one = await reviewWith(
      [
        { id: 'a', args: ['ok'], family: 'x' },
        { id: 'b', args: ['ok'], family: 'x' },
      ],
      { mode: 'multi-model' },
    );
    expect(one.verdict).toBe('HOLD');
    const two = await reviewWith(
      [
        { id: 'a', args: ['ok'], family: 'x' },
        { id: 'b', args: ['ok'], family: 'y' },
      ],
      { mode: 'multi-model' },
    );
    expect(two.verdict).toBe('CONFIRMED');
    expect(repo.state()).toBe(stateBefore);
  });
});

describe('command reviewer lanes in the jail', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((socket) => socket.end('hello\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("attack: cannot read proofgate's environment or data dir, the real repository, or reach the host network", async (test) => {
    if (skipJail !== null) test.skip(skipJail);
    const dataDir = join(repo.dir, '.git', 'proofgate');
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(join(dataDir, 'canary.txt'), 'data dir canary\n');
    const outcome = await reviewWith([{ id: 'snoop', args: ['snoop', dataDir, repo.dir, String(port)] }]);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    const text = evidenceText(outcome);
    for (const value of Object.values(SECRETS)) expect(text).not.toContain(value);
    // Nothing of the data dir is mounted, not even this lane's own evidence dir.
    expect(text).toMatch(/dataDir=failed:ENOENT/);
    expect(text).toMatch(/otherReviews=failed:ENOENT/);
    expect(text).not.toContain('data dir canary');
    expect(text).toMatch(/gitConfig=failed:ENOENT/);
    expect(text).toMatch(/net=failed:/);
    // /proc/1 inside is the jail's own first process: bubblewrap's minimal environment at most.
    for (const name of ['environ1', 'environParent']) expect(new RegExp(`${name}=(.*)`).exec(text)?.[1] ?? '').not.toMatch(/TOKEN|SECRET|KEY|PROOFGATE/);
    expect(repo.state()).toBe(stateBefore);
  });

  it('attack: cannot write the head snapshot, its own program or the real repository', async (test) => {
    if (skipJail !== null) test.skip(skipJail);
    for (const args of [['write-snapshot'], ['write-program']]) {
      const outcome = await reviewWith([{ id: 'writer', args }]);
      expect(evidenceText(outcome)).toMatch(/wrote=failed:EROFS/);
      expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
      expect(repo.state()).toBe(stateBefore);
    }
    // The repository's path is not mounted: whatever the program writes there lands in its own private /tmp, gone with the jail.
    const outcome = await reviewWith([{ id: 'writer', args: ['write-repo', repo.dir] }]);
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('# demo\n');
    expect(repo.state()).toBe(stateBefore);
  });

  it('works jailed when the repository and the data dir sit under a directory only root can search (0700)', async (test) => {
    if (skipJail !== null) test.skip(skipJail);
    const locked = mkdtempSync(join(tmpdir(), 'pg-locked-'));
    try {
      chmodSync(locked, 0o700);
      const inner = reviewedRepo(locked);
      const before = inner.state();
      expect(inner.dir.startsWith(`${locked}/`)).toBe(true);
      expect(statSync(locked).mode & 0o777).toBe(0o700);
      const outcome = await reviewWith([{ id: 'inspect', args: ['inspect'] }], { repoDir: inner.dir });
      expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
      expect(outcome.verdict).toBe('CONFIRMED');
      // proofgate copied the evidence out of the job into the lane's evidence dir, in the data dir under the locked parent.
      const evidence = outcome.lanes[0]?.result?.evidence_path ?? '';
      expect(evidence.startsWith(`${outcome.lanes[0]?.request.evidence_dir ?? '?'}/`)).toBe(true);
      expect(evidence.startsWith(`${locked}/`)).toBe(true);
      expect(statSync(evidence).uid).toBe(process.getuid?.());
      const text = evidenceText(outcome);
      expect(text).toContain(`reviewed ${outcome.head_sha}`);
      // The reviewer read the diff and the request from its job dir, never from the data dir.
      expect(text).toMatch(/diff-bytes=[1-9]/);
      expect(text).not.toContain(locked);
      expect(inner.state()).toBe(before);
    } finally {
      rmSync(locked, { recursive: true, force: true });
    }
  });
});

describe('command reviewer lanes without a working jail', () => {
  it('`proofgate review` ends with one JAIL_UNAVAILABLE error naming bubblewrap, exit 1, and records no verdict', async () => {
    const config = configFile([{ id: 'inspect', args: ['inspect'] }], 'fresh-context', true);
    const data = mkdtempSync(join(scratch.dir, 'data-'));
    // The seam in src/host/jail/status.ts: a bwrap that is not there is a machine without a working jail.
    const env = { PROOFGATE_BWRAP: join(scratch.dir, 'no-such-bwrap') };
    const run = await runCliAsync(['review', '--repo', repo.dir, '--base', 'main', '--head', 'feature', '--config', config, '--data', data], { env });
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    const errors = run.stderr.split('\n').filter((line) => line !== '');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^proofgate: .*bubblewrap.*\[JAIL_UNAVAILABLE\]$/);
    for (const review of readdirSync(join(data, 'reviews'))) expect(existsSync(join(data, 'reviews', review, 'review.json'))).toBe(false);
    const runs = await runCliAsync(['runs', 'list', '--namespace', 'reviews', '--data', data]);
    expect(runs.stdout).toMatch(/\bfailed\b/);
    expect(runs.stdout).not.toMatch(/\bcomplete\b/);
    expect(repo.state()).toBe(stateBefore);
  });
});
