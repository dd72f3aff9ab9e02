import { describe, expect, it } from 'vitest';
import {
  decideAppend,
  defaultStoragePolicy,
  findFreeTextSecret,
  policyDigest,
  redactFreeText,
  validateStoragePolicy,
  type ExistingEvent,
  type StoragePolicy,
} from '../../src/storage/index.js';
import { canonicalJson } from '../../src/core/index.js';
import { WriteGuard } from '../../src/storage/guard.js';
import { KnownSecrets } from '../../src/storage/known-secrets.js';
import { policyRefusal } from '../../src/storage/sensitive.js';
import { expectCode } from './conformance.js';

const batch = {
  streamId: 's',
  expectedRevision: 2,
  events: [
    { id: 'a', type: 't', dataText: '1' },
    { id: 'b', type: 't', dataText: '2' },
  ],
};
const stored = (id: string, revision: number, changes: Partial<ExistingEvent> = {}): ExistingEvent => ({
  id,
  streamId: 's',
  revision,
  type: 't',
  dataText: id === 'a' ? '1' : '2',
  ...changes,
});

describe('decideAppend', () => {
  const cases: [string, number, ExistingEvent[], string][] = [
    ['fresh ids at the expected revision', 2, [], 'insert'],
    ['fresh ids at a stale revision', 3, [], 'conflict'],
    ['fresh ids behind the expected revision', 1, [], 'conflict'],
    ['the identical batch already stored there', 4, [stored('a', 3), stored('b', 4)], 'retry'],
    ['the identical batch, stream moved on since', 9, [stored('a', 3), stored('b', 4)], 'retry'],
    ['one id stored with other data', 4, [stored('a', 3), stored('b', 4, { dataText: '3' })], 'duplicate'],
    ['one id stored with another type', 4, [stored('a', 3, { type: 'u' }), stored('b', 4)], 'duplicate'],
    ['ids stored at other revisions', 6, [stored('a', 5), stored('b', 6)], 'duplicate'],
    ['ids stored in another stream', 4, [stored('a', 3, { streamId: 'x' }), stored('b', 4, { streamId: 'x' })], 'duplicate'],
    ['only part of the batch stored', 3, [stored('a', 3)], 'duplicate'],
  ];
  it.each(cases)('%s -> %s', (_name, current, existing, kind) => {
    const decision = decideAppend(batch, current, existing);
    expect(decision.kind).toBe(kind);
    if (decision.kind !== 'insert') expect(decision.reason.length).toBeGreaterThan(0);
    if (decision.kind === 'retry') expect(decision.revision).toBe(4);
  });
});

describe('free-text redaction', () => {
  const cases: [string, string, string | undefined][] = [
    ['plain words about tokens and passwords', 'plain words about tokens and passwords', undefined],
    ['id AKIAIOSFODNN7EXAMPLE here', 'id [redacted:aws-access-key-id] here', 'aws-access-key-id'],
    ['gho_abcdefghijklmnopqrstuvwxyz0123', '[redacted:github-token]', 'github-token'],
    ['github_pat_11ABCDEFG0123456789_abcdefghijk', '[redacted:github-token]', 'github-token'],
    ['authorization: bearer eyJhbGciOi.x-y_z', 'authorization: bearer [redacted:bearer-token]', 'bearer-token'],
    ['url?token=abc&x=1', 'url?token=[redacted:assignment]&x=1', 'assignment'],
    ['PASSWORD: "s3cr3t words"', 'PASSWORD: [redacted:assignment]', 'assignment'],
    ['a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\nz', 'a\n[redacted:private-key]\nz', 'private-key'],
    ['cut -----BEGIN PRIVATE KEY-----\nMIIE', 'cut [redacted:private-key]', 'private-key'],
  ];
  it.each(cases)('%j', (input, redacted, kind) => {
    expect(redactFreeText(input)).toBe(redacted);
    expect(redactFreeText(redactFreeText(input))).toBe(redacted);
    expect(findFreeTextSecret(input)).toBe(kind);
  });
});

describe('validateStoragePolicy', () => {
  it('accepts the default policy, freezes a copy and digests it stably', () => {
    const policy = validateStoragePolicy(JSON.parse(JSON.stringify(defaultStoragePolicy)));
    expect(policy).toEqual(defaultStoragePolicy);
    expect(Object.isFrozen(policy.sensitiveContent)).toBe(true);
    expect(policyDigest(policy)).toBe(policyDigest(defaultStoragePolicy));
    expect(policyDigest({ ...policy, maxArtifactBytes: 1 })).not.toBe(policyDigest(policy));
  });

  const bad: [string, unknown, string, string][] = [
    ['unknown top-level key', { ...defaultStoragePolicy, colour: 'red' }, 'POLICY_VIOLATION', 'colour'],
    [
      'unknown nested key',
      { ...defaultStoragePolicy, sensitiveContent: { ...defaultStoragePolicy.sensitiveContent, extra: 1 } },
      'POLICY_VIOLATION',
      'sensitiveContent.extra',
    ],
    ['wrong type', { ...defaultStoragePolicy, maxEventPayloadBytes: '1' }, 'POLICY_VIOLATION', 'maxEventPayloadBytes'],
    ['zero limit', { ...defaultStoragePolicy, maxAppendBatchBytes: 0 }, 'POLICY_VIOLATION', 'maxAppendBatchBytes'],
    ['unknown retention', { ...defaultStoragePolicy, retention: 'a-while' }, 'POLICY_VIOLATION', 'retention'],
    [
      'exact other than reject',
      { ...defaultStoragePolicy, sensitiveContent: { ...defaultStoragePolicy.sensitiveContent, exact: 'allow' } },
      'POLICY_VIOLATION',
      'sensitiveContent.exact',
    ],
    ['missing key', { ...defaultStoragePolicy, retention: undefined }, 'POLICY_VIOLATION', 'retention'],
    ['schema version 2', { ...defaultStoragePolicy, schemaVersion: 2 }, 'UNSUPPORTED_SCHEMA_VERSION', 'schemaVersion'],
    ['schema version as text', { ...defaultStoragePolicy, schemaVersion: '1' }, 'UNSUPPORTED_SCHEMA_VERSION', 'schemaVersion'],
    ['not an object', 'policy', 'POLICY_VIOLATION', '(policy)'],
  ];
  it.each(bad)('%s -> %s naming %s', async (_name, input, code, key) => {
    const error = await expectCode(() => validateStoragePolicy(input), code as 'POLICY_VIOLATION');
    expect(error.message).toContain(key);
  });
});

describe('WriteGuard.prepareJson: the stored form of a value', () => {
  const secret = 'kn0wn-s3cret';
  const guardFor = (sensitiveContent: StoragePolicy['sensitiveContent']) =>
    new WriteGuard('ns', { ...defaultStoragePolicy, sensitiveContent }, KnownSecrets.from([secret]));
  const redacting = guardFor({ marked: 'redact', exact: 'reject', freeText: 'redact-before-hash' });
  const values: unknown[] = [
    { log: 'password=hunter2', n: 1 },
    { b: [1, 'token: abc', { pin: { $sensitive: 'x' } }], a: 'AKIAIOSFODNN7EXAMPLE' },
    'Authorization: Bearer abc.def',
    { nothing: ['to', 'redact'], z: null, y: true },
  ];
  it.each(values)('is what an append stores, and preparing it again changes nothing: %j', (value) => {
    const prepared = redacting.prepareJson(value);
    const [event] = redacting.prepareAppend('s', 0, [{ id: 'e', type: 't', data: value }]).events;
    expect(canonicalJson(prepared)).toBe(event?.dataText);
    expect(redacting.prepareJson(prepared)).toEqual(prepared);
  });

  const refusals: [string, StoragePolicy['sensitiveContent'], unknown, string, string][] = [
    ['a known secret in a string', redacting.policy.sensitiveContent, { a: [`x ${secret}`] }, 'KNOWN_SECRET', 'KNOWN_SECRET at $.a[0]'],
    ['a known secret in a key', redacting.policy.sensitiveContent, { [secret]: 1 }, 'KNOWN_SECRET', 'KNOWN_SECRET at $ (an object key)'],
    [
      'a marked value under reject',
      { marked: 'reject', exact: 'reject', freeText: 'allow' },
      { pin: { $sensitive: 1 } },
      'POLICY_VIOLATION',
      'POLICY_VIOLATION at $.pin (a marked value)',
    ],
    [
      'free text under reject',
      { marked: 'reject', exact: 'reject', freeText: 'reject' },
      { note: 'token=abc' },
      'POLICY_VIOLATION',
      'POLICY_VIOLATION at $.note (secret-looking text: assignment)',
    ],
  ];
  it.each(refusals)('refuses %s like an append does, and policyRefusal names code and path only', (_name, sensitive, value, code, refusal) => {
    const guard = guardFor(sensitive);
    const error = (() => {
      try {
        guard.prepareJson(value, 'result');
        return undefined;
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toMatchObject({ code });
    expect(() => guard.prepareAppend('s', 0, [{ id: 'e', type: 't', data: value }])).toThrow(expect.objectContaining({ code }));
    expect(policyRefusal(error, 'result')).toBe(refusal);
    expect(String((error as Error).message)).not.toContain(secret);
  });

  it('policyRefusal is null for other errors', () => {
    expect(policyRefusal(new Error('x'), 'result')).toBeNull();
  });
});
