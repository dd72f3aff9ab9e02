import { ProofgateError, canonicalJson, isSha256Digest, sha256Digest, type JsonValue, type Sha256Digest } from '../core/index.js';
import { checkCount, checkName, checkScope } from './input.js';
import { KnownSecrets } from './known-secrets.js';
import type { StoragePolicy } from './policy-types.js';
import type { ArtifactMeta, ArtifactRef, ArtifactScope } from './ports.js';
import { applySensitivePolicy } from './sensitive.js';

/** An event after the write guard: redacted, checked, and in canonical text. */
export interface PreparedEvent {
  readonly id: string;
  readonly type: string;
  /** RFC 8785 text of the (redacted) data: what is stored and what is compared on retry. */
  readonly dataText: string;
}

export interface PreparedAppend {
  readonly streamId: string;
  readonly expectedRevision: number;
  readonly events: readonly PreparedEvent[];
}

export interface PreparedArtifact {
  readonly runId: string;
  readonly bytes: Buffer;
  readonly ref: ArtifactRef;
}

/**
 * The checks every write goes through, shared by both adapters, before any
 * database work: names, JSON-ness, known secrets, marked values, free-text
 * redaction, and the size limits of the policy. A write that fails here
 * stores nothing.
 */
export class WriteGuard {
  readonly policy: StoragePolicy;
  readonly namespace: string;
  readonly #secrets: KnownSecrets;

  constructor(namespace: string, policy: StoragePolicy, secrets: KnownSecrets) {
    this.namespace = namespace;
    this.policy = policy;
    this.#secrets = secrets;
  }

  #name(value: unknown, what: string): string {
    const name = checkName(value, what);
    this.#secrets.assertNotIn(name, what);
    return name;
  }

  /**
   * The JSON value exactly as an append would store it: known secrets refused
   * (`KNOWN_SECRET`), marked values refused or redacted, secret-looking free
   * text redacted or refused (`POLICY_VIOLATION`), as the policy says. Pure:
   * nothing is written. Hash this, not the caller's value, so that a digest
   * matches the stored bytes. Applying it again to its own output changes
   * nothing. `where` names the value in error messages (never the secret).
   */
  prepareJson(value: unknown, where = 'value'): JsonValue {
    return JSON.parse(canonicalJson(applySensitivePolicy(value, where, this.policy.sensitiveContent, this.#secrets))) as JsonValue;
  }

  prepareAppend(streamId: unknown, expectedRevision: unknown, events: unknown): PreparedAppend {
    const stream = this.#name(streamId, 'stream id');
    const expected = checkCount(expectedRevision, 'expectedRevision', 0);
    if (!Array.isArray(events)) throw new ProofgateError('INVALID_INPUT', 'events must be an array');
    if (events.length === 0) throw new ProofgateError('INVALID_INPUT', 'an append needs at least one event');
    const seen = new Set<string>();
    const prepared: PreparedEvent[] = [];
    let batchBytes = 0;
    let lastType: string | undefined;
    events.forEach((event: unknown, index) => {
      if (event === null || typeof event !== 'object' || Array.isArray(event)) {
        throw new ProofgateError('INVALID_INPUT', `events[${index}] must be an object { id, type, data }`);
      }
      const record = event as Record<string, unknown>;
      for (const key in record) {
        if (key !== 'id' && key !== 'type' && key !== 'data') {
          throw new ProofgateError('INVALID_INPUT', `events[${index}] has keys besides id, type, data`);
        }
      }
      const id = this.#name(record.id, `events[${index}].id`);
      const type = lastType !== undefined && record.type === lastType ? lastType : this.#name(record.type, `events[${index}].type`);
      lastType = type;
      if (!('data' in record)) throw new ProofgateError('NON_JSON_VALUE', `events[${index}].data is missing`, { path: '$' });
      if (seen.has(id)) throw new ProofgateError('DUPLICATE_EVENT_ID', `event id ${id} appears twice in one batch`, { id });
      seen.add(id);
      const data = applySensitivePolicy(record.data, `events[${index}].data`, this.policy.sensitiveContent, this.#secrets);
      const dataText = canonicalJson(data);
      const dataBytes = Buffer.byteLength(dataText, 'utf8');
      if (dataBytes > this.policy.maxEventPayloadBytes) {
        throw new ProofgateError(
          'POLICY_VIOLATION',
          `events[${index}].data is ${dataBytes} canonical bytes; the limit is ${this.policy.maxEventPayloadBytes}`,
          { limit: 'maxEventPayloadBytes', bytes: dataBytes },
        );
      }
      batchBytes += dataBytes + Buffer.byteLength(id, 'utf8') + Buffer.byteLength(type, 'utf8');
      prepared.push({ id, type, dataText });
    });
    if (batchBytes > this.policy.maxAppendBatchBytes) {
      throw new ProofgateError('POLICY_VIOLATION', `the batch is ${batchBytes} bytes; the limit is ${this.policy.maxAppendBatchBytes}`, {
        limit: 'maxAppendBatchBytes',
        bytes: batchBytes,
      });
    }
    return { streamId: stream, expectedRevision: expected, events: prepared };
  }

  scope(scope: unknown): ArtifactScope {
    const checked = checkScope(scope, this.namespace);
    this.#secrets.assertNotIn(checked.runId, 'artifact scope runId');
    return checked;
  }

  prepareArtifact(scope: unknown, bytes: unknown, meta: unknown): PreparedArtifact {
    const { runId } = this.scope(scope);
    if (!(bytes instanceof Uint8Array)) throw new ProofgateError('INVALID_INPUT', 'artifact bytes must be a Uint8Array');
    if (meta === null || typeof meta !== 'object') throw new ProofgateError('INVALID_INPUT', 'artifact meta must be { mediaType, purpose }');
    const { mediaType, purpose } = meta as Partial<ArtifactMeta>;
    const checkedMeta = {
      mediaType: this.#name(mediaType, 'artifact mediaType'),
      purpose: this.#name(purpose, 'artifact purpose'),
    };
    if (bytes.byteLength > this.policy.maxArtifactBytes) {
      throw new ProofgateError('POLICY_VIOLATION', `the artifact is ${bytes.byteLength} bytes; the limit is ${this.policy.maxArtifactBytes}`, {
        limit: 'maxArtifactBytes',
        bytes: bytes.byteLength,
      });
    }
    if (this.#secrets.inBytes(bytes)) {
      throw new ProofgateError('KNOWN_SECRET', 'artifact bytes contain a configured known secret; nothing was stored', { where: 'artifact bytes' });
    }
    const copy = Buffer.from(bytes);
    return {
      runId,
      bytes: copy,
      ref: { digest: sha256Digest(copy), byteLength: copy.byteLength, ...checkedMeta },
    };
  }

  /** Throw `QUOTA_EXCEEDED` when adding `adding` new bytes to a run using `used` would pass the limit. */
  checkRunQuota(runId: string, used: number, adding: number): void {
    const limit = this.policy.maxTotalArtifactBytesPerRun;
    if (used + adding > limit) {
      throw new ProofgateError('QUOTA_EXCEEDED', `run ${runId} would hold ${used + adding} artifact bytes; the limit is ${limit}`, {
        runId,
        used,
        adding,
        limit,
      });
    }
  }
}

/** The digest named by an artifact reference or given directly. */
export function refDigest(ref: unknown): Sha256Digest {
  const digest = typeof ref === 'string' ? ref : ref !== null && typeof ref === 'object' ? (ref as { digest?: unknown }).digest : undefined;
  if (!isSha256Digest(digest)) throw new ProofgateError('INVALID_INPUT', 'artifact reference must be sha256:<64 lowercase hex> or { digest }');
  return digest;
}

/** Verify bytes read back against their digest; corrupt bytes are never returned. */
export function verifyArtifactBytes(digest: Sha256Digest, bytes: Uint8Array, expectedLength: number): Uint8Array {
  if (bytes.byteLength !== expectedLength || sha256Digest(bytes) !== digest) {
    throw new ProofgateError('DIGEST_MISMATCH', `stored artifact ${digest} does not match its digest`, { digest });
  }
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * An artifact's media type and purpose are part of its identity within a run:
 * the same bytes already stored with other metadata are refused
 * (`ARTIFACT_CONFLICT`), so a returned reference always describes what is stored.
 */
export function refuseOtherArtifactMeta(ref: ArtifactRef, runId: string, stored: ArtifactMeta): void {
  if (stored.mediaType === ref.mediaType && stored.purpose === ref.purpose) return;
  throw new ProofgateError(
    'ARTIFACT_CONFLICT',
    `artifact ${ref.digest} is already stored for run ${runId} as ${JSON.stringify(stored.mediaType)} (purpose ${JSON.stringify(stored.purpose)}); the same bytes cannot be stored again as ${JSON.stringify(ref.mediaType)} (purpose ${JSON.stringify(ref.purpose)})`,
    { digest: ref.digest, runId, stored: { ...stored }, requested: { mediaType: ref.mediaType, purpose: ref.purpose } },
  );
}
