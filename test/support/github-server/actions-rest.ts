/**
 * The Actions operations of the test server: dispatch a workflow, list and
 * get its runs, list a run's artifacts, get one, and download one (a 302 to
 * the artifact storage server, as GitHub redirects to signed blob storage).
 * Bodies are GitHub's shapes; the server checks each against the published
 * schema like every other answer.
 */
import type { ModelArtifact, ModelWorkflowRun } from './actions-model.js';
import type { RepositoryModel } from './model.js';
import { DOCS, error, repository, simpleUser, validationError } from './rest-shapes.js';
import { paged, type RestAnswer, type RestRequest } from './rest.js';

const notFound = (): RestAnswer => ({ status: 404, body: error('Not Found', 404) });

/** GitHub takes at most this many dispatch inputs. */
const MAX_INPUTS = 25;

/** What a run's `status` query matches: its status, or (for a completed run) its conclusion. */
const STATUS_FILTERS = new Set([
  'completed',
  'action_required',
  'cancelled',
  'failure',
  'neutral',
  'skipped',
  'stale',
  'success',
  'timed_out',
  'in_progress',
  'queued',
  'requested',
  'waiting',
  'pending',
]);

function member(body: unknown, name: string): unknown {
  return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)[name] : undefined;
}

function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function workflowRun(model: RepositoryModel, run: ModelWorkflowRun, web: string, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const url = `${repoApi}/actions/runs/${run.id}`;
  const workflow = model.actions.workflows.find((w) => w.id === run.workflowId);
  const repo = repository(model, web, api);
  const checkSuiteId = 900_000 + run.id;
  return {
    id: run.id,
    name: workflow?.name ?? null,
    node_id: Buffer.from(`011:WorkflowRun${run.id}`).toString('base64'),
    check_suite_id: checkSuiteId,
    check_suite_node_id: Buffer.from(`010:CheckSuite${checkSuiteId}`).toString('base64'),
    head_branch: run.headBranch,
    head_sha: run.headSha,
    path: run.path,
    display_title: run.displayTitle,
    run_number: run.runNumber,
    event: run.event,
    status: run.status,
    conclusion: run.conclusion,
    workflow_id: run.workflowId,
    url,
    html_url: `${web}/${model.owner}/${model.repo}/actions/runs/${run.id}`,
    pull_requests: [],
    created_at: run.createdAt,
    updated_at: run.updatedAt,
    actor: simpleUser(model, run.actor, web, api),
    triggering_actor: simpleUser(model, run.actor, web, api),
    run_attempt: run.runAttempt,
    referenced_workflows: [],
    run_started_at: run.runStartedAt,
    jobs_url: `${url}/jobs`,
    logs_url: `${url}/logs`,
    check_suite_url: `${repoApi}/check-suites/${checkSuiteId}`,
    artifacts_url: `${url}/artifacts`,
    cancel_url: `${url}/cancel`,
    rerun_url: `${url}/rerun`,
    previous_attempt_url: run.runAttempt > 1 ? `${url}/attempts/${run.runAttempt - 1}` : null,
    workflow_url: `${repoApi}/actions/workflows/${run.workflowId}`,
    head_commit: {
      id: run.headSha,
      tree_id: run.headSha.split('').reverse().join(''),
      message: 'commit',
      timestamp: run.createdAt,
      author: { name: 'Octo Cat', email: 'octocat@example.com' },
      committer: { name: 'GitHub', email: 'noreply@example.com' },
    },
    repository: repo,
    head_repository: repo,
    head_repository_id: model.repositoryId,
  };
}

export function artifactShape(model: RepositoryModel, artifact: ModelArtifact, api: string): Record<string, unknown> {
  const repoApi = `${api}/repos/${model.owner}/${model.repo}`;
  const run = model.actions.run(artifact.runId);
  return {
    id: artifact.id,
    node_id: Buffer.from(`08:Artifact${artifact.id}`).toString('base64'),
    name: artifact.name,
    size_in_bytes: artifact.sizeInBytes,
    url: `${repoApi}/actions/artifacts/${artifact.id}`,
    archive_download_url: `${repoApi}/actions/artifacts/${artifact.id}/zip`,
    expired: artifact.expired,
    created_at: artifact.createdAt,
    expires_at: artifact.expiresAt,
    updated_at: artifact.createdAt,
    digest: artifact.digest,
    workflow_run:
      run === null
        ? null
        : { id: run.id, repository_id: model.repositoryId, head_repository_id: model.repositoryId, head_branch: run.headBranch ?? '', head_sha: run.headSha },
  };
}

/**
 * GitHub's `created` filter (its search date syntax): `>=T`, `>T`, `<=T`,
 * `<T`, `A..B`, or one moment or day. Null: not a filter GitHub would read.
 */
function createdFilter(text: string): ((at: number) => boolean) | null {
  const time = (t: string): number | null => {
    const ms = Date.parse(t);
    return /^\d{4}-\d{2}-\d{2}/.test(t) && !Number.isNaN(ms) ? ms : null;
  };
  const compare = /^(>=|<=|>|<)(.+)$/.exec(text);
  if (compare !== null) {
    const bound = time(compare[2] as string);
    if (bound === null) return null;
    const op = compare[1];
    return (at) => (op === '>=' ? at >= bound : op === '>' ? at > bound : op === '<=' ? at <= bound : at < bound);
  }
  const range = /^(.+)\.\.(.+)$/.exec(text);
  if (range !== null) {
    const from = time(range[1] as string);
    const to = time(range[2] as string);
    return from === null || to === null ? null : (at) => at >= from && at <= to;
  }
  const one = time(text);
  if (one === null) return null;
  return /^\d{4}-\d{2}-\d{2}$/.test(text) ? (at) => at >= one && at < one + 86_400_000 : (at) => at === one;
}

const invalidQuery = (name: string, value: string): RestAnswer => ({
  status: 422,
  body: { message: 'Validation Failed', errors: [{ resource: 'WorkflowRun', field: name, value, code: 'invalid' }], documentation_url: DOCS },
});

export const actionsHandlers: Readonly<Record<string, (req: RestRequest) => RestAnswer>> = {
  'actions/create-workflow-dispatch': (req) => {
    const { actions } = req.model;
    const workflow = actions.workflow(req.params.workflow_id ?? '');
    if (workflow === null) return notFound();
    const ref = member(req.body, 'ref');
    if (typeof ref !== 'string' || ref === '') return { status: 422, body: validationError("Invalid request.\n\nFor 'properties/ref', nil is not a string.") };
    const branch = ref.replace(/^refs\/heads\//, '');
    if (req.model.resolve(branch) === null) return { status: 422, body: error(`No ref found for: ${ref}`, 422) };
    const given = member(req.body, 'inputs') ?? {};
    if (typeof given !== 'object' || given === null || Array.isArray(given)) {
      return { status: 422, body: validationError("Invalid request.\n\nFor 'properties/inputs', is not an object.") };
    }
    const entries = Object.entries(given as Record<string, unknown>);
    if (entries.length > MAX_INPUTS)
      return { status: 422, body: error(`you may only define up to ${MAX_INPUTS} \`inputs\` for a workflow_dispatch event`, 422) };
    const unexpected = entries.map(([name]) => name).filter((name) => !workflow.inputs.includes(name));
    if (unexpected.length > 0) return { status: 422, body: error(`Unexpected inputs provided: ${JSON.stringify(unexpected)}`, 422) };
    const inputs: Record<string, string> = {};
    for (const [name, value] of entries) {
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
        return { status: 422, body: error(`Provided value for input '${name}' is not a string`, 422) };
      }
      inputs[name] = String(value);
    }
    const returnRunDetails = member(req.body, 'return_run_details') === true;
    const { runs, answer } = actions.dispatch(workflow, { ref: branch, inputs, returnRunDetails, actor: req.actor });
    if (answer === 'reset') return { status: 0, body: undefined, drop: 'reset' };
    if (answer === 502) return { status: 502, body: error('Server Error', 502) };
    const first = runs[0];
    if (!returnRunDetails || first === undefined) return { status: 204, body: undefined };
    return {
      status: 200,
      body: {
        workflow_run_id: first.id,
        run_url: `${req.api}/repos/${req.model.owner}/${req.model.repo}/actions/runs/${first.id}`,
        html_url: `${req.web}/${req.model.owner}/${req.model.repo}/actions/runs/${first.id}`,
      },
    };
  },

  /** Newest first; `event`, `branch`, `status` (a status or a conclusion), `actor`, `head_sha` and `created` filter. */
  'actions/list-workflow-runs': (req) => {
    const workflow = req.model.actions.workflow(req.params.workflow_id ?? '');
    if (workflow === null) return notFound();
    const q = req.query;
    const status = q.get('status');
    if (status !== null && !STATUS_FILTERS.has(status)) return invalidQuery('status', status);
    const createdText = q.get('created');
    const created = createdText === null ? null : createdFilter(createdText);
    if (createdText !== null && created === null) return invalidQuery('created', createdText);
    const matching = req.model.actions.runs
      .filter((run) => run.workflowId === workflow.id)
      .filter((run) => q.get('event') === null || run.event === q.get('event'))
      .filter((run) => q.get('branch') === null || run.headBranch === q.get('branch'))
      .filter((run) => q.get('head_sha') === null || run.headSha === q.get('head_sha'))
      .filter((run) => q.get('actor') === null || run.actor.toLowerCase() === (q.get('actor') ?? '').toLowerCase())
      .filter((run) => status === null || run.status === status || run.conclusion === status)
      .filter((run) => created === null || created(Date.parse(run.createdAt)))
      .sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt) || b.id - a.id);
    const page = paged(req, matching);
    return {
      status: 200,
      body: { total_count: matching.length, workflow_runs: page.items.map((run) => workflowRun(req.model, run, req.web, req.api)) },
      headers: page.headers,
    };
  },

  'actions/get-workflow-run': (req) => {
    const run = req.model.actions.run(Number(req.params.run_id));
    return run === null ? notFound() : { status: 200, body: workflowRun(req.model, run, req.web, req.api) };
  },

  'actions/list-workflow-run-artifacts': (req) => {
    const run = req.model.actions.run(Number(req.params.run_id));
    if (run === null) return notFound();
    const name = req.query.get('name');
    const matching = req.model.actions.artifactsOf(run.id).filter((a) => name === null || a.name === name);
    const page = paged(req, matching);
    return {
      status: 200,
      body: { total_count: matching.length, artifacts: page.items.map((a) => artifactShape(req.model, a, req.api)) },
      headers: page.headers,
    };
  },

  'actions/get-artifact': (req) => {
    const artifact = req.model.actions.artifact(Number(req.params.artifact_id));
    return artifact === null ? notFound() : { status: 200, body: artifactShape(req.model, artifact, req.api) };
  },

  /** A 302 to the storage server's signed URL for the bytes (no body); 410 once the artifact has expired. */
  'actions/download-artifact': (req) => {
    const artifact = req.model.actions.artifact(Number(req.params.artifact_id));
    if (artifact === null || req.params.archive_format !== 'zip' || req.storageUrl === undefined) return notFound();
    if (artifact.expired) return { status: 410, body: error('Artifact has expired', 410) };
    const expires = stamp(Date.parse(req.model.latest()) + 60_000);
    const location = `${req.storageUrl}/artifacts/${artifact.id}/zip?expires=${encodeURIComponent(expires)}&sig=${artifact.storageToken}`;
    return { status: 302, body: undefined, headers: { location } };
  },
};
