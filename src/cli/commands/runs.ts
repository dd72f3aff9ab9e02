import type { Command } from 'commander';
import { ProofgateError, errorMessage, isProofgateError } from '../../core/index.js';
import { RUN_STREAM_PREFIX, checkRunId, parseRunEvent, runStreamId, type RunEvent } from '../../runtime/run/stream.js';
import type { RunStorage } from '../../storage/policy-types.js';
import type { StoredEvent } from '../../storage/ports.js';
import { openLocalStoreReader } from '../../storage/sqlite/index.js';
import { repositoryStateDir, resolveDataDir } from '../data-dir.js';
import { emit } from '../io.js';
import { untrustedText } from '../untrusted-text.js';

interface StoreOptions {
  data?: string;
  repo: string;
  namespace: string;
  json?: boolean;
}

async function storeDirectory(options: StoreOptions): Promise<string> {
  return resolveDataDir(options.data, (await repositoryStateDir(options.repo)) ?? '.proofgate');
}

/**
 * Open the namespace read-only with the policy it was created with; the store
 * is never created, migrated or registered into. No database file, or no such
 * namespace in it, is `null` (there are no runs to show).
 */
async function openStore(options: StoreOptions): Promise<RunStorage | null> {
  const directory = await storeDirectory(options);
  try {
    return openLocalStoreReader({ directory, namespace: options.namespace });
  } catch (error) {
    if (isProofgateError(error, 'NOT_FOUND')) return null;
    throw error;
  }
}

type RunSummary = {
  runId: string;
  status: string;
  graphId: string;
  startedAt: string;
  events: number;
  lastEventAt: string;
  /** Why the run's events cannot be read (status `unreadable` only). */
  reason?: string;
};

/** Check every event of a run stream: the events, or the first reason one of them is not a run event. */
function parseRun(events: readonly StoredEvent[]): { kind: 'ok'; events: RunEvent[] } | { kind: 'unreadable'; reason: string } {
  try {
    return { kind: 'ok', events: events.map(parseRunEvent) };
  } catch (error) {
    return { kind: 'unreadable', reason: errorMessage(error) };
  }
}

/** By start time, then run id; runs without a readable start time last. */
function byStart(a: RunSummary, b: RunSummary): number {
  const known = Number(a.startedAt === '?') - Number(b.startedAt === '?');
  if (known !== 0) return known;
  if (a.startedAt !== b.startedAt) return a.startedAt < b.startedAt ? -1 : 1;
  return a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0;
}

function statusOf(events: readonly StoredEvent[]): string {
  for (let i = events.length - 1; i >= 0; i -= 1) {
    const type = events[i]?.type;
    if (type === 'run-completed') return 'complete';
    if (type === 'run-failed') return 'failed';
    if (type === 'run-paused') return 'paused';
  }
  return events.length > 1 ? 'running' : 'started';
}

async function summarize(storage: RunStorage, streamId: string): Promise<RunSummary> {
  const events = await storage.eventStore.read(streamId);
  const base = { runId: streamId.slice(RUN_STREAM_PREFIX.length), events: events.length, lastEventAt: events[events.length - 1]?.recordedAt ?? '?' };
  const parsed = parseRun(events);
  if (parsed.kind === 'unreadable') return { ...base, status: 'unreadable', graphId: '?', startedAt: '?', reason: parsed.reason };
  const first = parsed.events[0];
  const started = first?.type === 'run-started' ? first.data : null;
  const definition = started?.graphDefinition as { id?: unknown } | undefined;
  return {
    ...base,
    status: statusOf(events),
    graphId: typeof definition?.id === 'string' ? definition.id : '?',
    startedAt: started?.timestamp ?? '?',
  };
}

/** Stored runs hold what lanes and checks reported (reasons quoting a change): every stored string is shown escaped. */
function listLine(run: RunSummary): string {
  const runId = untrustedText(run.runId);
  if (run.reason !== undefined) return `${runId}  ${run.status.padEnd(10)} ${run.events} events: ${untrustedText(run.reason)}`;
  return `${runId}  ${run.status.padEnd(10)} graph ${untrustedText(run.graphId)}  started ${untrustedText(run.startedAt)}  ${run.events} events`;
}

function describeEvent(event: RunEvent): string {
  switch (event.type) {
    case 'run-started':
      return `graph ${event.data.definitionDigest.slice(0, 19)} plan ${event.data.resolvedPlan.digest.slice(0, 19)}`;
    case 'dispatch-decided':
      return `${event.data.position} (by ${event.data.executorId})`;
    case 'attempt-started':
      return `${event.data.position}${event.data.restart > 0 ? ` restart ${event.data.restart}` : ''} input ${event.data.inputBytes} B`;
    case 'attempt-completed':
      return `${event.data.position} result ${event.data.resultDigest.slice(0, 19)} (${event.data.outputBytes} B${event.data.resolvedBy === 'host' ? ', by host' : ''})`;
    case 'attempt-failed':
      return `${event.data.position} ${event.data.failureClass}: ${event.data.reason}`;
    case 'attempt-paused':
      return `${event.data.position} ${event.data.request.kind}: ${event.data.reason}`;
    case 'attempt-interrupted':
      return `${event.data.position}: ${event.data.reason}`;
    default:
      return event.data.reason;
  }
}

export function registerRunsCommands(program: Command): void {
  const runs = program.command('runs').description('inspect graph runs kept in the local store');
  const storeOptions = (command: Command) =>
    command
      .option('--repo <dir>', 'repository whose store to read', '.')
      .option('--data <dir>', 'data directory (default: $PROOFGATE_DATA_DIR, else proofgate/ in the git directory of --repo, else ./.proofgate)')
      .option('--namespace <name>', 'storage namespace', 'default')
      .option('--json', 'print JSON');

  storeOptions(runs.command('list').description('list runs with their status')).action(async (options: StoreOptions) => {
    const storage = await openStore(options);
    const summaries: RunSummary[] = [];
    if (storage) {
      try {
        const streams = await storage.eventStore.listStreams(RUN_STREAM_PREFIX);
        for (const stream of streams) {
          if (!stream.streamId.slice(RUN_STREAM_PREFIX.length).includes('/')) summaries.push(await summarize(storage, stream.streamId));
        }
      } finally {
        await storage.close();
      }
    }
    summaries.sort(byStart);
    await emit(Boolean(options.json), summaries, () => (summaries.length === 0 ? 'no runs' : summaries.map(listLine).join('\n')));
  });

  storeOptions(runs.command('show').description('show a run as a timeline (--json: its raw events)').argument('<runId>', 'run id')).action(
    async (runIdArg: string, options: StoreOptions) => {
      const runId = checkRunId(runIdArg);
      const storage = await openStore(options);
      if (!storage) throw new ProofgateError('NOT_FOUND', `run ${runId} not found (no namespace ${options.namespace} in ${await storeDirectory(options)})`);
      try {
        const events = await storage.eventStore.read(runStreamId(runId));
        if (events.length === 0) throw new ProofgateError('NOT_FOUND', `run ${runId} not found`);
        const parsed = parseRun(events);
        if (parsed.kind === 'unreadable') throw new ProofgateError('INVALID_STORED_VALUE', `run ${runId} is unreadable: ${parsed.reason}`, { runId });
        const related = (await storage.eventStore.listStreams(`${runStreamId(runId)}/`)).map((stream) => `${stream.streamId} (${stream.revision} events)`);
        await emit(Boolean(options.json), events, () => {
          const lines = parsed.events.map(
            (event) =>
              `${String(event.revision).padStart(4)}  ${untrustedText(event.recordedAt)}  ${event.type.padEnd(19)} ${untrustedText(describeEvent(event))}`,
          );
          const status = statusOf(events);
          return [
            `run ${runId}: ${status}`,
            ...lines,
            ...(related.length > 0 ? ['related streams:', ...related.map((line) => `  ${untrustedText(line)}`)] : []),
          ].join('\n');
        });
      } finally {
        await storage.close();
      }
    },
  );
}
