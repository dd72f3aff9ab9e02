import { z } from 'zod';
import { ProofgateError, deepFreeze, digestJson, type Sha256Digest } from '../core/index.js';
import type { StoragePolicy } from './policy-types.js';

/** The only storage policy schema version this build understands. */
export const STORAGE_POLICY_SCHEMA_VERSION = 1;

const byteLimit = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

const sensitiveContentSchema = z.strictObject({
  marked: z.enum(['reject', 'redact']),
  exact: z.literal('reject'),
  freeText: z.enum(['redact-before-hash', 'reject', 'allow']),
});

const storagePolicySchema = z.strictObject({
  schemaVersion: z.literal(STORAGE_POLICY_SCHEMA_VERSION),
  maxEventPayloadBytes: byteLimit,
  maxAppendBatchBytes: byteLimit,
  maxArtifactBytes: byteLimit,
  maxTotalArtifactBytesPerRun: byteLimit,
  retention: z.enum(['until-run-delete', 'forever']),
  sensitiveContent: sensitiveContentSchema,
});

function issuePath(path: readonly PropertyKey[], extra?: string): string {
  const parts = path.map((part) => String(part));
  if (extra !== undefined) parts.push(extra);
  return parts.length === 0 ? '(policy)' : parts.join('.');
}

/**
 * Validate a storage policy given by a caller (or read back from a store).
 * Unknown keys and wrong types are `POLICY_VIOLATION`; a `schemaVersion` other
 * than 1 is `UNSUPPORTED_SCHEMA_VERSION`. Every message names the key.
 * Returns a frozen copy holding exactly the policy fields.
 */
export function validateStoragePolicy(input: unknown): StoragePolicy {
  if (input !== null && typeof input === 'object' && !Array.isArray(input) && 'schemaVersion' in input) {
    const version = (input as { schemaVersion: unknown }).schemaVersion;
    if (version !== STORAGE_POLICY_SCHEMA_VERSION) {
      throw new ProofgateError(
        'UNSUPPORTED_SCHEMA_VERSION',
        `storage policy schemaVersion ${JSON.stringify(version) ?? String(version)} is not supported (expected ${STORAGE_POLICY_SCHEMA_VERSION})`,
        { key: 'schemaVersion' },
      );
    }
  }
  const parsed = storagePolicySchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (issue === undefined) throw new ProofgateError('POLICY_VIOLATION', 'storage policy is invalid');
    const key = issue.code === 'unrecognized_keys' ? issuePath(issue.path, issue.keys.join(',')) : issuePath(issue.path);
    const what = issue.code === 'unrecognized_keys' ? 'unknown key' : issue.message;
    throw new ProofgateError('POLICY_VIOLATION', `storage policy ${key}: ${what}`, { key });
  }
  const policy = parsed.data;
  const copy: StoragePolicy = {
    schemaVersion: policy.schemaVersion,
    maxEventPayloadBytes: policy.maxEventPayloadBytes,
    maxAppendBatchBytes: policy.maxAppendBatchBytes,
    maxArtifactBytes: policy.maxArtifactBytes,
    maxTotalArtifactBytesPerRun: policy.maxTotalArtifactBytesPerRun,
    retention: policy.retention,
    sensitiveContent: { ...policy.sensitiveContent },
  };
  return deepFreeze(copy);
}

/** Digest of the canonical bytes of a (validated) policy. */
export function policyDigest(policy: StoragePolicy): Sha256Digest {
  return digestJson(policy);
}

const MIB = 1024 * 1024;

/** A sensible policy for tools and tests: 1 MiB events, 4 MiB batches, 64 MiB artifacts, 512 MiB per run. */
export const defaultStoragePolicy: StoragePolicy = deepFreeze({
  schemaVersion: 1,
  maxEventPayloadBytes: 1 * MIB,
  maxAppendBatchBytes: 4 * MIB,
  maxArtifactBytes: 64 * MIB,
  maxTotalArtifactBytesPerRun: 512 * MIB,
  retention: 'until-run-delete',
  sensitiveContent: { marked: 'reject', exact: 'reject', freeText: 'redact-before-hash' },
});
