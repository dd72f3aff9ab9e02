import { describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import {
  DEFAULT_EVIDENCE_MAX_BYTES,
  DEFAULT_EVIDENCE_MAX_ENTRIES,
  emptyRepoConfig,
  isBranchName,
  isSafeEvidencePath,
  parseRepoConfig,
  parseRepoConfigYaml,
} from '../../src/contracts/repo-config.js';
import { findScenario, isScenarioId, noProofSettings, proofSettingsOf } from '../../src/proof/scenarios.js';

const SOURCE = 'main:.proofgate.yml';

const LOCAL = { kind: 'local', command: ['node', 'proof/web.mjs'] };
const WORKFLOW = { kind: 'github-workflow', workflow: '.github/workflows/proof.yml', artifact: 'evidence' };

function scenario(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: 'web-chat', description: 'Sends a chat message and reads the reply', producer: LOCAL, timeoutSeconds: 300, ...overrides };
}

function configError(value: unknown): string {
  try {
    parseRepoConfig(value, SOURCE);
  } catch (error) {
    if (isProofgateError(error, 'CONFIG')) return error.message;
    throw error;
  }
  throw new Error('expected a CONFIG error');
}

describe('the proof: section of .proofgate.yml', () => {
  it('leaves the empty configuration as it was: no proof key, and the defaults when asked', () => {
    expect('proof' in emptyRepoConfig()).toBe(false);
    expect(proofSettingsOf(emptyRepoConfig(), { branch: 'main', config: emptyRepoConfig() })).toEqual(noProofSettings());
    expect(noProofSettings()).toEqual({ scenarios: [], ceilingSeconds: 1200, reserveSeconds: 90 });
    expect(parseRepoConfig({ proof: {} }, SOURCE).proof).toEqual({ scenarios: [], ceilingSeconds: 1200, reserveSeconds: 90 });
  });

  it('reads both producers from YAML and fills the evidence defaults', () => {
    const text = [
      'proof:',
      '  ceilingSeconds: 900',
      '  reserveSeconds: 60',
      '  scenarios:',
      '    - id: web-chat',
      '      description: Sends a chat message and reads the reply',
      '      producer: { kind: local, command: [node, proof/web.mjs] }',
      '      timeoutSeconds: 300',
      '    - id: bot_e2e',
      '      description: Runs the bot plan',
      '      producer:',
      '        kind: github-workflow',
      '        workflow: .github/workflows/proof-bot.yaml',
      '        ref: release',
      '        artifact: bot-evidence',
      '      timeoutSeconds: 900',
      '      evidence: { requiredFiles: [observations/reply.json, screen.png], maxBytes: 1048576, maxEntries: 8 }',
      'protectedBranches: [main, release]',
      '',
    ].join('\n');
    const config = parseRepoConfigYaml(text, SOURCE);
    expect(config.proof?.scenarios[0]?.evidence).toEqual({ requiredFiles: [], maxBytes: DEFAULT_EVIDENCE_MAX_BYTES, maxEntries: DEFAULT_EVIDENCE_MAX_ENTRIES });
    const settings = proofSettingsOf(config, { branch: 'main', config });
    expect(settings).toEqual({
      ceilingSeconds: 900,
      reserveSeconds: 60,
      scenarios: [
        {
          id: 'web-chat',
          description: 'Sends a chat message and reads the reply',
          producer: { kind: 'local', command: ['node', 'proof/web.mjs'] },
          timeoutSeconds: 300,
          evidence: { requiredFiles: [], maxBytes: DEFAULT_EVIDENCE_MAX_BYTES, maxEntries: DEFAULT_EVIDENCE_MAX_ENTRIES },
        },
        {
          id: 'bot_e2e',
          description: 'Runs the bot plan',
          producer: { kind: 'github-workflow', workflow: '.github/workflows/proof-bot.yaml', ref: 'release', artifact: 'bot-evidence' },
          timeoutSeconds: 900,
          evidence: { requiredFiles: ['observations/reply.json', 'screen.png'], maxBytes: 1048576, maxEntries: 8 },
        },
      ],
    });
    expect(findScenario(settings.scenarios, 'bot_e2e')?.timeoutSeconds).toBe(900);
    expect(findScenario(settings.scenarios, 'BOT_E2E')).toBeNull();
  });

  it('binds a workflow producer to the trusted branch when it names none, and refuses a branch that is not protected', () => {
    const trusted = { branch: 'trunk', config: parseRepoConfig({ protectedBranches: ['release'] }, SOURCE) };
    const config = parseRepoConfig({ proof: { scenarios: [scenario({ producer: WORKFLOW })] } }, SOURCE);
    expect(proofSettingsOf(config, trusted).scenarios[0]?.producer).toEqual({ ...WORKFLOW, ref: 'trunk' });
    const release = parseRepoConfig({ proof: { scenarios: [scenario({ producer: { ...WORKFLOW, ref: 'release' } })] } }, SOURCE);
    expect(proofSettingsOf(release, trusted).scenarios[0]?.producer).toMatchObject({ ref: 'release' });
    // A base config cannot make its own branch list: only the trusted branch's protectedBranches count.
    const feature = parseRepoConfig(
      { protectedBranches: ['main', 'feature/x'], proof: { scenarios: [scenario(), scenario({ id: 'bot', producer: { ...WORKFLOW, ref: 'feature/x' } })] } },
      SOURCE,
    );
    const message = (() => {
      try {
        proofSettingsOf(feature, { branch: 'main', config: emptyRepoConfig() }, 'release:.proofgate.yml');
      } catch (error) {
        if (isProofgateError(error, 'CONFIG')) return error.message;
        throw error;
      }
      return 'no error';
    })();
    expect(message).toBe(
      'release:.proofgate.yml: proof.scenarios[1].producer.ref: "feature/x" is not a protected branch (main); a producer workflow runs from trusted code only',
    );
  });

  const longId = 'a'.repeat(48);
  const valid: [string, Record<string, unknown>][] = [
    ['a 48-character id', { scenarios: [scenario({ id: longId })] }],
    ['a timeout equal to the ceiling', { ceilingSeconds: 600, scenarios: [scenario({ timeoutSeconds: 600 })] }],
    ['a zero reserve', { reserveSeconds: 0 }],
    ['nested required files', { scenarios: [scenario({ evidence: { requiredFiles: ['a/b/c.json', 'screens/1.png'] } })] }],
    [
      'a .yaml workflow on a branch with slashes',
      { scenarios: [scenario({ producer: { ...WORKFLOW, workflow: '.github/workflows/p.yaml', ref: 'release/1.x' } })] },
    ],
  ];
  it.each(valid)('accepts %s', (_name, proof) => {
    expect(() => parseRepoConfig({ proof, protectedBranches: ['main', 'release/1.x'] }, SOURCE)).not.toThrow();
  });

  const bad: [string, unknown, string | RegExp][] = [
    ['an id with path characters', { scenarios: [scenario({ id: '../etc' })] }, 'proof.scenarios[0].id: expected a scenario id'],
    ['an id with a slash', { scenarios: [scenario({ id: 'a/b' })] }, 'proof.scenarios[0].id: expected a scenario id'],
    ['an id with a dot', { scenarios: [scenario({ id: 'web.chat' })] }, 'proof.scenarios[0].id: expected a scenario id'],
    ['an id in upper case', { scenarios: [scenario({ id: 'Web' })] }, 'proof.scenarios[0].id: expected a scenario id'],
    ['an id starting with a dash', { scenarios: [scenario({ id: '-web' })] }, 'proof.scenarios[0].id: expected a scenario id'],
    ['an id with a NUL', { scenarios: [scenario({ id: 'web\0' })] }, 'proof.scenarios[0].id: expected a scenario id'],
    ['an id of 49 characters', { scenarios: [scenario({ id: `${longId}a` })] }, 'proof.scenarios[0].id: expected a scenario id'],
    ['two scenarios with one id', { scenarios: [scenario(), scenario()] }, 'proof.scenarios[1].id: duplicate scenario id "web-chat"'],
    ['a missing timeout', { scenarios: [scenario({ timeoutSeconds: undefined })] }, 'proof.scenarios[0].timeoutSeconds: is required'],
    ['a zero timeout', { scenarios: [scenario({ timeoutSeconds: 0 })] }, 'proof.scenarios[0].timeoutSeconds: expected an integer from 1 to 86400'],
    ['a negative timeout', { scenarios: [scenario({ timeoutSeconds: -5 })] }, 'proof.scenarios[0].timeoutSeconds: expected an integer from 1 to 86400'],
    ['a fractional timeout', { scenarios: [scenario({ timeoutSeconds: 1.5 })] }, 'proof.scenarios[0].timeoutSeconds: expected an integer from 1 to 86400'],
    [
      'a timeout over the default ceiling',
      { scenarios: [scenario({ timeoutSeconds: 1201 })] },
      'proof.scenarios[0].timeoutSeconds: 1201 is more than proof.ceilingSeconds (1200)',
    ],
    [
      'a timeout over a set ceiling',
      { ceilingSeconds: 60, scenarios: [scenario({ timeoutSeconds: 61 })] },
      'proof.scenarios[0].timeoutSeconds: 61 is more than proof.ceilingSeconds (60)',
    ],
    ['a missing description', { scenarios: [scenario({ description: undefined })] }, 'proof.scenarios[0].description: is required'],
    ['a blank description', { scenarios: [scenario({ description: '   ' })] }, /^main:\.proofgate\.yml: proof\.scenarios\[0\]\.description: /],
    [
      'an unknown producer kind',
      { scenarios: [scenario({ producer: { kind: 'shell', command: ['sh'] } })] },
      'proof.scenarios[0].producer.kind: expected kind local or github-workflow',
    ],
    ['a producer that is a string', { scenarios: [scenario({ producer: 'local' })] }, 'proof.scenarios[0].producer: expected kind local or github-workflow'],
    ['a local producer without a command', { scenarios: [scenario({ producer: { kind: 'local' } })] }, 'proof.scenarios[0].producer.command: is required'],
    [
      'a local producer with an empty argv',
      { scenarios: [scenario({ producer: { kind: 'local', command: [] } })] },
      /^main:\.proofgate\.yml: proof\.scenarios\[0\]\.producer\.command: /,
    ],
    [
      'a command holding a NUL',
      { scenarios: [scenario({ producer: { kind: 'local', command: ['a\0b'] } })] },
      'proof.scenarios[0].producer.command[0]: must not hold a NUL character',
    ],
    [
      'a local producer with a workflow key',
      { scenarios: [scenario({ producer: { ...LOCAL, workflow: 'x' } })] },
      'unknown key proof.scenarios[0].producer.workflow',
    ],
    [
      'a workflow outside .github/workflows',
      { scenarios: [scenario({ producer: { ...WORKFLOW, workflow: 'ci/proof.yml' } })] },
      'proof.scenarios[0].producer.workflow: expected a file .github/workflows/<name>.yml',
    ],
    [
      'a workflow path that climbs',
      { scenarios: [scenario({ producer: { ...WORKFLOW, workflow: '.github/workflows/../../x.yml' } })] },
      'proof.scenarios[0].producer.workflow: expected a file',
    ],
    [
      'a workflow that is not YAML',
      { scenarios: [scenario({ producer: { ...WORKFLOW, workflow: '.github/workflows/x.sh' } })] },
      'proof.scenarios[0].producer.workflow: expected a file',
    ],
    ['a ref with ..', { scenarios: [scenario({ producer: { ...WORKFLOW, ref: 'a..b' } })] }, 'proof.scenarios[0].producer.ref: expected a branch name'],
    [
      'a ref that is an option',
      { scenarios: [scenario({ producer: { ...WORKFLOW, ref: '-main' } })] },
      'proof.scenarios[0].producer.ref: expected a branch name',
    ],
    [
      'a ref with a space',
      { scenarios: [scenario({ producer: { ...WORKFLOW, ref: 'my branch' } })] },
      'proof.scenarios[0].producer.ref: expected a branch name',
    ],
    [
      'a ref ending in .lock',
      { scenarios: [scenario({ producer: { ...WORKFLOW, ref: 'main.lock' } })] },
      'proof.scenarios[0].producer.ref: expected a branch name',
    ],
    [
      'an artifact name with a slash',
      { scenarios: [scenario({ producer: { ...WORKFLOW, artifact: 'a/b' } })] },
      'proof.scenarios[0].producer.artifact: expected an artifact name',
    ],
    [
      'a workflow producer without an artifact',
      { scenarios: [scenario({ producer: { kind: 'github-workflow', workflow: WORKFLOW.workflow } })] },
      'proof.scenarios[0].producer.artifact: is required',
    ],
    [
      'a required file that climbs',
      { scenarios: [scenario({ evidence: { requiredFiles: ['../secret'] } })] },
      'proof.scenarios[0].evidence.requiredFiles[0]: expected a relative path',
    ],
    [
      'an absolute required file',
      { scenarios: [scenario({ evidence: { requiredFiles: ['/etc/passwd'] } })] },
      'proof.scenarios[0].evidence.requiredFiles[0]: expected a relative path',
    ],
    [
      'a required file with a backslash',
      { scenarios: [scenario({ evidence: { requiredFiles: ['a\\b'] } })] },
      'proof.scenarios[0].evidence.requiredFiles[0]: expected a relative path',
    ],
    [
      'a required file with a drive letter',
      { scenarios: [scenario({ evidence: { requiredFiles: ['C:x'] } })] },
      'proof.scenarios[0].evidence.requiredFiles[0]: expected a relative path',
    ],
    [
      'a required file with ./',
      { scenarios: [scenario({ evidence: { requiredFiles: ['./a'] } })] },
      'proof.scenarios[0].evidence.requiredFiles[0]: expected a relative path',
    ],
    [
      'the manifest as a required file',
      { scenarios: [scenario({ evidence: { requiredFiles: ['Manifest.JSON'] } })] },
      "manifest.json is the bundle's index, not an observation",
    ],
    [
      'two required files differing by case',
      { scenarios: [scenario({ evidence: { requiredFiles: ['a.json', 'A.json'] } })] },
      'proof.scenarios[0].evidence.requiredFiles[1]: duplicate file "A.json"',
    ],
    [
      'a zero byte cap',
      { scenarios: [scenario({ evidence: { maxBytes: 0 } })] },
      'proof.scenarios[0].evidence.maxBytes: expected an integer from 1 to 1073741824',
    ],
    [
      'a byte cap over 1 GiB',
      { scenarios: [scenario({ evidence: { maxBytes: 2 ** 31 } })] },
      'proof.scenarios[0].evidence.maxBytes: expected an integer from 1 to 1073741824',
    ],
    [
      'a zero entry cap',
      { scenarios: [scenario({ evidence: { maxEntries: 0 } })] },
      'proof.scenarios[0].evidence.maxEntries: expected an integer from 1 to 10000',
    ],
    [
      'an entry cap over the bound',
      { scenarios: [scenario({ evidence: { maxEntries: 10_001 } })] },
      'proof.scenarios[0].evidence.maxEntries: expected an integer from 1 to 10000',
    ],
    [
      'an entry cap with no room for the required files',
      { scenarios: [scenario({ evidence: { requiredFiles: ['a', 'b'], maxEntries: 2 } })] },
      'proof.scenarios[0].evidence.maxEntries: expected room for the manifest and 2 required files',
    ],
    ['an unknown evidence key', { scenarios: [scenario({ evidence: { maxFiles: 3 } })] }, 'unknown key proof.scenarios[0].evidence.maxFiles'],
    ['a zero ceiling', { ceilingSeconds: 0 }, 'proof.ceilingSeconds: expected an integer from 1 to 86400'],
    ['a ceiling over a day', { ceilingSeconds: 86_401 }, 'proof.ceilingSeconds: expected an integer from 1 to 86400'],
    ['a negative reserve', { reserveSeconds: -1 }, 'proof.reserveSeconds: expected an integer from 0 to 3600'],
    ['a reserve over an hour', { reserveSeconds: 3601 }, 'proof.reserveSeconds: expected an integer from 0 to 3600'],
    ['an unknown proof key', { deadline: 5 }, 'unknown key proof.deadline'],
    ['33 scenarios', { scenarios: Array.from({ length: 33 }, (_, index) => scenario({ id: `s${index}` })) }, /^main:\.proofgate\.yml: proof\.scenarios: /],
    ['scenarios that are not a list', { scenarios: { id: 'x' } }, /^main:\.proofgate\.yml: proof\.scenarios: /],
  ];
  it.each(bad)('refuses %s with one CONFIG line naming the field', (_name, proof, expected) => {
    const message = configError({ proof });
    expect(message).not.toContain('\n');
    if (typeof expected === 'string') expect(message).toContain(expected);
    else expect(message).toMatch(expected);
    expect(message.startsWith(`${SOURCE}: `)).toBe(true);
  });

  it('refuses a reserve that leaves the review budget no time for proof', () => {
    const review = { lanes: [{ id: 'rules', builtin: 'rules' }], budgetSeconds: 120 };
    expect(configError({ review, proof: { reserveSeconds: 120, scenarios: [scenario({ timeoutSeconds: 60 })] } })).toBe(
      `${SOURCE}: proof.reserveSeconds: 120 leaves no time for proof within review.budgetSeconds (120)`,
    );
    expect(() => parseRepoConfig({ review, proof: { reserveSeconds: 119, scenarios: [scenario({ timeoutSeconds: 60 })] } }, SOURCE)).not.toThrow();
    // Without scenarios there is no proof to leave time for.
    expect(() => parseRepoConfig({ review, proof: { reserveSeconds: 600 } }, SOURCE)).not.toThrow();
  });
});

describe('names in the proof config', () => {
  it.each([
    ['web-chat', true],
    ['bot_e2e', true],
    ['0', true],
    ['a'.repeat(48), true],
    ['a'.repeat(49), false],
    ['', false],
    ['../x', false],
    ['a/b', false],
    ['a\\b', false],
    ['a.b', false],
    ['Web', false],
    ['_web', false],
    ['web chat', false],
  ])('scenario id %j: %s', (id, expected) => {
    expect(isScenarioId(id)).toBe(expected);
  });

  it.each([
    ['main', true],
    ['release/1.x', true],
    ['a..b', false],
    ['-x', false],
    ['/x', false],
    ['x/', false],
    ['x.', false],
    ['a//b', false],
    ['.hidden', false],
    ['a/.b', false],
    ['x.lock', false],
    ['a@{1}', false],
    ['@', false],
    ['a~1', false],
    ['a:b', false],
    ['', false],
  ])('branch name %j: %s', (name, expected) => {
    expect(isBranchName(name)).toBe(expected);
  });

  it.each([
    ['a.json', true],
    ['dir/a.json', true],
    ['..a', true],
    ['', false],
    ['..', false],
    ['a/../b', false],
    ['a/./b', false],
    ['/a', false],
    ['a/', false],
    ['a\\b', false],
    ['C:/a', false],
    ['a\0b', false],
    ['a\nb', false],
  ])('evidence path %j: %s', (path, expected) => {
    expect(isSafeEvidencePath(path)).toBe(expected);
  });
});
