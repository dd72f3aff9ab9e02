import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ProofgateError } from '../../core/index.js';
import { RUN_STREAM_PREFIX, checkRunId, parseRunEvent, runStreamId, type RunEvent } from '../../runtime/run/stream.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import type { RunStorage } from '../../storage/policy-types.js';
import type { StoredEvent } from '../../storage/ports.js';
import { DATABASE_FILE, createLocalRunStorage } from '../../storage/sqlite/index.js';
import { repositoryStateDir, resolveDataDir } from '../data-dir.js';
import { emit } from '../io.js';

interface StoreOptions {
  data?: string;
  repo: string;
  namespace: string;
  json?: boolean;
}

async function storeDirectory(options: StoreOptions): Promise<string> {
  return resolveDataDir(options.data, (await repositoryStateDir(options.repo)) ?? '.proofgate');
}

async function openStore(options: StoreOptions): Promise<RunStorage | null> {
  const directory = await storeDirectory(options);
  if (!existsSync(join(directory, DATABASE_FILE))) return null;
  return createLocalRunStorage({ directory, namespace: options.namespace, policy: defaultStoragePolicy });
}

type RunSummary = { runId: string; status: string; graphId: string; startedAt: string; events: number; lastEventAt: string };

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
  const first = events[0] ? parseRunEvent(events[0]) : null;
  const started = first?.type === 'run-started' ? first.data : null;
  const definition = started?.graphDefinition as { id?: unknown } | undefined;
  return {
    runId: streamId.slice(RUN_STREAM_PREFIX.length),
    status: statusOf(events),
    graphId: typeof definition?.id === 'string' ? definition.id : '?',
    startedAt: started?.timestamp ?? '?',
    events: events.length,
    lastEventAt: events[events.length - 1]?.recordedAt ?? '?',
  };
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
  const storeOptions = (command: Command) => command
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
    await emit(Boolean(options.json), summaries, () => (summaries.length === 0 ? 'no runs'
      : summaries.map((run) => `${run.runId}  ${run.status.padEnd(8)} graph ${run.graphId}  started ${run.startedAt}  ${run.events} events`).join('\n')));
  });

  storeOptions(runs.command('show').description('show a run as a timeline (--json: its raw events)').argument('<runId>', 'run id'))
    .action(async (runIdArg: string, options: StoreOptions) => {
      const runId = checkRunId(runIdArg);
      const storage = await openStore(options);
      if (!storage) throw new ProofgateError('NOT_FOUND', `run ${runId} not found (no store in ${await storeDirectory(options)})`);
      try {
        const events = await storage.eventStore.read(runStreamId(runId));
        if (events.length === 0) throw new ProofgateError('NOT_FOUND', `run ${runId} not found`);
        const related = (await storage.eventStore.listStreams(`${runStreamId(runId)}/`)).map((stream) => `${stream.streamId} (${stream.revision} events)`);
        await emit(Boolean(options.json), events, () => {
          const lines = events.map((event) => {
            const parsed = parseRunEvent(event);
            return `${String(event.revision).padStart(4)}  ${event.recordedAt}  ${event.type.padEnd(19)} ${describeEvent(parsed)}`;
          });
          const status = statusOf(events);
          return [`run ${runId}: ${status}`, ...lines, ...(related.length > 0 ? ['related streams:', ...related.map((line) => `  ${line}`)] : [])].join('\n');
        });
      } finally {
        await storage.close();
      }
    });
}
