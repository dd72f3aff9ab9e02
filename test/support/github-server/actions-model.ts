/**
 * GitHub Actions in the test server's repository: workflows a test
 * registers, the runs a `workflow_dispatch` creates, and the artifacts a test
 * attaches to a run. A test decides, per dispatch, what GitHub does with it
 * (`onDispatch`): which runs appear and on which commit, and whether the
 * caller hears the answer at all. Runs then move only when the test moves
 * them (`startRun`, `completeRun`), so a test polls a run through every state
 * without waiting on time.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { RepositoryModel } from './model.js';

export type ModelRunStatus = 'requested' | 'queued' | 'pending' | 'waiting' | 'in_progress' | 'completed';

export interface ModelWorkflow {
  readonly id: number;
  /** The workflow's `name:`. */
  readonly name: string;
  /** Its file, `.github/workflows/<file>`. */
  readonly path: string;
  /** The `workflow_dispatch` inputs it declares: GitHub refuses any other (422). */
  readonly inputs: readonly string[];
  /** Its `run-name:` for a dispatch with these inputs (GitHub's `display_title`). */
  readonly runName: (inputs: Readonly<Record<string, string>>) => string;
  /** What GitHub does with a dispatch (null: one run on the ref's commit, answered normally). */
  onDispatch: DispatchHook | null;
}

export interface ModelWorkflowRun {
  readonly id: number;
  readonly workflowId: number;
  readonly runNumber: number;
  runAttempt: number;
  displayTitle: string;
  event: string;
  /** The run's workflow file (GitHub's `path`); newer runs carry `@<ref>` after it. */
  path: string;
  headBranch: string | null;
  headSha: string;
  status: ModelRunStatus;
  conclusion: string | null;
  readonly actor: string;
  /** The dispatch inputs (GitHub shows them in no REST answer; the run name is how a caller sees them). */
  readonly inputs: Readonly<Record<string, string>>;
  readonly createdAt: string;
  updatedAt: string;
  runStartedAt: string;
}

export interface ModelArtifact {
  readonly id: number;
  readonly runId: number;
  readonly name: string;
  /** What the storage server sends. */
  bytes: Uint8Array;
  /** What the API declares (`size_in_bytes`); the bytes' length unless a test says otherwise. */
  sizeInBytes: number;
  expired: boolean;
  /** `sha256:<hex>` of the bytes unless a test says otherwise (null: GitHub gives none, as for older artifacts). */
  digest: string | null;
  readonly createdAt: string;
  readonly expiresAt: string;
  /** The storage server sends the bytes without a content-length (chunked). */
  chunked: boolean;
  /** The storage server answers with one more redirect (to itself) instead of the bytes. */
  redirectAgain: boolean;
  /** The signature of the storage URL the download redirects to. */
  readonly storageToken: string;
}

/** One dispatch request as GitHub received it (recorded whatever it answered). */
export interface ModelDispatch {
  readonly workflowId: number;
  readonly ref: string;
  readonly inputs: Readonly<Record<string, string>>;
  readonly returnRunDetails: boolean;
  readonly actor: string;
}

/** What a test's hook sees of a dispatch GitHub accepted (before any run exists). */
export interface DispatchContext extends ModelDispatch {
  readonly workflow: ModelWorkflow;
  readonly actions: ActionsModel;
}

/** What GitHub does with an accepted dispatch. */
export interface DispatchDecision {
  /** How many runs it creates (default 1; 0: accepted, but no run ever appears). */
  readonly runs?: number;
  /** Fields of each created run, instead of GitHub's own (another commit, path, event, branch, state). */
  readonly run?: Partial<Pick<ModelWorkflowRun, 'headSha' | 'headBranch' | 'path' | 'event' | 'displayTitle' | 'status' | 'conclusion' | 'runAttempt'>>;
  /**
   * What the caller hears: GitHub's answer (default), nothing (the connection
   * is reset after the runs exist), or a 502 (after the runs exist).
   */
  readonly answer?: 'answer' | 'reset' | 502;
  /** Called with each run created, in order (e.g. to complete it and attach artifacts). */
  readonly then?: (run: ModelWorkflowRun, actions: ActionsModel) => void;
}

/**
 * A test's say in a dispatch. It runs before the runs are created, so a
 * branch it moves is the commit they run on (the trusted branch moving
 * between a caller's pin and its dispatch).
 */
export type DispatchHook = (dispatch: DispatchContext) => DispatchDecision | void;

/** How long GitHub keeps an artifact by default. */
const RETENTION_MS = 90 * 24 * 3600 * 1000;

export class ActionsModel {
  readonly workflows: ModelWorkflow[] = [];
  readonly runs: ModelWorkflowRun[] = [];
  readonly artifacts: ModelArtifact[] = [];
  /** Every dispatch GitHub received and accepted for a known workflow, in order. */
  readonly dispatches: ModelDispatch[] = [];
  private nextRunNumber = 1;

  constructor(private readonly model: RepositoryModel) {}

  /**
   * Registers a workflow file: `path` (`.github/workflows/<file>`), its
   * `name` (default the file name), its dispatch `inputs` (default none),
   * its `run-name` (default: the name) and a dispatch hook.
   */
  addWorkflow(options: {
    path: string;
    name?: string;
    inputs?: readonly string[];
    runName?: (inputs: Readonly<Record<string, string>>) => string;
    onDispatch?: DispatchHook;
  }): ModelWorkflow {
    const file = fileOf(options.path);
    const name = options.name ?? file;
    const workflow: ModelWorkflow = {
      id: this.model.id(),
      name,
      path: options.path,
      inputs: [...(options.inputs ?? [])],
      runName: options.runName ?? (() => name),
      onDispatch: options.onDispatch ?? null,
    };
    this.workflows.push(workflow);
    return workflow;
  }

  /** A workflow by its id or its file name, as GitHub's `workflow_id` parameter takes either. */
  workflow(idOrFile: string): ModelWorkflow | null {
    return this.workflows.find((w) => String(w.id) === idOrFile || fileOf(w.path) === idOrFile) ?? null;
  }

  run(id: number): ModelWorkflowRun | null {
    return this.runs.find((r) => r.id === id) ?? null;
  }

  /**
   * An accepted dispatch: records it, lets the workflow's hook decide, and
   * creates the runs (queued, on the ref's commit at that moment, named by
   * the workflow's run-name). Answers the runs and what the caller hears.
   */
  dispatch(workflow: ModelWorkflow, request: Omit<ModelDispatch, 'workflowId'>): { runs: ModelWorkflowRun[]; answer: 'answer' | 'reset' | 502 } {
    const dispatch: ModelDispatch = { workflowId: workflow.id, ...request };
    this.dispatches.push(dispatch);
    const decision = workflow.onDispatch?.({ ...dispatch, workflow, actions: this }) ?? {};
    const runs: ModelWorkflowRun[] = [];
    for (let i = 0; i < (decision.runs ?? 1); i++) {
      const at = this.model.now();
      const run: ModelWorkflowRun = {
        id: this.model.id(),
        workflowId: workflow.id,
        runNumber: this.nextRunNumber++,
        runAttempt: 1,
        displayTitle: workflow.runName(dispatch.inputs),
        event: 'workflow_dispatch',
        path: workflow.path,
        headBranch: dispatch.ref,
        headSha: this.model.resolve(dispatch.ref) ?? dispatch.ref,
        status: 'queued',
        conclusion: null,
        actor: dispatch.actor,
        inputs: { ...dispatch.inputs },
        createdAt: at,
        updatedAt: at,
        runStartedAt: at,
        ...decision.run,
      };
      this.runs.push(run);
      runs.push(run);
    }
    for (const run of runs) decision.then?.(run, this);
    return { runs, answer: decision.answer ?? 'answer' };
  }

  /** The run is picked up by a runner. */
  startRun(id: number): ModelWorkflowRun {
    const run = this.requireRun(id);
    run.status = 'in_progress';
    run.updatedAt = this.model.now();
    return run;
  }

  /** The run ends with `conclusion` (default success). */
  completeRun(id: number, conclusion = 'success'): ModelWorkflowRun {
    const run = this.requireRun(id);
    run.status = 'completed';
    run.conclusion = conclusion;
    run.updatedAt = this.model.now();
    return run;
  }

  /**
   * Attaches an artifact to a run (what `actions/upload-artifact` leaves):
   * its zip `bytes`, and optionally another declared size or digest, expired,
   * or served chunked or behind a second redirect.
   */
  addArtifact(
    runId: number,
    options: {
      name: string;
      bytes: Uint8Array;
      sizeInBytes?: number;
      digest?: string | null;
      expired?: boolean;
      chunked?: boolean;
      redirectAgain?: boolean;
    },
  ): ModelArtifact {
    this.requireRun(runId);
    const at = this.model.now();
    const artifact: ModelArtifact = {
      id: this.model.id(),
      runId,
      name: options.name,
      bytes: options.bytes,
      sizeInBytes: options.sizeInBytes ?? options.bytes.length,
      expired: options.expired ?? false,
      digest: options.digest === undefined ? `sha256:${createHash('sha256').update(options.bytes).digest('hex')}` : options.digest,
      createdAt: at,
      expiresAt: new Date(Date.parse(at) + RETENTION_MS).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      chunked: options.chunked ?? false,
      redirectAgain: options.redirectAgain ?? false,
      storageToken: randomBytes(16).toString('hex'),
    };
    this.artifacts.push(artifact);
    return artifact;
  }

  artifactsOf(runId: number): ModelArtifact[] {
    return this.artifacts.filter((a) => a.runId === runId);
  }

  artifact(id: number): ModelArtifact | null {
    return this.artifacts.find((a) => a.id === id) ?? null;
  }

  private requireRun(id: number): ModelWorkflowRun {
    const run = this.run(id);
    if (run === null) throw new Error(`no workflow run ${id}`);
    return run;
  }
}

function fileOf(path: string): string {
  return path.split('/').pop() ?? path;
}
