/**
 * REST operations of the test server, keyed by GitHub's operation ids, with
 * GitHub's status codes and error messages for the cases proofgate meets:
 * 404, 405 not mergeable, 409 head moved, 422 validation, non-fast-forward
 * and a reference that does not exist. Lists page as GitHub does
 * (`per_page` up to 100, `page`, a `link` header).
 */
import { actionsHandlers } from './actions-rest.js';
import type { ModelApp, ModelPullRequest, RepositoryModel, Role } from './model.js';
import {
  DOCS,
  commitOf,
  diffEntry,
  error,
  gitCommit,
  fileContent,
  gitRef,
  githubApp,
  installation,
  issueComment,
  issueOfPull,
  label,
  fullRepository,
  pullRequestSimple,
  repository,
  simpleUser,
  validationError,
} from './rest-shapes.js';

export interface RestRequest {
  readonly model: RepositoryModel;
  readonly operationId: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly body: unknown;
  /** Login of the authenticated caller. */
  readonly actor: string;
  /** The App the caller authenticated as (its JWT) or through (one of its installation tokens); null otherwise. */
  readonly app: ModelApp | null;
  /** The request path without the REST prefix and query (for `link` headers). */
  readonly path: string;
  /** Web and API roots for URLs in answers. */
  readonly web: string;
  readonly api: string;
  /** Root of the artifact storage server that artifact downloads redirect to. */
  readonly storageUrl?: string;
}

export interface RestAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
  /** 'reset': the change is made, but the caller hears nothing (the connection is reset instead of answered). */
  readonly drop?: 'reset';
}

type Handler = (req: RestRequest) => RestAnswer;

const LEGACY: Readonly<Record<Role, string>> = { admin: 'admin', maintain: 'write', write: 'write', triage: 'read', read: 'read' };

const notFound = (): RestAnswer => ({ status: 404, body: error('Not Found', 404) });

/** GitHub's 405 message for a merge method the repository's settings do not allow. */
const DISALLOWED_METHOD: Readonly<Record<'merge' | 'squash' | 'rebase', string>> = {
  merge: 'Merge commits are not allowed on this repository.',
  squash: 'Squash merges are not allowed on this repository.',
  rebase: 'Rebase merges are not allowed on this repository.',
};

function field(body: unknown, name: string): unknown {
  return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)[name] : undefined;
}

/**
 * One page of a list, as GitHub pages: `per_page` defaults to 30 and is held
 * to 100, `page` counts from 1, and a `link` header names the prev, next,
 * last and first pages (each the request's own URL with another `page`).
 */
export function paged<T>(req: RestRequest, items: readonly T[]): { items: T[]; headers: Record<string, string> } {
  const perPage = Math.min(100, positive(req.query.get('per_page')) ?? 30);
  const page = positive(req.query.get('page')) ?? 1;
  const last = Math.max(1, Math.ceil(items.length / perPage));
  const at = (n: number) => {
    const query = new URLSearchParams(req.query);
    query.set('page', String(n));
    return `<${req.api}${req.path}?${query.toString()}>`;
  };
  const links: string[] = [];
  if (page > 1) links.push(`${at(page - 1)}; rel="prev"`);
  if (page < last) links.push(`${at(page + 1)}; rel="next"`, `${at(last)}; rel="last"`);
  if (page > 1) links.push(`${at(1)}; rel="first"`);
  return { items: items.slice((page - 1) * perPage, page * perPage), headers: links.length === 0 ? {} : { link: links.join(', ') } };
}

function positive(value: string | null): number | null {
  if (value === null || !/^\d+$/.test(value)) return null;
  const n = Number(value);
  return n >= 1 ? n : null;
}

const invalid = (field: string, value: string, resource = 'Issue'): RestAnswer => ({
  status: 422,
  body: { message: 'Validation Failed', errors: [{ value, resource, field, code: 'invalid' }], documentation_url: DOCS },
});

/** A query parameter that must be one of `allowed` (default `fallback`): its value, or GitHub's 422. */
function choice(req: RestRequest, name: string, allowed: readonly string[], fallback: string, resource = 'Issue'): string | RestAnswer {
  const value = req.query.get(name) ?? fallback;
  return allowed.includes(value) ? value : invalid(name, value, resource);
}

/** GitHub lists pull requests among a repository's issues; the model's issues are all pull requests. */
function listIssues(req: RestRequest): RestAnswer {
  const state = choice(req, 'state', ['open', 'closed', 'all'], 'open');
  const sort = choice(req, 'sort', ['created', 'updated', 'comments'], 'created');
  const direction = choice(req, 'direction', ['asc', 'desc'], 'desc');
  if (typeof state !== 'string') return state;
  if (typeof sort !== 'string') return sort;
  if (typeof direction !== 'string') return direction;
  const sinceText = req.query.get('since');
  const since = sinceText === null ? null : Date.parse(sinceText);
  if (sinceText !== null && (since === null || Number.isNaN(since))) return invalid('since', sinceText);
  const labels = (req.query.get('labels') ?? '')
    .split(',')
    .map((l) => l.trim().toLowerCase())
    .filter((l) => l !== '');
  const creator = req.query.get('creator');
  const { model } = req;
  const key = (pr: ModelPullRequest): number =>
    sort === 'created' ? Date.parse(pr.createdAt) : sort === 'updated' ? Date.parse(model.pullUpdatedAt(pr.number)) : model.commentsOf(pr.number).length;
  const sign = direction === 'asc' ? 1 : -1;
  const matching = [...model.pulls.values()]
    .filter((pr) => state === 'all' || pr.state === state)
    .filter((pr) => labels.every((l) => pr.labels.some((name) => name.toLowerCase() === l)))
    .filter((pr) => since === null || Date.parse(model.pullUpdatedAt(pr.number)) >= since)
    .filter((pr) => creator === null || pr.author.toLowerCase() === creator.toLowerCase())
    .sort((a, b) => sign * (key(a) - key(b) || a.number - b.number));
  const page = paged(req, matching);
  return { status: 200, body: page.items.map((pr) => issueOfPull(model, pr, req.web, req.api)), headers: page.headers };
}

/**
 * A repository's pull requests (pulls/list): `state` (default open), `base`
 * (the base branch's name), `head` (`owner:branch`: the account whose
 * repository holds the head, the model's owner or, for a cross-repository
 * pull request, its author's fork), `sort` (`created`, the default;
 * `updated`; `popularity`: by comment count; `long-running`: by creation,
 * without GitHub's one-month limits) and `direction` (default `desc` when
 * sorting by creation, else `asc`).
 */
function listPulls(req: RestRequest): RestAnswer {
  const state = choice(req, 'state', ['open', 'closed', 'all'], 'open', 'PullRequest');
  const sort = choice(req, 'sort', ['created', 'updated', 'popularity', 'long-running'], 'created', 'PullRequest');
  if (typeof state !== 'string') return state;
  if (typeof sort !== 'string') return sort;
  const direction = choice(req, 'direction', ['asc', 'desc'], sort === 'created' ? 'desc' : 'asc', 'PullRequest');
  if (typeof direction !== 'string') return direction;
  const base = req.query.get('base');
  const head = req.query.get('head');
  const colon = head === null ? -1 : head.indexOf(':');
  const headOwner = head === null || colon < 0 ? null : head.slice(0, colon).toLowerCase();
  const headRef = head === null || colon < 0 ? head : head.slice(colon + 1);
  const { model } = req;
  const ownerOfHead = (pr: ModelPullRequest) => (pr.crossRepository ? pr.author : model.owner).toLowerCase();
  const key = (pr: ModelPullRequest): number =>
    sort === 'updated' ? Date.parse(model.pullUpdatedAt(pr.number)) : sort === 'popularity' ? model.commentsOf(pr.number).length : Date.parse(pr.createdAt);
  const sign = direction === 'asc' ? 1 : -1;
  const matching = [...model.pulls.values()]
    .filter((pr) => state === 'all' || pr.state === state)
    .filter((pr) => base === null || pr.baseRef === base)
    .filter((pr) => headRef === null || (pr.headRef === headRef && (headOwner === null || ownerOfHead(pr) === headOwner)))
    .sort((a, b) => sign * (key(a) - key(b) || a.number - b.number));
  const page = paged(req, matching);
  return { status: 200, body: page.items.map((pr) => pullRequestSimple(model, pr, req.web, req.api)), headers: page.headers };
}

/** The branch a `heads/<branch>` ref parameter names (undefined for any other ref). */
function headsBranch(req: RestRequest): string | undefined {
  return /^heads\/(.+)$/.exec(req.params.ref ?? '')?.[1];
}

function issueNumber(req: RestRequest, name: string): number | null {
  const n = Number(req.params[name]);
  return req.model.pulls.has(n) ? n : null;
}

const handlers: Readonly<Record<string, Handler>> = {
  // The server lets only an App's JWT reach these two, and only its installation tokens reach the third.
  'apps/get-authenticated': (req) => (req.app === null ? notFound() : { status: 200, body: githubApp(req.model, req.app, req.web, req.api) }),

  'apps/list-installations': (req) => {
    if (req.app === null) return notFound();
    const page = paged(req, [installation(req.model, req.app, req.web, req.api)]);
    return { status: 200, body: page.items, headers: page.headers };
  },

  'repos/get': (req) => ({ status: 200, body: fullRepository(req.model, req.web, req.api) }),

  'apps/list-repos-accessible-to-installation': (req) => {
    if (req.app === null) return notFound();
    const all = [repository(req.model, req.web, req.api)];
    const page = paged(req, all);
    return {
      status: 200,
      body: { total_count: all.length, repository_selection: req.app.repositorySelection, repositories: page.items },
      headers: page.headers,
    };
  },

  'issues/list-for-repo': listIssues,

  'pulls/list': listPulls,

  'repos/get-collaborator-permission-level': (req) => {
    const login = req.params.username ?? '';
    if (!req.model.users.has(login)) return notFound();
    const role = req.model.collaborators.get(login);
    const user = { ...simpleUser(req.model, login, req.web, req.api), role_name: role ?? 'none' };
    return { status: 200, body: { permission: role === undefined ? 'none' : LEGACY[role], role_name: role ?? 'none', user } };
  },

  'issues/create-comment': (req) => {
    const number = issueNumber(req, 'issue_number');
    if (number === null) return notFound();
    const body = field(req.body, 'body');
    if (typeof body !== 'string' || body === '') {
      return { status: 422, body: validationError('Validation Failed', [{ resource: 'IssueComment', field: 'body', code: 'missing_field' }]) };
    }
    const comment = req.model.addComment(number, req.actor, body);
    return { status: 201, body: issueComment(req.model, comment, req.web, req.api) };
  },

  'issues/get-comment': (req) => {
    const comment = req.model.comments.find((c) => c.id === Number(req.params.comment_id));
    return comment === undefined ? notFound() : { status: 200, body: issueComment(req.model, comment, req.web, req.api) };
  },

  'issues/update-comment': (req) => {
    const comment = req.model.comments.find((c) => c.id === Number(req.params.comment_id));
    if (comment === undefined) return notFound();
    const body = field(req.body, 'body');
    if (typeof body !== 'string' || body === '') {
      return { status: 422, body: validationError('Validation Failed', [{ resource: 'IssueComment', field: 'body', code: 'missing_field' }]) };
    }
    req.model.editComment(comment.id, body);
    return { status: 200, body: issueComment(req.model, comment, req.web, req.api) };
  },

  'issues/add-labels': (req) => {
    const number = issueNumber(req, 'issue_number');
    if (number === null) return notFound();
    const names = Array.isArray(req.body) ? req.body : field(req.body, 'labels');
    if (!Array.isArray(names) || names.some((n) => typeof n !== 'string' || n === '')) {
      return { status: 422, body: validationError('Invalid request.', [{ resource: 'Label', field: 'labels', code: 'invalid' }]) };
    }
    const labels = req.model.addLabels(number, names as string[]);
    return { status: 200, body: labels.map((n) => label(req.model, req.model.label(n), req.api)) };
  },

  'issues/remove-label': (req) => {
    const number = issueNumber(req, 'issue_number');
    if (number === null) return notFound();
    if (!req.model.removeLabel(number, req.params.name ?? '')) return { status: 404, body: error('Label does not exist', 404) };
    const pr = req.model.pull(number);
    return { status: 200, body: pr.labels.map((n) => label(req.model, req.model.label(n), req.api)) };
  },

  'pulls/merge': (req) => {
    const number = issueNumber(req, 'pull_number');
    if (number === null) return notFound();
    const pr = req.model.pull(number);
    const method = field(req.body, 'merge_method') ?? 'merge';
    if (method !== 'merge' && method !== 'squash' && method !== 'rebase') {
      return { status: 422, body: validationError('Validation Failed', [{ resource: 'PullRequest', field: 'merge_method', code: 'invalid' }]) };
    }
    const notMergeable = (message: string): RestAnswer => ({ status: 405, body: { message, documentation_url: DOCS } });
    if (pr.state !== 'open') return notMergeable('Pull Request is not mergeable');
    const sha = field(req.body, 'sha');
    if (sha !== undefined && sha !== req.model.headSha(number)) {
      return { status: 409, body: { message: 'Head branch was modified. Review and try the merge again.', documentation_url: DOCS } };
    }
    if (pr.draft) return notMergeable('Pull Request is still a draft');
    // A base whose ruleset requires GitHub's merge queue takes pull requests only through the queue.
    if (req.model.mergeQueue.method(pr.baseRef) !== null)
      return notMergeable('Repository rule violations found\n\nChanges must be made through the merge queue');
    if (pr.mergeable !== 'MERGEABLE' || pr.mergeState === 'DIRTY') return notMergeable('Pull Request is not mergeable');
    if (pr.mergeState === 'BLOCKED') return notMergeable('Required status check "ci" is expected.');
    if (pr.mergeState === 'BEHIND') return notMergeable('Head branch is not up to date with the base branch');
    // The base's branch protection: GitHub merges nothing while a required check has not passed on the head.
    const missing = req.model.missingRequiredChecks(pr.baseRef, req.model.headSha(number));
    if (missing.length > 0) return notMergeable(`Required status check "${missing[0] ?? ''}" is expected.`);
    if (!req.model.mergeMethods.has(method)) return notMergeable(DISALLOWED_METHOD[method]);
    req.model.beforePullMerge?.(number);
    const merged = req.model.merge(number, method);
    return { status: 200, body: { sha: merged, merged: true, message: 'Pull Request successfully merged' } };
  },

  // Merge a head (a sha or a branch) into a branch with a merge commit: 201, 204 when the head is already in, 409 on a conflict.
  'repos/merge': (req) => {
    const base = field(req.body, 'base');
    const head = field(req.body, 'head');
    const message = field(req.body, 'commit_message');
    if (typeof base !== 'string' || typeof head !== 'string') {
      return { status: 422, body: validationError('Validation Failed', [{ resource: 'Merge', field: 'base', code: 'missing_field' }]) };
    }
    if (!req.model.branches.has(base)) return { status: 404, body: error('Base does not exist', 404) };
    if (req.model.resolve(head) === null) return { status: 404, body: error('Head does not exist', 404) };
    const merged = req.model.mergeIntoBranch(base, head, typeof message === 'string' && message !== '' ? message : `Merge ${head} into ${base}`);
    if (merged.kind === 'nothing') return { status: 204, body: undefined };
    if (merged.kind === 'conflict') return { status: 409, body: { message: 'Merge conflict', documentation_url: DOCS } };
    return { status: 201, body: commitOf(req.model, merged.sha, req.web, req.api) };
  },

  'git/get-commit': (req) => {
    const sha = req.params.commit_sha ?? '';
    return req.model.hasCommit(sha) ? { status: 200, body: gitCommit(req.model, sha, req.web, req.api) } : notFound();
  },

  // A pull request's files: what its head changes against the merge base of its base and head.
  'pulls/list-files': (req) => {
    const number = issueNumber(req, 'pull_number');
    if (number === null) return notFound();
    const { model } = req;
    const head = model.headSha(number);
    const from = model.mergeBase(model.baseSha(number), head);
    const paths = new Set([...(from === null ? [] : model.filesAt(from)), ...model.filesAt(head)]);
    const entries = [...paths].sort().flatMap((path) => {
      const before = from === null ? null : model.file(from, path);
      const after = model.file(head, path);
      if (before !== null && after !== null && Buffer.from(before).equals(Buffer.from(after))) return [];
      const status = before === null ? 'added' : after === null ? 'removed' : 'modified';
      return [diffEntry(model, path, status, head, after, req.web, req.api)];
    });
    const page = paged(req, entries);
    return { status: 200, body: page.items, headers: page.headers };
  },

  'git/get-ref': (req) => {
    const branch = headsBranch(req);
    const sha = branch === undefined ? undefined : req.model.branches.get(branch);
    return branch === undefined || sha === undefined ? notFound() : { status: 200, body: gitRef(req.model, branch, sha, req.api) };
  },

  'git/create-ref': (req) => {
    const ref = field(req.body, 'ref');
    const sha = field(req.body, 'sha');
    const branch = typeof ref === 'string' ? /^refs\/heads\/(.+)$/.exec(ref)?.[1] : undefined;
    if (branch === undefined || typeof sha !== 'string')
      return { status: 422, body: validationError('Reference name must start with refs/ and have at least two slashes.') };
    if (req.model.branches.has(branch)) return { status: 422, body: validationError('Reference already exists') };
    if (!req.model.hasCommit(sha)) return { status: 422, body: validationError('Object does not exist') };
    req.model.setBranch(branch, sha);
    return { status: 201, body: gitRef(req.model, branch, sha, req.api) };
  },

  'git/update-ref': (req) => {
    const branch = headsBranch(req);
    const current = branch === undefined ? undefined : req.model.branches.get(branch);
    if (branch === undefined || current === undefined) return { status: 422, body: validationError('Reference does not exist') };
    const sha = field(req.body, 'sha');
    if (typeof sha !== 'string' || !req.model.hasCommit(sha)) return { status: 422, body: validationError('Object does not exist') };
    if (field(req.body, 'force') !== true && !req.model.isAncestor(current, sha)) return { status: 422, body: validationError('Update is not a fast forward') };
    req.model.setBranch(branch, sha);
    return { status: 200, body: gitRef(req.model, branch, sha, req.api) };
  },

  // GitHub closes every open pull request whose base the deleted branch was; one whose head it was stays as it is.
  'git/delete-ref': (req) => {
    const branch = headsBranch(req);
    if (branch === undefined || !req.model.deleteBranch(branch)) return { status: 422, body: error('Reference does not exist', 422) };
    return { status: 204, body: undefined };
  },

  'repos/get-content': (req) => {
    const ref = req.query.get('ref') ?? req.model.defaultBranch;
    const sha = req.model.resolve(ref);
    if (sha === null) return { status: 404, body: error(`No commit found for the ref ${ref}`, 404) };
    const file = (req.params.path ?? '').replace(/^\/+|\/+$/g, '');
    const bytes = req.model.file(sha, file);
    if (bytes !== null) return { status: 200, body: fileContent(req.model, file, ref, bytes, req.web, req.api) };
    if (req.model.directoryExists(sha, file)) return { status: 200, body: directory(req, sha, file, ref) };
    return notFound();
  },
};

function directory(req: RestRequest, sha: string, dir: string, ref: string): unknown[] {
  const names = new Set<string>();
  for (const path of req.model.filesAt(sha)) {
    if (path.startsWith(`${dir}/`)) names.add(path.slice(dir.length + 1).split('/')[0] as string);
  }
  return [...names].sort().map((name) => {
    const path = `${dir}/${name}`;
    const bytes = req.model.file(sha, path);
    const entry = fileContent(req.model, path, ref, bytes ?? new Uint8Array(), req.web, req.api);
    return {
      type: bytes === null ? 'dir' : 'file',
      size: bytes?.length ?? 0,
      name,
      path,
      sha: entry.sha,
      url: entry.url,
      git_url: entry.git_url,
      html_url: entry.html_url,
      download_url: null,
      _links: entry._links,
    };
  });
}

export function answerRest(req: RestRequest): RestAnswer | null {
  const handler = handlers[req.operationId] ?? actionsHandlers[req.operationId];
  return handler === undefined ? null : handler(req);
}
