import { redactFreeText } from '../../storage/index.js';
import type { RepairContext } from './types.js';

/**
 * What the agent-fix command gets to read: a JSON file, path in
 * `PROOFGATE_REPAIR_CONTEXT`. Everything taken from outside proofgate (logs,
 * findings, the reason) passes through the redactor first.
 */

export const REPAIR_CONTEXT_VERSION = 1;

/** Blank out known secret values, then secret-looking fragments (storage free-text rules). */
export function makeRedactor(knownSecrets: readonly string[] = []): (text: string) => string {
  const secrets = [...new Set(knownSecrets.filter((secret) => secret.length >= 4))].sort((a, b) => b.length - a.length);
  return (text: string) => {
    let out = text;
    for (const secret of secrets) out = out.split(secret).join('[redacted]');
    return redactFreeText(out);
  };
}

export interface AgentWorktreeFacts {
  /** The commit the worktree holds when the agent starts. */
  readonly startSha: string;
  /** The base the change was replayed onto before the agent started, or null. */
  readonly rebasedOnto: string | null;
  /** The rebase onto the base stopped at a conflict the resolvers could not settle. */
  readonly rebaseConflict: { readonly commit: string; readonly paths: readonly string[]; readonly reason: string } | null;
  /** What the result must build on. */
  readonly mustDescendFrom: string;
}

function worktreeRule(facts: AgentWorktreeFacts): string {
  return facts.mustDescendFrom === facts.startSha
    ? 'The tree is worktree.startSha; the result is committed on top of it.'
    : 'The rebase onto the base stopped at a conflict: the files hold git\'s merge of the base into the head, with conflict markers. Resolve them; the result is committed as a merge of the base into the head.';
}

export function buildAgentContext(context: RepairContext, facts: AgentWorktreeFacts, redact: (text: string) => string): unknown {
  const { snapshot } = context;
  return {
    version: REPAIR_CONTEXT_VERSION,
    repair: context.repair,
    reason: redact(context.reason),
    change: {
      id: snapshot.id,
      number: snapshot.number,
      title: redact(snapshot.title),
      url: snapshot.url,
      base: { ref: snapshot.base.ref, sha: snapshot.base.sha },
      head: { ref: snapshot.head.ref, sha: snapshot.head.sha },
    },
    worktree: {
      startSha: facts.startSha,
      rebasedOnto: facts.rebasedOnto,
      rebaseConflict: facts.rebaseConflict === null ? null : { ...facts.rebaseConflict, paths: [...facts.rebaseConflict.paths], reason: redact(facts.rebaseConflict.reason) },
      mustDescendFrom: facts.mustDescendFrom,
    },
    failingChecks: context.failingChecks.map(({ check, log }) => ({
      name: check.name,
      workflow: check.workflow,
      status: check.status,
      conclusion: check.conclusion,
      url: check.url,
      headSha: check.headSha,
      log: log === null ? null : redact(log),
    })),
    findings: context.findings.map((finding) => ({
      title: redact(finding.title),
      evidence: redact(finding.evidence),
      path: finding.path ?? null,
      line: finding.line ?? null,
    })),
    rules: [
      'Edit the files in the current directory (an exported tree, no git repository) so the failing checks pass and the findings are addressed.',
      worktreeRule(facts),
      'Only file edits count: proofgate commits them itself. Anything under .git, symlinks pointing outside the tree and special files are left out.',
      'Exit 0 when done; a nonzero exit discards everything. A gate command must pass before anything is published.',
    ],
  };
}
