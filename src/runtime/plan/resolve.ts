import { ProofgateError, assertSha256Digest, canonicalJson, deepFreeze, digestJson } from '../../core/index.js';
import type { GraphDescription } from '../graph/contract.js';
import { requireJsonObject } from '../json-types.js';
import type { Admission, ExecutionLane, GraphPlan, PackageIdentity, Permission, ResolvePlanOptions, ResolvedGraphPlan } from './types.js';

function bad(message: string): never {
  throw new ProofgateError('INVALID_INPUT', `graph plan: ${message}`);
}

function nonEmpty(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0) bad(`${what} must be a nonempty string`);
  return value;
}

function checkPackage(value: unknown, what: string): PackageIdentity {
  const input = requireJsonObject(value, what);
  return {
    source: nonEmpty(input.source, `${what}.source`),
    version: nonEmpty(input.version, `${what}.version`),
    digest: assertSha256Digest(input.digest, `${what}.digest`),
  };
}

/** Validate a permission list: named, JSON scopes, no duplicates (by canonical bytes). */
export function checkPermissions(value: unknown, what: string): Permission[] {
  if (!Array.isArray(value)) bad(`${what} must be an array`);
  const seen = new Set<string>();
  return value.map((entry: unknown, i) => {
    const permission = requireJsonObject(entry, `${what}[${i}]`);
    const name = nonEmpty(permission.name, `${what}[${i}].name`);
    if (!('scope' in permission)) bad(`${what}[${i}].scope is missing`);
    const copy = { name, scope: permission.scope ?? null };
    const key = canonicalJson(copy);
    if (seen.has(key)) bad(`${what}[${i}] repeats an earlier permission`);
    seen.add(key);
    return copy;
  });
}

function checkLanes(value: unknown, nodeIds: ReadonlySet<string>): ExecutionLane[] {
  if (!Array.isArray(value)) bad('executionLanes must be an array');
  const laneIds = new Set<string>();
  const placed = new Set<string>();
  return value.map((entry: unknown, i) => {
    const lane = requireJsonObject(entry, `executionLanes[${i}]`);
    const id = nonEmpty(lane.id, `executionLanes[${i}].id`);
    if (laneIds.has(id)) bad(`lane id ${id} is declared twice`);
    laneIds.add(id);
    const engineId = nonEmpty(lane.engineId, `executionLanes[${i}].engineId`);
    if (!Array.isArray(lane.nodeIds)) bad(`executionLanes[${i}].nodeIds must be an array`);
    const laneNodes = lane.nodeIds.map((nodeId: unknown) => {
      const name = nonEmpty(nodeId, `executionLanes[${i}].nodeIds[]`);
      if (!nodeIds.has(name)) bad(`lane ${id} names unknown node ${name}`);
      if (placed.has(name)) bad(`node ${name} is in more than one lane`);
      placed.add(name);
      return name;
    });
    return { id, engineId, nodeIds: laneNodes };
  });
}

/**
 * Resolve a graph description, the package and its admission into a frozen
 * plan and the digest of the plan's canonical bytes.
 */
export function resolveGraphPlan(description: GraphDescription, options: ResolvePlanOptions): ResolvedGraphPlan {
  const input = requireJsonObject(options, 'plan options');
  const pkg = checkPackage(input.package, 'package');
  const admissionInput = requireJsonObject(input.admission, 'admission');
  const admission: Admission = {
    package: checkPackage(admissionInput.package, 'admission.package'),
    permissions: checkPermissions(admissionInput.permissions, 'admission.permissions'),
  };
  if (canonicalJson(admission.package) !== canonicalJson(pkg)) bad('admission.package must be the planned package');
  const nodeIds = description.nodes.map((node) => node.id);
  const plan: GraphPlan = {
    schemaVersion: 1,
    graph: {
      graphId: description.graphId,
      definitionVersion: description.definitionVersion,
      definitionDigest: assertSha256Digest(description.definitionDigest, 'description.definitionDigest'),
      typeId: description.typeId,
      typeVersion: description.typeVersion,
      nodeIds,
    },
    package: pkg,
    admission,
    executionLanes: checkLanes(input.executionLanes, new Set(nodeIds)),
  };
  return deepFreeze({ plan, digest: digestJson(plan) });
}
