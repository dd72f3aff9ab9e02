import type { Sha256Digest } from '../../core/index.js';
import type { ReadonlyJsonValue } from '../json-types.js';

/** Which package a run executes, pinned by digest. */
export interface PackageIdentity {
  readonly source: string;
  readonly version: string;
  readonly digest: Sha256Digest;
}

/** A permission: a name and a JSON scope compared by canonical bytes. */
export interface Permission {
  readonly name: string;
  readonly scope: ReadonlyJsonValue;
}

/** What the host admitted for the run: the package and the permissions it may use. */
export interface Admission {
  readonly package: PackageIdentity;
  readonly permissions: readonly Permission[];
}

/** Nodes that run on a named execution engine. */
export interface ExecutionLane {
  readonly id: string;
  readonly engineId: string;
  readonly nodeIds: readonly string[];
}

export interface PlanGraph {
  readonly graphId: string;
  readonly definitionVersion: number;
  readonly definitionDigest: Sha256Digest;
  readonly typeId: string;
  readonly typeVersion: number;
  readonly nodeIds: readonly string[];
}

export interface GraphPlan {
  readonly schemaVersion: 1;
  readonly graph: PlanGraph;
  readonly package: PackageIdentity;
  readonly admission: Admission;
  readonly executionLanes: readonly ExecutionLane[];
}

/** A plan with the digest of its canonical bytes. */
export interface ResolvedGraphPlan {
  readonly plan: GraphPlan;
  readonly digest: Sha256Digest;
}

export interface ResolvePlanOptions {
  readonly package: PackageIdentity;
  readonly admission: Admission;
  readonly executionLanes: readonly ExecutionLane[];
}
