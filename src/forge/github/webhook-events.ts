/**
 * Pure mapping from a verified GitHub webhook payload to a forge event, or to
 * an explicit `ignored` with the reason. Payload fields are read through a
 * small checked accessor: a payload without a field the mapping needs is bad
 * input (INVALID_INPUT naming the field), never a half-filled event.
 */
import { ProofgateError } from '../../core/errors.js';
import type { CheckConclusion, ForgeCheck, ForgeEvent } from '../port.js';
import { actorType, checkConclusion, checkStatus } from './snapshot-mapping.js';

export interface GitHubRepositoryRef {
  readonly owner: string;
  readonly repo: string;
}

/** A forge event plus where it came from (one App serves many repositories). */
export type GitHubForgeEvent = ForgeEvent & {
  readonly eventName: string;
  readonly repository: GitHubRepositoryRef;
  readonly installationId: number | null;
};

export interface IgnoredDelivery {
  readonly kind: 'ignored';
  readonly reason: string;
  readonly eventName: string;
  readonly deliveryId: string;
}

/** A delivery taken before (same id, or same signed body): acknowledged, and nothing is done. */
export interface DuplicateDelivery {
  readonly kind: 'duplicate';
  readonly reason: string;
  readonly eventName: string;
  readonly deliveryId: string;
}

export interface MappingContext {
  readonly eventName: string;
  readonly deliveryId: string;
  /** Branches whose pushes are `base-pushed`; default: the repository's default branch. */
  readonly baseBranches?: readonly string[];
}

type Json = Readonly<Record<string, unknown>>;

class Reader {
  constructor(
    private readonly value: unknown,
    private readonly path: string,
  ) {}
  at(key: string): Reader {
    const obj = this.value;
    const next = typeof obj === 'object' && obj !== null && !Array.isArray(obj) ? (obj as Json)[key] : undefined;
    return new Reader(next, `${this.path}.${key}`);
  }
  has(): boolean {
    return this.value !== undefined && this.value !== null;
  }
  string(): string {
    if (typeof this.value !== 'string') throw this.bad('a string');
    return this.value;
  }
  optString(): string | null {
    return this.has() ? this.string() : null;
  }
  number(): number {
    if (typeof this.value !== 'number' || !Number.isFinite(this.value)) throw this.bad('a number');
    return this.value;
  }
  boolean(): boolean {
    if (typeof this.value !== 'boolean') throw this.bad('a boolean');
    return this.value;
  }
  list(): Reader[] {
    if (!Array.isArray(this.value)) throw this.bad('an array');
    return this.value.map((item, i) => new Reader(item, `${this.path}[${i}]`));
  }
  private bad(what: string): ProofgateError {
    return new ProofgateError('INVALID_INPUT', `webhook payload: ${this.path} is not ${what}`, { field: this.path });
  }
}

export function mapWebhookPayload(payload: unknown, context: MappingContext): GitHubForgeEvent | IgnoredDelivery {
  const p = new Reader(payload, 'payload');
  const ignore = (reason: string): IgnoredDelivery => ({ kind: 'ignored', reason, eventName: context.eventName, deliveryId: context.deliveryId });
  const action = p.at('action').optString();
  const event = mapEvent(p, context, action);
  if (typeof event === 'string') return ignore(event);
  const repository = p.at('repository');
  const installation = p.at('installation');
  return {
    ...event,
    eventName: context.eventName,
    repository: { owner: repository.at('owner').at('login').string(), repo: repository.at('name').string() },
    installationId: installation.has() ? installation.at('id').number() : null,
  } as GitHubForgeEvent;
}

/** The event, or the reason it is ignored. */
function mapEvent(p: Reader, context: MappingContext, action: string | null): ForgeEvent | string {
  const deliveryId = context.deliveryId;
  const ignoredAction = `${context.eventName} action '${String(action)}' is not used`;
  switch (context.eventName) {
    case 'pull_request': {
      const pr = p.at('pull_request');
      const changeId = String(pr.at('number').number());
      if (action === 'opened' || action === 'reopened') return { kind: 'change-opened', changeId, headSha: pr.at('head').at('sha').string(), deliveryId };
      if (action === 'synchronize') return { kind: 'change-synchronized', changeId, headSha: pr.at('head').at('sha').string(), deliveryId };
      if (action === 'closed') return { kind: 'change-closed', changeId, merged: pr.at('merged').boolean(), deliveryId };
      if (action === 'enqueued' || action === 'dequeued') {
        const reason = action === 'dequeued' ? p.at('reason').string() : null;
        return { kind: action === 'enqueued' ? 'change-enqueued' : 'change-dequeued', changeId, headSha: pr.at('head').at('sha').string(), reason, deliveryId };
      }
      return ignoredAction;
    }
    case 'issue_comment': {
      if (action !== 'created' && action !== 'edited') return ignoredAction;
      const issue = p.at('issue');
      if (!issue.at('pull_request').has()) return 'comment on an issue, not on a pull request';
      const comment = p.at('comment');
      const user = comment.at('user');
      return {
        kind: action === 'created' ? 'comment-created' : 'comment-edited',
        changeId: String(issue.at('number').number()),
        comment: {
          id: String(comment.at('id').number()),
          author: user.has() ? user.at('login').string() : 'ghost',
          authorType: actorType(user.has() ? user.at('type').string() : null),
          body: comment.at('body').optString() ?? '',
          createdAt: comment.at('created_at').string(),
          updatedAt: comment.at('updated_at').string(),
        },
        deliveryId,
      };
    }
    case 'check_run': {
      if (action !== 'completed') return ignoredAction;
      const run = p.at('check_run');
      const headSha = run.at('head_sha').string();
      const check: ForgeCheck = {
        kind: 'check_run',
        name: run.at('name').string(),
        workflow: appName(run.at('check_suite').at('app')) ?? appName(run.at('app')),
        status: checkStatus(run.at('status').string()),
        conclusion: checkConclusion(run.at('conclusion').optString()),
        startedAt: run.at('started_at').optString(),
        completedAt: run.at('completed_at').optString(),
        url: run.at('details_url').optString() ?? run.at('html_url').optString(),
        headSha,
      };
      return {
        kind: 'check-completed',
        changeIds: checkedPulls(run.at('pull_requests'), run.at('check_suite').at('head_branch'), p),
        headSha,
        check,
        deliveryId,
      };
    }
    case 'merge_group': {
      if (action !== 'checks_requested' && action !== 'destroyed') return ignoredAction;
      const group = p.at('merge_group');
      const headRef = group.at('head_ref').string();
      const queued = queueRefChange(headRef.replace(/^refs\/heads\//, ''));
      return {
        kind: 'merge-group',
        action,
        changeIds: queued === null ? [] : [queued],
        headSha: group.at('head_sha').string(),
        baseRef: group
          .at('base_ref')
          .string()
          .replace(/^refs\/heads\//, ''),
        reason: action === 'destroyed' ? p.at('reason').string() : null,
        deliveryId,
      };
    }
    case 'check_suite': {
      if (action !== 'completed') return ignoredAction;
      const suite = p.at('check_suite');
      const headSha = suite.at('head_sha').string();
      const app = appName(suite.at('app'));
      const check: ForgeCheck = {
        kind: 'check_run',
        name: app ?? 'check suite',
        workflow: app,
        status: 'completed',
        conclusion: checkConclusion(suite.at('conclusion').optString()),
        startedAt: suite.at('created_at').optString(),
        completedAt: suite.at('updated_at').optString(),
        url: suite.at('url').optString(),
        headSha,
      };
      return { kind: 'check-completed', changeIds: checkedPulls(suite.at('pull_requests'), suite.at('head_branch'), p), headSha, check, deliveryId };
    }
    case 'status': {
      const state = p.at('state').string();
      const terminal: Record<string, CheckConclusion> = { success: 'success', failure: 'failure', error: 'error' };
      const conclusion = terminal[state];
      if (conclusion === undefined) return `status '${state}' is not terminal`;
      const headSha = p.at('sha').string();
      const check: ForgeCheck = {
        kind: 'status',
        name: p.at('context').string(),
        workflow: null,
        status: 'completed',
        conclusion,
        startedAt: p.at('created_at').optString(),
        completedAt: p.at('updated_at').optString(),
        url: p.at('target_url').optString(),
        headSha,
      };
      return { kind: 'check-completed', changeIds: [], headSha, check, deliveryId };
    }
    case 'pull_request_review': {
      if (action !== 'submitted') return ignoredAction;
      const review = p.at('review');
      const user = review.at('user');
      return {
        kind: 'review-submitted',
        changeId: String(p.at('pull_request').at('number').number()),
        reviewer: user.has() ? user.at('login').string() : 'ghost',
        state: review.at('state').string(),
        headSha: review.at('commit_id').string(),
        deliveryId,
      };
    }
    case 'push': {
      const ref = p.at('ref').string();
      if (!ref.startsWith('refs/heads/')) return `push to ${ref} is not a branch push`;
      if (p.at('deleted').boolean()) return `push deleted ${ref}`;
      const branch = ref.slice('refs/heads/'.length);
      const bases = context.baseBranches ?? [p.at('repository').at('default_branch').string()];
      if (!bases.includes(branch)) return `push to ${branch}, not to a base branch`;
      return { kind: 'base-pushed', ref: branch, before: p.at('before').string(), after: p.at('after').string(), deliveryId };
    }
    default:
      return `event '${context.eventName}' is not used`;
  }
}

function appName(app: Reader): string | null {
  return app.has() ? app.at('name').optString() : null;
}

/**
 * The pull request a merge group's branch names (`gh-readonly-queue/<base>/pr-<n>-<head sha>`,
 * the branch GitHub's merge queue makes for an entry), or null for any other branch.
 */
export function queueRefChange(branch: string): string | null {
  const match = /^gh-readonly-queue\/.+\/pr-([1-9][0-9]{0,9})-[0-9a-f]{40}$/.exec(branch);
  return match?.[1] ?? null;
}

/**
 * The pull requests a check wakes: those listed on it, else (a merge group's
 * check, which lists none) the one its merge group branch names. Only a
 * wake-up: the woken change reads its snapshot, whose checks are those of its
 * own head.
 */
function checkedPulls(list: Reader, headBranch: Reader, payload: Reader): string[] {
  const listed = sameRepoPulls(list, payload);
  if (listed.length > 0 || !headBranch.has()) return listed;
  const queued = queueRefChange(headBranch.string());
  return queued === null ? [] : [queued];
}

/** Pull requests listed on a check, keeping only those whose base is this repository (not a fork's). */
function sameRepoPulls(list: Reader, payload: Reader): string[] {
  if (!list.has()) return [];
  const repoId = payload.at('repository').at('id').number();
  return list
    .list()
    .filter((pr) => {
      const baseRepo = pr.at('base').at('repo');
      return !baseRepo.has() || baseRepo.at('id').number() === repoId;
    })
    .map((pr) => String(pr.at('number').number()));
}
