import { describe, expect, it } from 'vitest';
import { repositoryPathOf, trustedCommandPaths, trustedPathsTouched } from '../../src/automerge/index.js';
import { parseRepoConfig, type RepoConfig } from '../../src/contracts/repo-config.js';

const config: RepoConfig = parseRepoConfig(
  {
    checks: [
      { name: 'unit', run: 'npm test' },
      { name: 'script', run: 'node check.mjs && sh ./scripts/lint.sh --config=tools/lint.json' },
      { name: 'argv', run: ['python3', 'ci/run.py'] },
    ],
    review: {
      acceptanceContract: 'docs/ACCEPTANCE.md',
      lanes: [
        { id: 'llm', command: ['node', 'tools/review/lane.mjs', '--model', 'x'] },
        { id: 'rules', builtin: 'rules' },
      ],
    },
    automerge: { gate: ['npm', 'run', 'gate'], agentFix: { command: ['./fixer/run'] } },
    trustedPaths: ['policies/**', '*.lock'],
  },
  'test',
);

describe('repositoryPathOf: which command tokens name repository paths', () => {
  const rows: [string, string | null][] = [
    ['tools/review.mjs', 'tools/review.mjs'],
    ['./tools/review.mjs', 'tools/review.mjs'],
    ['check.mjs', 'check.mjs'],
    ['--config=tools/lint.json', 'tools/lint.json'],
    ['scripts/', 'scripts/'],
    ['node', null],
    ['npm', null],
    ['test', null],
    ['--model', null],
    ['/usr/bin/node', null],
    ['../outside.sh', null],
    ['tools/../x.sh', null],
    ['$HOME/x.sh', null],
    ['~/x.sh', null],
    ['', null],
  ];
  it.each(rows)('%j -> %j', (token, path) => {
    expect(repositoryPathOf(token)).toBe(path);
  });
});

describe('trustedCommandPaths', () => {
  it('collects files and their directories from lanes, checks, the gate and agent-fix', () => {
    expect(trustedCommandPaths(config)).toEqual({
      files: ['check.mjs', 'ci/run.py', 'fixer/run', 'scripts/lint.sh', 'tools/lint.json', 'tools/review/lane.mjs'],
      directories: ['ci/', 'fixer/', 'scripts/', 'tools/', 'tools/review/'],
    });
  });
});

describe('trustedPathsTouched: the trust rule', () => {
  const rows: [string, string[], string[]][] = [
    ['an ordinary change touches nothing trusted', ['src/feature.ts', 'README.md', 'test/feature.test.ts'], []],
    ['the trusted config', ['.proofgate.yml', 'src/a.ts'], ['.proofgate.yml']],
    ['a config of the same name elsewhere is not it', ['sub/.proofgate.yml'], []],
    ['a producer workflow', ['.github/workflows/ci.yml'], ['.github/workflows/ci.yml']],
    ['the acceptance contract', ['docs/ACCEPTANCE.md', 'docs/other.md'], ['docs/ACCEPTANCE.md']],
    ['a command lane script', ['tools/review/lane.mjs'], ['tools/review/lane.mjs']],
    ['a module next to a lane script', ['tools/review/prompt.txt'], ['tools/review/prompt.txt']],
    ['a check script at the top level', ['check.mjs'], ['check.mjs']],
    ['a file beside a top-level check script is not covered', ['lib.mjs'], []],
    ['a check script named with ./ in a shell line', ['scripts/lint.sh'], ['scripts/lint.sh']],
    ['a --flag=path argument', ['tools/lint.json'], ['tools/lint.json']],
    ['an argv check program', ['ci/run.py', 'ci/helpers.py'], ['ci/helpers.py', 'ci/run.py']],
    ['the agent-fix program', ['fixer/run'], ['fixer/run']],
    ['a trustedPaths glob', ['policies/deep/rule.rego'], ['policies/deep/rule.rego']],
    ['a trustedPaths glob matches dot files', ['policies/.hidden'], ['policies/.hidden']],
    ['a trustedPaths glob matches a path with a newline', ['policies/a\nb.rego'], ['policies/a\nb.rego']],
    ['a top-level glob', ['yarn.lock', 'sub/yarn.lock'], ['yarn.lock']],
    ['each path once, sorted', ['tools/x.mjs', '.proofgate.yml', 'tools/x.mjs'], ['.proofgate.yml', 'tools/x.mjs']],
  ];
  it.each(rows)('%s', (_name, changed, touched) => {
    expect(trustedPathsTouched(changed, config)).toEqual(touched);
  });

  it('without a config file only the config path and workflows are trusted', () => {
    const empty = parseRepoConfig({}, 'empty');
    expect(trustedPathsTouched(['.proofgate.yml', '.github/workflows/a.yml', 'check.mjs', 'tools/x.mjs'], empty)).toEqual([
      '.github/workflows/a.yml',
      '.proofgate.yml',
    ]);
  });
});
