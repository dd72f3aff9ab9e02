import type { Sha256Digest } from '../core/index.js';
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
  close(): Promise<void>;
}
