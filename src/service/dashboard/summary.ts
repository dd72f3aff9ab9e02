/**
 * The dashboard's chart series and list queries, as pure functions over the
 * projection's rows.
 */
import { ProofgateError } from '../../core/index.js';
import type { QueueState } from '../../automerge/queue/queue.js';
import { isChangeStage, type ChangeStage } from '../../automerge/stage.js';

/** Largest page of a list. */
export const MAX_PAGE = 1000;

const timeOf = (iso: string): number => {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? Number.NEGATIVE_INFINITY : t;
};

/** The p-th percentile (0..1) of `values` by nearest rank; null for none. Pure. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil(p * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] as number;
}

/** Chart series of the dashboard. Times are seconds since 1970 (uPlot's x). */
export interface Summary {
  /** Time from `/proofgate automerge` to merge, by UTC day of the merge: p50 and p90 in seconds, and how many merges. */
  readonly mergeLeadTime: { readonly day: number[]; readonly p50: number[]; readonly p90: number[]; readonly count: number[] };
  /** Each finished review: when it finished and how long it took (seconds). */
  readonly reviewDuration: { readonly at: number[]; readonly seconds: number[] };
  /** Changes waiting in the merge queues (every base, in total) over time: a sample at each queue event that moved the total. */
  readonly queueDepth: { readonly at: number[]; readonly depth: number[] };
  /** Changes by stage now. */
  readonly stages: Readonly<Record<ChangeStage, number>>;
}

/** The chart series from the projection's rows. Pure. */
export function summarize(
  leads: readonly { readonly automergeAt: string; readonly mergedAt: string }[],
  reviews: readonly { readonly startedAt: string; readonly finishedAt: string }[],
  samples: readonly { readonly at: string; readonly depth: number }[],
  stages: Readonly<Record<ChangeStage, number>>,
  now: Date,
): Summary {
  const byDay = new Map<number, number[]>();
  for (const lead of leads) {
    const start = timeOf(lead.automergeAt);
    const end = timeOf(lead.mergedAt);
    if (!Number.isFinite(start) || !Number.isFinite(end) || end < start) continue;
    const day = Math.floor(end / 86_400_000) * 86_400;
    const list = byDay.get(day) ?? [];
    list.push((end - start) / 1000);
    byDay.set(day, list);
  }
  const days = [...byDay.keys()].sort((a, b) => a - b);
  const reviewPoints = reviews
    .map((review) => ({ end: timeOf(review.finishedAt), start: timeOf(review.startedAt) }))
    .filter((point) => Number.isFinite(point.end) && Number.isFinite(point.start) && point.end >= point.start)
    .sort((a, b) => a.end - b.end);
  const queue = samples.map((sample) => ({ at: timeOf(sample.at) / 1000, depth: sample.depth })).filter((sample) => Number.isFinite(sample.at));
  const last = queue[queue.length - 1];
  if (last !== undefined && now.getTime() / 1000 > last.at) queue.push({ at: now.getTime() / 1000, depth: last.depth });
  return {
    mergeLeadTime: {
      day: days,
      p50: days.map((day) => percentile(byDay.get(day) ?? [], 0.5) ?? 0),
      p90: days.map((day) => percentile(byDay.get(day) ?? [], 0.9) ?? 0),
      count: days.map((day) => (byDay.get(day) ?? []).length),
    },
    reviewDuration: { at: reviewPoints.map((point) => point.end / 1000), seconds: reviewPoints.map((point) => (point.end - point.start) / 1000) },
    queueDepth: { at: queue.map((sample) => sample.at), depth: queue.map((sample) => sample.depth) },
    stages,
  };
}

/** The merge queue depth: the changes waiting in the queues of every base (their folds), in total. Pure. */
export function mergeQueueDepth(queues: Iterable<Pick<QueueState, 'entries'>>): number {
  let depth = 0;
  for (const queue of queues) depth += queue.entries.length;
  return depth;
}

/** A list query, checked: a bad value is one `INVALID_INPUT` error. Pure. */
export interface ListQuery {
  readonly stage: ChangeStage | null;
  readonly repo: string | null;
  readonly limit: number;
  /** Rows with a number below this one (the previous page's last), or null: from the newest. */
  readonly cursor: number | null;
}

export function listQueryFrom(params: URLSearchParams): ListQuery {
  const one = (name: string): string | null => {
    const values = params.getAll(name);
    if (values.length > 1) throw new ProofgateError('INVALID_INPUT', `${name} is given more than once`);
    return values[0] ?? null;
  };
  const stage = one('stage');
  if (stage !== null && stage !== '' && !isChangeStage(stage))
    throw new ProofgateError('INVALID_INPUT', 'stage must be one of arriving, reviewing, proving, repairing, waiting, merged, blocked, closed');
  const repo = one('repo');
  if (repo !== null && repo.length > 200) throw new ProofgateError('INVALID_INPUT', 'repo is at most 200 characters');
  const limitText = one('limit');
  const limit = limitText === null || limitText === '' ? 100 : /^[0-9]{1,4}$/.test(limitText) ? Number(limitText) : NaN;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new ProofgateError('INVALID_INPUT', `limit must be an integer from 1 to ${MAX_PAGE}`);
  const cursorText = one('cursor');
  const cursor = cursorText === null || cursorText === '' ? null : /^[1-9][0-9]{0,15}$/.test(cursorText) ? Number(cursorText) : NaN;
  if (cursor !== null && !Number.isSafeInteger(cursor)) throw new ProofgateError('INVALID_INPUT', 'cursor must be the nextCursor of a previous page');
  return { stage: stage === null || stage === '' ? null : (stage as ChangeStage), repo: repo === null || repo === '' ? null : repo, limit, cursor };
}
