/**
 * The in-memory repository behind the GitHub API test server. Commits are
 * opaque shas with parents and a file map; tests drive it directly
 * (open a pull request, push a head, add checks) and the server's REST and
 * GraphQL answers read and change it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { ActionsModel } from './actions-model.js';
import { MergeQueueModel } from './merge-queue-model.js';

import type {
  UserType,
  Role,
  ModelBranchProtection,
  ModelRuleset,
  ModelMergeable,
  ModelMergeMethod,
  ModelMergeState,
  ModelReviewDecision,
  ModelUser,
  ModelPullRequest,
  ModelComment,
  ModelCheckRun,
  ModelStatus,
  ModelLabel,
} from './model-types.js';

export type {
  AppPermissionLevel,
  ModelApp,
  UserType,
  Role,
  ModelBranchProtection,
  ModelRuleset,
  ModelMergeable,
  ModelMergeMethod,
  ModelMergeState,
  ModelRequiredCheck,
  ModelReviewDecision,
  ModelUser,
  ModelPullRequest,
  ModelComment,
  ModelCheckRun,
  ModelStatus,
  ModelLabel,
} from './model-types.js';

interface Commit {
  readonly parents: readonly string[];
  readonly files: ReadonlyMap<string, Uint8Array>;
}

export class RepositoryModel {
  readonly users = new Map<string, ModelUser>();
  readonly collaborators = new Map<string, Role>();
  readonly branches = new Map<string, string>();
  readonly pulls = new Map<number, ModelPullRequest>();
  readonly comments: ModelComment[] = [];
  readonly checkRuns: ModelCheckRun[] = [];
  readonly statuses: ModelStatus[] = [];
  readonly labels = new Map<string, ModelLabel>();
  /** Branch protection rules by branch name (see `protectBranch`). */
  readonly protections = new Map<string, ModelBranchProtection>();
  /** Rulesets active on each branch, in the order they were added. */
  readonly rulesets = new Map<string, ModelRuleset[]>();
  /** The merge methods the repository allows (GitHub's allow_merge_commit, allow_squash_merge, allow_rebase_merge); all by default. */
  readonly mergeMethods = new Set<ModelMergeMethod>(['merge', 'squash', 'rebase']);
  /** GitHub Actions: workflows, their runs and artifacts (see actions-model.ts). */
  readonly actions: ActionsModel = new ActionsModel(this);
  /** GitHub's merge queue of the branches whose rulesets require one (see merge-queue-model.ts). */
  readonly mergeQueue: MergeQueueModel = new MergeQueueModel(this, () => this.serverUrl);
  /** Where the server serves the API (set by the server; payloads name it). */
  serverUrl = 'http://127.0.0.1';
  /**
   * Called by `pulls/merge` right before it merges (after every check
   * passed): a test moves the base here to play someone pushing in the
   * window between proofgate's read of the base and its merge.
   */
  beforePullMerge: ((number: number) => void) | null = null;
  /** Called after any branch moved or was created (a push): a test plays CI that runs on pushes here. */
  afterBranchSet: ((name: string, sha: string) => void) | null = null;
  /** Commit messages by sha (commits made by `mergeIntoBranch`; others have a default). */
  private readonly messages = new Map<string, string>();
  private readonly commits = new Map<string, Commit>();
  /**
   * The last sha of each deleted branch: a pull request keeps showing the
   * head (or base) it had when its branch was deleted, as GitHub's do.
   * Creating the branch again forgets it.
   */
  private readonly deletedBranches = new Map<string, string>();
  private nextId = 1000;
  private nextNumber = 1;
  private tick = Date.parse('2026-01-01T00:00:00Z');
  /** The model's first moment, before any event (the repository's creation time). */
  readonly epoch = stamp(this.tick);
  /** The repository's id in REST answers (not drawn from `id()`, so other ids stay as they were). */
  readonly repositoryId = 700_001;

  constructor(
    readonly owner: string,
    readonly repo: string,
    readonly defaultBranch = 'main',
  ) {
    this.user(owner, 'Organization');
    this.setBranch(defaultBranch, this.commit({ files: { 'README.md': `# ${repo}\n` } }));
  }

  /** A strictly increasing timestamp, one second per event. */
  now(): string {
    this.tick += 1000;
    return stamp(this.tick);
  }

  /** The latest timestamp handed out (the epoch before any), without moving the clock. */
  latest(): string {
    return stamp(this.tick);
  }

  id(): number {
    return this.nextId++;
  }

  user(login: string, type: UserType = login.endsWith('[bot]') ? 'Bot' : 'User'): ModelUser {
    const existing = this.users.get(login);
    if (existing !== undefined) return existing;
    const user = { login, id: this.id(), type };
    this.users.set(login, user);
    return user;
  }

  setCollaborator(login: string, role: Role): void {
    this.user(login);
    this.collaborators.set(login, role);
  }

  /** A new commit: the parent's files with `files` applied (a null value deletes a file). */
  /** `sha`: use this id (e.g. a real git commit's, so a real repository can mirror the model). */
  commit(options: { parent?: string; files?: Readonly<Record<string, string | Uint8Array | null>>; sha?: string } = {}): string {
    const files = new Map(options.parent === undefined ? [] : this.requireCommit(options.parent).files);
    for (const [file, content] of Object.entries(options.files ?? {})) {
      if (content === null) files.delete(file);
      else files.set(file, typeof content === 'string' ? new TextEncoder().encode(content) : content);
    }
    const sha = options.sha ?? randomBytes(20).toString('hex');
    this.commits.set(sha, { parents: options.parent === undefined ? [] : [options.parent], files });
    return sha;
  }

  hasCommit(sha: string): boolean {
    return this.commits.has(sha);
  }

  /**
   * The tree id of a commit: a 40-hex digest of its files (paths and
   * contents), so two commits with the same files have the same tree.
   */
  treeOf(sha: string): string {
    const files = [...this.requireCommit(sha).files.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const hash = createHash('sha1');
    for (const [path, bytes] of files) hash.update(`${path}\0${createHash('sha1').update(bytes).digest('hex')}\n`);
    return hash.digest('hex');
  }

  /** The message of a commit (a default for commits made without one). */
  messageOf(sha: string): string {
    return this.messages.get(sha) ?? `commit ${sha.slice(0, 12)}`;
  }

  /** A best common ancestor of two commits (the nearest to `b` among `a`'s ancestors), or null. */
  mergeBase(a: string, b: string): string | null {
    const ofA = new Set<string>();
    const stack = [a];
    while (stack.length > 0) {
      const next = stack.pop() as string;
      if (ofA.has(next)) continue;
      ofA.add(next);
      stack.push(...(this.commits.get(next)?.parents ?? []));
    }
    const queue = [b];
    const seen = new Set<string>();
    while (queue.length > 0) {
      const next = queue.shift() as string;
      if (ofA.has(next)) return next;
      if (seen.has(next)) continue;
      seen.add(next);
      queue.push(...(this.commits.get(next)?.parents ?? []));
    }
    return null;
  }

  /**
   * A three-way merge at file level of `theirs` into `ours` against their
   * merge base: a file changed on one side only takes that side, a file
   * changed on both sides the same way takes it, and a file changed on both
   * sides differently is a conflict (the files hold `theirs`'s version of
   * it). The merged files and the conflicting paths.
   */
  threeWay(ours: string, theirs: string): { files: Map<string, Uint8Array>; conflicts: string[] } {
    const baseSha = this.mergeBase(ours, theirs);
    const base = baseSha === null ? new Map<string, Uint8Array>() : this.requireCommit(baseSha).files;
    const o = this.requireCommit(ours).files;
    const t = this.requireCommit(theirs).files;
    const same = (x: Uint8Array | undefined, y: Uint8Array | undefined) =>
      x === undefined || y === undefined ? x === y : Buffer.from(x).equals(Buffer.from(y));
    const files = new Map<string, Uint8Array>();
    const conflicts: string[] = [];
    for (const path of new Set([...base.keys(), ...o.keys(), ...t.keys()])) {
      const [b, x, y] = [base.get(path), o.get(path), t.get(path)];
      const clean = same(x, y) || same(y, b) || same(x, b);
      if (!clean) conflicts.push(path);
      const merged = !clean ? y : same(y, b) ? x : y;
      if (merged !== undefined) files.set(path, merged);
    }
    return { files, conflicts: conflicts.sort() };
  }

  /**
   * GitHub's merges API: merge `head` (a sha or branch) into branch `base`
   * with a merge commit (parents: the base tip, then the head). `nothing`
   * when the head is already contained in the base; `conflict` when the
   * three-way merge conflicts; the branch moves only on `merged`.
   */
  mergeIntoBranch(base: string, head: string, message: string): { kind: 'merged'; sha: string } | { kind: 'nothing' } | { kind: 'conflict'; paths: string[] } {
    const tip = this.requireBranch(base);
    const headSha = this.resolve(head);
    if (headSha === null) throw new Error(`unknown head ${head}`);
    if (this.isAncestor(headSha, tip)) return { kind: 'nothing' };
    const merged = this.threeWay(tip, headSha);
    if (merged.conflicts.length > 0) return { kind: 'conflict', paths: merged.conflicts };
    const sha = randomBytes(20).toString('hex');
    this.commits.set(sha, { parents: [tip, headSha], files: merged.files });
    this.messages.set(sha, message);
    this.setBranch(base, sha);
    return { kind: 'merged', sha };
  }

  /** True when `ancestor` is `sha` or reachable from it through parents. */
  isAncestor(ancestor: string, sha: string): boolean {
    const queue = [sha];
    const seen = new Set<string>();
    while (queue.length > 0) {
      const next = queue.pop() as string;
      if (next === ancestor) return true;
      if (seen.has(next)) continue;
      seen.add(next);
      queue.push(...(this.commits.get(next)?.parents ?? []));
    }
    return false;
  }

  file(sha: string, file: string): Uint8Array | null {
    return this.commits.get(sha)?.files.get(file) ?? null;
  }

  filesAt(sha: string): string[] {
    return [...(this.commits.get(sha)?.files.keys() ?? [])];
  }

  directoryExists(sha: string, dir: string): boolean {
    const prefix = `${dir.replace(/\/+$/, '')}/`;
    return [...(this.commits.get(sha)?.files.keys() ?? [])].some((f) => f.startsWith(prefix));
  }

  /** Moving the head branch of an open pull request updates that pull request (`updatedAt`). */
  setBranch(name: string, sha: string): void {
    this.requireCommit(sha);
    const before = this.branches.get(name);
    this.branches.set(name, sha);
    this.deletedBranches.delete(name);
    if (before !== sha) this.afterBranchSet?.(name, sha);
    if (before === undefined || before === sha) return;
    const moved = [...this.pulls.values()].filter((pr) => pr.headRef === name && pr.state === 'open');
    if (moved.length === 0) return;
    const at = this.now();
    for (const pr of moved) pr.updatedAt = at;
    this.mergeQueue.headMoved(name, sha);
  }

  /**
   * Deletes a branch, as GitHub's delete-a-reference does: false when there
   * is no such branch. Every open pull request whose base it is is closed
   * (GitHub closes them: a pull request needs its base); a pull request
   * whose head it is stays as it is and keeps showing the head it had.
   */
  deleteBranch(name: string): boolean {
    const sha = this.branches.get(name);
    if (sha === undefined) return false;
    this.branches.delete(name);
    this.deletedBranches.set(name, sha);
    const orphaned = [...this.pulls.values()].filter((pr) => pr.baseRef === name && pr.state === 'open');
    for (const pr of orphaned) this.closePullRequest(pr.number);
    return true;
  }

  /** A branch name or a full sha, as a commit sha; null when neither. */
  resolve(ref: string): string | null {
    const branch = this.branches.get(ref.replace(/^refs\/heads\//, ''));
    if (branch !== undefined) return branch;
    return this.commits.has(ref) ? ref : null;
  }

  openPullRequest(options: {
    author: string;
    title?: string;
    base?: string;
    head?: string;
    headSha?: string;
    files?: Readonly<Record<string, string>>;
    draft?: boolean;
    /** The head lives in a fork (GraphQL's `isCrossRepository`). Default false. */
    crossRepository?: boolean;
  }): ModelPullRequest {
    const number = this.nextNumber++;
    const base = options.base ?? this.defaultBranch;
    const head = options.head ?? `change-${number}`;
    const baseSha = this.requireBranch(base);
    const headSha = options.headSha ?? this.commit({ parent: baseSha, files: options.files ?? { [`change-${number}.txt`]: `change ${number}\n` } });
    this.setBranch(head, headSha);
    this.user(options.author);
    const at = this.now();
    const pr: ModelPullRequest = {
      number,
      title: options.title ?? `Change ${number}`,
      state: 'open',
      merged: false,
      mergeCommitSha: null,
      mergeMethod: null,
      crossRepository: options.crossRepository ?? false,
      locked: false,
      draft: options.draft ?? false,
      baseRef: base,
      headRef: head,
      author: options.author,
      mergeable: 'MERGEABLE',
      mergeState: 'CLEAN',
      reviewDecision: null,
      labels: [],
      createdAt: at,
      updatedAt: at,
      closedAt: null,
    };
    this.pulls.set(number, pr);
    return pr;
  }

  /** `count` pull requests opened one after the other (each `openPullRequest(options)`, titles and heads numbered). */
  openPullRequests(count: number, options: { author: string; base?: string; draft?: boolean }): ModelPullRequest[] {
    return Array.from({ length: count }, () => this.openPullRequest(options));
  }

  /** Closes a pull request without merging it. */
  closePullRequest(number: number): void {
    const pr = this.pull(number);
    if (pr.state === 'closed') return;
    const at = this.now();
    pr.state = 'closed';
    pr.closedAt = at;
    pr.updatedAt = at;
  }

  /** Reopens a closed, unmerged pull request. */
  reopenPullRequest(number: number): void {
    const pr = this.pull(number);
    if (pr.state === 'open' || pr.merged) return;
    pr.state = 'open';
    pr.closedAt = null;
    pr.updatedAt = this.now();
  }

  /** When the pull request last changed, counting its comments' own `updatedAt` (a test may set those by hand). */
  pullUpdatedAt(number: number): string {
    let latest = this.pull(number).updatedAt;
    for (const comment of this.commentsOf(number)) if (Date.parse(comment.updatedAt) > Date.parse(latest)) latest = comment.updatedAt;
    return latest;
  }

  pull(number: number): ModelPullRequest {
    const pr = this.pulls.get(number);
    if (pr === undefined) throw new Error(`no pull request #${number}`);
    return pr;
  }

  headSha(number: number): string {
    return this.shownSha(this.pull(number).headRef);
  }

  baseSha(number: number): string {
    return this.shownSha(this.pull(number).baseRef);
  }

  /** Moves the head to `sha`, or to a new commit on top of the current head. */
  pushHead(number: number, sha?: string): string {
    const pr = this.pull(number);
    const next = sha ?? this.commit({ parent: this.headSha(number), files: { [`push-${this.nextId}.txt`]: 'pushed\n' } });
    this.setBranch(pr.headRef, next);
    return next;
  }

  setMergeable(number: number, mergeable: ModelMergeable, mergeState?: ModelMergeState): void {
    const pr = this.pull(number);
    pr.mergeable = mergeable;
    pr.mergeState = mergeState ?? (mergeable === 'CONFLICTING' ? 'DIRTY' : mergeable === 'UNKNOWN' ? 'UNKNOWN' : 'CLEAN');
  }

  /** What GraphQL answers as the pull request's `reviewDecision` (null: the base requires no approving review). */
  setReviewDecision(number: number, decision: ModelReviewDecision): void {
    this.pull(number).reviewDecision = decision;
  }

  addCheckRun(options: {
    sha: string;
    name: string;
    status?: ModelCheckRun['status'];
    conclusion?: string | null;
    app?: string;
    workflow?: string | null;
    detailsUrl?: string | null;
  }): ModelCheckRun {
    const status = options.status ?? 'completed';
    const at = this.now();
    const run: ModelCheckRun = {
      id: this.id(),
      headSha: options.sha,
      name: options.name,
      status,
      conclusion: status === 'completed' ? (options.conclusion ?? 'success') : null,
      startedAt: status === 'queued' ? null : at,
      completedAt: status === 'completed' ? at : null,
      detailsUrl: options.detailsUrl ?? `https://ci.example.test/runs/${this.nextId}`,
      app: options.app ?? 'GitHub Actions',
      workflow: options.workflow === undefined ? 'CI' : options.workflow,
    };
    this.checkRuns.push(run);
    return run;
  }

  addStatus(options: { sha: string; context: string; state: ModelStatus['state']; targetUrl?: string | null }): ModelStatus {
    const status: ModelStatus = {
      id: this.id(),
      sha: options.sha,
      context: options.context,
      state: options.state,
      targetUrl: options.targetUrl ?? null,
      createdAt: this.now(),
    };
    this.statuses.push(status);
    return status;
  }

  addComment(number: number, author: string, body: string): ModelComment {
    this.pull(number);
    this.user(author);
    const at = this.now();
    const comment: ModelComment = { id: this.id(), issueNumber: number, author, body, createdAt: at, updatedAt: at };
    this.comments.push(comment);
    this.pull(number).updatedAt = at;
    return comment;
  }

  /** Edits a comment's body; the comment and its pull request are updated now. */
  editComment(id: number, body: string): ModelComment {
    const comment = this.comments.find((c) => c.id === id);
    if (comment === undefined) throw new Error(`no comment ${id}`);
    const at = this.now();
    comment.body = body;
    comment.updatedAt = at;
    const pr = this.pulls.get(comment.issueNumber);
    if (pr !== undefined) pr.updatedAt = at;
    return comment;
  }

  /** Adds labels (created on first use, matched without case); the pull request is updated when one was new. Answers its labels. */
  addLabels(number: number, names: readonly string[]): string[] {
    const pr = this.pull(number);
    let changed = false;
    for (const name of names) {
      const l = this.label(name);
      if (pr.labels.includes(l.name)) continue;
      pr.labels.push(l.name);
      changed = true;
    }
    if (changed) pr.updatedAt = this.now();
    return pr.labels;
  }

  /** Removes a label (matched without case); false when the pull request does not carry it. */
  removeLabel(number: number, name: string): boolean {
    const pr = this.pull(number);
    const index = pr.labels.findIndex((n) => n.toLowerCase() === name.toLowerCase());
    if (index < 0) return false;
    pr.labels.splice(index, 1);
    pr.updatedAt = this.now();
    return true;
  }

  commentsOf(number: number): ModelComment[] {
    return this.comments.filter((c) => c.issueNumber === number);
  }

  label(name: string): ModelLabel {
    const existing = [...this.labels.values()].find((l) => l.name.toLowerCase() === name.toLowerCase());
    if (existing !== undefined) return existing;
    const created: ModelLabel = { id: this.id(), name, color: 'ededed', description: null };
    this.labels.set(name, created);
    return created;
  }

  /**
   * Protects a branch: its required status checks (names, or `{ context, app }`
   * for a check that must come from one App), whether checks are required at
   * all (default true), and whether the caller may read the rule (default
   * true; false plays a GitHub App without `administration: read`, to which
   * GraphQL answers the rule as null). Replaces an earlier rule of the branch.
   */
  protectBranch(
    name: string,
    options: { requiredChecks?: readonly (string | { context: string; app?: string | null })[]; requiresStatusChecks?: boolean; readable?: boolean } = {},
  ): ModelBranchProtection {
    const rule: ModelBranchProtection = {
      requiresStatusChecks: options.requiresStatusChecks ?? true,
      requiredChecks: (options.requiredChecks ?? []).map((check) =>
        typeof check === 'string' ? { context: check, app: null } : { context: check.context, app: check.app ?? null },
      ),
      readable: options.readable ?? true,
    };
    this.protections.set(name, rule);
    return rule;
  }

  /**
   * Adds a ruleset that applies to a branch and requires status checks
   * (names, or `{ context, app }` for a check that must come from one App;
   * none: a ruleset with no required-status-checks rule), and whether it
   * requires GitHub's merge queue (see merge-queue-model.ts). Rulesets add up
   * with each other and with the branch protection rule, as on GitHub.
   */
  addRuleset(
    branch: string,
    options: {
      name?: string;
      requiredChecks?: readonly (string | { context: string; app?: string | null })[];
      /** A MERGE_QUEUE rule: pull requests land only through GitHub's merge queue (`mergeQueue`), by this method (true: squash). */
      mergeQueue?: boolean | ModelMergeMethod;
    } = {},
  ): ModelRuleset {
    const list = this.rulesets.get(branch) ?? [];
    const queue = options.mergeQueue ?? false;
    const ruleset: ModelRuleset = {
      name: options.name ?? `ruleset ${list.length + 1}`,
      requiredChecks: (options.requiredChecks ?? []).map((check) =>
        typeof check === 'string' ? { context: check, app: null } : { context: check.context, app: check.app ?? null },
      ),
      mergeQueue: queue === false ? null : { mergeMethod: queue === true ? 'squash' : queue },
    };
    this.rulesets.set(branch, [...list, ruleset]);
    return ruleset;
  }

  /**
   * The required checks of a branch's rule that have not passed on `sha`
   * (what GitHub names when it refuses a merge): a check run or commit
   * status of that name (from the rule's App, when it names one) whose
   * newest result is success, neutral or skipped passes.
   */
  missingRequiredChecks(branch: string, sha: string): string[] {
    const rule = this.protections.get(branch);
    const fromRule = rule === undefined || !rule.requiresStatusChecks ? [] : rule.requiredChecks;
    const required = [...fromRule, ...(this.rulesets.get(branch) ?? []).flatMap((ruleset) => ruleset.requiredChecks)];
    const passing = new Set(['success', 'neutral', 'skipped']);
    return required
      .filter((check) => {
        const runs = this.checkRuns.filter((r) => r.headSha === sha && r.name === check.context && (check.app === null || r.app === check.app));
        const statuses = this.statuses.filter((s) => s.sha === sha && s.context === check.context);
        const run = runs[runs.length - 1];
        const status = statuses[statuses.length - 1];
        const runPassed = run !== undefined && run.status === 'completed' && passing.has(run.conclusion ?? '');
        const statusPassed = check.app === null && status !== undefined && status.state === 'success';
        return !runPassed && !statusPassed;
      })
      .map((check) => check.context);
  }

  /**
   * Squash-merges a pull request: one new commit on the base whose files are
   * the three-way merge of the head into the base (what the base gained
   * since the head branched off stays); a conflicting file takes the head's
   * version (GitHub would have refused the merge as not mergeable).
   */
  squashMerge(number: number): string {
    const base = this.baseSha(number);
    const headSha = this.headSha(number);
    const { files } = this.threeWay(base, headSha);
    const sha = this.commit({ parent: base });
    this.commits.set(sha, { parents: [base], files });
    return this.landMerge(number, sha, 'squash');
  }

  /** Merges a pull request with a merge commit: parents the base and the head, the head's files. */
  mergeCommitMerge(number: number): string {
    const base = this.baseSha(number);
    const headSha = this.headSha(number);
    const sha = this.commit({ parent: base });
    this.commits.set(sha, { parents: [base, headSha], files: new Map(this.requireCommit(headSha).files) });
    return this.landMerge(number, sha, 'merge');
  }

  /**
   * Rebase-merges a pull request: each commit of the head that the base
   * lacks (first parents, oldest first) becomes a new commit on the base with
   * that commit's files; the base ends at the last one, which is returned.
   */
  rebaseMerge(number: number): string {
    const base = this.baseSha(number);
    const own: string[] = [];
    for (let at: string | undefined = this.headSha(number); at !== undefined && !this.isAncestor(at, base); at = this.requireCommit(at).parents[0]) {
      own.unshift(at);
    }
    let tip = base;
    for (const sha of own) {
      const next = this.commit({ parent: tip });
      this.commits.set(next, { parents: [tip], files: new Map(this.requireCommit(sha).files) });
      tip = next;
    }
    return this.landMerge(number, tip, 'rebase');
  }

  /** Merges a pull request by `method`. */
  merge(number: number, method: ModelMergeMethod): string {
    if (method === 'merge') return this.mergeCommitMerge(number);
    if (method === 'rebase') return this.rebaseMerge(number);
    return this.squashMerge(number);
  }

  private landMerge(number: number, sha: string, method: ModelMergeMethod): string {
    const pr = this.pull(number);
    this.setBranch(pr.baseRef, sha);
    const at = this.now();
    pr.state = 'closed';
    pr.merged = true;
    pr.mergeCommitSha = sha;
    pr.mergeMethod = method;
    pr.closedAt = at;
    pr.updatedAt = at;
    return sha;
  }

  /** The parents of a commit the model holds. */
  parentsOf(sha: string): readonly string[] {
    return this.requireCommit(sha).parents;
  }

  private requireCommit(sha: string): Commit {
    const commit = this.commits.get(sha);
    if (commit === undefined) throw new Error(`unknown commit ${sha}`);
    return commit;
  }

  /** A branch's sha, or a deleted branch's last one (what its pull requests still show). */
  private shownSha(name: string): string {
    return this.deletedBranches.get(name) ?? this.requireBranch(name);
  }

  private requireBranch(name: string): string {
    const sha = this.branches.get(name);
    if (sha === undefined) throw new Error(`unknown branch ${name}`);
    return sha;
  }
}

function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
