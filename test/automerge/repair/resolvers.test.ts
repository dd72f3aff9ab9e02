import { describe, expect, it } from 'vitest';
import { isChecksumFileName, parseChecksumLine, resolveChangelog, resolveChecksums, resolveConflict } from '../../../src/automerge/repair/index.js';

const lines = (...parts: string[]) => parts.map((part) => `${part}\n`).join('');

const HEAD_OF_LOG = ['# Changelog', '', '## Unreleased', ''];
const OLDER = ['', '## 1.0.0', '', '- first release'];
const log = (...entries: string[]) => lines(...HEAD_OF_LOG, ...entries, ...OLDER);

describe('resolveChangelog', () => {
  const base = log('- existing entry');
  const cases: Array<{ name: string; ours: string; theirs: string; expected: string | null; baseText?: string }> = [
    {
      name: 'both add at the top of Unreleased: base entries first, then the change',
      ours: log('- base fix', '- existing entry'),
      theirs: log('- change feature', '- existing entry'),
      expected: log('- base fix', '- change feature', '- existing entry'),
    },
    {
      name: 'several lines on each side',
      ours: log('- base a', '- base b', '- existing entry'),
      theirs: log('- change a', '- change b', '- existing entry'),
      expected: log('- base a', '- base b', '- change a', '- change b', '- existing entry'),
    },
    {
      name: 'different spots of the same section keep their places',
      ours: log('- base fix', '- existing entry'),
      theirs: log('- existing entry', '- change feature'),
      expected: log('- base fix', '- existing entry', '- change feature'),
    },
    {
      name: 'the same entry added on both sides is kept once',
      ours: log('- shared', '- existing entry'),
      theirs: log('- shared', '- change only', '- existing entry'),
      expected: log('- shared', '- change only', '- existing entry'),
    },
    {
      name: 'only one side changed: that side',
      ours: base,
      theirs: log('- change feature', '- existing entry'),
      expected: log('- change feature', '- existing entry'),
    },
    {
      name: 'subsections (###) stay in their section',
      baseText: lines('# Changelog', '', '## Unreleased', '### Added', '- a', '### Fixed', '- f', '', '## 1.0.0'),
      ours: lines('# Changelog', '', '## Unreleased', '### Added', '- a', '- base added', '### Fixed', '- f', '', '## 1.0.0'),
      theirs: lines('# Changelog', '', '## Unreleased', '### Added', '- a', '### Fixed', '- f', '- change fixed', '', '## 1.0.0'),
      expected: lines('# Changelog', '', '## Unreleased', '### Added', '- a', '- base added', '### Fixed', '- f', '- change fixed', '', '## 1.0.0'),
    },
    {
      name: 'refuses: the base branch edited an existing line',
      ours: log('- existing entry (reworded)'),
      theirs: log('- change', '- existing entry'),
      expected: null,
    },
    { name: 'refuses: the change removed an existing line', ours: log('- base', '- existing entry'), theirs: log(), expected: null },
    { name: 'refuses: the change edited an existing line', ours: log('- base', '- existing entry'), theirs: log('- new', '- existing entry!'), expected: null },
    {
      name: 'refuses: additions in two places on one side',
      ours: log('- base', '- existing entry'),
      theirs: lines('# Changelog', '- stray', '', '## Unreleased', '', '- change', '- existing entry', ...OLDER),
      expected: null,
    },
    {
      name: 'refuses: additions in different sections',
      ours: log('- base', '- existing entry'),
      theirs: lines(...HEAD_OF_LOG, '- existing entry', '', '## 1.0.0', '', '- change', '- first release'),
      expected: null,
    },
    {
      name: 'refuses: additions deep in the history, far from the top',
      baseText: lines('# Changelog', '## 3.0', '- c', '## 2.0', '- b', '## 1.0', '- a'),
      ours: lines('# Changelog', '## 3.0', '- c', '## 2.0', '- b', '## 1.0', '- ours', '- a'),
      theirs: lines('# Changelog', '## 3.0', '- c', '## 2.0', '- b', '## 1.0', '- theirs', '- a'),
      expected: null,
    },
  ];
  it.each(cases)('$name', ({ ours, theirs, expected, baseText }) => {
    expect(resolveChangelog(baseText ?? base, ours, theirs)).toBe(expected);
  });

  it('keeps a missing final newline where the base had none', () => {
    const noEol = '# Changelog\n\n## Unreleased\n\n- old';
    expect(resolveChangelog(noEol, noEol.replace('- old', '- ours\n- old'), noEol.replace('- old', '- theirs\n- old'))).toBe(
      '# Changelog\n\n## Unreleased\n\n- ours\n- theirs\n- old',
    );
  });
});

const D = (c: string) => c.repeat(64);

describe('parseChecksumLine and isChecksumFileName', () => {
  it.each([
    [`${D('a')}  dist/app.js`, false, { digest: D('a'), path: 'dist/app.js' }],
    [`${D('b')} *bin/tool`, false, { digest: D('b'), path: 'bin/tool' }],
    [`sha256:${D('c')} config/a.yml\n`, false, { digest: `sha256:${D('c')}`, path: 'config/a.yml' }],
    [`config/a.yml ${D('d')}`, false, null],
    [`config/a.yml: sha256:${D('d')}`, true, { path: 'config/a.yml', digest: `sha256:${D('d')}` }],
    ['abc  short.txt', false, null],
    ['# generated file', true, null],
  ] as const)('%s (path first allowed: %s)', (line, pathFirst, expected) => {
    expect(parseChecksumLine(line, pathFirst)).toEqual(expected);
  });

  it.each([
    ['checksums.txt', true],
    ['config/config.checksums', true],
    ['SHA256SUMS', true],
    ['release/sha512sums.txt', true],
    ['deps-checksums.lst', true],
    ['src/checksum.ts', false],
    ['src/checksums.ts', false],
    ['README.md', false],
    ['src/index.ts', false],
  ])('%s -> %s', (path, expected) => {
    expect(isChecksumFileName(path)).toBe(expected);
  });
});

describe('resolveChecksums', () => {
  const entry = (digest: string, path: string) => `${digest}  ${path}`;
  const base = lines(entry(D('0'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('2'), 'c.yml'));
  const cases: Array<{ name: string; path?: string; base?: string; ours: string; theirs: string; expected: string | null }> = [
    {
      name: 'each side regenerated other entries: base version plus the change entries',
      ours: lines(entry(D('0'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('9'), 'c.yml')),
      theirs: lines(entry(D('0'), 'a.yml'), entry(D('8'), 'b.yml'), entry(D('2'), 'c.yml')),
      expected: lines(entry(D('0'), 'a.yml'), entry(D('8'), 'b.yml'), entry(D('9'), 'c.yml')),
    },
    {
      name: 'a new entry goes to its sorted place',
      ours: lines(entry(D('0'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('9'), 'c.yml')),
      theirs: lines(entry(D('0'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('7'), 'bb.yml'), entry(D('2'), 'c.yml')),
      expected: lines(entry(D('0'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('7'), 'bb.yml'), entry(D('9'), 'c.yml')),
    },
    {
      name: 'an entry the change removed is removed',
      ours: lines(entry(D('5'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('2'), 'c.yml')),
      theirs: lines(entry(D('0'), 'a.yml'), entry(D('2'), 'c.yml')),
      expected: lines(entry(D('5'), 'a.yml'), entry(D('2'), 'c.yml')),
    },
    {
      name: 'both set the same entry to the same value',
      ours: lines(entry(D('0'), 'a.yml'), entry(D('6'), 'b.yml'), entry(D('9'), 'c.yml')),
      theirs: lines(entry(D('0'), 'a.yml'), entry(D('6'), 'b.yml'), entry(D('2'), 'c.yml')),
      expected: lines(entry(D('0'), 'a.yml'), entry(D('6'), 'b.yml'), entry(D('9'), 'c.yml')),
    },
    {
      name: 'sha256:<hex> <path> entries with a comment header (named file)',
      path: 'config/checksums',
      base: lines('# generated', `sha256:${D('0')} a.yml`, `sha256:${D('1')} b.yml`),
      ours: lines('# generated', `sha256:${D('3')} a.yml`, `sha256:${D('1')} b.yml`),
      theirs: lines('# generated', `sha256:${D('0')} a.yml`, `sha256:${D('4')} b.yml`),
      expected: lines('# generated', `sha256:${D('3')} a.yml`, `sha256:${D('4')} b.yml`),
    },
    {
      name: '<path>: <digest> entries in a checksums-named file',
      path: 'checksums.txt',
      base: lines(`a.yml: ${D('0')}`, `b.yml: ${D('1')}`),
      ours: lines(`a.yml: ${D('3')}`, `b.yml: ${D('1')}`),
      theirs: lines(`a.yml: ${D('0')}`, `b.yml: ${D('4')}`),
      expected: lines(`a.yml: ${D('3')}`, `b.yml: ${D('4')}`),
    },
    {
      name: 'refuses: both sides set the same entry to different values',
      ours: lines(entry(D('0'), 'a.yml'), entry(D('6'), 'b.yml'), entry(D('2'), 'c.yml')),
      theirs: lines(entry(D('0'), 'a.yml'), entry(D('7'), 'b.yml'), entry(D('2'), 'c.yml')),
      expected: null,
    },
    {
      name: 'refuses: the change removed an entry the base changed',
      ours: lines(entry(D('0'), 'a.yml'), entry(D('6'), 'b.yml'), entry(D('2'), 'c.yml')),
      theirs: lines(entry(D('0'), 'a.yml'), entry(D('2'), 'c.yml')),
      expected: null,
    },
    {
      name: 'refuses: the change touched a line that is not an entry (named file)',
      path: 'checksums.txt',
      base: lines('# v1', entry(D('0'), 'a.yml')),
      ours: lines('# v1', entry(D('3'), 'a.yml')),
      theirs: lines('# v2', entry(D('0'), 'a.yml'), entry(D('4'), 'b.yml')),
      expected: null,
    },
    {
      name: 'refuses: a file that is not a checksum list',
      path: 'src/data.txt',
      base: lines(entry(D('0'), 'a.yml'), 'some prose'),
      ours: lines(entry(D('3'), 'a.yml'), 'some prose'),
      theirs: lines(entry(D('4'), 'a.yml'), 'some prose'),
      expected: null,
    },
    {
      name: 'refuses: a path listed twice',
      ours: lines(entry(D('0'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('9'), 'c.yml')),
      theirs: lines(entry(D('0'), 'a.yml'), entry(D('1'), 'b.yml'), entry(D('7'), 'b.yml'), entry(D('2'), 'c.yml')),
      expected: null,
    },
  ];
  it.each(cases)('$name', ({ path, base: baseText, ours, theirs, expected }) => {
    expect(resolveChecksums(path ?? 'dist/SHA256SUMS', baseText ?? base, ours, theirs)).toBe(expected);
  });
});

describe('resolveConflict picks the resolver by path and content', () => {
  const bytes = (text: string) => new TextEncoder().encode(text);
  it('routes CHANGELOG.md (any folder, any case) to the changelog resolver', () => {
    const base = log('- x');
    const result = resolveConflict({ path: 'docs/changelog.md', base: bytes(base), ours: bytes(log('- o', '- x')), theirs: bytes(log('- t', '- x')) });
    expect(result).toEqual({ kind: 'resolved', resolver: 'changelog', content: log('- o', '- t', '- x') });
  });

  it('routes a checksum list to the checksum resolver', () => {
    const e = (d: string, p: string) => `${D(d)}  ${p}\n`;
    const result = resolveConflict({
      path: 'SHA256SUMS',
      base: bytes(e('0', 'a') + e('1', 'b')),
      ours: bytes(e('2', 'a') + e('1', 'b')),
      theirs: bytes(e('0', 'a') + e('3', 'b')),
    });
    expect(result).toEqual({ kind: 'resolved', resolver: 'checksums', content: e('2', 'a') + e('3', 'b') });
  });

  it.each([
    ['src/index.ts', 'const a = 1;\n', 'const a = 2;\n', 'const a = 3;\n', 'src/index.ts: no mechanical resolver applies'],
    ['CHANGELOG.md', log('- x'), log('- x!'), log('- t', '- x'), 'CHANGELOG.md: not an isolated addition of entries on both sides'],
    [
      'checksums.txt',
      `${D('0')}  a\n`,
      `${D('1')}  a\n`,
      `${D('2')}  a\n`,
      'checksums.txt: the change touched more than checksum entries, or both sides changed the same entry',
    ],
  ])('refuses %s with a reason', (path, base, ours, theirs, reason) => {
    expect(resolveConflict({ path, base: bytes(base), ours: bytes(ours), theirs: bytes(theirs) })).toEqual({ kind: 'refused', reason });
  });

  it('refuses binary content', () => {
    const binary = new Uint8Array([0x89, 0x50, 0x00, 0x01]);
    expect(resolveConflict({ path: 'CHANGELOG.md', base: binary, ours: binary, theirs: binary })).toEqual({
      kind: 'refused',
      reason: 'CHANGELOG.md: not a text file',
    });
  });
});
