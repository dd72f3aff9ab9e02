/**
 * Maintainer commands in change comments: `/proofgate <cmd>` or `@proofgate <cmd>`
 * (and `@<slug> <cmd>` for a GitHub App, see `commandMention`),
 * one command per whole line. Lines inside fenced code blocks (``` or ~~~),
 * indented code (4+ columns), block quotes (with their lazy continuation lines),
 * HTML comments and HTML `<pre>` / `<code>` elements (any case, with attributes,
 * over any number of lines; an unclosed one runs to the end of the comment) are
 * never commands, so quoting or pasting a command never triggers it.
 */

export type CommandKind = 'automerge' | 'stop' | 'review' | 'rebase' | 'status' | 'proof' | 'approve';

export type AutomergeCommand =
  | { readonly kind: 'automerge' | 'stop' | 'review' | 'rebase' | 'status' }
  | { readonly kind: 'proof'; readonly scenarios: readonly string[]; readonly sha: string | null }
  /** A maintainer approves the change's current head (the named full sha must be it) although it touches what proofgate trusts. */
  | { readonly kind: 'approve'; readonly sha: string | null }
  /** Anything else after the prefix: the router answers with a help reply. */
  | { readonly kind: 'unknown'; readonly text: string }
  /** A known command with bad arguments: the router answers with the reason. */
  | { readonly kind: 'invalid'; readonly command: CommandKind; readonly reason: string; readonly text: string };

/** A command plus where it was found. */
export type ParsedCommand = AutomergeCommand & {
  /** 1-based line number in the comment body. */
  readonly line: number;
  /** The command line as written, without surrounding whitespace. */
  readonly source: string;
};

const PLAIN_COMMANDS = new Set(['automerge', 'stop', 'review', 'rebase', 'status']);
/** Scenario names as the trusted config spells them. */
const SCENARIO_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const FULL_SHA = /^[0-9a-f]{40}$/;
/** A token that looks like a commit id (7+ hex digits): it must then be a full sha. */
const SHA_LIKE = /^[0-9a-f]{7,}$/i;
const COMMAND_LINE = /^(?:\/|@)proofgate(?:[ \t]+(.*))?$/i;
/** A name commands may also be addressed to (`@name`): a GitHub App's slug. */
const MENTION = /^[a-z0-9](?:[a-z0-9-]{0,38})$/i;

/**
 * The extra name commands answer to for an identity (pure): a GitHub App
 * `slug[bot]` is addressed as `@slug`; `proofgate` itself, or a login that
 * is not a slug, adds nothing.
 */
export function commandMention(selfLogin: string): string | null {
  const name = selfLogin.replace(/\[bot\]$/i, '');
  return MENTION.test(name) && name.toLowerCase() !== 'proofgate' ? name.toLowerCase() : null;
}

function commandLine(mention: string | null): RegExp {
  if (mention === null || !MENTION.test(mention)) return COMMAND_LINE;
  return new RegExp(`^(?:[/@]proofgate|@${mention})(?:[ \\t]+(.*))?$`, 'i');
}
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;
/** An HTML `<pre>` / `<code>` tag, opening or closing, with attributes (the `>` may be on a later line). */
const HTML_CODE_TAG = /<(\/?)(pre|code)(?=[\s/>]|$)[^>]*(?:>|$)/gi;
/** Leading list-item markers, possibly nested (`- `, `* `, `+ `, `1. `, `1) `). */
const LIST_MARKERS = /^(?: {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]+|$))+/;

/** The fence marker a line opens, or null. A backtick fence's info string may not hold a backtick. */
function openingFence(line: string): string | null {
  const match = FENCE_OPEN.exec(line);
  const marker = match?.[1];
  if (marker === undefined) return null;
  if (marker[0] === '`' && (match?.[2] ?? '').includes('`')) return null;
  return marker;
}

function indentColumns(line: string): number {
  let columns = 0;
  for (const ch of line) {
    if (ch === ' ') columns += 1;
    else if (ch === '\t') columns += 4 - (columns % 4);
    else break;
  }
  return columns;
}

/**
 * The HTML code element (`pre` or `code`) still open after `line`, given the one
 * open before it (null: none). Inside an element only its own closing tag counts.
 */
function openHtmlCode(line: string, open: string | null): string | null {
  let current = open;
  for (const match of line.matchAll(HTML_CODE_TAG)) {
    const tag = (match[2] ?? '').toLowerCase();
    if (current === null) {
      if (match[1] !== '/') current = tag;
    } else if (match[1] === '/' && tag === current) {
      current = null;
    }
  }
  return current;
}

function isBlank(line: string): boolean {
  return line.trim() === '';
}

function parseProofArgs(text: string, args: string): AutomergeCommand {
  const invalid = (reason: string): AutomergeCommand => ({ kind: 'invalid', command: 'proof', reason, text });
  let rest = args.trim();
  let sha: string | null = null;
  const lastStart = rest.search(/\S+$/);
  const lastToken = lastStart >= 0 ? rest.slice(lastStart) : '';
  // A trailing token of 7+ hex digits is a commit id: it must be the full 40-hex sha.
  if (SHA_LIKE.test(lastToken)) {
    if (!FULL_SHA.test(lastToken.toLowerCase())) {
      return invalid(`"${lastToken}" is not a full commit sha (40 hex digits)`);
    }
    sha = lastToken.toLowerCase();
    rest = rest.slice(0, lastStart).trim();
  }
  if (rest === '') return { kind: 'proof', scenarios: [], sha };
  const scenarios: string[] = [];
  for (const raw of rest.split(',')) {
    const name = raw.trim();
    if (name === '') return invalid('empty scenario name in the comma-separated list');
    if (/\s/.test(name)) return invalid(`"${name}": separate scenario names with commas and put the sha last`);
    if (!SCENARIO_NAME.test(name)) {
      return invalid(`"${name}" is not a scenario name (lowercase letters, digits, . _ -; at most 64 characters)`);
    }
    if (!scenarios.includes(name)) scenarios.push(name);
  }
  return { kind: 'proof', scenarios, sha };
}

/** `approve` takes nothing, or the full 40-hex sha of the head it approves. */
function parseApproveArgs(text: string, args: string): AutomergeCommand {
  const rest = args.trim();
  if (rest === '') return { kind: 'approve', sha: null };
  if (/\s/.test(rest)) return { kind: 'invalid', command: 'approve', reason: 'approve takes at most one argument: the full sha of the head', text };
  if (!FULL_SHA.test(rest.toLowerCase())) return { kind: 'invalid', command: 'approve', reason: `"${rest}" is not a full commit sha (40 hex digits)`, text };
  return { kind: 'approve', sha: rest.toLowerCase() };
}

function parseCommandText(text: string, args: string): AutomergeCommand {
  const trimmed = args.trim();
  if (trimmed === '') return { kind: 'unknown', text };
  const match = /^(\S+)(?:\s+(.*))?$/.exec(trimmed);
  const word = (match?.[1] ?? '').toLowerCase();
  const rest = match?.[2] ?? '';
  if (word === 'proof') return parseProofArgs(text, rest);
  if (word === 'approve') return parseApproveArgs(text, rest);
  if (PLAIN_COMMANDS.has(word)) {
    const kind = word as 'automerge' | 'stop' | 'review' | 'rebase' | 'status';
    if (rest.trim() !== '') return { kind: 'invalid', command: kind, reason: `${kind} takes no arguments`, text };
    return { kind };
  }
  return { kind: 'unknown', text };
}

type BlockState =
  | { readonly kind: 'text' }
  | { readonly kind: 'fence'; readonly marker: string }
  | { readonly kind: 'quote' }
  | { readonly kind: 'html-comment' }
  | { readonly kind: 'html-code'; readonly tag: string }
  | { readonly kind: 'indented-code' };

/**
 * Every command line in a comment body, in order. Never throws: an unreadable
 * command is an `unknown` or `invalid` entry for the router to answer.
 */
export function parseCommands(body: string, mention: string | null = null): ParsedCommand[] {
  const pattern = commandLine(mention);
  const lines = body.split(/\r\n|\r|\n/);
  const found: ParsedCommand[] = [];
  let state: BlockState = { kind: 'text' };
  let previousBlank = true;
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index] ?? '';
    const blank = isBlank(line);
    const wasBlank = previousBlank;
    previousBlank = blank;
    if (state.kind === 'fence') {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
      if (close?.[1] !== undefined && close[1][0] === state.marker[0] && close[1].length >= state.marker.length) {
        state = { kind: 'text' };
      }
      continue;
    }
    if (state.kind === 'html-comment') {
      if (line.includes('-->')) state = { kind: 'text' };
      continue;
    }
    if (state.kind === 'html-code') {
      const tag = openHtmlCode(line, state.tag);
      state = tag === null ? { kind: 'text' } : { kind: 'html-code', tag };
      continue;
    }
    // Block starts are looked for after any list-item markers (`- `, `1. `, nested).
    const block = line.replace(LIST_MARKERS, '');
    const fence = openingFence(block);
    if (state.kind === 'quote' || state.kind === 'indented-code') {
      if (blank) {
        state = { kind: 'text' };
        continue;
      }
      // A quote swallows lazy continuation lines, but not a line that opens a fence.
      const continues = state.kind === 'quote' ? fence === null : indentColumns(line) >= 4;
      if (continues) continue;
      state = { kind: 'text' };
    }
    if (blank) continue;
    if (fence !== null) {
      state = { kind: 'fence', marker: fence };
      continue;
    }
    if (/^ {0,3}>/.test(block)) {
      state = { kind: 'quote' };
      continue;
    }
    if (indentColumns(line) >= 4) {
      if (wasBlank) state = { kind: 'indented-code' };
      continue;
    }
    const trimmed = line.trim();
    if (trimmed.startsWith('<!--')) {
      if (!trimmed.includes('-->', 4)) state = { kind: 'html-comment' };
      continue;
    }
    // A line that leaves a <pre> or <code> element open starts code: neither it nor what follows is a command.
    const htmlCode = openHtmlCode(line, null);
    if (htmlCode !== null) {
      state = { kind: 'html-code', tag: htmlCode };
      continue;
    }
    const match = pattern.exec(trimmed);
    if (match === null) continue;
    const command = parseCommandText(trimmed, match[1] ?? '');
    found.push({ ...command, line: index + 1, source: trimmed });
  }
  return found;
}

/** One-line canonical text of a command (used by the ledger to compare comment versions). */
export function commandText(command: AutomergeCommand): string {
  switch (command.kind) {
    case 'proof':
      return ['proof', command.scenarios.join(','), command.sha ?? ''].filter((part) => part !== '').join(' ');
    case 'approve':
      return command.sha === null ? 'approve' : `approve ${command.sha}`;
    case 'unknown':
      return `unknown ${command.text}`;
    case 'invalid':
      return `invalid ${command.text}`;
    default:
      return command.kind;
  }
}
