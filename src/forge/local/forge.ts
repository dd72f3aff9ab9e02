import { userInfo } from 'node:os';
import { ProofgateError, newId, systemClock, type Clock } from '../../core/index.js';
import { emptyRepoConfig } from '../../contracts/repo-config.js';
import type { StoredEvent } from '../../storage/ports.js';
import type { ChangeSnapshot, Forge, ForgeComment, MergeRequest, MergeResult, PushRequest, RepoPermission } from '../port.js';
import { runChecks, type CheckProgress, type CheckRunResult } from './checks.js';
import { tailForgeEvents, toForgeEvent, type ForgeEventListener, type PositionedForgeEvent, type TailOptions } from './events.js';
import { mergeChange } from './merge.js';
import { branchStream, changeStream, foldChange, type ChangeRecord } from './records.js';
import type { GitRepository } from './repository.js';
import { permissionFromConfig, readLiveChange } from './snapshot.js';
import { LocalForgeStore, type LocalForgeStorage } from './store.js';
import { loadTrustedConfig } from './trusted-config.js';

export interface LocalForgeOptions {
  readonly repo: GitRepository;
  readonly storage: LocalForgeStorage;
  /** The identity proofgate comments as (default `proofgate`). */
  readonly selfLogin?: string;
  readonly clock?: Clock;
  /** Branch whose `.proofgate.yml` answers `permission()` (default: `main`, else `master`). */
  readonly trustedBranch?: string;
  /** Output kept per check run (default 1 MiB). */
  readonly outputCapBytes?: number;
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
  readonly #clock: Clock;
  readonly #trustedBranch: string | undefined;
  readonly #outputCapBytes: number;
  readonly #beforeBaseUpdate: (() => Promise<void>) | undefined;
  readonly #listeners = new Set<ForgeEventListener>();
  readonly #wakers = new Set<() => void>();

  constructor(options: LocalForgeOptions) {
    this.repo = options.repo;
    this.selfLogin = options.selfLogin ?? 'proofgate';
    this.#clock = options.clock ?? systemClock;
    this.#trustedBranch = options.trustedBranch;
    this.#outputCapBytes = options.outputCapBytes ?? 1024 * 1024;
    this.#beforeBaseUpdate = options.beforeBaseUpdate;
    this.store = new LocalForgeStore(options.storage, (events) => this.#publish(events));
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

  /** Register a change: `head` branch proposed into `base` branch. */
  async openChange(request: OpenChangeRequest): Promise<ChangeSnapshot> {
    const baseSha = await this.repo.requireBranch(request.base);
    const headSha = await this.repo.requireBranch(request.head);
    if (request.head === request.base) throw new ProofgateError('INVALID_INPUT', 'head and base must be different branches');
    if ((await this.repo.mergeBase(baseSha, headSha)) === null) {
      throw new ProofgateError('INVALID_INPUT', `"${request.base}" and "${request.head}" share no history (the base is not an ancestor of the head)`);
    }
    if (await this.repo.isAncestor(headSha, baseSha)) {
      throw new ProofgateError('INVALID_INPUT', `"${request.head}" has no commits that "${request.base}" lacks`);
    }
    const author = request.author ?? (await this.localIdentity());
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

  async snapshot(changeId: string): Promise<ChangeSnapshot> {
    return (await readLiveChange(this.repo, this.store, changeId)).snapshot;
  }

  createComment(changeId: string, body: string): Promise<ForgeComment> {
    return this.commentAs(changeId, body, this.selfLogin);
  }

  /** Comment as `login` (a person at the terminal, or another agent); proofgate's own login is a Bot. */
  async commentAs(changeId: string, body: string, login: string): Promise<ForgeComment> {
    if (body.trim() === '') throw new ProofgateError('INVALID_INPUT', 'a comment needs a nonempty body');
    if (login.trim() === '') throw new ProofgateError('INVALID_INPUT', 'a comment needs an author login');
    await this.store.requireChange(changeId);
    const commentId = newId('cmt');
    const authorType = login === this.selfLogin ? 'Bot' : 'User';
    await this.store.append(changeStream(changeId), [{ type: 'comment-created', data: { commentId, author: login, authorType, body, at: this.#now() } }]);
    return this.#comment(changeId, commentId);
  }

  async #comment(changeId: string, commentId: string): Promise<ForgeComment> {
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
      if (comment.author !== this.selfLogin) {
        throw new ProofgateError('INVALID_INPUT', `comment ${commentId} was written by ${comment.author}; proofgate edits only its own comments`);
      }
      return [{ type: 'comment-edited', data: { commentId, author: comment.author, authorType: comment.authorType, createdAt: comment.createdAt, body, at } }];
    });
    return this.#comment(changeId, commentId);
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
    await this.store.appendWith(changeStream(changeId), (events) => (foldChange(events)?.state === 'open' ? [{ type: 'change-closed', data: { at: this.#now() } }] : []));
    return this.snapshot(changeId);
  }

  merge(changeId: string, request: MergeRequest): Promise<MergeResult> {
    return mergeChange({ repo: this.repo, store: this.store, clock: this.#clock, selfLogin: this.selfLogin, beforeBaseUpdate: this.#beforeBaseUpdate }, changeId, request);
  }

  async pushBranch(request: PushRequest): Promise<void> {
    if (!(await this.repo.isValidBranchName(request.branch))) throw new ProofgateError('INVALID_INPUT', `not a valid branch name: ${request.branch}`);
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(request.newSha)) throw new ProofgateError('INVALID_INPUT', 'pushBranch needs newSha as a full commit sha');
    const commit = await this.repo.resolveCommit(request.newSha);
    if (commit === null || commit !== request.newSha) throw new ProofgateError('NOT_FOUND', `no commit ${request.newSha} in ${this.repo.root}`);
    const swapped = await this.repo.compareAndSwapRef(`refs/heads/${request.branch}`, request.newSha, request.expectedOldSha, 'proofgate: push');
    if (!swapped) {
      throw new ProofgateError('HEAD_MOVED', `branch ${request.branch} is no longer at ${request.expectedOldSha ?? '(absent)'}; nothing was pushed`, { branch: request.branch });
    }
    if (request.expectedOldSha !== null) await this.repo.followCheckedOut(request.branch, request.expectedOldSha, request.newSha);
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

  async permission(login: string): Promise<RepoPermission> {
    const branch = this.#trustedBranch ?? ((await this.repo.branchSha('main')) !== null ? 'main' : 'master');
    const sha = await this.repo.branchSha(branch);
    const config = sha === null ? emptyRepoConfig() : await loadTrustedConfig(this.repo, branch, sha);
    return permissionFromConfig(config, login);
  }

  /** Run the trusted config's checks at the change's current head. */
  async runChecks(changeId: string, options: RunChecksOptions = {}): Promise<{ headSha: string; results: CheckRunResult[] }> {
    const live = await readLiveChange(this.repo, this.store, changeId);
    if (live.record.state !== 'open') throw new ProofgateError('INVALID_INPUT', `change ${changeId} is ${live.record.state}; checks run on open changes`);
    const results = await runChecks(
      { repo: this.repo, store: this.store, clock: this.#clock, outputCapBytes: this.#outputCapBytes },
      { changeId, headSha: live.headSha, config: live.config, onProgress: options.onProgress, signal: options.signal },
    );
    return { headSha: live.headSha, results };
  }
}
