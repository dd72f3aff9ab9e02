import type { JsonValue, Sha256Digest } from '../core/index.js';

/**
 * The storage ports. Everything that keeps state goes through these two
 * interfaces; the SQLite and PostgreSQL adapters implement both and one
 * conformance suite (test/storage/conformance.ts) holds them to the same rules.
 */

/** What a caller appends. `id` is unique within the namespace. */
export interface NewEvent {
  readonly id: string;
  readonly type: string;
  readonly data: JsonValue;
}

/** What a reader gets back. */
export interface StoredEvent extends NewEvent {
  readonly streamId: string;
  /** 1-based position of the event inside its stream. */
  readonly revision: number;
  /** Position in the namespace-wide order, strictly increasing across all streams. */
  readonly position: number;
  /** ISO-8601 time the batch was committed. */
  readonly recordedAt: string;
}

export interface AppendResult {
  /** The stream revision after the batch (the revision of its last event). */
  readonly revision: number;
  /** False when the identical batch was already stored at this revision (a safe retry). */
  readonly written: boolean;
}

export interface ReadOptions {
  /** Return events whose revision is greater than this (default 0: all). */
  readonly fromRevision?: number;
  readonly limit?: number;
}

export interface ReadAllOptions {
  /** Return events whose global position is greater than this (default 0: all). */
  readonly afterPosition?: number;
  readonly limit?: number;
  /** Only streams whose id starts with this prefix. */
  readonly streamPrefix?: string;
}

export interface StreamInfo {
  readonly streamId: string;
  readonly revision: number;
}

export interface EventStore {
  /**
   * Append a batch atomically. `expectedRevision` is the stream revision the
   * caller last saw (0 for a new stream). A stale revision fails with
   * `REVISION_CONFLICT` and nothing of the batch is stored; re-appending the
   * identical batch at the revision it already produced returns `written: false`;
   * a known event id with other content fails with `DUPLICATE_EVENT_ID`.
   */
  append(streamId: string, expectedRevision: number, events: readonly NewEvent[]): Promise<AppendResult>;
  read(streamId: string, options?: ReadOptions): Promise<StoredEvent[]>;
  /** Current revision of a stream (0 when it does not exist). */
  revision(streamId: string): Promise<number>;
  listStreams(prefix?: string): Promise<StreamInfo[]>;
  /** Tail events across all streams in global order. */
  readAll(options?: ReadAllOptions): Promise<StoredEvent[]>;
}

/** Where an artifact belongs: quotas are counted per run. */
export interface ArtifactScope {
  readonly namespace: string;
  readonly runId: string;
}

export interface ArtifactMeta {
  readonly mediaType: string;
  readonly purpose: string;
}

export interface ArtifactRef extends ArtifactMeta {
  readonly digest: Sha256Digest;
  readonly byteLength: number;
}

export interface ArtifactStore {
  /** Store bytes addressed by their sha256; the same bytes are stored once per run. */
  write(scope: ArtifactScope, bytes: Uint8Array, meta: ArtifactMeta): Promise<ArtifactRef>;
  /** Read bytes back, verified against the digest (`DIGEST_MISMATCH` if corrupt, `NOT_FOUND` if absent). */
  read(scope: ArtifactScope, ref: Pick<ArtifactRef, 'digest'> | Sha256Digest): Promise<Uint8Array>;
  has(scope: ArtifactScope, digest: Sha256Digest): Promise<boolean>;
  /** Total distinct artifact bytes stored for the run. */
  usage(scope: ArtifactScope): Promise<number>;
}

export type StorageProvider = 'sqlite' | 'postgres';
