/**
 * REST bodies in GitHub's shapes (the test server checks each against the
 * published response schema before sending it).
 */
import type { ModelApp, ModelComment, ModelLabel, ModelPullRequest, RepositoryModel } from './model.js';

export const DOCS = 'https://docs.github.com/rest';

/** Issue ids of pull requests: apart from the model's other ids, so none of those moves. */
const ISSUE_IDS = 800_000;

export function simpleUser(model: RepositoryModel, login: string, web: string, api: string): Record<string, unknown> {
  const user = model.user(login);
  const url = `${api}/users/${encodeURIComponent(login)}`;
  return {
    login,
    id: user.id,
    node_id: Buffer.from(`04:User${user.id}`).toString('base64'),
    avatar_url: `${web}/avatars/${user.id}`,
    gravatar_id: '',
    url,
    html_url: `${web}/${encodeURIComponent(login)}`,
    followers_url: `${url}/followers`,
    following_url: `${url}/following{/other_user}`,
    gists_url: `${url}/gists{/gist_id}`,
    starred_url: `${url}/starred{/owner}{/repo}`,
    subscriptions_url: `${url}/subscriptions`,
    organizations_url: `${url}/orgs`,
    repos_url: `${url}/repos`,
    events_url: `${url}/events{/privacy}`,
    received_events_url: `${url}/received_events`,
    type: user.type,
    site_admin: false,
  };
}

export function issueComment(model: RepositoryModel, comment: ModelComment, web: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  return {
    id: comment.id,
    node_id: Buffer.from(`012:IssueComment${comment.id}`).toString('base64'),
    url: `${repoApi}/issues/comments/${comment.id}`,
    html_url: `${web}/${model.owner}/${model.repo}/pull/${comment.issueNumber}#issuecomment-${comment.id}`,
    body: comment.body,
    user: simpleUser(model, comment.author, web, api),
    created_at: comment.createdAt,
    updated_at: comment.updatedAt,
    issue_url: `${repoApi}/issues/${comment.issueNumber}`,
    author_association: association(model, comment.author),
  };
}

function association(model: RepositoryModel, login: string): string {
  return model.collaborators.has(login) ? 'COLLABORATOR' : 'NONE';
}

/** The authenticated App (apps/get-authenticated). */
export function githubApp(model: RepositoryModel, app: ModelApp, web: string, api: string): Record<string, unknown> {
  return {
    id: app.appId,
    slug: app.slug,
    node_id: Buffer.from(`011:Integration${app.appId}`).toString('base64'),
    client_id: `Iv1.${app.appId.toString(16).padStart(16, '0')}`,
    owner: simpleUser(model, app.owner, web, api),
    name: app.name,
    description: app.description,
    external_url: `${web}/apps/${app.slug}/home`,
    html_url: `${web}/apps/${app.slug}`,
    created_at: app.createdAt,
    updated_at: app.createdAt,
    permissions: { ...app.permissions },
    events: [...app.events],
    installations_count: 1,
  };
}

/**
 * The App's installation on the model's owner (apps/list-installations).
 * The published schema types `account` as all of Simple User and Enterprise
 * (`allOf`), so the account also carries Enterprise's required `name`,
 * `slug`, `created_at` and `updated_at`.
 */
export function installation(model: RepositoryModel, app: ModelApp, web: string, api: string): Record<string, unknown> {
  const account = model.user(model.owner);
  const settings = account.type === 'Organization' ? `${web}/organizations/${model.owner}/settings/installations` : `${web}/settings/installations`;
  return {
    id: app.installationId,
    account: { ...simpleUser(model, model.owner, web, api), name: model.owner, slug: model.owner, created_at: model.epoch, updated_at: model.epoch },
    repository_selection: app.repositorySelection,
    access_tokens_url: `${api}/app/installations/${app.installationId}/access_tokens`,
    repositories_url: `${api}/installation/repositories`,
    html_url: `${settings}/${app.installationId}`,
    app_id: app.appId,
    app_slug: app.slug,
    target_id: account.id,
    target_type: account.type,
    permissions: { ...app.permissions },
    events: [...app.events],
    created_at: app.createdAt,
    updated_at: app.createdAt,
    single_file_name: null,
    has_multiple_single_files: false,
    single_file_paths: [],
    suspended_by: null,
    suspended_at: null,
  };
}

/**
 * The model's repository in GitHub's full Repository shape
 * (apps/list-repos-accessible-to-installation). `owner`: another account's
 * fork of it (the head repository of a cross-repository pull request; the
 * model keeps no fork of its own, so its counts are the model's).
 */
export function repository(model: RepositoryModel, web: string, api: string, owner = model.owner): Record<string, unknown> {
  const full = `${owner}/${model.repo}`;
  const url = `${api}/repos/${full}`;
  const host = new URL(web).host;
  const open = [...model.pulls.values()].filter((pr) => pr.state === 'open').length;
  const fork = owner !== model.owner;
  const id = fork ? model.repositoryId + model.user(owner).id : model.repositoryId;
  return {
    id,
    node_id: Buffer.from(`010:Repository${id}`).toString('base64'),
    name: model.repo,
    full_name: full,
    owner: simpleUser(model, owner, web, api),
    private: false,
    visibility: 'public',
    html_url: `${web}/${full}`,
    description: null,
    fork,
    url,
    archive_url: `${url}/{archive_format}{/ref}`,
    assignees_url: `${url}/assignees{/user}`,
    blobs_url: `${url}/git/blobs{/sha}`,
    branches_url: `${url}/branches{/branch}`,
    collaborators_url: `${url}/collaborators{/collaborator}`,
    comments_url: `${url}/comments{/number}`,
    commits_url: `${url}/commits{/sha}`,
    compare_url: `${url}/compare/{base}...{head}`,
    contents_url: `${url}/contents/{+path}`,
    contributors_url: `${url}/contributors`,
    deployments_url: `${url}/deployments`,
    downloads_url: `${url}/downloads`,
    events_url: `${url}/events`,
    forks_url: `${url}/forks`,
    git_commits_url: `${url}/git/commits{/sha}`,
    git_refs_url: `${url}/git/refs{/sha}`,
    git_tags_url: `${url}/git/tags{/sha}`,
    git_url: `git://${host}/${full}.git`,
    issue_comment_url: `${url}/issues/comments{/number}`,
    issue_events_url: `${url}/issues/events{/number}`,
    issues_url: `${url}/issues{/number}`,
    keys_url: `${url}/keys{/key_id}`,
    labels_url: `${url}/labels{/name}`,
    languages_url: `${url}/languages`,
    merges_url: `${url}/merges`,
    milestones_url: `${url}/milestones{/number}`,
    notifications_url: `${url}/notifications{?since,all,participating}`,
    pulls_url: `${url}/pulls{/number}`,
    releases_url: `${url}/releases{/id}`,
    ssh_url: `git@${host}:${full}.git`,
    stargazers_url: `${url}/stargazers`,
    statuses_url: `${url}/statuses/{sha}`,
    subscribers_url: `${url}/subscribers`,
    subscription_url: `${url}/subscription`,
    tags_url: `${url}/tags`,
    teams_url: `${url}/teams`,
    trees_url: `${url}/git/trees{/sha}`,
    clone_url: `${web}/${full}.git`,
    mirror_url: null,
    hooks_url: `${url}/hooks`,
    svn_url: `${web}/${full}`,
    homepage: null,
    language: null,
    forks_count: 0,
    forks: 0,
    stargazers_count: 0,
    watchers_count: 0,
    watchers: 0,
    size: 0,
    default_branch: model.defaultBranch,
    open_issues_count: open,
    open_issues: open,
    is_template: false,
    topics: [],
    has_issues: true,
    has_projects: true,
    has_wiki: true,
    has_pages: false,
    has_downloads: true,
    has_discussions: false,
    archived: false,
    disabled: false,
    allow_forking: true,
    web_commit_signoff_required: false,
    license: null,
    pushed_at: model.latest(),
    created_at: model.epoch,
    updated_at: model.latest(),
  };
}

/** A pull request as GitHub lists it among issues (issues/list-for-repo): an issue with a `pull_request` member. */
export function issueOfPull(model: RepositoryModel, pr: ModelPullRequest, web: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const url = `${repoApi}/issues/${pr.number}`;
  const html = `${web}/${model.owner}/${model.repo}/pull/${pr.number}`;
  const id = ISSUE_IDS + pr.number;
  const closedAt = pr.state === 'closed' ? (pr.closedAt ?? model.pullUpdatedAt(pr.number)) : null;
  return {
    id,
    node_id: Buffer.from(`05:Issue${id}`).toString('base64'),
    url,
    repository_url: repoApi,
    labels_url: `${url}/labels{/name}`,
    comments_url: `${url}/comments`,
    events_url: `${url}/events`,
    html_url: html,
    timeline_url: `${url}/timeline`,
    number: pr.number,
    state: pr.state,
    state_reason: null,
    title: pr.title,
    body: null,
    user: simpleUser(model, pr.author, web, api),
    labels: pr.labels.map((name) => label(model, model.label(name), api)),
    assignee: null,
    assignees: [],
    milestone: null,
    locked: false,
    active_lock_reason: null,
    comments: model.commentsOf(pr.number).length,
    pull_request: {
      url: `${repoApi}/pulls/${pr.number}`,
      html_url: html,
      diff_url: `${html}.diff`,
      patch_url: `${html}.patch`,
      merged_at: pr.merged ? closedAt : null,
    },
    closed_at: closedAt,
    created_at: pr.createdAt,
    updated_at: model.pullUpdatedAt(pr.number),
    draft: pr.draft,
    author_association: association(model, pr.author),
  };
}

/** GitHub's Pull Request Simple ids: apart from the model's other ids and from the issue ids. */
const PULL_IDS = 900_000;

/**
 * A pull request as GitHub lists it (pulls/list: "Pull Request Simple"). Its
 * `head` and `base` name branch, sha and repository; a cross-repository pull
 * request's head lives in the author's fork (`author:branch`). A label
 * without a description shows an empty one: this shape's published schema
 * types a label's description as a string.
 */
export function pullRequestSimple(model: RepositoryModel, pr: ModelPullRequest, web: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const url = `${repoApi}/pulls/${pr.number}`;
  const issue = `${repoApi}/issues/${pr.number}`;
  const html = `${web}/${model.owner}/${model.repo}/pull/${pr.number}`;
  const id = PULL_IDS + pr.number;
  const closedAt = pr.state === 'closed' ? (pr.closedAt ?? model.pullUpdatedAt(pr.number)) : null;
  const headSha = model.headSha(pr.number);
  const side = (ref: string, sha: string, owner: string) => ({
    label: `${owner}:${ref}`,
    ref,
    repo: repository(model, web, api, owner),
    sha,
    user: simpleUser(model, owner, web, api),
  });
  return {
    url,
    id,
    node_id: Buffer.from(`011:PullRequest${id}`).toString('base64'),
    html_url: html,
    diff_url: `${html}.diff`,
    patch_url: `${html}.patch`,
    issue_url: issue,
    commits_url: `${url}/commits`,
    review_comments_url: `${url}/comments`,
    review_comment_url: `${repoApi}/pulls/comments{/number}`,
    comments_url: `${issue}/comments`,
    statuses_url: `${repoApi}/statuses/${headSha}`,
    number: pr.number,
    state: pr.state,
    locked: false,
    title: pr.title,
    user: simpleUser(model, pr.author, web, api),
    body: null,
    labels: pr.labels.map((name) => ({ ...label(model, model.label(name), api), description: model.label(name).description ?? '' })),
    milestone: null,
    active_lock_reason: null,
    created_at: pr.createdAt,
    updated_at: model.pullUpdatedAt(pr.number),
    closed_at: closedAt,
    merged_at: pr.merged ? closedAt : null,
    merge_commit_sha: pr.mergeCommitSha,
    assignee: null,
    assignees: [],
    requested_reviewers: [],
    requested_teams: [],
    head: side(pr.headRef, headSha, pr.crossRepository ? pr.author : model.owner),
    base: side(pr.baseRef, model.baseSha(pr.number), model.owner),
    _links: {
      self: { href: url },
      html: { href: html },
      issue: { href: issue },
      comments: { href: `${issue}/comments` },
      review_comments: { href: `${url}/comments` },
      review_comment: { href: `${repoApi}/pulls/comments{/number}` },
      commits: { href: `${url}/commits` },
      statuses: { href: `${repoApi}/statuses/${headSha}` },
    },
    author_association: association(model, pr.author),
    auto_merge: null,
    draft: pr.draft,
  };
}

export function label(model: RepositoryModel, l: ModelLabel, api: string): Record<string, unknown> {
  return {
    id: l.id,
    node_id: Buffer.from(`05:Label${l.id}`).toString('base64'),
    url: `${api}/repos/${model.owner}/${model.repo}/labels/${encodeURIComponent(l.name)}`,
    name: l.name,
    description: l.description,
    color: l.color,
    default: false,
  };
}

export function gitRef(model: RepositoryModel, branch: string, sha: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  return {
    ref: `refs/heads/${branch}`,
    node_id: Buffer.from(`03:Ref${branch}`).toString('base64'),
    url: `${repoApi}/git/refs/heads/${branch}`,
    object: { type: 'commit', sha, url: `${repoApi}/git/commits/${sha}` },
  };
}

export function fileContent(model: RepositoryModel, file: string, ref: string, bytes: Uint8Array, web: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const blob = Buffer.from(bytes).toString('hex').slice(0, 40).padEnd(40, '0');
  const self = `${repoApi}/contents/${file}?ref=${encodeURIComponent(ref)}`;
  const base64 = Buffer.from(bytes).toString('base64').replace(/.{60}/g, '$&\n');
  return {
    type: 'file',
    encoding: 'base64',
    size: bytes.length,
    name: file.split('/').pop() ?? file,
    path: file,
    content: base64,
    sha: blob,
    url: self,
    git_url: `${repoApi}/git/blobs/${blob}`,
    html_url: `${web}/${model.owner}/${model.repo}/blob/${ref}/${file}`,
    download_url: null,
    _links: { self, git: `${repoApi}/git/blobs/${blob}`, html: `${web}/${model.owner}/${model.repo}/blob/${ref}/${file}` },
  };
}

export function error(message: string, status: number): Record<string, unknown> {
  return { message, documentation_url: DOCS, status: String(status) };
}

export function validationError(message: string, errors: readonly { resource: string; field: string; code: string }[] = []): Record<string, unknown> {
  return { message, documentation_url: DOCS, errors };
}

/** `repos/get`'s answer: the repository with what the full shape adds (the caller's permissions, network counts). */
export function fullRepository(model: RepositoryModel, web: string, api: string): Record<string, unknown> {
  return { ...repository(model, web, api), network_count: 0, subscribers_count: 0 };
}

const GIT_USER = { name: 'GitHub', email: 'noreply@github.com' };
const UNSIGNED = { verified: false, reason: 'unsigned', signature: null, payload: null, verified_at: null };

function parentsOf(model: RepositoryModel, sha: string, web: string, api: string): Record<string, unknown>[] {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  return model
    .parentsOf(sha)
    .map((parent) => ({ sha: parent, url: `${repoApi}/git/commits/${parent}`, html_url: `${web}/${model.owner}/${model.repo}/commit/${parent}` }));
}

/** A git commit (`git/get-commit`): its tree, parents and message. */
export function gitCommit(model: RepositoryModel, sha: string, web: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const date = model.latest();
  return {
    sha,
    node_id: Buffer.from(`04:Commit${sha}`).toString('base64'),
    url: `${repoApi}/git/commits/${sha}`,
    html_url: `${web}/${model.owner}/${model.repo}/commit/${sha}`,
    author: { ...GIT_USER, date },
    committer: { ...GIT_USER, date },
    tree: { sha: model.treeOf(sha), url: `${repoApi}/git/trees/${model.treeOf(sha)}` },
    message: model.messageOf(sha),
    parents: parentsOf(model, sha, web, api),
    verification: UNSIGNED,
  };
}

/** A commit as the commits and merges APIs answer it (`repos/merge` 201). */
export function commitOf(model: RepositoryModel, sha: string, web: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const date = model.latest();
  return {
    url: `${repoApi}/commits/${sha}`,
    sha,
    node_id: Buffer.from(`04:Commit${sha}`).toString('base64'),
    html_url: `${web}/${model.owner}/${model.repo}/commit/${sha}`,
    comments_url: `${repoApi}/commits/${sha}/comments`,
    commit: {
      url: `${repoApi}/git/commits/${sha}`,
      author: { ...GIT_USER, date },
      committer: { ...GIT_USER, date },
      message: model.messageOf(sha),
      comment_count: 0,
      tree: { sha: model.treeOf(sha), url: `${repoApi}/git/trees/${model.treeOf(sha)}` },
      verification: UNSIGNED,
    },
    author: null,
    committer: null,
    parents: parentsOf(model, sha, web, api),
  };
}

/** One file of a pull request's diff (`pulls/list-files`). */
export function diffEntry(
  model: RepositoryModel,
  path: string,
  status: 'added' | 'removed' | 'modified',
  head: string,
  bytes: Uint8Array | null,
  web: string,
  api: string,
): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const lines = bytes === null ? 0 : Buffer.from(bytes).toString('utf8').split('\n').length;
  return {
    sha: bytes === null ? null : fileContent(model, path, head, bytes, web, api).sha,
    filename: path,
    status,
    additions: status === 'removed' ? 0 : lines,
    deletions: status === 'added' ? 0 : 1,
    changes: lines + 1,
    blob_url: `${web}/${model.owner}/${model.repo}/blob/${head}/${path}`,
    raw_url: `${web}/${model.owner}/${model.repo}/raw/${head}/${path}`,
    contents_url: `${repoApi}/contents/${path}?ref=${head}`,
  };
}
