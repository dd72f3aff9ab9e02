/**
 * The GitHub App as the service uses it: the App's own identity (its JWT:
 * `GET /app` for the slug, `GET /app/installations`), and one client per
 * installation whose token @octokit/auth-app mints, caches and refreshes
 * before it expires. Forges are made per repository from the installation's
 * client, so every repository of one installation shares one token.
 */
import type { Logger } from 'pino';
import { ProofgateError } from '../../core/index.js';
import {
  createGitHubClient,
  type GitHubOctokit,
  type GitHubRequestObservation,
  type GitHubRetryOptions,
  type GitHubThrottleOptions,
} from '../../forge/github/client.js';
import { forgeError } from '../../forge/github/errors.js';
import type { GitHubAppSettings } from '../settings.js';

export interface GitHubAppClientOptions {
  readonly settings: Pick<GitHubAppSettings, 'appId' | 'privateKey' | 'apiUrl'>;
  readonly logger?: Logger;
  readonly retry?: GitHubRetryOptions;
  readonly throttle?: GitHubThrottleOptions;
  /** Told the end of every request of every client made here (metrics): `installationId` null for the App's own (JWT) requests. */
  readonly observe?: (observation: GitHubRequestObservation, installationId: number | null) => void;
}

/** The App as `GET /app` describes it. */
export interface AppIdentity {
  readonly id: number;
  readonly slug: string;
  /** The login its comments and pushes carry: `slug[bot]`. */
  readonly botLogin: string;
}

export interface InstallationRepository {
  readonly installationId: number;
  /** `owner/name`. */
  readonly repository: string;
  readonly owner: string;
  readonly name: string;
  readonly fork: boolean;
}

/** An open pull request as the issue list shows it. */
export interface ListedPull {
  readonly number: number;
  readonly labels: readonly string[];
  readonly updatedAt: string;
}

/** Items asked for per page, and most pages read of one list. */
const PAGE = 100;
const MAX_PAGES = 50;

export class GitHubAppClient {
  readonly #options: GitHubAppClientOptions;
  readonly #app: GitHubOctokit;
  readonly #installations = new Map<number, GitHubOctokit>();

  constructor(options: GitHubAppClientOptions) {
    this.#options = options;
    this.#app = this.#client(undefined);
  }

  #client(installationId: number | undefined): GitHubOctokit {
    const { settings, observe } = this.#options;
    return createGitHubClient({
      ...(observe === undefined ? {} : { observe: (observation: GitHubRequestObservation) => observe(observation, installationId ?? null) }),
      auth: { kind: 'app', appId: settings.appId, privateKey: settings.privateKey, ...(installationId === undefined ? {} : { installationId }) },
      baseUrl: settings.apiUrl,
      ...(this.#options.logger === undefined ? {} : { logger: this.#options.logger }),
      ...(this.#options.retry === undefined ? {} : { retry: this.#options.retry }),
      ...(this.#options.throttle === undefined ? {} : { throttle: this.#options.throttle }),
    });
  }

  /** The client of one installation (one per process; its token is cached and refreshed by the auth strategy). */
  installation(installationId: number): GitHubOctokit {
    if (!Number.isSafeInteger(installationId) || installationId <= 0) throw new ProofgateError('INVALID_INPUT', `installation id must be a positive integer`);
    let client = this.#installations.get(installationId);
    if (client === undefined) {
      client = this.#client(installationId);
      this.#installations.set(installationId, client);
    }
    return client;
  }

  /** `GET /app`: who the App is. A key GitHub does not take is FORGE_AUTH. */
  async identity(): Promise<AppIdentity> {
    try {
      const { data } = await this.#app.request('GET /app');
      const slug = (data as { slug?: unknown } | null)?.slug;
      const id = (data as { id?: unknown } | null)?.id;
      if (typeof slug !== 'string' || slug === '' || typeof id !== 'number')
        throw new ProofgateError('FORGE_API', 'GET /app answered without the App id and slug');
      return { id, slug, botLogin: `${slug}[bot]` };
    } catch (error) {
      throw forgeError('App lookup', error);
    }
  }

  /** `GET /app/installations`: every installation's id. */
  async installationIds(): Promise<number[]> {
    const ids: number[] = [];
    await everyPage(
      'installation list',
      (page) => this.#app.request('GET /app/installations', { per_page: PAGE, page }),
      (data) => {
        const list = Array.isArray(data) ? (data as { id?: unknown }[]) : [];
        for (const item of list) if (typeof item.id === 'number') ids.push(item.id);
        return list.length;
      },
    );
    return ids;
  }

  /** `GET /installation/repositories` with the installation's token. */
  async repositories(installationId: number): Promise<InstallationRepository[]> {
    const client = this.installation(installationId);
    const found: InstallationRepository[] = [];
    await everyPage(
      'repository list',
      (page) => client.request('GET /installation/repositories', { per_page: PAGE, page }),
      (data) => {
        const repositories = (data as { repositories?: unknown } | null)?.repositories;
        const list = Array.isArray(repositories) ? (repositories as { name?: unknown; owner?: { login?: unknown }; fork?: unknown }[]) : [];
        for (const repo of list) {
          if (typeof repo.name !== 'string' || typeof repo.owner?.login !== 'string') continue;
          found.push({ installationId, repository: `${repo.owner.login}/${repo.name}`, owner: repo.owner.login, name: repo.name, fork: repo.fork === true });
        }
        return list.length;
      },
    );
    return found;
  }

  /**
   * Open pull requests of a repository (issues that are pull requests), the
   * most recently updated first; `since`: only those updated at or after it.
   */
  async openPulls(installationId: number, owner: string, repo: string, since: string | null): Promise<ListedPull[]> {
    const client = this.installation(installationId);
    const found: ListedPull[] = [];
    const query = { owner, repo, state: 'open', sort: 'updated', direction: 'desc', per_page: PAGE, ...(since === null ? {} : { since }) } as const;
    await everyPage(
      'pull request list',
      (page) => client.request('GET /repos/{owner}/{repo}/issues', { ...query, page }),
      (data) => {
        const list = Array.isArray(data) ? (data as { number?: unknown; pull_request?: unknown; labels?: unknown; updated_at?: unknown }[]) : [];
        for (const issue of list) {
          if (typeof issue.number !== 'number' || issue.pull_request === undefined || issue.pull_request === null) continue;
          const labels = Array.isArray(issue.labels)
            ? (issue.labels as unknown[])
                .map((label) => (typeof label === 'string' ? label : (label as { name?: unknown }).name))
                .filter((n): n is string => typeof n === 'string')
            : [];
          found.push({ number: issue.number, labels, updatedAt: typeof issue.updated_at === 'string' ? issue.updated_at : '' });
        }
        return list.length;
      },
    );
    return found;
  }
}

/**
 * Read a paged list: page 1, 2, ... until a page holds fewer than `PAGE`
 * items (or `MAX_PAGES` were read). `take` keeps a page's items and says how
 * many it held; a failed request is the forge's typed error naming `what`.
 */
async function everyPage(what: string, request: (page: number) => Promise<{ data: unknown }>, take: (data: unknown) => number): Promise<void> {
  for (let page = 1; page <= MAX_PAGES; page++) {
    let data: unknown;
    try {
      ({ data } = await request(page));
    } catch (error) {
      throw forgeError(what, error);
    }
    if (take(data) < PAGE) return;
  }
}
