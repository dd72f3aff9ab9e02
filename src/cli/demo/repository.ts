/**
 * The demo repository: a small JavaScript project on `main` with a trusted
 * `.proofgate.yml` (two checks, the builtin reviewers, a proof scenario, a
 * gate and an agent-fix formatter), and six branches, each one a change that
 * shows one path of the automerge loop.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { gitText, type SandboxMode } from '../../host/index.js';

export const DEMO_MAINTAINER = 'Demo Maintainer';
export const DEMO_CONTRIBUTOR = 'Casey Contributor';

export interface DemoChange {
  readonly branch: string;
  readonly title: string;
  /** What the demo expects the loop to end with. */
  readonly expect: 'merged' | 'blocked';
  /** The change's files (null: the change deletes it). */
  readonly files: Readonly<Record<string, string | null>>;
  /** What the maintainer comments (default `/proofgate automerge`). */
  readonly comment?: string;
}

/**
 * The trusted configuration. The demo runs its checks jailed; only on a
 * machine where the jail does not work does it say `sandbox: none` (and the
 * demo prints that it ran unjailed).
 */
function demoConfig(sandbox: SandboxMode): string {
  const policy = sandbox === 'none' ? '# The jail (bubblewrap) does not work on this machine: run checks unjailed.\nsandbox: none\n' : '';
  return `# Trusted configuration: read from main, never from a change.
${policy}maintainers:
  - login: ${DEMO_MAINTAINER}
    permission: admin
checks:
  - name: lint
    run: node scripts/lint.mjs
    timeoutSeconds: 60
  - name: test
    run: node scripts/test.mjs
    timeoutSeconds: 60
review:
  mode: fresh-context
  lanes:
    - id: rules
      builtin: rules
    - id: tests
      builtin: tests
    - id: proof
      builtin: proof
proof:
  scenarios:
    - id: greet-contract
      description: calls the head's greet() on sample names and compares what it returns with the contract
      producer: { kind: local, command: [node, scripts/prove-greet.mjs] }
      timeoutSeconds: 60
      evidence: { requiredFiles: [expectations.json] }
automerge:
  gate: [node, scripts/lint.mjs]
  agentFix:
    command: [node, scripts/fix-whitespace.mjs]
`;
}

const LINT = `// Fails on trailing whitespace or tabs in src/ and test/.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
let problems = 0;
for (const dir of ['src', 'test']) {
  for (const name of readdirSync(dir)) {
    readFileSync(join(dir, name), 'utf8').split('\\n').forEach((line, index) => {
      if (/[ \\t]+$/.test(line) || line.includes('\\t')) {
        console.error(\`\${dir}/\${name}:\${index + 1}: trailing whitespace or tab\`);
        problems += 1;
      }
    });
  }
}
if (problems > 0) process.exit(1);
console.log('lint: clean');
`;

const FIX = `// The agent-fix program of the demo: a formatter that removes trailing whitespace and tabs.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
for (const dir of ['src', 'test']) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const text = readFileSync(path, 'utf8');
    const fixed = text.split('\\n').map((line) => line.replace(/\\t/g, '  ').replace(/[ \\t]+$/, '')).join('\\n');
    if (fixed !== text) writeFileSync(path, fixed);
  }
}
`;

const TEST_RUNNER = `// Runs every test/*.test.mjs file.
import { readdirSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join, resolve } from 'node:path';
for (const name of readdirSync('test').filter((n) => n.endsWith('.test.mjs')).sort()) {
  await import(pathToFileURL(resolve(join('test', name))).href);
  console.log(\`ok \${name}\`);
}
`;

// The proof scenario, from main: it runs the head's greet() (in its own process, jailed) and writes what it returned
// next to what the contract says, for the reviewer to judge. Whatever the head's code does, the expectations are main's.
const PROVE = `// Proof scenario greet-contract: greet(name) must return "Hello, <name>!".
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const plan = JSON.parse(readFileSync(process.env.PROOFGATE_PROOF_PLAN, 'utf8'));
const head = process.env.PROOFGATE_HEAD_DIR;
const names = ['Ada', 'Grace', 'Linus'];
const probe = "import('./src/greet.mjs').then((m) => process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]).map((n) => m.greet(n)))))";
const actual = JSON.parse(execFileSync(process.execPath, ['-e', probe, JSON.stringify(names)], { cwd: head, encoding: 'utf8' }));
const expectations = names.map((name, index) => ({ name: \`greet(\${JSON.stringify(name)})\`, expected: \`Hello, \${name}!\`, actual: actual[index] }));
writeFileSync(join(process.env.PROOFGATE_PROOF_OUTPUT, 'expectations.json'), JSON.stringify(expectations, null, 2) + '\\n');
writeFileSync(join(process.env.PROOFGATE_PROOF_OUTPUT, 'plan.json'), JSON.stringify(plan) + '\\n');
`;

export function baseFiles(sandbox: SandboxMode): Readonly<Record<string, string>> {
  return {
    'README.md': '# greeter\n\nA tiny library used by the proofgate demo.\n',
    'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n- first release\n',
    'src/greet.mjs': 'export function greet(name) {\n  return `Hello, ${name}!`;\n}\n',
    'test/greet.test.mjs': "import assert from 'node:assert/strict';\nimport { greet } from '../src/greet.mjs';\nassert.equal(greet('Ada'), 'Hello, Ada!');\n",
    'scripts/lint.mjs': LINT,
    'scripts/test.mjs': TEST_RUNNER,
    'scripts/fix-whitespace.mjs': FIX,
    'scripts/prove-greet.mjs': PROVE,
    '.proofgate.yml': demoConfig(sandbox),
  };
}

export const DEMO_CHANGES: readonly DemoChange[] = [
  {
    branch: 'clean-shout',
    title: 'Add shout()',
    expect: 'merged',
    files: {
      'src/shout.mjs': 'export function shout(text) {\n  return text.toUpperCase();\n}\n',
      'test/shout.test.mjs': "import assert from 'node:assert/strict';\nimport { shout } from '../src/shout.mjs';\nassert.equal(shout('hi'), 'HI');\n",
      'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n- first release\n- add shout()\n',
    },
  },
  {
    branch: 'docs-usage',
    title: 'Document usage (CHANGELOG conflict, needs a rebase)',
    expect: 'merged',
    files: {
      'docs/usage.md': '# Usage\n\n```js\nimport { greet } from "greeter";\n```\n',
      'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n- first release\n- document usage\n',
    },
  },
  {
    branch: 'whisper-lint',
    title: 'Add whisper() (fails lint: trailing whitespace)',
    expect: 'merged',
    files: {
      'src/whisper.mjs': 'export function whisper(text) {   \n  return text.toLowerCase();\t\n}\n',
      'test/whisper.test.mjs': "import assert from 'node:assert/strict';\nimport { whisper } from '../src/whisper.mjs';\nassert.equal(whisper('HI'), 'hi');\n",
    },
  },
  {
    branch: 'deploy-key',
    title: 'Add deploy settings (a secret in the diff)',
    expect: 'blocked',
    files: {
      // A made-up access key id, assembled so that scanners of proofgate's own source do not flag this file.
      'deploy/settings.env': `REGION=eu-west-1\nAWS_ACCESS_KEY_ID=${['AKIA', 'Q3EGRDEMOKEY7XYZ'].join('')}\n`,
    },
  },
  {
    branch: 'greet-move',
    title: 'Move greet() into src/greetings/ (asks for proof: inconclusive)',
    expect: 'blocked',
    comment: '@proofgate proof\n/proofgate automerge',
    files: {
      // Its own tests pass (they import the new path), but the scenario on main calls src/greet.mjs, which is gone:
      // the scenario cannot run, the proof is inconclusive, and the change waits for a human.
      'src/greet.mjs': null,
      'src/greetings/index.mjs': 'export function greet(name) {\n  return `Hello, ${name}!`;\n}\n',
      'test/greet.test.mjs':
        "import assert from 'node:assert/strict';\nimport { greet } from '../src/greetings/index.mjs';\nassert.equal(greet('Ada'), 'Hello, Ada!');\n",
    },
  },
  {
    branch: 'greet-trim',
    title: 'Trim names in greet() (asks for proof: proven)',
    expect: 'merged',
    comment: '@proofgate proof greet-contract\n/proofgate automerge',
    files: {
      'src/greet.mjs': 'export function greet(name) {\n  return `Hello, ${String(name).trim()}!`;\n}\n',
      'test/greet.test.mjs':
        "import assert from 'node:assert/strict';\nimport { greet } from '../src/greet.mjs';\nassert.equal(greet('Ada'), 'Hello, Ada!');\nassert.equal(greet(' Ada '), 'Hello, Ada!');\n",
    },
  },
];

export function git(dir: string, args: readonly string[]): Promise<string> {
  return gitText(dir, args);
}

async function writeFiles(dir: string, files: Readonly<Record<string, string | null>>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    if (content === null) {
      await rm(join(dir, path));
      continue;
    }
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

/** Create the demo repository in `dir` (empty or missing): main plus one branch per demo change. */
export async function createDemoRepository(dir: string, sandbox: SandboxMode): Promise<void> {
  await mkdir(dir, { recursive: true });
  await git(dir, ['init', '-q', '-b', 'main']);
  await git(dir, ['config', 'user.name', DEMO_MAINTAINER]);
  await git(dir, ['config', 'user.email', 'maintainer@demo.invalid']);
  await git(dir, ['config', 'commit.gpgsign', 'false']);
  await writeFiles(dir, baseFiles(sandbox));
  await git(dir, ['add', '-A']);
  await git(dir, ['commit', '-q', '-m', 'greeter: initial commit']);
  for (const change of DEMO_CHANGES) {
    await git(dir, ['checkout', '-q', '-b', change.branch, 'main']);
    await writeFiles(dir, change.files);
    await git(dir, ['add', '-A']);
    await git(dir, ['-c', `user.name=${DEMO_CONTRIBUTOR}`, '-c', 'user.email=casey@demo.invalid', 'commit', '-q', '-m', change.title]);
  }
  await git(dir, ['checkout', '-q', 'main']);
}
