/**
 * `proofgate queue show|pause|resume [--base B]`: a protected base's merge
 * queue on the local forge (src/automerge/queue/). `show` lists the waiting
 * changes in order, the lease holder, the candidate being checked (its
 * checks), the last outcomes and counts; `pause`
 * and `resume` (a maintainer: admin or maintain under the trusted config)
 * stop and restart its candidates. A paused queue keeps its changes; their
 * processes wait.
 */
import type { Command } from 'commander';
import { ProofgateError } from '../../core/index.js';
import { protectedBranchNames } from '../../contracts/repo-config.js';
import { AUTOMERGE_NAMESPACE } from '../../automerge/loop/local.js';
import { foldQueue, queueCandidateNow, queuePosition, type QueueCandidateNow, type QueueState } from '../../automerge/queue/queue.js';
import { QueueStore, readQueueEvents } from '../../automerge/queue/store.js';
import { GitRepository, defaultLocalDataDir, type LocalForge } from '../../forge/local/index.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import { createLocalRunStorage } from '../../storage/sqlite/index.js';
import { resolveDataDir } from '../data-dir.js';
import { emit } from '../io.js';
import { untrustedText } from '../untrusted-text.js';
import { addLocalForgeOptions, withLocalForge, type LocalForgeFlags } from './change.js';

interface QueueFlags extends LocalForgeFlags {
  base?: string;
  as?: string;
}

/** The base named (default: the trusted branch); it must be protected (else `PROTECTED_BRANCH`, nothing stored). */
async function protectedBase(forge: LocalForge, base: string | undefined): Promise<string> {
  const trusted = await forge.trustedConfig();
  const name = base ?? trusted.branch;
  const names = protectedBranchNames(trusted.branch, trusted.config);
  if (!names.includes(name)) {
    throw new ProofgateError('PROTECTED_BRANCH', `${JSON.stringify(name)} is not a protected branch (protected: ${names.join(', ')}); it has no merge queue`, {
      base: name,
    });
  }
  return name;
}

async function withQueues<T>(flags: QueueFlags, action: (forge: LocalForge, queues: QueueStore, base: string) => Promise<T>): Promise<T> {
  const repo = await GitRepository.open(flags.repo ?? process.cwd());
  const dataDir = resolveDataDir(flags.data, defaultLocalDataDir(repo));
  return withLocalForge({ ...flags, repo: repo.root, data: dataDir }, async (forge) => {
    const base = await protectedBase(forge, flags.base);
    const storage = createLocalRunStorage({ directory: dataDir, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
    try {
      return await action(forge, new QueueStore(storage.eventStore), base);
    } finally {
      await storage.close();
    }
  });
}

/** What `show --json` prints (`candidate`: the latest candidate not landed, with its checks; null when none). */
export function queueView(state: QueueState, candidate: QueueCandidateNow | null = null) {
  return {
    base: state.base,
    paused: state.paused,
    lease: state.lease,
    candidate,
    waiting: state.entries.map((entry) => {
      const position = queuePosition(state, entry.change);
      return {
        change: entry.change,
        head: entry.head,
        title: entry.title,
        queuedAt: entry.at,
        position: position.kind === 'waiting' ? position.position : null,
      };
    }),
    suspects: state.suspects,
    outcomes: Object.values(state.outcomes),
    stats: state.stats,
  };
}

function humanView(view: ReturnType<typeof queueView>): string {
  const lines = [
    `merge queue of ${untrustedText(view.base)}: ${view.paused === null ? 'running' : `paused by ${untrustedText(view.paused.by)} at ${view.paused.at}`}`,
  ];
  const lease = view.lease;
  lines.push(`runner       ${lease === null || lease.released ? 'none' : `${untrustedText(lease.owner)} until ${lease.until}`}`);
  lines.push(`waiting      ${view.waiting.length}`);
  for (const entry of view.waiting)
    lines.push(`  ${entry.position ?? '?'}. change ${untrustedText(entry.change)} at ${entry.head.slice(0, 12)}  ${untrustedText(entry.title)}`);
  const candidate = view.candidate;
  if (candidate !== null)
    lines.push(
      `candidate    ${untrustedText(candidate.candidate)} (${candidate.changes.map((id) => untrustedText(id)).join(', ')}), tip ${candidate.tip.slice(0, 12)}, checks ${candidate.checks}${
        candidate.failure === null ? '' : `: ${untrustedText(candidate.failure.check ?? 'a check')}`
      }`,
    );
  if (view.suspects !== null)
    lines.push(
      `bisecting    ${view.suspects.changes.map((id) => untrustedText(id)).join(', ')} (${untrustedText(view.suspects.failure.check ?? 'checks')} failed)`,
    );
  const recent = view.outcomes.slice(-10);
  if (recent.length > 0) lines.push('last outcomes');
  for (const outcome of recent) {
    const detail = outcome.kind === 'landed' ? `as ${outcome.mergeCommit.slice(0, 12)}` : untrustedText(outcome.reason);
    lines.push(`  change ${untrustedText(outcome.change)} ${outcome.kind} ${detail}`);
  }
  const s = view.stats;
  lines.push(`totals       ${s.landed} landed, ${s.ejected} ejected, ${s.candidates} candidates, ${s.bisections} bisections, ${s.flaky} flaky`);
  return lines.join('\n');
}

/** `pause`/`resume` need a maintainer (admin or maintain under the trusted config); `INVALID_INPUT` otherwise, nothing stored. */
async function maintainer(forge: LocalForge, login: string | undefined): Promise<string> {
  const who = login ?? (await forge.localIdentity());
  const permission = await forge.permission(who);
  if (permission !== 'admin' && permission !== 'maintain') {
    throw new ProofgateError(
      'INVALID_INPUT',
      `${JSON.stringify(who)} has ${permission} permission; pausing or resuming a merge queue needs maintain or admin`,
      { login: who },
    );
  }
  return who;
}

export function registerQueueCommands(program: Command): void {
  const queue = program.command('queue').description("a protected base's merge queue (local forge)");
  const withBase = (command: Command): Command =>
    addLocalForgeOptions(command.option('--base <branch>', 'the protected base (default: the trusted branch)').option('--json', 'print JSON'));

  withBase(queue.command('show').description('the waiting changes in order, the runner, the candidate and its checks, the last outcomes')).action(
    async (flags: QueueFlags) => {
      const view = await withQueues(flags, async (_forge, queues, base) => {
        // One read of the stream: the fold and the candidate from the same events.
        const events = await readQueueEvents(queues.events, base);
        const state = foldQueue(base, events);
        return queueView(state, queueCandidateNow(state, events));
      });
      await emit(Boolean(flags.json), view, () => humanView(view));
    },
  );

  for (const action of ['pause', 'resume'] as const) {
    withBase(
      queue
        .command(action)
        .description(action === 'pause' ? 'build no new candidate until resumed (waiting changes stay queued)' : 'build candidates again')
        .option('--as <login>', 'act as this maintainer (default: git config user.name)'),
    ).action(async (flags: QueueFlags) => {
      const result = await withQueues(flags, async (forge, queues, base) => {
        const by = await maintainer(forge, flags.as);
        const changed = await queues.appendWith(base, (state) => {
          const paused = state.paused !== null;
          if ((action === 'pause') === paused) return { events: [], result: false };
          const type = action === 'pause' ? ('queue-paused' as const) : ('queue-resumed' as const);
          return { events: [{ type, data: { by, at: queues.now() } }], result: true };
        });
        return { base, action, by, changed, view: queueView(await queues.load(base)) };
      });
      await emit(Boolean(flags.json), result, () =>
        result.changed
          ? `merge queue of ${untrustedText(result.base)} ${action === 'pause' ? 'paused' : 'resumed'} by ${untrustedText(result.by)}`
          : `merge queue of ${untrustedText(result.base)} was already ${action === 'pause' ? 'paused' : 'running'}; nothing changed`,
      );
    });
  }
}
