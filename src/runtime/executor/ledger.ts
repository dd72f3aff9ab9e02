import type { EventStore } from '../../storage/ports.js';
import type { CompiledGraph } from '../graph/contract.js';
import type { ReadonlyJsonValue } from '../json-types.js';
import { graphEventOf, readRunEvents, type RunEvent } from '../run/stream.js';
import type { PausedRequest } from './types.js';

export interface AttemptRecord {
  readonly position: string;
  readonly nodeId: string;
  readonly attempt: number;
  started: { readonly executorId: string; readonly restart: number; readonly leaseExpiresAt: number } | null;
  status: 'outstanding' | 'paused' | 'done';
  request: PausedRequest | null;
}

/**
 * The executor's in-memory fold of a run stream: the graph state plus what
 * the graph type does not track (who started which attempt, until when).
 */
export class RunLedger<D, N, S> {
  revision = 0;
  state: S;
  readonly attempts = new Map<string, AttemptRecord>();
  readonly results = new Map<string, ReadonlyJsonValue>();
  /** The attempts whose status is `outstanding`, kept as events arrive so no step scans every attempt. */
  private readonly open = new Map<string, AttemptRecord>();
  last: RunEvent | null = null;
  finished: RunEvent | null = null;

  constructor(private readonly graph: CompiledGraph<D, N, S>) {
    this.state = graph.initialState();
  }

  apply(event: RunEvent): void {
    this.revision = event.revision;
    this.last = event;
    const graphEvent = graphEventOf(event);
    if (graphEvent) this.state = this.graph.reduce(this.state, graphEvent);
    switch (event.type) {
      case 'dispatch-decided': {
        const record: AttemptRecord = {
          position: event.data.position,
          nodeId: event.data.nodeId,
          attempt: event.data.attempt,
          started: null,
          status: 'outstanding',
          request: null,
        };
        this.attempts.set(record.position, record);
        this.open.set(record.position, record);
        break;
      }
      case 'attempt-started': {
        const record = this.attempts.get(event.data.position);
        if (record) record.started = { executorId: event.data.executorId, restart: event.data.restart, leaseExpiresAt: Date.parse(event.data.leaseExpiresAt) };
        break;
      }
      case 'attempt-completed':
        this.results.set(event.data.nodeId, event.data.result as ReadonlyJsonValue);
        this.settle(event.data.position);
        break;
      case 'attempt-failed':
      case 'attempt-interrupted':
        this.settle(event.data.position);
        break;
      case 'attempt-paused': {
        const record = this.attempts.get(event.data.position);
        if (record) {
          record.status = 'paused';
          this.open.delete(record.position);
          record.request = { position: record.position, nodeId: record.nodeId, kind: event.data.request.kind, detail: event.data.request.detail };
        }
        break;
      }
      case 'run-completed':
      case 'run-failed':
        this.finished = event;
        break;
      default:
        break;
    }
  }

  private settle(position: string): void {
    const record = this.attempts.get(position);
    if (record) {
      record.status = 'done';
      record.request = null;
      this.open.delete(position);
    }
  }

  async catchUp(eventStore: EventStore, runId: string): Promise<void> {
    for (const event of await readRunEvents(eventStore, runId, this.revision)) this.apply(event);
  }

  outstanding(): AttemptRecord[] {
    return [...this.open.values()];
  }

  get outstandingCount(): number {
    return this.open.size;
  }

  pausedRequests(): PausedRequest[] {
    return [...this.attempts.values()].flatMap((record) => (record.status === 'paused' && record.request ? [record.request] : []));
  }
}
