import type { JsonValue, Sha256Digest } from '../core/index.js';
import type { ArtifactStore, EventStore, StorageProvider } from './ports.js';

/** How sensitive content is handled before anything is stored or hashed. */
export interface SensitiveContentPolicy {
  /** Values the caller marked sensitive. */
  readonly marked: 'reject' | 'redact';
  /** Exact occurrences of a configured known secret. */
  readonly exact: 'reject';
  /** Secret-looking fragments inside free text. */
  readonly freeText: 'redact-before-hash' | 'reject' | 'allow';
}

export type RetentionPolicy = 'until-run-delete' | 'forever';

export interface StoragePolicy {
  readonly schemaVersion: 1;
  readonly maxEventPayloadBytes: number;
  readonly maxAppendBatchBytes: number;
  readonly maxArtifactBytes: number;
  readonly maxTotalArtifactBytesPerRun: number;
  readonly retention: RetentionPolicy;
  readonly sensitiveContent: SensitiveContentPolicy;
}

/** The frozen description of an open storage, checked again on every reopen. */
export interface StorageRecord {
  readonly namespace: string;
  readonly provider: StorageProvider;
  readonly policyDigest: Sha256Digest;
  readonly policy: StoragePolicy;
}

/** What `createLocalRunStorage` and `createPostgresRunStorage` return. */
export interface RunStorage {
  readonly record: StorageRecord;
  readonly eventStore: EventStore;
  readonly artifactStore: ArtifactStore;
  /**
   * The JSON value exactly as this storage would store it inside an event:
   * the same sensitive-content transforms the write guard applies to every
   * append (known secrets -> `KNOWN_SECRET`; marked values and secret-looking
   * free text redacted or refused with `POLICY_VIOLATION` per the policy),
   * returned as the canonical JSON read back. Pure and synchronous; writes
   * nothing. Whoever stores a digest next to a value hashes this, so the
   * digest matches the stored bytes. `where` names the value in errors.
   */
  prepareJson(value: unknown, where?: string): JsonValue;
  close(): Promise<void>;
}
