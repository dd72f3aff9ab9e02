/**
 * The GitHub App manifest (pure): what `proofgate github manifest` prints for
 * GitHub's manifest flow (POST it as the `manifest` field of a form to
 * `https://github.com/settings/apps/new`, or an organization's
 * `.../organizations/ORG/settings/apps/new`). Field names follow GitHub's
 * "Registering a GitHub App from a manifest": `name`, `url` (the homepage,
 * required), `hook_attributes` {`url`, `active`}, `redirect_url`,
 * `description`, `public`, `default_permissions`, `default_events`.
 *
 * The permissions are what the GitHub forge and the service call, nothing
 * more; each carries the reason docs/service.md shows in its table.
 */
import { ProofgateError } from '../core/index.js';
import { httpUrl } from './settings.js';

export type PermissionAccess = 'read' | 'write';

export interface ManifestPermission {
  readonly access: PermissionAccess;
  /** One line: which calls or events need it. */
  readonly reason: string;
}

/**
 * Repository permissions, each with the least access that covers what
 * proofgate does. `metadata: read` is granted to every App; it is listed so
 * the manifest says everything it relies on.
 *
 * Left out on purpose:
 * - `workflows`: `.github/workflows/` is a trusted path that changes only
 *   with a maintainer's approval; without this permission GitHub refuses any
 *   push of the App that changes a workflow, so no repair can (a rebase
 *   repair of a change that edits one fails and is left to its author).
 * - `issues: write`: comments and labels on a pull request go through the
 *   issue endpoints, which accept `pull_requests: write` for pull requests.
 * - `checks: write`, `statuses: write`: proofgate reads check results; it
 *   reports through its status comment, not through checks of its own.
 * - `administration: write`, `members`, any organization permission.
 */
export const MANIFEST_PERMISSIONS = {
  metadata: {
    access: 'read',
    reason: "granted to every App: the repository (default branch) and a commenter's permission on it, which decides who may command proofgate",
  },
  contents: {
    access: 'write',
    reason: 'read .proofgate.yml on the trusted branch and the base, clone and fetch a change; push repair commits to the head (lease-checked); merge',
  },
  pull_requests: {
    access: 'write',
    reason:
      'read pull requests (head, base, mergeability, review decision, comments, labels); write the status comment and labels; merge with the reviewed sha',
  },
  issues: {
    access: 'read',
    reason: 'receive issue_comment (the commands) and list the open pull requests carrying proofgate labels in the reconciliation pass',
  },
  checks: {
    access: 'read',
    reason: 'read check runs and suites of the head (the check summary) and receive check_run and check_suite',
  },
  statuses: {
    access: 'read',
    reason: 'read commit statuses of the head (the check summary) and receive status',
  },
  merge_queues: {
    access: 'write',
    reason:
      "put a reviewed change in GitHub's merge queue pinned to its head (where a ruleset requires the queue), take it out on /proofgate stop, and receive merge_group",
  },
  actions: {
    access: 'write',
    reason:
      "receive workflow_run and read a failed job's log, which the repair of a failing check is given; dispatch a proof scenario's workflow on a protected branch, find its run and download its evidence artifact",
  },
  administration: {
    // Read only, never write: GitHub answers the branch protection endpoints
    // (required status checks, required reviews) only to an App holding this
    // permission. Without it a required check that has not started cannot be
    // told from one that does not exist, and it must count as pending.
    access: 'read',
    reason: 'read branch protection: required checks (one not yet reported is pending, not absent) and required reviews; never changed',
  },
} as const satisfies Record<string, ManifestPermission>;

export type ManifestPermissionName = keyof typeof MANIFEST_PERMISSIONS;

/**
 * Webhook events, each with the permission it needs. `installation` and
 * `installation_repositories` are not listed: GitHub sends them to every App
 * and refuses them in a subscription list; `ping` comes when the hook is set
 * up.
 */
export const MANIFEST_EVENTS = {
  pull_request: { permission: 'pull_requests', reason: 'a change opened, pushed to (synchronize), retargeted, labelled, closed or reopened' },
  pull_request_review: { permission: 'pull_requests', reason: 'a review submitted or dismissed changes the review decision' },
  issue_comment: { permission: 'issues', reason: 'a command (`/proofgate ...`, `@<app slug> ...`) written, edited or deleted' },
  check_run: { permission: 'checks', reason: 'a check started or finished on a head' },
  check_suite: { permission: 'checks', reason: 'a suite of checks finished on a head' },
  status: { permission: 'statuses', reason: 'a commit status set on a head' },
  workflow_run: { permission: 'actions', reason: 'a workflow run requested, waiting for approval or finished' },
  merge_group: { permission: 'merge_queues', reason: "GitHub's merge queue made a queued change's merge group (its checks start) or let it go" },
  push: { permission: 'contents', reason: 'a base branch or the trusted branch moved (mergeability, trusted config)' },
} as const satisfies Record<string, { readonly permission: ManifestPermissionName; readonly reason: string }>;

export type ManifestEventName = keyof typeof MANIFEST_EVENTS;

export const DEFAULT_APP_NAME = 'proofgate';
/** GitHub's limit on an App's name. */
export const MAX_APP_NAME_LENGTH = 34;
/** Where `proofgate serve` takes webhook deliveries, under the service's URL. */
export const WEBHOOK_PATH = '/webhooks';

export interface ManifestOptions {
  /**
   * The service's public URL: the App's homepage and the base of its webhook
   * (`<url>/webhooks`). Without it the manifest has neither, and only shows
   * what proofgate asks for: GitHub's manifest flow requires `url`.
   */
  readonly url?: string;
  /** The App's name (default `proofgate`; a name is unique on GitHub). */
  readonly name?: string;
}

export interface GitHubAppManifest {
  readonly name: string;
  readonly url?: string;
  readonly description: string;
  readonly hook_attributes?: { readonly url: string; readonly active: boolean };
  readonly redirect_url?: string;
  readonly public: boolean;
  readonly default_permissions: Readonly<Record<ManifestPermissionName, PermissionAccess>>;
  readonly default_events: readonly ManifestEventName[];
}

const DESCRIPTION = 'Self-hosted proofgate: reviews pull requests, asks for proof when it matters, and merges only the head it reviewed.';

/** The service's base URL without a trailing slash; a bad one is a one-line USAGE error that does not repeat it. */
export function serviceBaseUrl(text: string, flag = '--url'): string {
  const url = httpUrl(text.trim());
  if (url === null) throw new ProofgateError('USAGE', `${flag} must be an absolute http(s) URL without credentials, query or fragment`, { flag });
  return url.href.replace(/\/+$/, '');
}

function appName(text: string | undefined): string {
  const name = (text ?? DEFAULT_APP_NAME).trim();
  // eslint-disable-next-line no-control-regex
  if (name === '' || name.length > MAX_APP_NAME_LENGTH || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new ProofgateError('USAGE', `--name must be 1 to ${MAX_APP_NAME_LENGTH} characters without control characters`, { flag: '--name' });
  }
  return name;
}

/** The manifest for GitHub's manifest flow. The App is private (`public: false`): a self-hosted service serves its owner. */
export function githubAppManifest(options: ManifestOptions = {}): GitHubAppManifest {
  const name = appName(options.name);
  const base = options.url === undefined ? null : serviceBaseUrl(options.url);
  const default_permissions = Object.fromEntries(Object.entries(MANIFEST_PERMISSIONS).map(([key, value]) => [key, value.access])) as Record<
    ManifestPermissionName,
    PermissionAccess
  >;
  const default_events = Object.keys(MANIFEST_EVENTS) as ManifestEventName[];
  return {
    name,
    ...(base === null
      ? {}
      : {
          url: base,
          hook_attributes: { url: `${base}${WEBHOOK_PATH}`, active: true },
          // GitHub sends the browser here with `?code=...` once the App exists; the code
          // turns into the App's id, key and webhook secret (docs/service.md).
          redirect_url: base,
        }),
    description: DESCRIPTION,
    public: false,
    default_permissions,
    default_events,
  };
}
