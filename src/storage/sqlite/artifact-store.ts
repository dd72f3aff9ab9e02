import type Database from 'better-sqlite3';
import { ProofgateError, type Clock, type Sha256Digest } from '../../core/index.js';
import { refDigest, refuseOtherArtifactMeta, verifyArtifactBytes, type PreparedArtifact, type WriteGuard } from '../guard.js';
import type { ArtifactMeta, ArtifactRef, ArtifactScope, ArtifactStore } from '../ports.js';

/** The SQLite artifact store of one namespace. `live()` throws CLOSED once the storage is closed. */
export function createSqliteArtifactStore(db: Database.Database, guard: WriteGuard, clock: Clock, live: () => void): ArtifactStore {
  const namespace = guard.namespace;
  const statements = {
    find: db.prepare<[string, string, string], { media_type: string; purpose: string }>(
      'SELECT media_type, purpose FROM proofgate_artifacts WHERE namespace = ? AND run_id = ? AND digest = ?',
    ),
    usage: db.prepare<[string, string], { total: number | null }>(
      'SELECT sum(byte_length) AS total FROM proofgate_artifacts WHERE namespace = ? AND run_id = ?',
    ),
    insert: db.prepare<[string, string, string, number, string, string, Buffer, string]>(
      'INSERT INTO proofgate_artifacts (namespace, run_id, digest, byte_length, media_type, purpose, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    bytes: db.prepare<[string, string, string], { bytes: Buffer; byte_length: number }>(
      'SELECT bytes, byte_length FROM proofgate_artifacts WHERE namespace = ? AND run_id = ? AND digest = ?',
    ),
  };

  const writeInTransaction = db.transaction((artifact: PreparedArtifact, createdAt: string): ArtifactRef => {
    const { ref, runId } = artifact;
    const stored = statements.find.get(namespace, runId, ref.digest);
    if (stored !== undefined) {
      refuseOtherArtifactMeta(ref, runId, { mediaType: stored.media_type, purpose: stored.purpose });
      return ref;
    }
    guard.checkRunQuota(runId, statements.usage.get(namespace, runId)?.total ?? 0, ref.byteLength);
    statements.insert.run(namespace, runId, ref.digest, ref.byteLength, ref.mediaType, ref.purpose, artifact.bytes, createdAt);
    return ref;
  });

  return {
    async write(scope: ArtifactScope, bytes: Uint8Array, meta: ArtifactMeta): Promise<ArtifactRef> {
      live();
      const artifact = guard.prepareArtifact(scope, bytes, meta);
      return writeInTransaction.immediate(artifact, clock.now().toISOString());
    },

    async read(scope: ArtifactScope, ref: Pick<ArtifactRef, 'digest'> | Sha256Digest): Promise<Uint8Array> {
      live();
      const { runId } = guard.scope(scope);
      const digest = refDigest(ref);
      const row = statements.bytes.get(namespace, runId, digest);
      if (row === undefined) throw new ProofgateError('NOT_FOUND', `artifact ${digest} is not stored for run ${runId}`, { digest, runId });
      return verifyArtifactBytes(digest, row.bytes, row.byte_length);
    },

    async has(scope: ArtifactScope, digest: Sha256Digest): Promise<boolean> {
      live();
      const { runId } = guard.scope(scope);
      return statements.find.get(namespace, runId, refDigest(digest)) !== undefined;
    },

    async usage(scope: ArtifactScope): Promise<number> {
      live();
      const { runId } = guard.scope(scope);
      return statements.usage.get(namespace, runId)?.total ?? 0;
    },
  };
}
