import { userInfo } from 'node:os';
import { ProofgateError, newId, systemClock, type Clock } from '../../core/index.js';
import { isAncestor } from '../../host/git.js';
import { emptyRepoConfig, protectedBranchNames, protectedBranchRefusal, sameLogin } from '../../contracts/repo-config.js';
import type { TrustedConfig } from '../protection.js';
import type { StoredEvent } from '../../storage/ports.js';
import type {
  ChangeSnapshot,
  ChangeWorkspace,
  DeleteBranchRequest,
  Forge,
  ForgeComment,
  MergeQueuePort,
  MergeRequest,
  MergeResult,
  PushRequest,
  RepoPermission,
} from '../port.js';
import { lowerPermission } from '../port.js';
import { runChecks, type CheckProgress, type CheckRunResult } from './checks.js';
import { localMergeQueue } from './candidate.js';
import { deleteBranch } from './delete-branch.js';
import { tailForgeEvents, toForgeEvent, type ForgeEventListener, type PositionedForgeEvent, type TailOptions } from './events.js';
import { mergeChange } from './merge.js';
import { branchStream, changeStream, foldChange, type ChangeRecord } from './records.js';
import type { GitRepository } from './repository.js';
import { localReviewDecision, type ApprovalReader } from './review-decision.js';
import { permissionFromConfig, readLiveChange } from './snapshot.js';
import { LocalForgeStore, type LocalForgeStorage } from './store.js';
import { loadTrustedConfig } from './trusted-config.js';
import { repositoryWorkspace } from './workspace.js';

export interface LocalForgeOptions {
  readonly repo: GitRepository;
  readonly storage: LocalForgeStorage;
  /** The identity proofgate comments as (default `proofgate`). */
  readonly selfLogin?: string;
  readonly clock?: Clock;
  /**
   * The trusted branch: its `.proofgate.yml` names the protected branches and
   * the maintainers (default: `main`, else `master`; `openLocalForge` passes the
   * data directory's setting).
   */
  readonly trustedBranch?: string;
  /** Output kept per check run (default 1 MiB). */
  readonly outputCapBytes?: number;
  /** proofgate's data dir (a configured cacheDir may not overlap it). */
  readonly dataDir?: string;
  /** Test seam for the base-moved race: runs inside `merge` right before the base ref is swapped. */
  readonly beforeBaseUpdate?: () => Promise<void>;
}

export interface OpenChangeRequest {
  readonly head: string;
  readonly base: string;
  readonly title?: string;
  /** Author login (default: the local git identity). */
  readonly author?: string;
}

export interface RunChecksOptions {
  readonly onProgress?: (progress: CheckProgress) => void;
  /** Cancels the run (see `runChecks` in checks.ts). */
  readonly signal?: AbortSignal;
}

/** The local forge: a git repository on disk plus proofgate's store. */
export class LocalForge implements Forge {
  readonly kind = 'local' as const;
  readonly selfLogin: string;
  readonly repo: GitRepository;
  readonly store: LocalForgeStore;
  /** The repository itself; a new head is published with `pushBranch`. */
  readonly workspace: ChangeWorkspace;
  /** The merge queue's candidates on this repository (candidate.ts). */
  readonly mergeQueue: MergeQueuePort;
  readonly #clock: Clock;
  readonly #trustedBranch: string | undefined;
  #trustedCache: { readonly branch: string; readonly sha: string; readonly value: TrustedConfig } | null = null;
  readonly #outputCapBytes: number;
  readonly #dataDir: string | undefined;
  readonly #beforeBaseUpdate: (() => Promise<void>) | undefined;
  readonly #listeners = new Set<ForgeEventListener>();
  readonly #wakers = new Set<() => void>();
  #approvals: ApprovalReader | null = null;
  #ceiling: ((login: string) => Promise<RepoPermission | null>) | null = null;

  constructor(options: LocalForgeOptions) {
    this.repo = options.repo;
    this.selfLogin = options.selfLogin ?? 'proofgate';
    this.#clock = options.clock ?? systemClock;
    this.#trustedBranch = options.trustedBranch;
    this.#outputCapBytes = options.outputCapBytes ?? 1024 * 1024;
    this.#dataDir = options.dataDir;
    this.#beforeBaseUpdate = options.beforeBaseUpdate;
    this.store = new LocalForgeStore(options.storage, (events) => this.#publish(events));
    this.workspace = repositoryWorkspace(this.repo, (request) => this.pushBranch(request));
    this.mergeQueue = localMergeQueue({
      repo: this.repo,
      store: this.store,
      clock: this.#clock,
      selfLogin: this.selfLogin,
      outputCapBytes: this.#outputCapBytes,
      ...(this.#dataDir === undefined ? {} : { dataDir: this.#dataDir }),
      trusted: () => this.trustedConfig(),
    });
  }

  #now(): string {
    return this.#clock.now().toISOString();
  }

  #publish(events: readonly StoredEvent[]): void {
    for (const wake of this.#wakers) wake();
    if (this.#listeners.size === 0) return;
    for (const stored of events) {
      const event = toForgeEvent(stored);
      if (event === null) continue;
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch {
          // A listener's failure is its own; the action that fired the event already happened.
        }
      }
    }
  }

  /** Listen to forge events of actions taken through this instance. Returns the unsubscribe function. */
  onEvent(listener: ForgeEventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The position of the newest stored event (0 when none): where a tail of only new events starts. */
  async lastEventPosition(): Promise<number> {
    let position = 0;
    for (;;) {
      const batch = await this.store.events.readAll({ afterPosition: position, limit: 1000 });
      const last = batch[batch.length - 1];
      if (last === undefined) return position;
      position = last.position;
    }
  }

  /** Tail forge events from the store (all processes), woken at once by this instance's own actions. */
  events(options: TailOptions = {}): AsyncGenerator<PositionedForgeEvent> {
    return tailForgeEvents(
      this.store.events,
      (wake) => {
        this.#wakers.add(wake);
        return () => this.#wakers.delete(wake);
      },
      options,
    );
  }

  /** The login of the local git identity (`user.name`, else `user.email`, else the OS user). */
  async localIdentity(): Promise<string> {
    return (await this.repo.configValue('user.name')) ?? (await this.repo.configValue('user.email')) ?? userInfo().username;
  }

  /** Refuse (`RESERVED_IDENTITY`) a login that is proofgate's own in any letter case, and an empty one. */
  #actingLogin(login: string, what: string): string {
    if (login.trim() === '') throw new ProofgateError('INVALID_INPUT', `${what} needs a login`);
    if (sameLogin(login, this.selfLogin)) {
      throw new ProofgateError('RESERVED_IDENTITY', `"${login}" is proofgate's own identity; act as yourself (--as LOGIN, or git config user.name)`, { login });
    }
    return login;
  }

  /** The trusted branch (see `LocalForgeOptions.trustedBranch`). */
  async trustedBranch(): Promise<string> {
    return this.#trustedBranch ?? ((await this.repo.branchSha('main')) !== null ? 'main' : 'master');
  }

  /** The trusted branch and its config (read again only when the branch moved); a missing trusted branch is `PROTECTED_BRANCH`. */
  async trustedConfig(): Promise<TrustedConfig> {
    const branch = await this.trustedBranch();
    const sha = await this.repo.branchSha(branch);
    if (sha === null) {
      throw new ProofgateError(
        'PROTECTED_BRANCH',
        `the trusted branch "${branch}" does not exist in ${this.repo.root}; name another with \`proofgate config trusted-branch NAME\``,
        { branch },
      );
    }
    const cached = this.#trustedCache;
    if (cached !== null && cached.branch === branch && cached.sha === sha) return cached.value;
    const value = { branch, config: await loadTrustedConfig(this.repo, branch, sha) };
    this.#trustedCache = { branch, sha, value };
    return value;
  }

  /**
   * Register a change: `head` branch proposed into `base` branch. Everything is
   * checked before anything is written, so a refused change registers nothing:
   * the author, the branches, the protected-branch rule (`PROTECTED_BRANCH`)
   * and the base's config (`CONFIG`).
   */
  async openChange(request: OpenChangeRequest): Promise<ChangeSnapshot> {
    const author = this.#actingLogin(request.author ?? (await this.localIdentity()), 'a change author');
    const baseSha = await this.repo.requireBranch(request.base);
    const headSha = await this.repo.requireBranch(request.head);
    if (request.head === request.base) throw new ProofgateError('INVALID_INPUT', 'head and base must be different branches');
    const trusted = await this.trustedConfig();
    const refusal = protectedBranchRefusal({ trustedBranch: trusted.branch, trustedConfig: trusted.config, base: request.base, head: request.head });
    if (refusal !== null) throw new ProofgateError('PROTECTED_BRANCH', `cannot open a change: ${refusal}`, { base: request.base, head: request.head });
    if ((await this.repo.mergeBase(baseSha, headSha)) === null) {
      throw new ProofgateError('INVALID_INPUT', `"${request.base}" and "${request.head}" share no history (the base is not an ancestor of the head)`);
    }
    if (await isAncestor(this.repo.root, headSha, baseSha)) {
      throw new ProofgateError('INVALID_INPUT', `"${request.head}" has no commits that "${request.base}" lacks`);
    }
    await loadTrustedConfig(this.repo, request.base, baseSha);
    const number = await this.store.allocateNumber();
    const changeId = String(number);
    const title = request.title?.trim() || (await this.repo.text(['log', '-1', '--format=%s', headSha])) || request.head;
    await this.store.append(changeStream(changeId), [
      { type: 'change-opened', data: { changeId, number, title, baseRef: request.base, headRef: request.head, baseSha, headSha, author, at: this.#now() } },
    ]);
    return this.snapshot(changeId);
  }

  /** Every change in the store, oldest first. */
  listChanges(): Promise<ChangeRecord[]> {
    return this.store.listChanges();
  }

  /**
   * Read approvals with `reader` for the review decision of changes whose
   * base config asks for `requiredApprovals` (the automerge wiring installs
   * the reader of its approval records; see review-decision.ts).
   */
  useApprovals(reader: ApprovalReader | null): void {
    this.#approvals = reader;
  }

  async snapshot(changeId: string): Promise<ChangeSnapshot> {
    const trusted = await this.trustedConfig();
    const live = await readLiveChange(this.repo, this.store, changeId, trusted);
    if (live.refusal !== null) return live.snapshot;
    const reviewDecision = await localReviewDecision(live.snapshot, live.config, (login) => permissionFromConfig(trusted.config, login), this.#approvals);
    return { ...live.snapshot, reviewDecision };
  }

  /** Comment as proofgate itself (a Bot). */
  createComment(changeId: string, body: string): Promise<ForgeComment> {
    return this.#comment(changeId, body, this.selfLogin, 'Bot');
  }

  /**
   * Comment as `login` (a person at the terminal, or another agent). proofgate's
   * own login, in any letter case, is reserved: `RESERVED_IDENTITY`.
   */
  commentAs(changeId: string, body: string, login: string): Promise<ForgeComment> {
    return this.#comment(changeId, body, this.#actingLogin(login, 'a comment'), 'User');
  }

  async #comment(changeId: string, body: string, login: string, authorType: 'Bot' | 'User'): Promise<ForgeComment> {
    if (body.trim() === '') throw new ProofgateError('INVALID_INPUT', 'a comment needs a nonempty body');
    await this.store.requireChange(changeId);
    const commentId = newId('cmt');
    await this.store.append(changeStream(changeId), [{ type: 'comment-created', data: { commentId, author: login, authorType, body, at: this.#now() } }]);
    return this.#findComment(changeId, commentId);
  }

  async #findComment(changeId: string, commentId: string): Promise<ForgeComment> {
    const comment = (await this.store.requireChange(changeId)).comments.find((entry) => entry.id === commentId);
    if (comment === undefined) throw new ProofgateError('NOT_FOUND', `change ${changeId} has no comment ${commentId}`, { changeId, commentId });
    return comment;
  }

  /** Edit one of proofgate's own comments in place. */
  async editComment(changeId: string, commentId: string, body: string): Promise<ForgeComment> {
    if (body.trim() === '') throw new ProofgateError('INVALID_INPUT', 'a comment needs a nonempty body');
    const at = this.#now();
    await this.store.appendWith(changeStream(changeId), (events) => {
      const record = foldChange(events);
      if (record === null) throw new ProofgateError('NOT_FOUND', `no change with id "${changeId}"`, { changeId });
      const comment = record.comments.find((entry) => entry.id === commentId);
      if (comment === undefined) throw new ProofgateError('NOT_FOUND', `change ${changeId} has no comment ${commentId}`, { changeId, commentId });
      if (!sameLogin(comment.author, this.selfLogin)) {
        throw new ProofgateError('INVALID_INPUT', `comment ${commentId} was written by ${comment.author}; proofgate edits only its own comments`);
      }
      return [{ type: 'comment-edited', data: { commentId, author: comment.author, authorType: comment.authorType, createdAt: comment.createdAt, body, at } }];
    });
    return this.#findComment(changeId, commentId);
  }

  async addLabels(changeId: string, labels: readonly string[]): Promise<void> {
    const clean = [...new Set(labels.map((label) => label.trim()))];
    if (clean.some((label) => label === '')) throw new ProofgateError('INVALID_INPUT', 'labels must be nonempty');
    await this.store.requireChange(changeId);
    await this.store.appendWith(changeStream(changeId), (events) => {
      const present = foldChange(events)?.labels ?? [];
      const added = clean.filter((label) => !present.includes(label));
      return added.length === 0 ? [] : [{ type: 'labels-added', data: { labels: added, at: this.#now() } }];
    });
  }

  /** Remove a label; removing a label the change does not have changes nothing. */
  async removeLabel(changeId: string, label: string): Promise<void> {
    await this.store.requireChange(changeId);
    await this.store.appendWith(changeStream(changeId), (events) =>
      (foldChange(events)?.labels ?? []).includes(label) ? [{ type: 'label-removed', data: { label, at: this.#now() } }] : [],
    );
  }

  /** Close an open change without merging (refs stay as they are); closing a closed change changes nothing. */
  async closeChange(changeId: string): Promise<ChangeSnapshot> {
    const record = await this.store.requireChange(changeId);
    if (record.state === 'merged') throw new ProofgateError('INVALID_INPUT', `change ${changeId} is merged; it cannot be closed`);
    await this.store.appendWith(changeStream(changeId), (events) =>
      foldChange(events)?.state === 'open' ? [{ type: 'change-closed', data: { at: this.#now() } }] : [],
    );
    return this.snapshot(changeId);
  }

  merge(changeId: string, request: MergeRequest): Promise<MergeResult> {
    return this.trustedConfig().then((trusted) =>
      mergeChange(
        { repo: this.repo, store: this.store, clock: this.#clock, selfLogin: this.selfLogin, trusted, beforeBaseUpdate: this.#beforeBaseUpdate },
        changeId,
        request,
      ),
    );
  }

  /**
   * Delete a branch with compare-and-swap (see delete-branch.ts): never a
   * protected branch, one an open change uses, or one checked out in a work tree.
   */
  async deleteBranch(request: DeleteBranchRequest): Promise<void> {
    await deleteBranch({ repo: this.repo, store: this.store, trusted: await this.trustedConfig() }, request);
  }

  /** Move a branch with compare-and-swap; a protected branch (`PROTECTED_BRANCH`) moves only by a merge. */
  async pushBranch(request: PushRequest): Promise<void> {
    if (!(await this.repo.isValidBranchName(request.branch))) throw new ProofgateError('INVALID_INPUT', `not a valid branch name: ${request.branch}`);
    const trusted = await this.trustedConfig();
    if (protectedBranchNames(trusted.branch, trusted.config).some((name) => name.toLowerCase() === request.branch.toLowerCase())) {
      throw new ProofgateError('PROTECTED_BRANCH', `"${request.branch}" is a protected branch: it moves only by a merge; nothing was pushed`, {
        branch: request.branch,
      });
    }
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(request.newSha)) throw new ProofgateError('INVALID_INPUT', 'pushBranch needs newSha as a full commit sha');
    const commit = await this.repo.resolveCommit(request.newSha);
    if (commit === null || commit !== request.newSha) throw new ProofgateError('NOT_FOUND', `no commit ${request.newSha} in ${this.repo.root}`);
    const moved = await this.repo.moveBranch(request.branch, request.newSha, request.expectedOldSha, 'proofgate: push');
    if (!moved.swapped) {
      throw new ProofgateError('HEAD_MOVED', `branch ${request.branch} is no longer at ${request.expectedOldSha ?? '(absent)'}; nothing was pushed`, {
        branch: request.branch,
      });
    }
    const at = this.#now();
    const changes = (await this.store.listChanges()).filter((record) => record.state === 'open');
    for (const record of changes.filter((entry) => entry.headRef === request.branch)) {
      await this.store.append(changeStream(record.changeId), [{ type: 'head-pushed', data: { before: request.expectedOldSha, headSha: request.newSha, at } }]);
    }
    if (changes.some((record) => record.baseRef === request.branch)) {
      await this.store.append(branchStream(request.branch), [
        { type: 'branch-pushed', data: { ref: `refs/heads/${request.branch}`, before: request.expectedOldSha, after: request.newSha, at } },
      ]);
    }
  }

  async readFile(ref: string, path: string): Promise<Uint8Array | null> {
    const commit = await this.repo.resolveCommit(ref);
    if (commit === null) throw new ProofgateError('NOT_FOUND', `no ref or commit "${ref}" in ${this.repo.root}`, { ref });
    return this.repo.readBlob(commit, path);
  }

  /**
   * Cap every login's permission by `ceiling` (`proofgate serve`: the
   * permission of that login's token; null: no cap). The automerge router
   * reads a commenter's permission here, so a comment posted with a
   * read-ceiling token is judged as read, whatever the config gives its name.
   */
  limitPermissions(ceiling: ((login: string) => Promise<RepoPermission | null>) | null): void {
    this.#ceiling = ceiling;
  }

  /** A login's permission under the trusted branch's maintainers (`read` when that branch does not exist yet), under the ceiling if one is set. */
  async permission(login: string): Promise<RepoPermission> {
    const exists = (await this.repo.branchSha(await this.trustedBranch())) !== null;
    const granted = permissionFromConfig(exists ? (await this.trustedConfig()).config : emptyRepoConfig(), login);
    const cap = this.#ceiling === null ? null : await this.#ceiling(login);
    if (cap === null) return granted;
    return lowerPermission(cap, granted);
  }

  /** Run the base config's checks at the change's current head (refused, `PROTECTED_BRANCH`, unless the base is protected and the head is not). */
  async runChecks(changeId: string, options: RunChecksOptions = {}): Promise<{ headSha: string; results: CheckRunResult[] }> {
    const trusted = await this.trustedConfig();
    const live = await readLiveChange(this.repo, this.store, changeId, trusted);
    if (live.record.state !== 'open') throw new ProofgateError('INVALID_INPUT', `change ${changeId} is ${live.record.state}; checks run on open changes`);
    if (live.refusal !== null) throw new ProofgateError('PROTECTED_BRANCH', `change ${changeId}: ${live.refusal}; no check was run`, { changeId });
    // The base's config names the checks; the trusted branch's names the jail policy (sandbox, cacheDir, limits).
    const results = await runChecks(
      {
        repo: this.repo,
        store: this.store,
        clock: this.#clock,
        outputCapBytes: this.#outputCapBytes,
        ...(this.#dataDir === undefined ? {} : { dataDir: this.#dataDir }),
      },
      { changeId, headSha: live.headSha, config: live.config, jail: trusted.config, onProgress: options.onProgress, signal: options.signal },
    );
    return { headSha: live.headSha, results };
  }
}
