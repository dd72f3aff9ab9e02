import { setMaxListeners } from 'node:events';
import { ProofgateError, canonicalBytes, isProofgateError, randomHex, sha256Digest, systemClock } from '../../core/index.js';
import type { NewEvent } from '../../storage/ports.js';
import type { DispatchCommand, GraphCommand } from '../graph/contract.js';
import type { ReadonlyJsonValue } from '../json-types.js';
import type { GraphPlan } from '../plan/types.js';
import { checkRunId, readRunEvents, runStartedOf, runStreamId, type RunEvent } from '../run/stream.js';
import { runAttempt } from './attempt.js';
import { RunLedger, type AttemptRecord } from './ledger.js';
import { bindNodes } from './nodes.js';
import { outcomeEvent, resolutionEvent } from './records.js';
import { appendBatches, storableOutcome, storableText, storageFit, type StorableOutcome } from './storable.js';
import type { GraphExecutor, GraphExecutorOptions, NodeInput, PausedResolution, RunOutcome } from './types.js';

type Settled = { readonly position: string; readonly nodeId: string; readonly outcome: StorableOutcome };

/**
 * Create the executor of one stored run. It checks that `graph` is the graph
 * the run was started with, that every node has an implementation whose
 * permissions the plan admitted, and that every lane's engine is given.
 */
export async function createGraphExecutor<D, N, S>(options: GraphExecutorOptions<D, N, S>): Promise<GraphExecutor> {
  const runId = checkRunId(options.runId);
  const { graph, storage } = options;
  const eventStore = storage.eventStore;
  // Outcomes are recorded in their stored form: results as the storage
  // policy lets them through, digested after that, and refusals as failures.
  const fit = storageFit(storage);
  const started = runStartedOf(await readRunEvents(eventStore, runId, 0), runId);
  const plan = started.data.resolvedPlan.plan as GraphPlan;
  if (started.data.definitionDigest !== graph.definitionDigest) {
    throw new ProofgateError(
      'INVALID_INPUT',
      `graph ${graph.definitionDigest} is not the graph run ${runId} was started with (${started.data.definitionDigest})`,
    );
  }
  if (plan.graph.typeId !== graph.type.id || plan.graph.typeVersion !== graph.type.version) {
    throw new ProofgateError(
      'INVALID_INPUT',
      `graph type ${graph.type.id}@${graph.type.version} is not the planned ${plan.graph.typeId}@${plan.graph.typeVersion}`,
    );
  }
  const description = graph.describe();
  const engines = bindNodes(description, plan, options.nodes, options.engines);
  const dependsOn = new Map(description.nodes.map((node) => [node.id, node.dependsOn]));
  const clock = options.clock ?? systemClock;
  const leaseMarginMs = options.leaseMarginMs ?? 2000;
  const pollMs = options.pollMs ?? 50;
  // Event ids share the executor's random token and count up, so the events
  // of one executor sit next to each other in the store's unique id index
  // instead of landing on a random index page each.
  const token = randomHex(16);
  const executorId = `exec_${token}`;
  let eventCount = 0;
  const eventId = (): string => `evt_${token}_${(eventCount += 1).toString(36).padStart(8, '0')}`;
  const streamId = runStreamId(runId);
  const nodeOf = (nodeId: string) => {
    const node = options.nodes[nodeId];
    if (!node) throw new ProofgateError('INTERNAL', `no node ${nodeId}`);
    return node;
  };

  /** Append at the ledger's revision; false on a lost race (the caller re-reads). */
  async function tryAppend(ledger: RunLedger<D, N, S>, events: readonly NewEvent[]): Promise<boolean> {
    try {
      const result = await eventStore.append(streamId, ledger.revision, events);
      let revision = result.revision - events.length;
      for (const event of events) {
        revision += 1;
        ledger.apply({ type: event.type, data: event.data, revision, recordedAt: '', id: event.id } as RunEvent);
      }
      return true;
    } catch (error) {
      if (!isProofgateError(error, 'REVISION_CONFLICT')) throw error;
      await ledger.catchUp(eventStore, runId);
      return false;
    }
  }

  function inputOf(ledger: RunLedger<D, N, S>, nodeId: string, position: string, attempt: number): NodeInput {
    const upstream: Record<string, ReadonlyJsonValue> = {};
    for (const dep of dependsOn.get(nodeId) ?? []) {
      const result = ledger.results.get(dep);
      if (result !== undefined) upstream[dep] = result;
    }
    return { runId, nodeId, position, attempt, prompt: nodeOf(nodeId).prompt, upstream };
  }

  /** An attempt about to start: its input, measured once, and its `attempt-started` event. */
  type Start = { readonly input: NodeInput; readonly inputBytes: number; readonly restart: number; readonly event: NewEvent };

  function startOf(input: NodeInput, restart: number): Start {
    const { policy } = nodeOf(input.nodeId);
    const bytes = canonicalBytes(input);
    const lease = clock.now().getTime() + policy.timeoutMs + policy.teardownGraceMs + leaseMarginMs;
    const event: NewEvent = {
      id: eventId(),
      type: 'attempt-started',
      data: {
        position: input.position,
        nodeId: input.nodeId,
        executorId,
        restart,
        inputDigest: sha256Digest(bytes),
        inputBytes: bytes.byteLength,
        leaseExpiresAt: new Date(lease).toISOString(),
      },
    };
    return { input, inputBytes: bytes.byteLength, restart, event };
  }

  async function run(external: AbortSignal = new AbortController().signal): Promise<RunOutcome> {
    // One listener on the caller's signal; attempts listen on this internal one.
    const internal = new AbortController();
    setMaxListeners(0, internal.signal);
    const forward = (): void => internal.abort(external.reason);
    if (external.aborted) forward();
    else external.addEventListener('abort', forward, { once: true });
    try {
      return await drive(internal.signal);
    } finally {
      external.removeEventListener('abort', forward);
    }
  }

  async function drive(signal: AbortSignal): Promise<RunOutcome> {
    const ledger = new RunLedger(graph);
    await ledger.catchUp(eventStore, runId);
    // Attempts in flight by position (until their outcome is recorded), and
    // the ones that have ended but whose outcome is not recorded yet.
    const running = new Map<string, Promise<Settled>>();
    const ended: Settled[] = [];
    let wake: (() => void) | null = null;

    const launch = ({ input, inputBytes, restart }: Start): void => {
      const node = nodeOf(input.nodeId);
      const attempt = runAttempt({ node, input, inputBytes, restart, engine: engines.get(input.nodeId) ?? null, runSignal: signal }).then(
        (outcome): Settled => {
          const settled = { position: input.position, nodeId: input.nodeId, outcome: storableOutcome(fit, input.position, input.nodeId, outcome) };
          ended.push(settled);
          wake?.();
          return settled;
        },
      );
      running.set(input.position, attempt);
    };

    const dispatch = async (commands: readonly DispatchCommand[]): Promise<void> => {
      const starts: Start[] = [];
      const events: NewEvent[] = [];
      for (const command of commands) {
        const { position, nodeId, attempt } = command;
        events.push({ id: eventId(), type: 'dispatch-decided', data: { position, nodeId, attempt, executorId } });
        const start = startOf(inputOf(ledger, nodeId, position, attempt), 0);
        starts.push(start);
        events.push(start.event);
      }
      if (await tryAppend(ledger, events)) for (const start of starts) launch(start);
    };

    /** Attempts started by an executor whose lease ran out: re-run (retry-safe) or pause for reconcile. */
    const recover = async (): Promise<number | null> => {
      const now = clock.now().getTime();
      let nextExpiry: number | null = null;
      for (const record of ledger.outstanding()) {
        if (running.has(record.position)) continue;
        const expiry = record.started?.leaseExpiresAt ?? 0;
        if (expiry > now) {
          nextExpiry = nextExpiry === null ? expiry : Math.min(nextExpiry, expiry);
          continue;
        }
        if (!(await recoverOne(record))) return now;
      }
      return nextExpiry;
    };

    const recoverOne = async (record: AttemptRecord): Promise<boolean> => {
      const node = nodeOf(record.nodeId);
      if (node.retrySafe === true) {
        const start = startOf(inputOf(ledger, record.nodeId, record.position, record.attempt), (record.started?.restart ?? -1) + 1);
        const ok = await tryAppend(ledger, [start.event]);
        if (ok) launch(start);
        return ok;
      }
      const detail = `attempt ${record.position} was started by ${record.started?.executorId ?? 'an executor'} and never finished; its effects are unknown`;
      return tryAppend(ledger, [
        {
          id: eventId(),
          type: 'attempt-paused',
          data: {
            position: record.position,
            nodeId: record.nodeId,
            reason: 'needs reconcile after an interrupted attempt',
            request: { kind: 'reconcile', detail },
          },
        },
      ]);
    };

    const record = async (settled: readonly Settled[]): Promise<void> => {
      for (;;) {
        const open = settled.filter((entry) => ledger.attempts.get(entry.position)?.status === 'outstanding');
        if (open.length === 0) break;
        // Large results may need more than one append to stay within the policy's batch limit.
        let lost = false;
        const events = open.map((entry) => outcomeEvent(eventId(), entry.position, entry.nodeId, entry.outcome));
        const known = (index: number): number | undefined => {
          const outcome = open[index]?.outcome;
          return outcome?.kind === 'completed' ? outcome.eventBytes : undefined;
        };
        for (const batch of appendBatches(events, fit.maxAppendBatchBytes, known)) {
          if (!(await tryAppend(ledger, batch))) {
            lost = true;
            break;
          }
        }
        if (!lost) break;
      }
      for (const entry of settled) running.delete(entry.position);
    };

    const finish = async (command: Exclude<GraphCommand, DispatchCommand>): Promise<RunOutcome | null> => {
      const type = command.kind === 'complete' ? 'run-completed' : command.kind === 'fail' ? 'run-failed' : 'run-paused';
      const reason = storableText(fit, command.reason, 'run reason', Number.POSITIVE_INFINITY);
      const repeat = ledger.last?.type === type && ledger.last.data.reason === reason;
      if (!repeat && !(await tryAppend(ledger, [{ id: eventId(), type, data: { reason } }]))) return null;
      if (command.kind === 'complete') return { kind: 'complete', reason };
      if (command.kind === 'fail') return { kind: 'failed', reason };
      return { kind: 'paused', reason, requests: ledger.pausedRequests() };
    };

    /** Every attempt that has ended, once one has (or [] after a timer or an abort). */
    const waitForWork = async (wakeAt: number | null): Promise<Settled[]> => {
      if (ended.length === 0 && !signal.aborted) {
        let timer: NodeJS.Timeout | undefined;
        let onAbort: (() => void) | undefined;
        await new Promise<void>((resolve) => {
          wake = resolve;
          onAbort = resolve;
          if (wakeAt !== null || running.size === 0) {
            const ms = wakeAt === null ? pollMs : Math.max(1, Math.min(pollMs, wakeAt - clock.now().getTime()));
            timer = setTimeout(resolve, ms);
          }
          signal.addEventListener('abort', onAbort, { once: true });
        });
        wake = null;
        clearTimeout(timer);
        if (onAbort) signal.removeEventListener('abort', onAbort);
      }
      return ended.splice(0);
    };

    for (;;) {
      if (ledger.finished) {
        const { type, data } = ledger.finished as Extract<RunEvent, { type: 'run-completed' | 'run-failed' }>;
        return { kind: type === 'run-completed' ? 'complete' : 'failed', reason: data.reason };
      }
      if (signal.aborted) {
        await record(await Promise.all(running.values()));
        return { kind: 'paused', reason: 'aborted', requests: ledger.pausedRequests() };
      }
      const wakeAt = await recover();
      const commands = graph.decide(ledger.state);
      const dispatches = commands.filter((command): command is DispatchCommand => command.kind === 'dispatch');
      if (dispatches.length > 0) {
        await dispatch(dispatches);
        continue;
      }
      const terminal = commands.find((command): command is Exclude<GraphCommand, DispatchCommand> => command.kind !== 'dispatch');
      if (terminal && running.size === 0 && ledger.outstandingCount === 0) {
        const outcome = await finish(terminal);
        if (outcome) return outcome;
        continue;
      }
      const settled = await waitForWork(wakeAt);
      if (settled.length > 0) await record(settled);
      else if (running.size === 0) await ledger.catchUp(eventStore, runId);
    }
  }

  async function resolvePaused(position: string, resolution: PausedResolution): Promise<void> {
    for (;;) {
      const ledger = new RunLedger(graph);
      await ledger.catchUp(eventStore, runId);
      const attempt = ledger.attempts.get(position);
      if (!attempt || attempt.status !== 'paused') {
        throw new ProofgateError('INVALID_INPUT', `run ${runId} has no paused attempt at ${position}`);
      }
      if (await tryAppend(ledger, [resolutionEvent(eventId(), attempt, resolution, fit)])) return;
    }
  }

  return Object.freeze({ runId, executorId, run, resolvePaused });
}
