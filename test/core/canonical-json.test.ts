import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { canonicalJson, decodeUtf8, digestJson, isProofgateError, parseJson, sha256Digest } from '../../src/core/index.js';

const ONES = `sha256:${'1'.repeat(64)}`;

describe('canonicalJson (RFC 8785)', () => {
  it('gives the known answer in any key order', () => {
    const a = { inputs: { proposal: ONES }, result: { passed: true, tests: 21 } };
    const b = { result: { tests: 21, passed: true }, inputs: { proposal: ONES } };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(Buffer.byteLength(canonicalJson(a))).toBe(133);
    expect(digestJson(b)).toBe('sha256:db5b2a0eb5743b52617a78335dbc003a9a10619dc6cab05f6099f81c9b7fb329');
  });

  it('sorts keys by UTF-16 code units, not by code points or locale', () => {
    // U+1F600 is the surrogate pair D83D DE00; U+FB01 is a single unit above D83D.
    const value = { '\u{1F600}': 1, '\uFB01': 2, a: 3, B: 4, '': 5 };
    expect(canonicalJson(value)).toBe('{"":5,"B":4,"a":3,"\u{1F600}":1,"\uFB01":2}');
  });

  it('serializes numbers the ECMAScript way', () => {
    const cases: Array<[number, string]> = [
      [0, '0'],
      [-0, '0'],
      [1, '1'],
      [-1.5, '-1.5'],
      [1e21, '1e+21'],
      [1e-7, '1e-7'],
      [123456789012345680000, '123456789012345680000'],
      [0.1 + 0.2, '0.30000000000000004'],
      [5e-324, '5e-324'],
      [1.7976931348623157e308, '1.7976931348623157e+308'],
      [333333333.3333333, '333333333.3333333'],
    ];
    for (const [input, text] of cases) expect(canonicalJson(input)).toBe(text);
  });

  it('escapes strings minimally', () => {
    expect(canonicalJson('\u0000\u0008\t\n\u000b\f\r"\\/\u007f\u00e9\u20ac')).toBe('"\\u0000\\b\\t\\n\\u000b\\f\\r\\"\\\\/\u007f\u00e9\u20ac"');
  });

  it('has no whitespace and keeps array order', () => {
    expect(canonicalJson({ b: [3, 1, { d: null, c: false }], a: 'x' })).toBe('{"a":"x","b":[3,1,{"c":false,"d":null}]}');
  });

  it.each([
    ['undefined', { a: undefined }],
    ['function', { f: () => 1 }],
    ['NaN', [Number.NaN]],
    ['Infinity', { n: Number.POSITIVE_INFINITY }],
    ['bigint', { n: 1n }],
    ['lone high surrogate', '\ud800'],
    ['lone low surrogate key', { '\udc00': 1 }],
    ['Date', new Date(0)],
    ['symbol', Symbol('x')],
    ['symbol key', { [Symbol('x')]: 1, a: 1 }],
    ['symbol key, nested', { a: { [Symbol('x')]: 1 } }],
    // eslint-disable-next-line no-sparse-arrays
    ['array hole', [1, , 3]],
  ])('refuses %s with NON_JSON_VALUE', (_name, value) => {
    let caught: unknown;
    try {
      canonicalJson(value);
    } catch (error) {
      caught = error;
    }
    expect(isProofgateError(caught, 'NON_JSON_VALUE')).toBe(true);
  });

  it('refuses cycles but accepts shared (acyclic) references', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/cycle/);
  });

  it('round-trips: parsing the canonical text and canonicalizing again is stable', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const once = canonicalJson(value);
        expect(canonicalJson(JSON.parse(once))).toBe(once);
      }),
      { numRuns: 300 },
    );
  });

  it('digests bytes and strings alike', () => {
    expect(sha256Digest('abc')).toBe('sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Digest(new TextEncoder().encode('abc'))).toBe(sha256Digest('abc'));
  });
});

/** A slow, obviously-right reference: sort keys by UTF-16 code units, JSON.stringify the leaves. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${JSON.stringify(k)}:${reference(record[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

describe('canonicalJson against a reference', () => {
  const key = fc.oneof(fc.string(), fc.constantFrom('0', '1', '10', '9', '01', '4294967295', '4294967294', '-1', 'a', 'B'));
  const tree = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constant(null),
      fc.boolean(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.string(),
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(key, tie('value'), { maxKeys: 5 }),
    ),
  })).value;

  it('agrees on arbitrary JSON, including index-like keys', () => {
    fc.assert(
      fc.property(tree, (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 1000 },
    );
  });

  it('orders index-like keys as strings, not numbers', () => {
    expect(canonicalJson({ 10: 'a', 9: 'b', 1: 'c', x: 'd' })).toBe('{"1":"c","10":"a","9":"b","x":"d"}');
  });

  it('names the path of a refused value', () => {
    expect(() => canonicalJson({ a: [1, { b: Number.NaN }] })).toThrow(/\$?\.a\[1\]\.b/);
  });

  it('refuses a lone surrogate even next to escaped backslashes', () => {
    expect(() => canonicalJson({ s: '\\\ud800' })).toThrow(/lone surrogate/);
    expect(canonicalJson({ s: '\\ud800' })).toBe('{"s":"\\\\ud800"}');
  });
});

describe('member names that JavaScript treats specially, and duplicates', () => {
  it('keeps a __proto__ member in any key order (never drops it, never a shared digest)', () => {
    const a = JSON.parse('{"b":1,"__proto__":{"x":1}}') as unknown;
    const b = JSON.parse('{"__proto__":{"x":1},"b":1}') as unknown;
    expect(canonicalJson(a)).toBe('{"__proto__":{"x":1},"b":1}');
    expect(canonicalJson(b)).toBe(canonicalJson(a));
    expect(digestJson(a)).not.toBe(digestJson({ b: 1 }));
  });

  it('parseJson refuses a member name that occurs twice, wherever it is', () => {
    expect(() => parseJson('{"a":1,"a":2}')).toThrow(/member name \$\.a occurs twice/);
    expect(() => parseJson('{"x":[{"k":1},{"k":2,"k":3}]}')).toThrow(/\$\.x\[\]\.k occurs twice/);
    expect(() => parseJson('{"s":"a\\"b","s":1}')).toThrow(/occurs twice/);
    // A name spelled with an escape is the same name; the path names each level that leads to it.
    expect(() => parseJson('{"a":1,"\\u0061":2}')).toThrow(/member name \$\.a occurs twice/);
    expect(() => parseJson('{"x":{"c":{"d":1,"d":2}}}')).toThrow(/member name \$\.x\.c\.d occurs twice/);
    expect(() => parseJson('{"x":[[{"e":1}],{"f":{"g":1,"g":2}}]}')).toThrow(/member name \$\.x\[\]\.f\.g occurs twice/);
    // 100,000 levels deep: found without recursion, named by its innermost 32 levels.
    const deep = `{"n":${'{"a":'.repeat(100_000)}{"x":1,"x":2}${'}'.repeat(100_000)}}`;
    expect(() => parseJson(deep)).toThrow(new RegExp(`member name \\$\\.\\.\\.${'\\.a'.repeat(32)}\\.x occurs twice`));
    // Brackets, braces, commas and quotes inside strings are not structure; equal names in sibling objects are fine.
    expect(parseJson('{"a":"{\\"a\\":[1,2]}","b":[{"a":1},{"a":2}],"c":{"a":"]}"}}')).toEqual({ a: '{"a":[1,2]}', b: [{ a: 1 }, { a: 2 }], c: { a: ']}' } });
    expect(parseJson('{"a":{"a":1},"b":[{"a":1},{"a":2}]}')).toEqual({ a: { a: 1 }, b: [{ a: 1 }, { a: 2 }] });
  });

  it('an enumerable name added to Object.prototype neither hides a duplicate nor makes one up', () => {
    Object.defineProperty(Object.prototype, 'polluted', { value: 1, enumerable: true, configurable: true, writable: true });
    try {
      expect(() => parseJson('{"a":1,"a":2}')).toThrow(/member name \$\.a occurs twice/);
      expect(() => parseJson('{"a":1,"b":{"c":1,"c":2}}')).toThrow(/occurs twice/);
      expect(parseJson('{"a":1,"b":{"c":2},"polluted":3}')).toEqual({ a: 1, b: { c: 2 }, polluted: 3 });
      expect(parseJson('[{"x":1},{"y":2}]')).toEqual([{ x: 1 }, { y: 2 }]);
    } finally {
      delete (Object.prototype as Record<string, unknown>).polluted;
    }
  });

  it('parseJson refuses exactly the texts that repeat a name in one object, however they are spaced or escaped', () => {
    // A tree written as text by hand, so one object may hold a name twice (JSON.stringify never writes that).
    type Node =
      | { readonly kind: 'leaf'; readonly text: string }
      | { readonly kind: 'array'; readonly items: Node[] }
      | { readonly kind: 'object'; readonly members: [string, Node][] };
    // Colons inside names and strings, and strings ending in an escaped backslash: text a scan for names could misread.
    const name = fc.constantFrom('a', 'b', '__proto__', '0', 'é', '"', '\\', ':', 'x":"');
    const { node } = fc.letrec<{ node: Node }>((tie) => ({
      node: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.constantFrom('1', 'null', '"x"', '"{\\"a\\":1}"', '"]}"', '"a:b"', '"\\\\"', '"\\\\\\":"').map((text): Node => ({ kind: 'leaf', text })),
        fc.array(tie('node'), { maxLength: 3 }).map((items): Node => ({ kind: 'array', items })),
        fc.array(fc.tuple(name, tie('node')), { maxLength: 4 }).map((members): Node => ({ kind: 'object', members })),
      ),
    }));
    const space = fc.constantFrom('', ' ', '\n  ');
    const write = (n: Node, gap: string, escape: boolean): string => {
      if (n.kind === 'leaf') return n.text;
      if (n.kind === 'array') return `[${gap}${n.items.map((item) => write(item, gap, escape)).join(`,${gap}`)}${gap}]`;
      // A name may be written with \u escapes: the same name to JSON.parse.
      const key = (k: string): string =>
        escape ? `"${[...k].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(k);
      return `{${gap}${n.members.map(([k, v]) => `${key(k)}${gap}:${gap}${write(v, gap, escape)}`).join(`,${gap}`)}${gap}}`;
    };
    const repeats = (n: Node): boolean =>
      n.kind === 'array'
        ? n.items.some(repeats)
        : n.kind === 'object'
          ? new Set(n.members.map(([k]) => k)).size < n.members.length || n.members.some(([, v]) => repeats(v))
          : false;
    fc.assert(
      fc.property(node, space, fc.boolean(), (tree, gap, escape) => {
        const text = write(tree, gap, escape);
        if (repeats(tree)) expect(() => parseJson(text)).toThrow(/occurs twice/);
        else expect(parseJson(text)).toEqual(JSON.parse(text));
      }),
      { numRuns: 500 },
    );
  });

  it('parseJson accepts any valid JSON without duplicates, and a leading byte order mark', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(parseJson(JSON.stringify(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 300 },
    );
    expect(parseJson('\ufeff{"a":1}')).toEqual({ a: 1 });
  });

  it('decodeUtf8 refuses invalid UTF-8 instead of replacing it', () => {
    expect(() => decodeUtf8(new Uint8Array([0x7b, 0xff, 0x7d]))).toThrow(/not valid UTF-8/);
    expect(decodeUtf8(new TextEncoder().encode('{"é":1}'))).toBe('{"é":1}');
    // A byte order mark stays: it is the caller's to skip (parseJson does).
    expect(decodeUtf8(new Uint8Array([0xef, 0xbb, 0xbf, 0x31]))).toBe('\ufeff1');
  });

  it('decodeUtf8 reads only the bytes of the view it is given, ASCII or not', () => {
    const whole = new TextEncoder().encode('xx{"a":"b"}yy{"é":1}zz');
    expect(decodeUtf8(whole.subarray(2, 11))).toBe('{"a":"b"}');
    expect(decodeUtf8(whole.subarray(13, 21))).toBe('{"é":1}');
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.nat(8), fc.nat(8), (text, before, after) => {
        const encoded = new TextEncoder().encode(text);
        const padded = new Uint8Array(before + encoded.length + after).fill(0x41);
        padded.set(encoded, before);
        expect(decodeUtf8(padded.subarray(before, before + encoded.length))).toBe(new TextDecoder('utf-8', { ignoreBOM: true }).decode(encoded));
      }),
      { numRuns: 300 },
    );
  });
});
