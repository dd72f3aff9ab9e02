import { describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import {
  emptyRepoConfig,
  formatSchemaIssues,
  loadRepoConfigAt,
  maintainerPermission,
  parseRepoConfigYaml,
  repoConfigSchema,
  type ReadFileAtRef,
} from '../../src/contracts/repo-config.js';

const SOURCE = 'main:.proofgate.yml';

function configError(text: string): string {
  try {
    parseRepoConfigYaml(text, SOURCE);
  } catch (error) {
    if (isProofgateError(error, 'CONFIG')) return error.message;
    throw error;
  }
  throw new Error('expected a CONFIG error');
}

describe('.proofgate.yml schema', () => {
  it('gives defaults for an empty file', () => {
    expect(parseRepoConfigYaml('', SOURCE)).toEqual({ checks: [], maintainers: [], requireUpToDate: false, sandbox: 'jail' });
  });

  it('reads the jail policy and refuses a bad one', () => {
    const config = parseRepoConfigYaml(
      'sandbox: none\ncacheDir: /var/cache/ci\nlimits: { processes: 64 }\nchecks:\n  - { name: net, run: "true", network: true, git: true }\n',
      SOURCE,
    );
    expect(config).toMatchObject({ sandbox: 'none', cacheDir: '/var/cache/ci', limits: { processes: 64 }, checks: [{ network: true, git: true }] });
    expect(() => parseRepoConfigYaml('sandbox: off\n', SOURCE)).toThrow(/sandbox/);
    expect(() => parseRepoConfigYaml('cacheDir: cache\n', SOURCE)).toThrow(/cacheDir: must be an absolute path/);
    expect(() => parseRepoConfigYaml('limits: { disk: 1 }\n', SOURCE)).toThrow(/unknown key limits.disk/);
  });

  it('reads a full configuration', () => {
    const text = [
      'checks:',
      '  - name: lint',
      '    run: npm run lint',
      '  - name: test',
      '    run: [npm, test]',
      '    timeoutSeconds: 120',
      'maintainers:',
      '  - alice',
      '  - { login: bob, permission: admin }',
      'requireUpToDate: true',
      'review:',
      '  lanes:',
      '    - { id: rules, builtin: rules }',
      'automerge:',
      '  ignoredChecks: [Labeler]',
      '  maxRepairsPerChange: 3',
      '  maxRepairsPerHead: 1',
      '  shepherdWaitMs: 600000',
      '  shepherdPollMs: 15000',
      '  transientWaitMs: 600000',
      '  transientPollMs: 15000',
      '  gate: [npm, run, gate]',
      '  agentFix: { command: [fixer, --apply] }',
      '',
    ].join('\n');
    const config = parseRepoConfigYaml(text, SOURCE);
    expect(config.checks).toEqual([
      { name: 'lint', run: 'npm run lint', timeoutSeconds: 600, network: false, git: false },
      { name: 'test', run: ['npm', 'test'], timeoutSeconds: 120, network: false, git: false },
    ]);
    expect(config.requireUpToDate).toBe(true);
    expect(config.review?.mode).toBe('fresh-context');
    expect(config.automerge?.agentFix?.command).toEqual(['fixer', '--apply']);
    expect(maintainerPermission(config, 'alice')).toBe('write');
    expect(maintainerPermission(config, 'bob')).toBe('admin');
    expect(maintainerPermission(config, 'carol')).toBeNull();
  });

  const bad: Array<[string, string, string]> = [
    ['unknown top-level key', 'chekcs: []\n', 'unknown key chekcs'],
    ['unknown automerge key', 'automerge:\n  maxRepairs: 2\n', 'unknown key automerge.maxRepairs'],
    ['unknown agentFix key', 'automerge:\n  agentFix: { command: [x], shell: true }\n', 'unknown key automerge.agentFix.shell'],
    ['negative cap', 'automerge:\n  maxRepairsPerHead: -1\n', 'automerge.maxRepairsPerHead:'],
    ['zero poll interval', 'automerge:\n  shepherdPollMs: 0\n', 'automerge.shepherdPollMs:'],
    ['gate as a string', 'automerge:\n  gate: make gate\n', 'automerge.gate:'],
    ['empty agentFix command', 'automerge:\n  agentFix: { command: [] }\n', 'automerge.agentFix.command:'],
    ['check without run', 'checks:\n  - name: lint\n', 'checks[0].run: is required'],
    ['check timeout not a number', 'checks:\n  - { name: lint, run: x, timeoutSeconds: soon }\n', 'checks[0].timeoutSeconds:'],
    ['duplicate check names', 'checks:\n  - { name: a, run: x }\n  - { name: a, run: y }\n', 'checks[1].name: duplicate check name "a"'],
    ['bad maintainer permission', 'maintainers:\n  - { login: bob, permission: owner }\n', 'maintainers[0].permission:'],
    ['unknown maintainer key', 'maintainers:\n  - { login: bob, role: admin }\n', 'unknown key maintainers[0].role'],
    ['requireUpToDate as a string', 'requireUpToDate: "yes"\n', 'requireUpToDate:'],
    ['bad review lane', 'review:\n  lanes:\n    - { id: x }\n', 'review.lanes[0]'],
    ['top level list', '- a\n- b\n', 'the top level must be a mapping'],
    ['not YAML', 'checks: [\n', 'not valid YAML'],
    ['duplicate YAML key', 'requireUpToDate: true\nrequireUpToDate: false\n', 'not valid YAML'],
  ];

  it.each(bad)('refuses %s with one CONFIG error naming the key path', (_name, text, expected) => {
    const message = configError(text);
    expect(message.startsWith(`${SOURCE}: `)).toBe(true);
    expect(message).toContain(expected);
    expect(message).not.toContain('\n');
  });
});

describe('formatSchemaIssues: the one formatter of configuration errors', () => {
  it('names every bad key path on one line, and counts what it does not spell out', () => {
    const parsed = repoConfigSchema.safeParse({
      requireUpToDate: 'yes',
      sandbox: 'off',
      chekcs: [],
      review: { lanes: [{ id: 'a', builtin: 'rules' }], transportRetries: 11 },
    });
    expect(parsed.success).toBe(false);
    const text = parsed.success ? '' : formatSchemaIssues(parsed.error.issues);
    expect(text).toContain('unknown key chekcs');
    expect(text).toContain('requireUpToDate: expected boolean');
    expect(text).toContain('review.transportRetries: expected an integer from 0 to 10');
    expect(text.split('; ')).toHaveLength(4);
    const many = repoConfigSchema.safeParse({ checks: Array.from({ length: 7 }, () => ({ name: 'x' })) });
    expect(many.success ? '' : formatSchemaIssues(many.error.issues)).toMatch(/^checks\[0\]\.run: is required; .* \(and \d+ more\)$/);
  });

  it('quotes a key that is not a plain word, so a key with a newline stays on one line', () => {
    const message = configError('"bad\\nkey": 1\n');
    expect(message).toBe(`${SOURCE}: unknown key ["bad\\nkey"]`);
  });
});

describe('loadRepoConfigAt: the one trusted-config loader', () => {
  function reader(files: Record<string, string>): { read: ReadFileAtRef; asked: string[] } {
    const asked: string[] = [];
    return {
      asked,
      read: (ref, path) => {
        asked.push(`${ref}:${path}`);
        const text = files[`${ref}:${path}`];
        return Promise.resolve(text === undefined ? null : new TextEncoder().encode(text));
      },
    };
  }

  it('reads .proofgate.yml at the given ref only, and names it by its label', async () => {
    const { read, asked } = reader({ 'abc123:.proofgate.yml': 'requireUpToDate: true\n', 'head:.proofgate.yml': 'checks: []\n' });
    const loaded = await loadRepoConfigAt(read, 'abc123', 'main');
    expect(loaded.source).toBe('main:.proofgate.yml');
    expect(loaded.config.requireUpToDate).toBe(true);
    expect(asked).toEqual(['abc123:.proofgate.yml']);
  });

  it('gives the empty configuration (source null) when the ref has no file', async () => {
    const loaded = await loadRepoConfigAt(reader({}).read, 'refs/heads/main');
    expect(loaded).toEqual({ config: emptyRepoConfig(), source: null });
  });

  it('refuses a malformed file with one CONFIG error naming the label and the key path', async () => {
    const { read } = reader({ 'abc123:.proofgate.yml': 'review:\n  transportRetries: -1\n  lanes: [{ id: a, builtin: rules }]\n' });
    await expect(loadRepoConfigAt(read, 'abc123', 'main@abc123')).rejects.toMatchObject({
      code: 'CONFIG',
      message: 'main@abc123:.proofgate.yml: review.transportRetries: expected an integer from 0 to 10',
    });
  });
});
