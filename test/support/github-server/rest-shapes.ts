/**
 * REST bodies in GitHub's shapes (the test server checks each against the
 * published response schema before sending it).
 */
import type { ModelComment, ModelLabel, RepositoryModel } from './model.js';

export const DOCS = 'https://docs.github.com/rest';

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
    author_association: model.collaborators.has(comment.author) ? 'COLLABORATOR' : 'NONE',
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
