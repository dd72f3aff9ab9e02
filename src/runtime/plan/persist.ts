import { ProofgateError, canonicalJson, digestJson } from '../../core/index.js';
import type { JsonValue } from '../../core/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import type { AppendResult } from '../../storage/ports.js';
import type { GraphDefinition } from '../graph/contract.js';
import { isJsonObject, type ReadonlyJsonObject, type ReadonlyJsonValue } from '../json-types.js';
import { checkRunId, runStreamId } from '../run/stream.js';
import type { ResolvedGraphPlan } from './types.js';

export interface RunDefinitionInput {
  readonly runId: string;
  /** Id of the run-started event; retrying with the same id and bytes is a no-op. */
  readonly eventId: string;
  /** ISO-8601 time the host started the run. */
  readonly timestamp: string;
  readonly graphDefinition: GraphDefinition<unknown, unknown>;
  readonly resolvedPlan: ResolvedGraphPlan;
  readonly resolvedInputs: ReadonlyJsonObject;
  /** The workspace the run is bound to (e.g. a captured WorkspaceAnchor), or null. */
  readonly workspaceBinding: ReadonlyJsonValue;
  /** Host facts the run is bound to, or null. */
  readonly hostBinding: ReadonlyJsonValue;
}

function bad(message: string): never {
  throw new ProofgateError('INVALID_INPUT', `run definition: ${message}`);
}

/**
 * Store the run-started event: the graph definition, the resolved plan and
 * the run's bindings. The definition must be the plan's graph and the plan
 * must match its digest; content the storage policy refuses is its typed
 * error (`KNOWN_SECRET`, `POLICY_VIOLATION`), and so is a definition or plan
 * the policy would redact (its digest would no longer match its bytes). Appending the identical event again is a no-op;
 * anything else on an existing run is `REVISION_CONFLICT`.
 */
export async function persistRunDefinition(storage: RunStorage, input: RunDefinitionInput): Promise<AppendResult> {
  const runId = checkRunId(input.runId);
  if (typeof input.eventId !== 'string' || input.eventId.length === 0) bad('eventId must be a nonempty string');
  if (typeof input.timestamp !== 'string' || Number.isNaN(Date.parse(input.timestamp))) bad('timestamp must be an ISO-8601 time');
  const definitionDigest = digestJson(input.graphDefinition);
  const { resolvedPlan } = input;
  if (!isJsonObject(resolvedPlan) || !isJsonObject(resolvedPlan.plan)) bad('resolvedPlan must come from resolveGraphPlan');
  if (digestJson(resolvedPlan.plan) !== resolvedPlan.digest) bad('resolvedPlan.digest does not match the plan bytes');
  if (resolvedPlan.plan.graph.definitionDigest !== definitionDigest) {
    bad(`graph definition ${definitionDigest} is not the planned graph ${resolvedPlan.plan.graph.definitionDigest}`);
  }
  if (!isJsonObject(input.resolvedInputs)) bad('resolvedInputs must be a JSON object');
  const data = storage.prepareJson(
    {
      schemaVersion: 1,
      runId,
      timestamp: input.timestamp,
      graphDefinition: input.graphDefinition,
      definitionDigest,
      resolvedPlan,
      resolvedInputs: input.resolvedInputs,
      workspaceBinding: input.workspaceBinding ?? null,
      hostBinding: input.hostBinding ?? null,
    },
    'run definition',
  ) as { readonly [key: string]: JsonValue };
  // The definition and plan digests were computed from the caller's bytes; if
  // the storage policy would redact part of them, the stored copies would not
  // match their digests, so the run is refused instead of stored.
  for (const [field, given] of [
    ['graphDefinition', input.graphDefinition],
    ['resolvedPlan', resolvedPlan],
  ] as const) {
    if (canonicalJson(data[field]) !== canonicalJson(given)) {
      throw new ProofgateError(
        'POLICY_VIOLATION',
        `run definition: the storage policy would redact part of ${field}, so the stored copy would not match its digest; nothing was stored`,
        { field },
      );
    }
  }
  return storage.eventStore.append(runStreamId(runId), 0, [{ id: input.eventId, type: 'run-started', data }]);
}
