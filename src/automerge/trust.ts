import { sameLogin } from '../contracts/repo-config.js';
import type { RepoPermission } from '../forge/port.js';
import type { AutomergeCommand } from './commands.js';

/** Who wrote a command comment, as the forge reports it. */
export interface CommandActor {
  readonly login: string;
  readonly permission: RepoPermission;
  /** The actor opened the change. */
  readonly isChangeAuthor: boolean;
  /** The forge marks the account as a bot / app. */
  readonly isBot: boolean;
}

export type Authorization = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

/** Permissions that may drive automerge. */
export const WRITE_PERMISSIONS: readonly RepoPermission[] = ['admin', 'maintain', 'write'];

/** What the change's own author may ask for without write permission: a re-review, nothing else. */
const AUTHOR_COMMANDS = new Set<AutomergeCommand['kind']>(['review']);

function describe(command: AutomergeCommand): string {
  return command.kind === 'invalid' ? `an invalid ${command.command} command` : `"${command.kind}"`;
}

/**
 * May `actor` give `command`? A refusal's reason is the log line; the router does
 * nothing else for a refused command (no reply, so strangers cannot make
 * proofgate talk). `unknown` / `invalid` commands are allowed only for write
 * permission and above, who get a help reply; the change's author below write
 * may only ask for a re-review (`review`), and anything else from them, help
 * replies included, is ignored like a stranger's command.
 */
export function authorizeCommand(command: AutomergeCommand, actor: CommandActor, selfLogin: string): Authorization {
  if (sameLogin(actor.login, selfLogin)) {
    return { allowed: false, reason: `ignored ${describe(command)}: written by proofgate's own identity (${actor.login})` };
  }
  if (actor.isBot) {
    return { allowed: false, reason: `ignored ${describe(command)} from bot account ${actor.login}: bots cannot command proofgate` };
  }
  if (WRITE_PERMISSIONS.includes(actor.permission)) return { allowed: true };
  if (actor.isChangeAuthor) {
    if (AUTHOR_COMMANDS.has(command.kind)) return { allowed: true };
    return {
      allowed: false,
      reason: `ignored ${describe(command)} from ${actor.login}: the change's author (permission ${actor.permission}) may only ask for a re-review (review)`,
    };
  }
  return {
    allowed: false,
    reason: `ignored ${describe(command)} from ${actor.login}: permission ${actor.permission} is below write and ${actor.login} is not the change's author`,
  };
}
