import { Ajv } from 'ajv';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ProofgateError } from '../../src/core/index.js';
import {
  createApprovalCallbackGate,
  createGraphExecutor,
  readRunEvents,
  type ApprovalSubjectInput,
  type CallbackGateDefinition,
  type ReadonlyJsonObject,
  type ReadonlyJsonValue,
  type Sha256Digest,
} from '../../src/runtime/index.js';
import { checkSchemaSubset, schemaViolation } from '../../src/runtime/schema/json-schema-subset.js';
import { dag, node, required, startRun } from './fixtures.js';
import { describeEachStore } from './stores.js';

function refusal(schema: unknown): string {
  try {
    checkSchemaSubset(schema, 'responseSchema');
  } catch (error) {
    expect(error).toBeInstanceOf(ProofgateError);
    expect(error).toMatchObject({ code: 'INVALID_INPUT' });
    return (error as Error).message;
  }
  throw new Error('the schema was accepted');
}

describe('checkSchemaSubset', () => {
  it('accepts every keyword of the subset, at any depth', () => {
    expect(() =>
      checkSchemaSubset(
        {
          title: 'answer',
          description: 'an answer',
          type: 'object',
          required: ['kind'],
          additionalProperties: false,
          properties: {
            kind: { type: 'string', enum: ['allow', 'deny'], minLength: 1, maxLength: 10 },
            count: { type: 'integer', minimum: 0, maximum: 9 },
            fixed: { const: { a: [1, 2] } },
            list: { type: 'array', items: { type: 'object', properties: { n: { type: 'number' } } } },
            none: { type: 'null' },
            flag: { type: 'boolean' },
          },
        },
        'responseSchema',
      ),
    ).not.toThrow();
    expect(() => checkSchemaSubset({}, 'responseSchema')).not.toThrow();
  });

  // Each is a schema the subset refuses, and the one-line message that names where.
  it.each([
    ['a keyword outside the subset', { type: 'string', pattern: '^a' }, 'responseSchema: unsupported schema keyword pattern at $'],
    [
      'one inside a property',
      { type: 'object', properties: { kind: { type: 'string', format: 'email' } } },
      'responseSchema: unsupported schema keyword format at $.kind',
    ],
    ['one inside items', { type: 'array', items: { oneOf: [] } }, 'responseSchema: unsupported schema keyword oneOf at $[]'],
    ['one below items and a property', { items: { properties: { deep: { $ref: '#' } } } }, 'responseSchema: unsupported schema keyword $ref at $[].deep'],
    ['an unknown type', { type: 'date' }, 'responseSchema: type at $ must be one of object, array, string, number, integer, boolean, null'],
    ['a list of types', { type: ['string', 'null'] }, 'responseSchema: type at $ must be one of object, array, string, number, integer, boolean, null'],
    ['properties that are not an object', { properties: [] }, 'responseSchema: properties at $ must be an object'],
    ['a property schema that is not an object', { properties: { kind: 'string' } }, 'responseSchema: schema at $.kind must be an object'],
    ['required that is not a list of names', { required: ['a', 1] }, 'responseSchema: required at $ must be a list of names'],
    ['additionalProperties as a schema', { additionalProperties: { type: 'string' } }, 'responseSchema: additionalProperties at $ must be a boolean'],
    ['enum that is not a list', { properties: { kind: { enum: 'allow' } } }, 'responseSchema: enum at $.kind must be a list'],
    ['a length that is not a number', { minLength: '1' }, 'responseSchema: minLength at $ must be an integer >= 0'],
    ['a negative length', { maxLength: -1 }, 'responseSchema: maxLength at $ must be an integer >= 0'],
    ['a bound that is not a number', { maximum: '9' }, 'responseSchema: maximum at $ must be a number'],
    ['an array as the schema', [], 'responseSchema: schema at $ must be an object'],
    ['null as the schema', null, 'responseSchema: schema at $ must be an object'],
  ])('refuses %s', (_what, schema, message) => {
    expect(refusal(schema)).toBe(message);
  });

  it('refuses a gate whose responseSchema is outside the subset, before anything is derived', () => {
    const d = (digit: string) => `sha256:${digit.repeat(64)}` as Sha256Digest;
    const subject: ApprovalSubjectInput = {
      workspaceAnchor: null,
      inputArtifactHashes: { proposal: d('1') },
      proofScope: {},
      proofArtifact: { digest: d('2'), byteLength: 2, mediaType: 'application/json', purpose: 'proof-packet' },
      proposedOutput: new Uint8Array([1]),
      effectivePermissions: [],
    };
    const definition: CallbackGateDefinition = {
      gateId: 'g',
      gateVersion: 1,
      decisionText: 'ok?',
      input: null,
      responseSchema: { type: 'object', properties: { kind: { type: 'string', pattern: 'allow|deny' } } },
    };
    expect(() => createApprovalCallbackGate(definition, subject)).toThrow(
      new ProofgateError('INVALID_INPUT', 'responseSchema: unsupported schema keyword pattern at $.kind'),
    );
    const request = createApprovalCallbackGate({ ...definition, responseSchema: { type: 'object' } }, subject);
    expect(request.requestId).toMatch(/^approval-/);
  });
});

describe('schemaViolation', () => {
  const answer: ReadonlyJsonObject = {
    type: 'object',
    required: ['kind'],
    additionalProperties: false,
    properties: {
      kind: { type: 'string', enum: ['allow', 'deny'] },
      note: { type: 'string', minLength: 2, maxLength: 5 },
      count: { type: 'integer', minimum: 1, maximum: 3 },
      ratio: { type: 'number' },
      fixed: { const: { a: [1, 2] } },
      options: { enum: [{ x: 1 }, null] },
      list: { type: 'array', items: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } },
      nested: { type: 'object', properties: { flag: { type: 'boolean' } } },
    },
  };

  // Each row is a value the earlier hand-written validator also rejected, with the reason.
  it.each<[string, ReadonlyJsonValue, string | null]>([
    [
      'a value that fits',
      { kind: 'allow', note: 'ok', count: 2, ratio: 0.5, fixed: { a: [1, 2] }, options: { x: 1 }, list: [{ name: 'a' }], nested: { flag: true } },
      null,
    ],
    ['the smallest value that fits', { kind: 'deny' }, null],
    ['another type at the root', ['allow'], '$ must be object, got array'],
    ['a missing required property', {}, '$.kind is required'],
    ['a value outside the enum', { kind: 'maybe' }, '$.kind is not one of the allowed values'],
    ['a property not listed', { kind: 'allow', extra: 1 }, '$.extra is not allowed'],
    ['a string that is too short', { kind: 'allow', note: 'a' }, '$.note is shorter than 2'],
    ['a string that is too long', { kind: 'allow', note: 'abcdef' }, '$.note is longer than 5'],
    ['a fraction for an integer', { kind: 'allow', count: 1.5 }, '$.count must be integer, got number'],
    ['a number below the minimum', { kind: 'allow', count: 0 }, '$.count is below 1'],
    ['a number above the maximum', { kind: 'allow', count: 4 }, '$.count is above 3'],
    ['a string for a number', { kind: 'allow', ratio: '0.5' }, '$.ratio must be number, got string'],
    ['another fixed value', { kind: 'allow', fixed: { a: [2, 1] } }, '$.fixed must equal the fixed value'],
    ['an object outside an enum of objects', { kind: 'allow', options: { x: 2 } }, '$.options is not one of the allowed values'],
    ['a bad item, named by index', { kind: 'allow', list: [{ name: 'a' }, { name: 7 }] }, '$.list[1].name must be string, got number'],
    ['an item missing a property', { kind: 'allow', list: [{}] }, '$.list[0].name is required'],
    ['null for a nested object', { kind: 'allow', nested: null }, '$.nested must be object, got null'],
    ['a bad nested value', { kind: 'allow', nested: { flag: 'yes' } }, '$.nested.flag must be boolean, got string'],
  ])('%s', (_what, value, reason) => {
    expect(schemaViolation(answer, value)).toBe(reason);
  });

  it('treats a schema outside the subset as a reason, never as a pass', () => {
    expect(schemaViolation({ type: 'string', pattern: '^a' }, 'a')).toBe('the schema is not usable: unsupported schema keyword pattern at $');
    expect(schemaViolation({ type: 'string', format: 'email' }, 'a@b')).toMatch(/^the schema is not usable: /);
  });

  describe('compiles each schema once', () => {
    afterEach(() => {
      vi.restoreAllMocks();
    });

    it('reuses the compiled schema for an equal schema, whatever its key order', () => {
      const compile = vi.spyOn(Ajv.prototype, 'compile');
      const title = `cache-${Math.random()}`;
      for (let i = 0; i < 5; i += 1) {
        expect(schemaViolation({ title, type: 'object', required: ['n'] }, { n: i })).toBeNull();
        expect(schemaViolation({ required: ['n'], type: 'object', title }, {})).toBe('$.n is required');
        checkSchemaSubset({ type: 'object', title, required: ['n'] }, 'responseSchema');
      }
      expect(compile).toHaveBeenCalledTimes(1);
    });

    it('still checks a schema correctly after many others pushed it out of the cache', () => {
      const first = { title: `first-${Math.random()}`, type: 'integer' } as const;
      expect(schemaViolation(first, 1)).toBeNull();
      for (let i = 0; i < 600; i += 1) expect(schemaViolation({ title: `other-${i}`, minimum: i }, i)).toBeNull();
      expect(schemaViolation(first, 'x')).toBe('$ must be integer, got string');
      expect(schemaViolation(first, 2)).toBeNull();
    });
  });
});

describeEachStore('a node result contract', (newStore) => {
  it('fails the attempt invalid-result, naming the path, when the result breaks it or the contract is outside the subset', async () => {
    const storage = await newStore().open();
    const graph = dag([required('fits'), required('breaks'), required('unusable')], [], { stopOnError: false });
    await startRun(storage, 'contract', graph);
    const verdict = { type: 'object', required: ['verdict'], properties: { verdict: { type: 'string', enum: ['pass', 'fail'] } } } as const;
    const nodes = {
      fits: node(() => ({ verdict: 'pass' }), { resultContract: verdict }),
      breaks: node(() => ({ verdict: 'maybe' }), { resultContract: verdict }),
      unusable: node(() => ({ verdict: 'pass' }), { resultContract: { type: 'object', properties: { verdict: { type: 'string', pattern: 'pass' } } } }),
    };
    const executor = await createGraphExecutor({ runId: 'contract', graph, storage, nodes, engines: [] });
    await executor.run();
    const events = await readRunEvents(storage.eventStore, 'contract');
    const failed = events.flatMap((event) => (event.type === 'attempt-failed' ? [event.data] : []));
    expect(failed.map((data) => [data.position, data.failureClass, data.reason]).sort()).toEqual([
      ['dag/breaks/1', 'invalid-result', 'result breaks its contract: $.verdict is not one of the allowed values'],
      ['dag/unusable/1', 'invalid-result', 'result breaks its contract: the schema is not usable: unsupported schema keyword pattern at $.verdict'],
    ]);
    expect(events.filter((event) => event.type === 'attempt-completed').map((event) => event.data.position)).toEqual(['dag/fits/1']);
  });
});
