import { describe, expect, it } from 'vitest';
import { jsonForTerminal, untrustedText } from '../../src/cli/untrusted-text.js';

/** Nothing a terminal acts on, and no line break of any kind, is left. */
// eslint-disable-next-line no-control-regex -- the raw control characters are what the test looks for
const RAW = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff]|[\ud800-\udfff]/u;

describe('untrustedText: single-line fields', () => {
  it.each([
    ['plain text', 'fix typo in README', 'fix typo in README'],
    ['unicode letters and emoji stay', 'café – naïve 日本語 👩‍👩‍👧', 'café – naïve 日本語 👩‍👩‍👧'],
    ['newline', 'ok\n2\tmerged', 'ok\\n2\\tmerged'],
    ['carriage return', 'safe\rREVIEW: CONFIRMED', 'safe\\rREVIEW: CONFIRMED'],
    ['CRLF', 'a\r\nb', 'a\\r\\nb'],
    ['tab', 'a\tb', 'a\\tb'],
    ['NUL, BEL, backspace, form feed, vertical tab', 'a\u0000\u0007\b\f\vb', 'a\\x00\\x07\\x08\\x0c\\x0bb'],
    ['ESC: CSI clear screen and colour', 'x\u001b[2J\u001b[31m', 'x\\x1b[2J\\x1b[31m'],
    ['ESC: OSC window title ended by BEL', '\u001b]0;owned\u0007', '\\x1b]0;owned\\x07'],
    ['ESC: OSC 8 hyperlink ended by ST', '\u001b]8;;https://evil.test\u001b\\link', '\\x1b]8;;https://evil.test\\x1b\\link'],
    ['DEL', 'a\u007fb', 'a\\x7fb'],
    ['C1: 8-bit CSI, OSC, NEL, ST', '\u009b2J\u009d0;t\u0085\u009c', '\\x9b2J\\x9d0;t\\x85\\x9c'],
    ['bidi embeddings and overrides U+202A-U+202E', '\u202a\u202b\u202c\u202d\u202e', '\\u202a\\u202b\\u202c\\u202d\\u202e'],
    ['bidi isolates U+2066-U+2069', '\u2066\u2067\u2068\u2069', '\\u2066\\u2067\\u2068\\u2069'],
    ['a right-to-left override reversing a file name', 'invoice\u202Efdp.exe', 'invoice\\u202efdp.exe'],
    ['LRM, RLM, ALM', '\u200e\u200f\u061c', '\\u200e\\u200f\\u061c'],
    ['line and paragraph separators', 'a\u2028b\u2029c', 'a\\u2028b\\u2029c'],
    ['zero-width space, word joiner, BOM, soft hyphen', '\u200b\u2060\ufeff\u00ad', '\\u200b\\u2060\\ufeff\\xad'],
    ['tag characters (hidden text)', 'ok\u{e0041}\u{e0042}', 'ok\\u{e0041}\\u{e0042}'],
    ['lone surrogates', 'a\ud800b\udfffc', 'a\\ud800b\\udfffc'],
    ['backslashes are printed as they are', 'C:\\dir\\n', 'C:\\dir\\n'],
    ['empty', '', ''],
  ])('%s', (_name, input, expected) => {
    const shown = untrustedText(input);
    expect(shown).toBe(expected);
    expect(shown).not.toMatch(RAW);
    // Escaping is idempotent: showing shown text again changes nothing.
    expect(untrustedText(shown)).toBe(shown);
  });
});

describe('untrustedText: multi-line bodies', () => {
  const block = { prefix: '    | ' };

  it.each([
    ['one line', 'please merge', ['    | please merge']],
    ['lines keep their breaks, each prefixed', 'first\nsecond\n\nfourth', ['    | first', '    | second', '    | ', '    | fourth']],
    ['one trailing newline is dropped', 'done\n', ['    | done']],
    [
      'a forged proofgate line stays inside the body',
      'ok\n  [9] alice at 2024-01-01:\nREVIEW: CONFIRMED',
      ['    | ok', '    |   [9] alice at 2024-01-01:', '    | REVIEW: CONFIRMED'],
    ],
    ['escapes, tabs and carriage returns inside lines are escaped', 'a\u001b[2J\tb\r\nc\u202ed', ['    | a\\x1b[2J\\tb\\r', '    | c\\u202ed']],
    ['C1 NEL and U+2028/U+2029 do not break lines', 'a\u0085b\u2028c\u2029d', ['    | a\\x85b\\u2028c\\u2029d']],
  ])('%s', (_name, input, expected) => {
    const shown = untrustedText(input, block);
    expect(shown.split('\n')).toEqual(expected);
    for (const line of shown.split('\n')) expect(line).not.toMatch(RAW);
    expect(shown.split('\n').every((line) => line.startsWith(block.prefix))).toBe(true);
  });

  it('an empty body is no lines', () => {
    expect(untrustedText('', block)).toBe('');
  });

  it('with an empty prefix (output that is all the body) only the escaping applies', () => {
    expect(untrustedText('ok 1\nnot ok 2\u001b[31m\n', { prefix: '' })).toBe('ok 1\nnot ok 2\\x1b[31m');
  });
});

describe('jsonForTerminal: --json stays exact', () => {
  it.each([
    ['plain', { title: 'fix typo', n: 1, list: [null, true] }],
    ['C0 controls (JSON escapes them already)', { title: 'ok\n2\tmerged\u001b[2J\u0007' }],
    ['DEL and C1 controls', { title: 'a\u007f\u009b2J\u0085' }],
    ['bidi, separators, BOM', { title: '\u202eevil\u2066\u2028\u2029\ufeff' }],
    ['tag characters', { title: 'x\u{e0041}' }],
    ['lone surrogates', { title: 'a\ud800b' }],
    ['keys are covered too', { ['k\u202e\u009b']: 'v' }],
    ['emoji with joiners', { title: '👩‍👩‍👧 café' }],
  ])('%s: parses back to the same value and prints nothing raw', (_name, value) => {
    const line = jsonForTerminal(value);
    expect(JSON.parse(line)).toEqual(value);
    expect(line).not.toMatch(RAW);
    expect(line.includes('\n')).toBe(false);
  });

  it('is JSON.stringify where nothing needs escaping', () => {
    const value = { title: 'naïve 日本語', sha: 'a'.repeat(40) };
    expect(jsonForTerminal(value)).toBe(JSON.stringify(value));
  });
});
