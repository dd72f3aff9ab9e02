import { describe, expect, it } from 'vitest';
import { authorizeCommand, type AutomergeCommand, type CommandActor } from '../../src/automerge/index.js';
import type { RepoPermission } from '../../src/forge/port.js';

const SELF = 'proofgate[bot]';
const COMMANDS: Record<string, AutomergeCommand> = {
  automerge: { kind: 'automerge' },
  stop: { kind: 'stop' },
  rebase: { kind: 'rebase' },
  review: { kind: 'review' },
  status: { kind: 'status' },
  proof: { kind: 'proof', scenarios: ['smoke'], sha: null },
  unknown: { kind: 'unknown', text: '/proofgate what' },
  invalid: { kind: 'invalid', command: 'proof', reason: 'bad sha', text: '@proofgate proof abc1234' },
};

function actor(permission: RepoPermission, overrides: Partial<CommandActor> = {}): CommandActor {
  return { login: 'someone', permission, isChangeAuthor: false, isBot: false, ...overrides };
}

type Row = [string, keyof typeof COMMANDS, CommandActor, boolean, RegExp | null];

const rows: Row[] = [];
for (const permission of ['admin', 'maintain', 'write'] as const) {
  for (const command of Object.keys(COMMANDS)) rows.push([`${permission} may ${command}`, command, actor(permission), true, null]);
}
for (const permission of ['triage', 'read', 'none'] as const) {
  for (const command of ['automerge', 'stop', 'rebase', 'proof', 'status', 'unknown', 'invalid'] as const) {
    rows.push([`author with ${permission} may not ${command}`, command, actor(permission, { isChangeAuthor: true }), false, /may only ask for a re-review/]);
    rows.push([`stranger with ${permission} may not ${command}`, command, actor(permission), false, /below write and someone is not the change's author/]);
  }
  rows.push([`author with ${permission} may review`, 'review', actor(permission, { isChangeAuthor: true }), true, null]);
  rows.push([`stranger with ${permission} may not review`, 'review', actor(permission), false, /below write/]);
}
rows.push(
  ['proofgate itself never commands itself', 'automerge', actor('admin', { login: SELF, isBot: true }), false, /proofgate's own identity/],
  ['self identity matched case-insensitively', 'stop', actor('write', { login: 'ProofGate[BOT]' }), false, /proofgate's own identity/],
  ['a bot with write is ignored', 'automerge', actor('write', { login: 'dependabot[bot]', isBot: true }), false, /bots cannot command/],
  [
    'a bot that authored the change is ignored',
    'review',
    actor('read', { login: 'renovate[bot]', isBot: true, isChangeAuthor: true }),
    false,
    /bots cannot command/,
  ],
  ['author with write may automerge', 'automerge', actor('write', { isChangeAuthor: true }), true, null],
  ['invalid command named in reason', 'invalid', actor('read'), false, /an invalid proof command/],
);

describe('authorizeCommand', () => {
  it.each(rows)('%s', (_name, command, who, allowed, reason) => {
    const result = authorizeCommand(COMMANDS[command] as AutomergeCommand, who, SELF);
    expect(result.allowed).toBe(allowed);
    if (!result.allowed) {
      expect(result.reason).toMatch(reason ?? /./);
      expect(result.reason).toContain(who.login);
      expect(result.reason).not.toMatch(/\n/);
    }
  });
});
