import { ProofgateError } from '../../core/index.js';
import { identityEnvironment } from './git.js';
import { resolveConflict, type ResolverName } from './resolvers/index.js';
import type { RepairWorktree } from './worktree.js';

/**
 * The deterministic fast path: replay the change's commits onto the current
 * base, one `git cherry-pick --no-commit` at a time, in a disposable
 * worktree. Merge commits are left out (as `git rebase` does), a commit whose
 * changes are already in the base is dropped, and each replayed commit keeps
 * its author, date and message; the committer is the repair identity. A
 * conflict is resolved only by a mechanical resolver; anything else stops the
 * replay and reports the conflict, and nothing is kept.
 */

export interface ResolvedFile {
  readonly path: string;
  readonly resolver: ResolverName;
  /** The change's commit whose replay conflicted. */
  readonly commit: string;
}

export type ReplayResult =
  | {
      readonly kind: 'replayed';
      /** The new tip (equal to the base when every commit was already there). */
      readonly tip: string;
      /** The new commits, oldest first. */
      readonly commits: readonly string[];
      /** The change's commits whose changes the base already had. */
      readonly dropped: readonly string[];
      readonly resolved: readonly ResolvedFile[];
    }
  | { readonly kind: 'conflict'; readonly commit: string; readonly paths: readonly string[]; readonly reason: string };

export interface ReplayRequest {
  readonly base: string;
  readonly head: string;
  readonly identity: { readonly name: string; readonly email: string };
  readonly signal?: AbortSignal;
  readonly onProgress?: (line: string) => void;
}

interface UnmergedEntry {
  readonly mode: string;
  readonly oid: string;
  readonly stage: number;
}

const REGULAR_FILE = new Set(['100644', '100755']);

function short(sha: string): string {
  return sha.slice(0, 12);
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new ProofgateError('ABORTED', 'the repair was aborted');
}

async function unmergedEntries(ws: RepairWorktree): Promise<Map<string, UnmergedEntry[]>> {
  const listing = (await ws.git(['ls-files', '--unmerged', '-z'])).stdout.toString('utf8');
  const byPath = new Map<string, UnmergedEntry[]>();
  for (const record of listing.split('\0')) {
    const match = /^(\d+) ([0-9a-f]+) (\d)\t(.*)$/s.exec(record);
    if (match === null) continue;
    const path = match[4] ?? '';
    byPath.set(path, [...(byPath.get(path) ?? []), { mode: match[1] ?? '', oid: match[2] ?? '', stage: Number(match[3]) }]);
  }
  return byPath;
}

/** Resolve every conflicted path of the current cherry-pick, or say why not. */
async function resolveAll(ws: RepairWorktree, commit: string, stderr: string): Promise<{ resolved: ResolvedFile[] } | { paths: string[]; reason: string }> {
  const conflicts = await unmergedEntries(ws);
  const paths = [...conflicts.keys()];
  if (paths.length === 0) {
    const why =
      stderr
        .split('\n')
        .find((line) => line.trim() !== '')
        ?.trim() ?? 'git cherry-pick failed';
    return { paths, reason: `replaying ${short(commit)} failed: ${why}` };
  }
  const resolved: ResolvedFile[] = [];
  for (const [path, entries] of conflicts) {
    const stage = (n: number) => entries.find((entry) => entry.stage === n);
    const [base, ours, theirs] = [stage(1), stage(2), stage(3)];
    if (base === undefined || ours === undefined || theirs === undefined) {
      return { paths, reason: `${path}: added, deleted or renamed on one side (no mechanical resolver)` };
    }
    if (!REGULAR_FILE.has(ours.mode) || base.mode !== ours.mode || theirs.mode !== ours.mode) {
      return { paths, reason: `${path}: not the same regular file on every side` };
    }
    const blob = async (oid: string) => new Uint8Array((await ws.git(['cat-file', 'blob', oid])).stdout);
    const resolution = resolveConflict({ path, base: await blob(base.oid), ours: await blob(ours.oid), theirs: await blob(theirs.oid) });
    if (resolution.kind === 'refused') return { paths, reason: resolution.reason };
    const oid = await ws.text(['hash-object', '-w', '--stdin'], { input: resolution.content });
    await ws.git(['update-index', '--cacheinfo', `${ours.mode},${oid},${path}`]);
    resolved.push({ path, resolver: resolution.resolver, commit });
  }
  return { resolved };
}

/** Replay `base..head` onto `base` in the workspace; the workspace ends at the new tip. */
export async function replayOnto(ws: RepairWorktree, request: ReplayRequest): Promise<ReplayResult> {
  const listing = await ws.text(['rev-list', '--reverse', '--topo-order', '--no-merges', request.head, `^${request.base}`]);
  const commits = listing.split('\n').filter((line) => line !== '');
  request.onProgress?.(`replaying ${commits.length} commit${commits.length === 1 ? '' : 's'} onto ${short(request.base)}`);
  await ws.resetTo(request.base);
  const created: string[] = [];
  const dropped: string[] = [];
  const resolved: ResolvedFile[] = [];
  const committer = identityEnvironment(request.identity, false);
  for (const commit of commits) {
    throwIfAborted(request.signal);
    const picked = await ws.git(['cherry-pick', '--no-commit', commit], { okExitCodes: [1] });
    let fixed: ResolvedFile[] = [];
    if (picked.exitCode !== 0) {
      const outcome = await resolveAll(ws, commit, picked.stderr);
      if ('reason' in outcome) return { kind: 'conflict', commit, paths: outcome.paths, reason: outcome.reason };
      fixed = outcome.resolved;
      for (const file of fixed) request.onProgress?.(`resolved ${file.path} (${file.resolver}) while replaying ${short(commit)}`);
    }
    const staged = await ws.git(['diff', '--cached', '--quiet'], { okExitCodes: [1] });
    if (staged.exitCode === 0) {
      dropped.push(commit);
      request.onProgress?.(`dropped ${short(commit)}: its changes are already in the base`);
    } else {
      await ws.git(['commit', '--quiet', '--no-verify', '--allow-empty-message', '--reuse-message', commit], { env: committer });
      created.push(await ws.head());
      resolved.push(...fixed);
    }
    // Drop whatever the cherry-pick left behind (conflict markers in files, MERGE_MSG) before the next one.
    await ws.git(['reset', '--quiet', '--hard']);
  }
  return { kind: 'replayed', tip: await ws.head(), commits: created, dropped, resolved };
}
