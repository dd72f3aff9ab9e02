import { describe, expect, it } from 'vitest';
import { commandMention, commandText, parseCommands, type AutomergeCommand } from '../../src/automerge/index.js';

const SHA = '0123456789abcdef0123456789abcdef01234567';

function kinds(body: string): AutomergeCommand[] {
  return parseCommands(body).map(({ line: _line, source: _source, ...command }) => command as AutomergeCommand);
}

describe('parseCommands: one command per body', () => {
  const rows: [string, string, AutomergeCommand[]][] = [
    ['slash automerge', '/proofgate automerge', [{ kind: 'automerge' }]],
    ['at automerge', '@proofgate automerge', [{ kind: 'automerge' }]],
    ['slash stop', '/proofgate stop', [{ kind: 'stop' }]],
    ['at stop', '@proofgate stop', [{ kind: 'stop' }]],
    ['review', '/proofgate review', [{ kind: 'review' }]],
    ['at review', '@proofgate review', [{ kind: 'review' }]],
    ['rebase', '/proofgate rebase', [{ kind: 'rebase' }]],
    ['at rebase', '@proofgate rebase', [{ kind: 'rebase' }]],
    ['status', '/proofgate status', [{ kind: 'status' }]],
    ['at status', '@proofgate status', [{ kind: 'status' }]],
    ['leading and trailing spaces', '   /proofgate automerge   ', [{ kind: 'automerge' }]],
    ['tab between prefix and command', '/proofgate\tautomerge', [{ kind: 'automerge' }]],
    ['upper case', '/ProofGate AUTOMERGE', [{ kind: 'automerge' }]],
    ['CRLF line ends', 'hello\r\n/proofgate stop\r\n', [{ kind: 'stop' }]],
    ['proof bare', '@proofgate proof', [{ kind: 'proof', scenarios: [], sha: null }]],
    ['proof slash form', '/proofgate proof smoke', [{ kind: 'proof', scenarios: ['smoke'], sha: null }]],
    ['proof one scenario', '@proofgate proof smoke', [{ kind: 'proof', scenarios: ['smoke'], sha: null }]],
    ['proof list', '@proofgate proof smoke,login.flow,e2e_1', [{ kind: 'proof', scenarios: ['smoke', 'login.flow', 'e2e_1'], sha: null }]],
    ['proof list with spaces after commas', '@proofgate proof smoke, login', [{ kind: 'proof', scenarios: ['smoke', 'login'], sha: null }]],
    ['proof duplicate scenario kept once', '@proofgate proof smoke,smoke', [{ kind: 'proof', scenarios: ['smoke'], sha: null }]],
    ['proof sha only', `@proofgate proof ${SHA}`, [{ kind: 'proof', scenarios: [], sha: SHA }]],
    ['proof upper-case sha normalized', `@proofgate proof ${SHA.toUpperCase()}`, [{ kind: 'proof', scenarios: [], sha: SHA }]],
    ['proof scenarios and sha', `@proofgate proof smoke,login ${SHA}`, [{ kind: 'proof', scenarios: ['smoke', 'login'], sha: SHA }]],
    ['proof hex-ish scenario inside list', '@proofgate proof deadbeef00,smoke', [{ kind: 'proof', scenarios: ['deadbeef00', 'smoke'], sha: null }]],
    ['approve', '/proofgate approve', [{ kind: 'approve', sha: null }]],
    ['at approve', '@proofgate approve', [{ kind: 'approve', sha: null }]],
    ['approve a named head', `/proofgate approve ${SHA}`, [{ kind: 'approve', sha: SHA }]],
    ['approve an upper-case sha, normalized', `/proofgate APPROVE ${SHA.toUpperCase()}`, [{ kind: 'approve', sha: SHA }]],
    [
      'approve a short sha is invalid',
      '/proofgate approve abc1234',
      [{ kind: 'invalid', command: 'approve', reason: '"abc1234" is not a full commit sha (40 hex digits)', text: '/proofgate approve abc1234' }],
    ],
    [
      'approve with two arguments is invalid',
      `/proofgate approve ${SHA} now`,
      [{ kind: 'invalid', command: 'approve', reason: 'approve takes at most one argument: the full sha of the head', text: `/proofgate approve ${SHA} now` }],
    ],
    ['a quoted approve is no command', '> /proofgate approve', []],
    ['a fenced approve is no command', '```\n/proofgate approve\n```', []],
    ['unknown command', '/proofgate merge-now', [{ kind: 'unknown', text: '/proofgate merge-now' }]],
    ['help is unknown (help reply)', '@proofgate help', [{ kind: 'unknown', text: '@proofgate help' }]],
    ['prefix alone', '/proofgate', [{ kind: 'unknown', text: '/proofgate' }]],
    ['prefix with trailing spaces', '/proofgate   ', [{ kind: 'unknown', text: '/proofgate' }]],
    ['trailing punctuation is unknown', '/proofgate automerge.', [{ kind: 'unknown', text: '/proofgate automerge.' }]],
    [
      'plain command with args',
      '/proofgate automerge now',
      [{ kind: 'invalid', command: 'automerge', reason: 'automerge takes no arguments', text: '/proofgate automerge now' }],
    ],
    ['stop with args', '/proofgate stop please', [{ kind: 'invalid', command: 'stop', reason: 'stop takes no arguments', text: '/proofgate stop please' }]],
  ];
  it.each(rows)('%s', (_name, body, expected) => {
    expect(kinds(body)).toEqual(expected);
  });
});

describe('parseCommands: invalid proof arguments', () => {
  const rows: [string, string, RegExp][] = [
    ['short sha', '@proofgate proof abc1234', /not a full commit sha/],
    ['39 hex', `@proofgate proof ${SHA.slice(1)}`, /not a full commit sha/],
    ['41 hex', `@proofgate proof ${SHA}a`, /not a full commit sha/],
    ['scenario then short sha', '@proofgate proof smoke deadbeef', /not a full commit sha/],
    ['sha before scenario', `@proofgate proof ${SHA} smoke`, /separate scenario names with commas/],
    ['upper-case scenario', '@proofgate proof Smoke', /not a scenario name/],
    ['scenario with slash', '@proofgate proof a/b', /not a scenario name/],
    ['scenario starting with dot', '@proofgate proof .hidden', /not a scenario name/],
    ['empty list entry', '@proofgate proof smoke,,login', /empty scenario name/],
    ['trailing comma', '@proofgate proof smoke,', /empty scenario name/],
    ['space separated scenarios', '@proofgate proof smoke login', /separate scenario names with commas/],
    ['scenario name too long', `@proofgate proof ${'x'.repeat(65)}`, /not a scenario name/],
    ['non-hex 40 chars as sha position', `@proofgate proof smoke ${'g'.repeat(40)}`, /separate scenario names with commas/],
  ];
  it.each(rows)('%s', (_name, body, reason) => {
    const [command, ...rest] = parseCommands(body);
    expect(rest).toEqual([]);
    expect(command?.kind).toBe('invalid');
    if (command?.kind !== 'invalid') throw new Error('expected invalid');
    expect(command.command).toBe('proof');
    expect(command.reason).toMatch(reason);
  });
});

describe('parseCommands: text that is never a command', () => {
  const rows: [string, string][] = [
    ['empty body', ''],
    ['text before the command', 'please /proofgate automerge'],
    ['text after prefix without space', '/proofgateautomerge'],
    ['other bot', '/otherbot automerge'],
    ['mention inside a sentence', 'thanks @proofgate automerge is great'],
    ['backtick fence', '```\n/proofgate automerge\n```'],
    ['backtick fence with info string', '```sh\n/proofgate automerge\n```'],
    ['tilde fence', '~~~\n/proofgate automerge\n~~~'],
    ['long fence closed only by long enough fence', '````\n```\n/proofgate automerge\n````'],
    ['fence not closed by other char', '```\n~~~\n/proofgate automerge'],
    ['unclosed fence hides the rest', 'text\n```\n/proofgate automerge'],
    ['fence indented three spaces', '   ```\n/proofgate automerge\n   ```'],
    ['indented code after blank line', 'text\n\n    /proofgate automerge'],
    ['indented code at start', '    /proofgate automerge'],
    ['tab-indented code', '\t/proofgate automerge'],
    ['indented line after paragraph', 'text\n    /proofgate automerge'],
    ['quote', '> /proofgate automerge'],
    ['quote without space', '>/proofgate automerge'],
    ['indented quote', '  > /proofgate automerge'],
    ['nested quote', '> > /proofgate automerge'],
    ['lazy quote continuation', '> you wrote:\n/proofgate automerge'],
    ['html comment on one line', '<!-- /proofgate automerge -->'],
    ['html comment block', '<!--\n/proofgate automerge\n-->'],
    ['inline code', '`/proofgate automerge`'],
    ['list item', '- /proofgate automerge'],
    ['fence opened right after a quote line', '> quoted\n```\n\n/proofgate automerge\n```'],
    ['fence inside a list item', '- ```\n  /proofgate automerge\n  ```'],
    ['fence inside a nested ordered list item', '1. - ~~~\n/proofgate automerge\n~~~'],
    ['quote inside a list item', '- > quoted\n/proofgate automerge'],
    ['html pre block', '<pre>\n/proofgate automerge\n</pre>'],
    ['html pre block, upper case', '<PRE>\n/proofgate automerge\n</PRE>'],
    ['html pre with attributes', '<pre lang="sh" class=\'x\'>\n/proofgate automerge\n</pre>'],
    ['html pre tag spread over lines', '<pre\n  class="x">\n/proofgate automerge\n</pre>'],
    ['html pre closed with spaces, command inside', 'text <pre>\n@proofgate stop\n</pre >'],
    ['unclosed html pre runs to the end', 'see:\n<pre>\n\ntext\n\n/proofgate automerge'],
    ['html code spanning lines', 'run <code>\n/proofgate automerge\n</code>'],
    ['html code with attributes, mixed case', '<Code class="language-sh">\n/proofgate automerge\n</cODE>'],
    ['html code inside pre, closed code does not end pre', '<pre><code>x</code>\n/proofgate automerge\n</pre>'],
    ['html pre not closed by a closing code tag', '<pre>\n</code>\n/proofgate automerge'],
    ['html pre inside a list item', '- <pre>\n/proofgate automerge\n</pre>'],
    ['html pre on one line with the command', '<pre>/proofgate automerge</pre>'],
  ];
  it.each(rows)('%s', (_name, body) => {
    expect(parseCommands(body)).toEqual([]);
  });
});

describe('parseCommands: blocks end and commands resume', () => {
  const rows: [string, string, string[]][] = [
    ['after a closed fence', '```\n/proofgate stop\n```\n/proofgate automerge', ['automerge']],
    ['after a quote and a blank line', '> /proofgate stop\n\n/proofgate automerge', ['automerge']],
    ['after an html comment', '<!--\n/proofgate stop\n-->\n/proofgate automerge', ['automerge']],
    ['after indented code and a blank line', '    /proofgate stop\n\n/proofgate automerge', ['automerge']],
    ['indented code ends at a less indented line', '\n    code\n/proofgate automerge', ['automerge']],
    ['backticks in info string are not a fence', '``` a ` b\n/proofgate automerge', ['automerge']],
    ['several commands in order', '/proofgate automerge\ntext\n@proofgate status\n/proofgate nope', ['automerge', 'status', 'unknown']],
    ['three-space indent is still a command', '   /proofgate rebase', ['rebase']],
    ['after a fence inside a list item', '- ```\n  x\n  ```\n/proofgate automerge', ['automerge']],
    ['a thematic break is not a list marker', '***\n/proofgate automerge', ['automerge']],
    ['after a closed html pre block', '<pre>\n/proofgate stop\n</pre>\n/proofgate automerge', ['automerge']],
    ['after a one-line html pre element', '<pre>x</pre>\n/proofgate automerge', ['automerge']],
    ['after a closed html code element spanning lines', 'a <code>\n/proofgate stop\n</code> b\n/proofgate automerge', ['automerge']],
    ['a tag that only starts with pre is not pre', '<prelude>\n/proofgate automerge', ['automerge']],
  ];
  it.each(rows)('%s', (_name, body, expected) => {
    expect(parseCommands(body).map((c) => c.kind)).toEqual(expected);
  });

  it('reports line numbers and the source line', () => {
    const found = parseCommands('hi\n\n  /proofgate automerge  \n@proofgate proof smoke');
    expect(found.map((c) => [c.line, c.source])).toEqual([
      [3, '/proofgate automerge'],
      [4, '@proofgate proof smoke'],
    ]);
  });
});

describe('commandText', () => {
  const rows: [AutomergeCommand, string][] = [
    [{ kind: 'automerge' }, 'automerge'],
    [{ kind: 'proof', scenarios: [], sha: null }, 'proof'],
    [{ kind: 'proof', scenarios: ['a', 'b'], sha: SHA }, `proof a,b ${SHA}`],
    [{ kind: 'approve', sha: null }, 'approve'],
    [{ kind: 'approve', sha: SHA }, `approve ${SHA}`],
    [{ kind: 'unknown', text: '/proofgate x' }, 'unknown /proofgate x'],
    [{ kind: 'invalid', command: 'stop', reason: 'r', text: '/proofgate stop x' }, 'invalid /proofgate stop x'],
  ];
  it.each(rows)('%j', (command, text) => {
    expect(commandText(command)).toBe(text);
  });
});

describe('commands addressed to a GitHub App by its name', () => {
  it('commandMention: an App `slug[bot]` answers to @slug; proofgate itself and non-slugs add nothing', () => {
    expect(commandMention('proofgate-acme[bot]')).toBe('proofgate-acme');
    expect(commandMention('Merge-Bot[bot]')).toBe('merge-bot');
    expect(commandMention('proofgate[bot]')).toBeNull();
    expect(commandMention('proofgate')).toBeNull();
    expect(commandMention('bad.name[bot]')).toBeNull();
    expect(commandMention('-x[bot]')).toBeNull();
  });

  it('parseCommands with a mention takes @slug lines (any case) besides /proofgate and @proofgate, and nothing that only starts like it', () => {
    const body = [
      '@proofgate-acme automerge',
      '@Proofgate-ACME stop',
      '/proofgate status',
      '@proofgate-acmex review',
      '@proofgate-acme-x review',
      '/proofgate-acme rebase',
    ].join('\n');
    expect(parseCommands(body, 'proofgate-acme').map((c) => c.kind)).toEqual(['automerge', 'stop', 'status']);
    // Without the mention (the local forge, or another App) the slug is no command at all.
    expect(parseCommands(body).map((c) => c.kind)).toEqual(['status']);
    // Quoted or fenced, an @slug line is no command either.
    expect(parseCommands('> @proofgate-acme automerge\n```\n@proofgate-acme automerge\n```', 'proofgate-acme')).toEqual([]);
  });

  it('a mention that is not a slug is ignored rather than built into the pattern', () => {
    expect(parseCommands('@.* automerge\n/proofgate stop', '.*').map((c) => c.kind)).toEqual(['stop']);
  });
});
