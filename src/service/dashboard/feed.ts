/**
 * What the dashboard's projection reads (src/service/projection.ts): a feed
 * of event stores whose events name changes, followed by position, and a
 * reader of one change's facts. `localFeed` is the local forge's: its change
 * streams and check results, the automerge ledger (with the merge queues),
 * the branches. The GitHub App service's feed is in
 * src/service/github/changes.ts.
 */
import { basename } from 'node:path';
import { collectVerdicts, type MarkerSecret } from '../../automerge/markers.js';
import { AUTOMERGE_STREAM_PREFIX, type LoadedLedger } from '../../automerge/loop/ledger-store.js';
import type { LocalForge } from '../../forge/local/index.js';
import { CHANGE_STREAM_PREFIX, REGISTRY_STREAM, changeStream, foldChange } from '../../forge/local/records.js';
import type { ForgeCheck } from '../../forge/port.js';
import type { EventStore, StoredEvent } from '../../storage/ports.js';
import type { ChangeFacts, VerdictBindings } from './change-view.js';

/** One event store the projection follows: its events after the stored position (kept under `key`) name the changes to compute again. */
export interface FeedTail {
  readonly key: string;
  readonly events: EventStore;
  /** The ids of the changes an event names (none: the event is not about a change). */
  idsOf(event: StoredEvent): readonly string[];
  /** Its merge queue streams (`automerge/queue/<base>`) are folded (one tail of a feed at most: the local forge's ledger). */
  readonly queues?: boolean;
}

/** One change as a feed reads it: its facts (without the merge queue, which the projection folds) and its place in the list. */
export interface FeedChange {
  readonly facts: Omit<ChangeFacts, 'queue' | 'queueHistory'>;
  /** The order of the list, newest first (unique per row; a page's cursor is the last row's). */
  readonly order: number;
}

/** What a projection reads: the stores to follow, every change there is, and each change's facts. */
export interface ProjectionFeed {
  /** The stores to follow now (a feed may learn new ones: a repository the GitHub service meets). */
  tails(): Promise<readonly FeedTail[]>;
  /** Every change there is (a rebuild). */
  changeIds(): Promise<readonly string[]>;
  /** A reader of changes for one batch of computations (the local feed reads the branches once per batch). */
  reader(): Promise<(id: string) => Promise<FeedChange | null>>;
}

/** What the projection reads its changes from. */
export interface ProjectionSources {
  readonly forge: LocalForge;
  /** The automerge ledger (`LedgerStore`): its fold of a change, and its event store for the tail. */
  readonly ledger: { load(changeId: string): Promise<LoadedLedger>; readonly events: EventStore };
  /** The marker secret, to read the verdicts' bindings from proofgate's own comments (null: bindings unknown). */
  readonly secret: MarkerSecret | null;
  /** The repository's name on the board (default: the repository directory's name). */
  readonly repo?: string;
  readonly now?: () => Date;
}

/** The local forge's changes: its change streams and check results, the automerge ledger (with the merge queues), the branches. */
export function localFeed(sources: ProjectionSources): ProjectionFeed {
  const { forge } = sources;
  const repo = sources.repo ?? basename(forge.repo.root);
  const forgeIds = (event: StoredEvent): readonly string[] => {
    if (event.streamId.startsWith(CHANGE_STREAM_PREFIX)) return [event.streamId.slice(CHANGE_STREAM_PREFIX.length)];
    if (event.type === 'check-completed' && typeof event.data === 'object' && event.data !== null && !Array.isArray(event.data)) {
      const ids = event.data.changeIds;
      return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [];
    }
    return [];
  };
  const ledgerIds = (event: StoredEvent): readonly string[] =>
    event.streamId.startsWith(AUTOMERGE_STREAM_PREFIX) ? [event.streamId.slice(AUTOMERGE_STREAM_PREFIX.length)] : [];
  const branches = async (): Promise<Map<string, string>> => {
    const text = await forge.repo.text(['for-each-ref', '--format=%(objectname) %(refname)', 'refs/heads/']);
    const refs = new Map<string, string>();
    for (const line of text.split('\n')) {
      const match = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) refs\/heads\/(\S+)$/.exec(line.trim());
      if (match !== null) refs.set(match[2] as string, match[1] as string);
    }
    return refs;
  };
  return {
    tails: async () => [
      { key: 'forge', events: forge.store.events, idsOf: forgeIds },
      { key: 'automerge', events: sources.ledger.events, idsOf: ledgerIds, queues: true },
    ],
    async changeIds() {
      const registry = await forge.store.events.read(REGISTRY_STREAM);
      return registry.map((event) => (event.data as { changeId?: unknown }).changeId).filter((id): id is string => typeof id === 'string');
    },
    async reader() {
      const refs = await branches();
      return async (changeId) => {
        const forgeEvents = await forge.store.events.read(changeStream(changeId));
        const record = foldChange(forgeEvents);
        if (record === null) return null;
        const ledger = await sources.ledger.load(changeId);
        const checkHeads = new Set<string>();
        for (const step of ledger.steps)
          if ((step.step === 'checks-started' || step.step === 'checks-finished') && typeof step.head === 'string') checkHeads.add(step.head);
        const checks: ForgeCheck[] = [];
        for (const sha of checkHeads) checks.push(...(await forge.store.checks(sha)));
        const bindings = new Map<string, VerdictBindings>();
        if (sources.secret !== null) {
          const { verdicts } = collectVerdicts(record.comments, { selfLogin: forge.selfLogin, secret: sources.secret, changeId });
          for (const { fields } of verdicts)
            bindings.set(fields.review, { head: fields.head, diff: fields.diff, contract: fields.contract, config: fields.config });
        }
        return { facts: { repo, record, forgeEvents, branchSha: refs.get(record.headRef) ?? null, ledger, checks, bindings }, order: record.number };
      };
    },
  };
}
