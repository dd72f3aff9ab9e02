import { ProofgateError, deepFreeze, type JsonValue } from '../core/index.js';
import { checkName } from './input.js';
import { KnownSecrets } from './known-secrets.js';
import { policyDigest, validateStoragePolicy } from './policy.js';
import type { StorageRecord } from './policy-types.js';
import type { StorageProvider, StoredEvent } from './ports.js';
import { WriteGuard } from './guard.js';

/** What both adapters derive from their open options before touching a database. */
export interface OpenPlan {
  readonly record: StorageRecord;
  readonly guard: WriteGuard;
}

export function planOpen(provider: StorageProvider, namespace: unknown, policy: unknown, knownSecrets: readonly string[] | undefined): OpenPlan {
  const name = checkName(namespace, 'namespace');
  const validated = validateStoragePolicy(policy);
  const secrets = KnownSecrets.from(knownSecrets);
  secrets.assertNotIn(name, 'namespace');
  const record: StorageRecord = deepFreeze({
    namespace: name,
    provider,
    policyDigest: policyDigest(validated),
    policy: validated,
  });
  return { record, guard: new WriteGuard(name, validated, secrets) };
}

/** A namespace row as stored: which provider and which policy it was opened with. */
export interface StoredNamespace {
  readonly provider: string;
  readonly policyDigest: string;
}

/** Reopening a namespace with another provider or policy is `STORAGE_MISMATCH`. */
export function checkStoredNamespace(record: StorageRecord, stored: StoredNamespace): void {
  if (stored.provider !== record.provider) {
    throw new ProofgateError('STORAGE_MISMATCH', `namespace ${record.namespace} was created by provider ${stored.provider}, not ${record.provider}`, {
      namespace: record.namespace,
    });
  }
  if (stored.policyDigest !== record.policyDigest) {
    throw new ProofgateError('STORAGE_MISMATCH', `namespace ${record.namespace} was opened with another storage policy (${stored.policyDigest})`, {
      namespace: record.namespace,
      storedPolicyDigest: stored.policyDigest,
      policyDigest: record.policyDigest,
    });
  }
}

/** The raw columns of a stored event row, as both adapters read them. */
export interface EventRow {
  readonly position: number | string;
  readonly stream_id: string;
  readonly revision: number | string;
  readonly event_id: string;
  readonly type: string;
  readonly data: string;
  readonly recorded_at: string;
}

function storedNumber(value: number | string, what: string): number {
  const number = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(number) || number < 1) throw new ProofgateError('INVALID_STORED_VALUE', `stored ${what} is not a positive integer`);
  return number;
}

export function eventFromRow(row: EventRow): StoredEvent {
  let data: JsonValue;
  try {
    data = JSON.parse(row.data) as JsonValue;
  } catch {
    throw new ProofgateError('INVALID_STORED_VALUE', `stored data of event ${row.event_id} is not valid JSON`, { id: row.event_id });
  }
  return {
    id: row.event_id,
    type: row.type,
    data,
    streamId: row.stream_id,
    revision: storedNumber(row.revision, 'revision'),
    position: storedNumber(row.position, 'position'),
    recordedAt: row.recorded_at,
  };
}

export function closedError(): ProofgateError {
  return new ProofgateError('CLOSED', 'the storage is closed');
}
