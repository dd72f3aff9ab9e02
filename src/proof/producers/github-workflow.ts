import { createHash } from 'node:crypto';
import type yauzl from 'yauzl';
import { ProofgateError, canonicalJson, errorMessage, redactSecrets, systemClock, type Clock } from '../../core/index.js';
import { httpFailure } from '../../forge/github/errors.js';
import type { GitHubOctokit } from '../../forge/github/index.js';
import { crc32 } from '../evidence/crc32.js';
import { loadYauzl } from '../evidence/zip-modules.js';
import type { ProducerAnswer, ProducerJob, ProofProducerRunner } from './types.js';

/**
 * The GitHub producer: runs a plan in a workflow on a protected branch and
 * hands back the evidence bundle the run uploaded, unverified (the caller
 * verifies it). In order:
 *
 * 1. Pin: read the sha the producer's branch (`ref`) points at.
 * 2. Dispatch the workflow on that branch with the inputs `plan_digest`,
 *    `head_sha`, `correlation_id`, `scenario` and `plan` (canonical JSON),
 *    asking GitHub for the run's id. The dispatch is sent once: an answer that
 *    does not arrive (network error, 5xx, timeout) is never retried, because
 *    the run may exist; the run is looked for by its correlation id instead.
 * 3. Find the run: GitHub shows no inputs in its REST answers, so the
 *    workflow must name its run `proof <correlation id>` (`run-name:`), and
 *    the runs of the workflow created since shortly before the dispatch (of
 *    any event and branch, so that a wrong one is seen and refused, not
 *    missed) are matched on that name exactly. When the dispatch answered
 *    with the run's id, that run is read and must carry the name. Exactly
 *    one run may carry it, when found and again before the download. The
 *    run must be of the configured workflow file, triggered by
 *    `workflow_dispatch`, on `ref`, in this repository, and on the pinned
 *    sha: a run on another sha means the branch moved between pin and
 *    dispatch, and the answer is unverifiable (never a rebinding to the new
 *    sha).
 * 4. Poll the run (progress: its status) until it completes, the deadline
 *    (the plan's, or the scenario's `timeoutSeconds` if sooner) passes or
 *    the job is aborted (`incomplete`; the run itself is not cancelled). A
 *    read GitHub does not answer is tried again at the next look. A
 *    conclusion other than `success` is `incomplete` too, without
 *    downloading anything: evidence from a failed run is not evidence (the
 *    bundle might well be there, but a failed producer is a broken
 *    instrument, and the reviewer hears why).
 * 5. Exactly one artifact named `artifact`, not expired, no larger than the
 *    scenario's `evidence.maxBytes` (plus `zipOverheadBytes` for GitHub's
 *    wrapper). Its download (a redirect to signed storage) is followed once,
 *    without the GitHub token (the storage URL is signed; no credential goes
 *    to another host), capped while it streams, and held to the artifact's
 *    sha256 digest when GitHub gives one.
 * 6. GitHub zips what a workflow uploads: the workflow uploads the bundle
 *    file `bundle.zip`, so the download is a zip whose one entry is
 *    `bundle.zip` (stored or deflated, not encrypted, a regular file, within
 *    the cap, its CRC-32 checked). Those bytes are the answer.
 *
 * Any other outcome is `unverifiable` (after a dispatch) or `incomplete`
 * (nothing was dispatched, or the work did not finish), with a one-line
 * reason. Waits go through `wait` (default: `clock` timers), so tests move
 * time instead of sleeping.
 */
export interface GitHubWorkflowProducerOptions {
  /** The forge's Octokit (`createGitHubClient`), authenticated for the repository. */
  readonly octokit: Pick<GitHubOctokit, 'request'>;
  readonly owner: string;
  readonly repo: string;
  /** What time it is (deadlines are on this clock). Default: the system clock. */
  readonly clock?: Clock;
  /** Waits `ms` on the clock, or less when `signal` aborts (never rejects). Default: a `clock` timer. */
  readonly wait?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Between two looks at GitHub while waiting for the run to appear and to complete. Default 10 s. */
  readonly pollIntervalMs?: number;
  /** Longest one HTTP request may take (wall time; never past the job's deadline). Default 30 s. */
  readonly requestTimeoutMs?: number;
  /** Runs are listed from this long before the dispatch (clock skew between us and GitHub). Default 5 minutes. */
  readonly createdSlackMs?: number;
  /** Bytes GitHub's zip around `bundle.zip` may add to the scenario's `maxBytes`. Default 64 KiB. */
  readonly zipOverheadBytes?: number;
  /** A ceiling on every scenario's `evidence.maxBytes`. Default: none. */
  readonly maxBundleBytes?: number;
  /** Ask the dispatch for the run's id (`return_run_details`); turn off for a GitHub that refuses the parameter. Default true. */
  readonly returnRunDetails?: boolean;
}

/** The one entry of the artifact's zip. */
export const BUNDLE_ENTRY_NAME = 'bundle.zip';

/** The run name a producer workflow must give its run (`run-name: proof ${{ inputs.correlation_id }}`). */
export function proofRunName(correlationId: string): string {
  return `proof ${correlationId}`;
}

/** A correlation id travels in a run name: a short token without spaces. */
const CORRELATION_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$/;
const GIT_SHA = /^[0-9a-f]{40}$/;
const SHA256_DIGEST = /^sha256:([0-9a-f]{64})$/;
/** GitHub's limit on a dispatch's inputs (their JSON text). */
const MAX_INPUTS_CHARS = 65_535;
/** Pages of 100 runs or artifacts read at most for one look. */
const MAX_PAGES = 10;
const PER_PAGE = 100;

/** Ends the job with this answer (thrown from anywhere inside it). */
class Finish extends Error {
  constructor(readonly answer: ProducerAnswer) {
    super(answer.kind === 'bundle' ? 'bundle' : answer.message);
  }
}

const oneLine = (text: string): string => {
  const line = redactSecrets(text).replace(/\s+/g, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
};
const incomplete = (message: string): Finish => new Finish({ kind: 'incomplete', message: oneLine(message) });
const unverifiable = (message: string): Finish => new Finish({ kind: 'unverifiable', message: oneLine(message) });

/** What a failed request was: an answer that did not arrive (the request may have had its effect), or GitHub's refusal. */
function failureOf(error: unknown): { lost: true; text: string } | { lost: false; status: number; text: string } {
  const failure = httpFailure(error);
  if (failure === null || failure.status >= 500)
    return { lost: true, text: failure === null ? errorMessage(error) : describe(failure.status, failure.githubMessage, error) };
  return { lost: false, status: failure.status, text: describe(failure.status, failure.githubMessage, error) };
}

function describe(status: number, githubMessage: string, error: unknown): string {
  // Octokit reports a request that got no answer (network error, timeout) as status 500 without a response.
  const answered = typeof error === 'object' && error !== null && (error as { response?: unknown }).response !== undefined;
  if (!answered) return errorMessage(error);
  return githubMessage === '' ? `HTTP ${status}` : `HTTP ${status}: ${githubMessage}`;
}

interface RunView {
  readonly id: number;
  readonly display_title: string;
  readonly path: string;
  readonly event: string;
  readonly head_branch: string | null;
  readonly head_sha: string;
  readonly status: string | null;
  readonly conclusion: string | null;
  readonly repository?: { readonly full_name?: string };
  readonly head_repository?: { readonly full_name?: string } | null;
}

interface ArtifactView {
  readonly id: number;
  readonly name: string;
  readonly size_in_bytes: number;
  readonly expired: boolean;
  readonly digest?: string | null;
  readonly workflow_run?: { readonly id?: number; readonly head_sha?: string } | null;
}

export function githubWorkflowProducer(options: GitHubWorkflowProducerOptions): ProofProducerRunner {
  const clock = options.clock ?? systemClock;
  const wait = options.wait ?? clockWait(clock);
  const pollIntervalMs = positive(options.pollIntervalMs, 10_000, 'pollIntervalMs');
  const requestTimeoutMs = positive(options.requestTimeoutMs, 30_000, 'requestTimeoutMs');
  const createdSlackMs = positive(options.createdSlackMs, 5 * 60_000, 'createdSlackMs');
  const zipOverheadBytes = positive(options.zipOverheadBytes, 64 * 1024, 'zipOverheadBytes');
  const maxBundleBytes = positive(options.maxBundleBytes, Number.MAX_SAFE_INTEGER, 'maxBundleBytes');
  const { octokit, owner, repo } = options;
  const repoName = `${owner}/${repo}`.toLowerCase();

  async function run(job: ProducerJob): Promise<ProducerAnswer> {
    const producer = job.scenario.producer;
    if (producer.kind !== 'github-workflow') return { kind: 'unverifiable', message: `scenario ${job.scenario.id} is not a GitHub workflow scenario` };
    if (!CORRELATION_ID.test(job.correlationId)) {
      return { kind: 'incomplete', message: 'nothing dispatched: the correlation id must be letters, digits and . _ : - (at most 200)' };
    }
    if (!GIT_SHA.test(job.headSha)) return { kind: 'incomplete', message: 'nothing dispatched: the head sha must be 40 lowercase hex digits' };
    const { workflow, ref, artifact: artifactName } = producer;
    const workflowFile = workflow.slice(workflow.lastIndexOf('/') + 1);
    const runName = proofRunName(job.correlationId);
    const bundleCap = Math.min(job.scenario.evidence.maxBytes, maxBundleBytes);
    const now = () => clock.now().getTime();
    /** The plan's deadline, or the scenario's own timeout if that comes first. */
    const deadlineMs = Math.min(job.deadlineMs, now() + job.scenario.timeoutSeconds * 1000);
    let dispatched = false;

    /** Stops with `incomplete` when the job was aborted or its deadline has passed. */
    const checkTime = (what: string) => {
      if (job.signal.aborted) throw incomplete(`aborted ${what}`);
      if (now() >= deadlineMs) throw incomplete(`deadline passed ${what}`);
    };

    /** One request with a timeout (never past the deadline) that the job's abort also ends. */
    async function call<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
      const limit = Math.max(1, Math.min(requestTimeoutMs, deadlineMs - now()));
      const linked = linkedSignal(job.signal, limit);
      try {
        return await fn(linked.signal);
      } finally {
        linked.done();
      }
    }

    /** Waits one poll interval (less when the deadline is nearer); stops when time is up. */
    async function pause(what: string): Promise<void> {
      checkTime(what);
      await wait(Math.max(0, Math.min(pollIntervalMs, deadlineMs - now())), job.signal);
      checkTime(what);
    }

    /** A read after the dispatch: an answer that did not arrive is tried again at the next look; a refusal ends the job. */
    async function read<T>(what: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T | null> {
      try {
        return await call(fn);
      } catch (error) {
        if (job.signal.aborted) throw incomplete(`aborted while reading ${what}`);
        const failure = failureOf(error);
        if (failure.lost) {
          job.onProgress?.(oneLine(`GitHub did not answer (${what}): ${failure.text}; trying again`));
          return null;
        }
        throw unverifiable(`could not read ${what}: ${failure.text}`);
      }
    }

    // 1. Pin the branch the workflow runs from.
    let pinned: string;
    try {
      checkTime('before the dispatch');
      const { data } = await call((signal) =>
        octokit.request('GET /repos/{owner}/{repo}/git/ref/{ref}', { owner, repo, ref: `heads/${ref}`, request: { signal } }),
      );
      if (data.ref !== `refs/heads/${ref}` || data.object.type !== 'commit' || !GIT_SHA.test(data.object.sha)) {
        throw incomplete(`branch ${ref} did not resolve to a commit`);
      }
      pinned = data.object.sha;
    } catch (error) {
      if (error instanceof Finish) return error.answer;
      if (job.signal.aborted) return incomplete('aborted before the dispatch').answer;
      return incomplete(`could not read branch ${ref}, nothing dispatched: ${failureOf(error).text}`).answer;
    }

    try {
      // 2. Dispatch once.
      const dispatchedAt = now();
      let runId: number | null = null;
      let answerLost = false;
      try {
        checkTime('before the dispatch');
        const inputs = {
          plan_digest: job.planDigest,
          head_sha: job.headSha,
          correlation_id: job.correlationId,
          scenario: job.scenario.id,
          plan: canonicalJson(job.plan),
        };
        const size = JSON.stringify(inputs).length;
        if (size > MAX_INPUTS_CHARS)
          throw incomplete(`nothing dispatched: the workflow inputs would be ${size} characters, more than GitHub's ${MAX_INPUTS_CHARS}`);
        dispatched = true;
        const response = await call((signal) =>
          octokit.request('POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches', {
            owner,
            repo,
            workflow_id: workflowFile,
            ref,
            inputs,
            ...(options.returnRunDetails === false ? {} : { return_run_details: true }),
            // Never retried: the run may exist although its answer is lost.
            request: { signal, retries: 0 },
          }),
        );
        const id = (response.data as { workflow_run_id?: unknown } | undefined)?.workflow_run_id;
        if (response.status === 200 && typeof id === 'number' && Number.isSafeInteger(id)) runId = id;
        job.onProgress?.(runId === null ? `dispatched ${workflow} on ${ref}` : `dispatched ${workflow} on ${ref}: workflow run ${runId}`);
      } catch (error) {
        if (error instanceof Finish) throw error;
        if (job.signal.aborted) throw incomplete('aborted during the dispatch');
        const failure = failureOf(error);
        if (!failure.lost) {
          dispatched = false;
          throw incomplete(`dispatch of ${workflow} refused: ${failure.text}`);
        }
        answerLost = true;
        job.onProgress?.(oneLine(`dispatch answer lost (${failure.text}); looking for the run by its correlation id`));
      }

      // 3. Find the run by its name.
      const created = `>=${new Date(dispatchedAt - createdSlackMs).toISOString().replace(/\.\d{3}Z$/, 'Z')}`;
      const listNamed = async (): Promise<RunView[] | null> => {
        const named: RunView[] = [];
        for (let page = 1; page <= MAX_PAGES; page++) {
          const answer = await read('the workflow runs', (signal) =>
            octokit.request('GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs', {
              owner,
              repo,
              workflow_id: workflowFile,
              created,
              per_page: PER_PAGE,
              page,
              request: { signal },
            }),
          );
          if (answer === null) return null;
          const runs = answer.data.workflow_runs as unknown as RunView[];
          named.push(...runs.filter((r) => r.display_title === runName));
          if (runs.length < PER_PAGE) return named;
        }
        throw unverifiable(`more than ${MAX_PAGES * PER_PAGE} runs of ${workflow} since the dispatch; cannot tell which is ours`);
      };
      const getRun = async (id: number): Promise<RunView | null> => {
        const answer = await read(`workflow run ${id}`, (signal) =>
          octokit.request('GET /repos/{owner}/{repo}/actions/runs/{run_id}', { owner, repo, run_id: id, request: { signal } }),
        );
        return answer === null ? null : (answer.data as unknown as RunView);
      };
      /** No other run may carry our name: with two, the evidence could come from either. */
      const checkAlone = (named: readonly RunView[], id: number) => {
        const others = named.filter((r) => r.id !== id);
        if (others.length > 0)
          throw unverifiable(`two runs are named "${runName}" (${[id, ...others.map((r) => r.id)].join(', ')}); cannot tell which is ours`);
      };
      const checkIdentity = (r: RunView) => {
        if (r.display_title !== runName) throw unverifiable(`workflow run ${r.id} is named "${r.display_title}", not "${runName}"`);
        const paths = [workflow, `${workflow}@${ref}`, `${workflow}@refs/heads/${ref}`];
        if (!paths.includes(r.path)) throw unverifiable(`workflow run ${r.id} ran ${r.path}, not ${workflow}`);
        if (r.event !== 'workflow_dispatch') throw unverifiable(`workflow run ${r.id} was triggered by ${r.event}, not workflow_dispatch`);
        if (r.head_branch !== ref) throw unverifiable(`workflow run ${r.id} ran on ${r.head_branch ?? 'no branch'}, not ${ref}`);
        const repos = [r.repository?.full_name, r.head_repository?.full_name];
        if (repos.some((name) => typeof name !== 'string' || name.toLowerCase() !== repoName)) {
          throw unverifiable(`workflow run ${r.id} is not a run of ${owner}/${repo} on its own branch`);
        }
        if (r.head_sha !== pinned) {
          throw unverifiable(`trusted branch moved: ${ref} was ${pinned} before the dispatch, workflow run ${r.id} ran ${r.head_sha}`);
        }
      };

      let found: RunView | null = null;
      for (;;) {
        if (runId !== null) {
          const r = await getRun(runId);
          if (r !== null) {
            checkIdentity(r);
            const named = await listNamed();
            if (named !== null) {
              checkAlone(named, r.id);
              found = r;
            }
          }
        } else {
          const named = await listNamed();
          const first = named?.[0];
          if (named !== null && first !== undefined) {
            checkAlone(named, first.id);
            checkIdentity(first);
            found = first;
          }
        }
        if (found !== null) break;
        job.onProgress?.(`waiting for the run named "${runName}" to appear`);
        try {
          await pause(answerLost ? 'waiting for the run' : 'before the dispatched run appeared');
        } catch (error) {
          if (answerLost && error instanceof Finish && now() >= deadlineMs && !job.signal.aborted) {
            throw unverifiable(`dispatch answer lost and no run named "${runName}" found before the deadline`);
          }
          throw error;
        }
      }

      // 4. Poll until it completes.
      let current: RunView = found;
      for (;;) {
        checkIdentity(current);
        job.onProgress?.(`workflow run ${current.id}: ${current.status ?? 'unknown'}`);
        if (current.status === 'completed') break;
        await pause(`while workflow run ${current.id} was ${current.status ?? 'unknown'}`);
        current = (await getRun(current.id)) ?? current;
      }
      if (current.conclusion !== 'success') {
        throw incomplete(`workflow run ${current.id} concluded ${current.conclusion ?? 'without a conclusion'}; a failed run is not evidence`);
      }
      // Again: a second run with our name that appeared since would make ours ambiguous.
      for (;;) {
        const named = await listNamed();
        if (named !== null) {
          checkAlone(named, current.id);
          break;
        }
        await pause(`while checking workflow run ${current.id}`);
      }

      // 5. The one artifact, downloaded within the cap.
      const artifact = await findArtifact(current.id);
      if (artifact.expired) throw unverifiable(`artifact ${artifactName} of workflow run ${current.id} has expired`);
      const downloadCap = bundleCap + zipOverheadBytes;
      if (!(artifact.size_in_bytes <= downloadCap)) {
        throw unverifiable(`artifact ${artifactName} is ${artifact.size_in_bytes} bytes, more than the ${downloadCap} allowed`);
      }
      if (artifact.workflow_run?.id !== undefined && artifact.workflow_run.id !== current.id) {
        throw unverifiable(`artifact ${artifactName} belongs to workflow run ${artifact.workflow_run.id}, not ${current.id}`);
      }
      if (artifact.workflow_run?.head_sha !== undefined && artifact.workflow_run.head_sha !== pinned) {
        throw unverifiable(`artifact ${artifactName} was made on ${artifact.workflow_run.head_sha}, not the pinned ${pinned}`);
      }
      checkTime(`before downloading artifact ${artifactName}`);
      const zipped = await download(artifact, downloadCap);
      const digest = SHA256_DIGEST.exec(artifact.digest ?? '')?.[1];
      if (digest !== undefined && createHash('sha256').update(zipped).digest('hex') !== digest) {
        throw unverifiable(`artifact ${artifactName} does not match its sha256 digest`);
      }

      // 6. The bundle inside GitHub's zip.
      const bytes = await extractBundle(zipped, bundleCap, artifactName);
      return { kind: 'bundle', bytes };
    } catch (error) {
      if (error instanceof Finish) return error.answer;
      const message = `GitHub producer failed: ${errorMessage(error)}`;
      return (dispatched ? unverifiable(message) : incomplete(message)).answer;
    }

    async function findArtifact(runIdOfArtifacts: number): Promise<ArtifactView> {
      const named: ArtifactView[] = [];
      for (let page = 1; ; page++) {
        if (page > MAX_PAGES) throw unverifiable(`workflow run ${runIdOfArtifacts} has more than ${MAX_PAGES * PER_PAGE} artifacts`);
        let answer = null;
        while (answer === null) {
          answer = await read(`the artifacts of workflow run ${runIdOfArtifacts}`, (signal) =>
            octokit.request('GET /repos/{owner}/{repo}/actions/runs/{run_id}/artifacts', {
              owner,
              repo,
              run_id: runIdOfArtifacts,
              name: artifactName,
              per_page: PER_PAGE,
              page,
              request: { signal },
            }),
          );
          if (answer === null) await pause(`while listing the artifacts of workflow run ${runIdOfArtifacts}`);
        }
        const artifacts = answer.data.artifacts as unknown as ArtifactView[];
        named.push(...artifacts.filter((a) => a.name === artifactName));
        if (artifacts.length < PER_PAGE) break;
      }
      if (named.length === 0) throw unverifiable(`workflow run ${runIdOfArtifacts} has no artifact named ${artifactName}`);
      if (named.length > 1) throw unverifiable(`workflow run ${runIdOfArtifacts} has ${named.length} artifacts named ${artifactName}`);
      return named[0] as ArtifactView;
    }

    /**
     * GitHub answers the download with a redirect to signed storage. Followed
     * once, by hand: the storage URL needs no credential and gets none (fetch
     * itself would keep the token on a same-origin hop); only https, or http
     * when the API itself is plain http (a test server, a GHES without TLS).
     */
    async function download(artifact: ArtifactView, cap: number): Promise<Buffer> {
      let location: URL;
      try {
        const response = await call((signal) =>
          octokit.request('GET /repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}', {
            owner,
            repo,
            artifact_id: artifact.id,
            archive_format: 'zip',
            request: { signal, redirect: 'manual', parseSuccessResponseBody: false },
          }),
        );
        const body = response.data as unknown;
        if (body instanceof ReadableStream) await body.cancel().catch(() => undefined);
        const status = response.status as number;
        const target = (response.headers as Record<string, unknown>).location;
        if (status < 300 || status >= 400 || typeof target !== 'string') {
          throw unverifiable(`download of artifact ${artifact.name} answered HTTP ${status} without a redirect to storage`);
        }
        location = new URL(target, response.url);
      } catch (error) {
        if (error instanceof Finish) throw error;
        if (job.signal.aborted) throw incomplete(`aborted while downloading artifact ${artifact.name}`);
        const failure = failureOf(error);
        if (!failure.lost && failure.status === 410) throw unverifiable(`artifact ${artifact.name} has expired (HTTP 410)`);
        throw unverifiable(`could not download artifact ${artifact.name}: ${failure.text}`);
      }
      const api = new URL(apiBase(octokit));
      if (!(location.protocol === 'https:' || (location.protocol === 'http:' && api.protocol === 'http:'))) {
        throw unverifiable(`artifact ${artifact.name} redirects to a ${location.protocol} URL`);
      }
      try {
        return await call(async (signal) => {
          const response = await fetch(location, {
            redirect: 'manual',
            signal,
            headers: { accept: 'application/zip, application/octet-stream', 'user-agent': 'proofgate' },
          });
          if (response.status !== 200 || response.body === null) {
            await response.body?.cancel().catch(() => undefined);
            const again = response.status >= 300 && response.status < 400 ? ' (another redirect: only one is followed)' : '';
            throw unverifiable(`artifact storage answered HTTP ${response.status}${again}`);
          }
          const declared = Number(response.headers.get('content-length') ?? Number.NaN);
          if (declared > cap) {
            await response.body.cancel().catch(() => undefined);
            throw unverifiable(`artifact ${artifact.name} download is ${declared} bytes, more than the ${cap} allowed`);
          }
          const chunks: Buffer[] = [];
          let total = 0;
          const reader = response.body.getReader();
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            total += value.length;
            if (total > cap) {
              await reader.cancel().catch(() => undefined);
              throw unverifiable(`artifact ${artifact.name} download passed the ${cap} bytes allowed`);
            }
            chunks.push(Buffer.from(value));
          }
          return Buffer.concat(chunks, total);
        });
      } catch (error) {
        if (error instanceof Finish) throw error;
        if (job.signal.aborted) throw incomplete(`aborted while downloading artifact ${artifact.name}`);
        throw unverifiable(`could not download artifact ${artifact.name} from storage: ${errorMessage(error)}`);
      }
    }
  }

  return { run };
}

/** The API root the client sends requests to (Octokit keeps it in its endpoint defaults). */
function apiBase(octokit: Pick<GitHubOctokit, 'request'>): string {
  const base = (octokit.request as { endpoint?: { DEFAULTS?: { baseUrl?: unknown } } }).endpoint?.DEFAULTS?.baseUrl;
  return typeof base === 'string' ? base : 'https://api.github.com';
}

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const MADE_BY_UNIX = 3;

/**
 * The bytes of `bundle.zip`, the one entry of GitHub's artifact zip. The
 * archive is read with yauzl (names checked strictly, sizes validated while
 * inflating), and held to: exactly one entry, named `bundle.zip`; stored or
 * deflated; not encrypted; a regular file; at most `cap` bytes; its CRC-32.
 */
async function extractBundle(zipped: Buffer, cap: number, artifactName: string): Promise<Buffer> {
  const refuse = (why: string) => unverifiable(`artifact ${artifactName} ${why}`);
  let zip: yauzl.ZipFile;
  try {
    zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
      loadYauzl().fromBuffer(zipped, { lazyEntries: true, strictFileNames: true, validateEntrySizes: true, decodeStrings: true }, (error, file) =>
        error ? reject(error) : resolve(file),
      ),
    );
  } catch (error) {
    throw refuse(`is not a readable zip: ${errorMessage(error)}`);
  }
  try {
    if (zip.entryCount !== 1) throw refuse(`holds ${zip.entryCount} entries; expected only ${BUNDLE_ENTRY_NAME}`);
    let entry: yauzl.Entry;
    try {
      entry = await new Promise<yauzl.Entry>((resolve, reject) => {
        zip.once('entry', resolve);
        zip.once('error', reject);
        zip.once('end', () => reject(new Error('no entry')));
        zip.readEntry();
      });
    } catch (error) {
      throw refuse(`has no readable entry: ${errorMessage(error)}`);
    }
    if (entry.fileName !== BUNDLE_ENTRY_NAME) throw refuse(`holds ${JSON.stringify(entry.fileName)}; expected only ${BUNDLE_ENTRY_NAME}`);
    if (entry.isEncrypted()) throw refuse(`holds an encrypted ${BUNDLE_ENTRY_NAME}`);
    if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) throw refuse(`stores ${BUNDLE_ENTRY_NAME} with method ${entry.compressionMethod}`);
    const mode = entry.externalFileAttributes >>> 16;
    if (entry.versionMadeBy >>> 8 === MADE_BY_UNIX && mode !== 0 && (mode & S_IFMT) !== S_IFREG)
      throw refuse(`holds ${BUNDLE_ENTRY_NAME} as something other than a file`);
    if (entry.uncompressedSize > cap) throw refuse(`holds a ${BUNDLE_ENTRY_NAME} of ${entry.uncompressedSize} bytes, more than the ${cap} allowed`);
    let bytes: Buffer;
    try {
      bytes = await new Promise<Buffer>((resolve, reject) => {
        zip.openReadStream(entry, (error, stream) => {
          if (error) return reject(error);
          const chunks: Buffer[] = [];
          let total = 0;
          stream.on('data', (chunk: Buffer) => {
            total += chunk.length;
            if (total > cap) stream.destroy(new Error(`more than ${cap} bytes`));
            else chunks.push(chunk);
          });
          stream.once('error', reject);
          stream.once('end', () => resolve(Buffer.concat(chunks, total)));
        });
      });
    } catch (error) {
      throw refuse(`holds an unreadable ${BUNDLE_ENTRY_NAME}: ${errorMessage(error)}`);
    }
    if (crc32(bytes) !== entry.crc32) throw refuse(`holds a ${BUNDLE_ENTRY_NAME} that fails its CRC-32`);
    return bytes;
  } finally {
    zip.close();
  }
}

/** A signal that aborts with `parent` or after `ms` of wall time; `done` releases its timer and listener. */
function linkedSignal(parent: AbortSignal, ms: number): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(parent.reason);
  if (parent.aborted) controller.abort(parent.reason);
  else parent.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new ProofgateError('TIMEOUT', `no answer within ${ms} ms`)), ms);
  timer.unref?.();
  return {
    signal: controller.signal,
    done() {
      clearTimeout(timer);
      parent.removeEventListener('abort', onAbort);
    },
  };
}

/** `wait` on a clock's timers: resolves after `ms`, or at once when `signal` aborts. */
function clockWait(clock: Clock): (ms: number, signal: AbortSignal) => Promise<void> {
  return (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const finish = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const cancel = clock.timer(ms, finish);
      const onAbort = () => {
        cancel();
        finish();
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!(typeof value === 'number' && value > 0 && Number.isFinite(value))) throw new ProofgateError('INVALID_INPUT', `${name} must be a positive number`);
  return value;
}
