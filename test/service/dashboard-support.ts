/**
 * Seeds for the dashboard's tests: a real local repository (the test
 * template with the trusted config), real changes opened on the local forge,
 * and their automerge ledger written through the ledger store (commands
 * applied, outcomes recorded, steps appended), with proofgate's own signed
 * verdict comments. Nothing here fakes the API: the service reads these
 * events like any others.
 *
 * No seeded change has automerge on without being merged, so the service
 * started on the seed restarts no loop and the stages stay as seeded.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parseCommands } from '../../src/automerge/commands.js';
import { AUTOMERGE_NAMESPACE } from '../../src/automerge/loop/local.js';
import { LedgerStore } from '../../src/automerge/loop/ledger-store.js';
import { loadOrCreateSecret } from '../../src/automerge/loop/secret.js';
import { composeMarkedBody, type ReviewVerdictFields, type Verdict } from '../../src/automerge/markers.js';
import { systemClock, type Clock } from '../../src/core/index.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { startLocalService, type LocalService } from '../../src/service/local.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { makeSeededRepo, type TempRepo } from '../forge/git-fixture.js';
import { CHECK_SCRIPT, MAINTAINER, repoConfig } from '../automerge/loop/local-support.js';

export const silent = pino({ level: 'silent' });

/** Debian's chromium, and the flags the browser tests launch it with. */
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-gpu'];

export type SeedKind = 'merged' | 'blocked' | 'waiting' | 'reviewing' | 'arriving';

export interface SeedChange {
  readonly kind: SeedKind;
  readonly branch: string;
  readonly title: string;
  /** The block or wait reason (defaults given). */
  readonly reason?: string;
  /** A command comment's text (default by kind). */
  readonly comment?: string;
}

export interface Seeded {
  readonly repo: TempRepo;
  readonly data: string;
  /** Change ids in the order of `changes`. */
  readonly ids: readonly string[];
  cleanup(): void;
}

const digest = (n: number): string => `sha256:${n.toString(16).padStart(64, '0')}`;

/** A clock that moves one second per reading from a fixed start: the seeded times are in order and distinct. */
function steppingClock(start: number): Clock & { readonly at: () => string } {
  let t = start;
  const now = (): Date => {
    t += 1000;
    return new Date(t);
  };
  return { now, timer: (ms, fire) => systemClock.timer(ms, fire), at: () => now().toISOString() };
}

export async function seedRepository(changes: readonly SeedChange[], options: { readonly start?: number } = {}): Promise<Seeded> {
  const repo = makeSeededRepo('proofgate-dash-', { 'README.md': '# dashboard\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() });
  const data = mkdtempSync(join(tmpdir(), 'proofgate-dash-data-'));
  const cleanup = (): void => {
    repo.cleanup();
    rmSync(data, { recursive: true, force: true });
  };
  try {
    const clock = steppingClock(options.start ?? Date.parse('2026-01-05T09:00:00Z'));
    for (const [index, change] of changes.entries()) repo.commit(change.branch, { [`change-${index}.txt`]: `change ${index}\n` }, `change ${index}`, 'main');
    const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data, clock });
    const storage = createLocalRunStorage({ directory: data, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
    const ledger = new LedgerStore(storage.eventStore, clock);
    const secret = await loadOrCreateSecret(data);
    const ids: string[] = [];
    try {
      const { forge } = opened;
      for (const change of changes) {
        const snapshot = await forge.openChange({ head: change.branch, base: 'main', title: change.title, author: 'Casey Contributor' });
        const id = snapshot.id;
        const head = snapshot.head.sha;
        ids.push(id);
        const command = async (text: string): Promise<void> => {
          const comment = await forge.commentAs(id, text, MAINTAINER);
          await ledger.applyCommands(id, {
            comment: { id: comment.id, author: comment.author, updatedAt: comment.updatedAt },
            commands: parseCommands(comment.body),
          });
        };
        const review = async (n: number, verdict: Verdict): Promise<void> => {
          const reviewId = `rev-${id}-${n}`;
          await ledger.record(id, { type: 'review-dispatched', id: reviewId, head, at: clock.at() });
          const fields: ReviewVerdictFields = {
            kind: 'review-verdict',
            change: id,
            head,
            verdict,
            findings: verdict === 'REFUTED' ? 1 : 0,
            review: reviewId,
            at: clock.at(),
            diff: digest(n * 3 + 1),
            contract: digest(n * 3 + 2),
            config: digest(n * 3 + 3),
            run: null,
          };
          const posted = await forge.createComment(id, composeMarkedBody(`Review of ${head.slice(0, 12)}: ${verdict}`, [fields], secret));
          const findings = verdict === 'REFUTED' ? [{ title: 'a finding', evidence: 'see the diff' }] : [];
          await ledger.step(id, 'review-verdict', {
            review: reviewId,
            head,
            verdict,
            comment: posted.id,
            reviewRef: `review/${reviewId}`,
            run: null,
            findings,
          });
          await ledger.record(id, { type: 'review-finished', id: reviewId, head, verdict, at: clock.at() });
        };
        switch (change.kind) {
          case 'merged': {
            await command(change.comment ?? '/proofgate automerge');
            await review(1, 'CONFIRMED');
            await ledger.step(id, 'checks-started', { head });
            await ledger.step(id, 'checks-finished', { head });
            await ledger.step(id, 'merge-attempt', { attempt: `merge-${id}`, head });
            await ledger.record(id, { type: 'merged', id: `merge-${id}`, head, mergeCommit: repo.sha('main'), at: clock.at() });
            break;
          }
          case 'blocked': {
            await command(change.comment ?? '/proofgate review');
            await review(1, 'REFUTED');
            await ledger.step(id, 'decision', { kind: 'block', code: 'review-refuted', reason: change.reason ?? 'REFUTED: a finding', head });
            break;
          }
          case 'waiting':
            await command(change.comment ?? '/proofgate review');
            await review(1, 'CONFIRMED');
            await ledger.step(id, 'checks-started', { head });
            await ledger.step(id, 'decision', { kind: 'wait', code: 'checks-pending', reason: change.reason ?? 'checks pending: test', head });
            break;
          case 'reviewing':
            await command(change.comment ?? '/proofgate review');
            await ledger.record(id, { type: 'review-dispatched', id: `rev-${id}-1`, head, at: clock.at() });
            break;
          case 'arriving':
            break;
        }
      }
    } finally {
      await storage.close();
      await opened.close();
    }
    return { repo, data, ids, cleanup };
  } catch (error) {
    cleanup();
    throw error;
  }
}

/** The local service on a seeded repository, on a free loopback port. */
export async function serveSeed(
  seed: Pick<Seeded, 'repo' | 'data'>,
  options: { readonly host?: string; readonly clock?: Clock } = {},
): Promise<LocalService & { url: string }> {
  const service = await startLocalService({
    repoDir: seed.repo.dir,
    dataDir: seed.data,
    host: options.host ?? '127.0.0.1',
    port: 0,
    http: true,
    logger: silent,
    pollMs: 100,
    clock: options.clock ?? systemClock,
  });
  if (service.url === null) {
    await service.stop(0);
    throw new Error('no url');
  }
  return service as LocalService & { url: string };
}
