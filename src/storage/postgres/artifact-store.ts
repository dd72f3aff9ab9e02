import type { Pool } from 'pg';
import { ProofgateError, type Clock, type Sha256Digest } from '../../core/index.js';
import { refDigest, refuseOtherArtifactMeta, verifyArtifactBytes, type WriteGuard } from '../guard.js';
import type { ArtifactMeta, ArtifactRef, ArtifactScope, ArtifactStore } from '../ports.js';
import { inTransaction } from './transaction.js';

/** The PostgreSQL artifact store of one namespace. `live()` throws CLOSED once the storage is closed. */
export function createPostgresArtifactStore(pool: Pool, guard: WriteGuard, clock: Clock, live: () => void): ArtifactStore {
  const namespace = guard.namespace;

  const usage = async (runId: string): Promise<number> => {
    const result = await pool.query<{ total: string | null }>(
      'SELECT sum(byte_length)::text AS total FROM proofgate_artifacts WHERE namespace = $1 AND run_id = $2',
      [namespace, runId],
    );
    return Number(result.rows[0]?.total ?? 0);
  };

  return {
    async write(scope: ArtifactScope, bytes: Uint8Array, meta: ArtifactMeta): Promise<ArtifactRef> {
      live();
      const { runId, bytes: copy, ref } = guard.prepareArtifact(scope, bytes, meta);
      return inTransaction(await pool.connect(), async (client) => {
        // One writer per run at a time, so the quota check and the insert see the same total.
        await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`proofgate-artifacts\u0001${namespace}\u0001${runId}`]);
        const found = await client.query<{ media_type: string; purpose: string }>(
          'SELECT media_type, purpose FROM proofgate_artifacts WHERE namespace = $1 AND run_id = $2 AND digest = $3',
          [namespace, runId, ref.digest],
        );
        const stored = found.rows[0];
        if (stored !== undefined) {
          refuseOtherArtifactMeta(ref, runId, { mediaType: stored.media_type, purpose: stored.purpose });
        } else {
          const total = await client.query<{ total: string | null }>(
            'SELECT sum(byte_length)::text AS total FROM proofgate_artifacts WHERE namespace = $1 AND run_id = $2',
            [namespace, runId],
          );
          guard.checkRunQuota(runId, Number(total.rows[0]?.total ?? 0), ref.byteLength);
          await client.query(
            'INSERT INTO proofgate_artifacts (namespace, run_id, digest, byte_length, media_type, purpose, bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
            [namespace, runId, ref.digest, ref.byteLength, ref.mediaType, ref.purpose, copy, clock.now().toISOString()],
          );
        }
        return ref;
      });
    },

    async read(scope: ArtifactScope, ref: Pick<ArtifactRef, 'digest'> | Sha256Digest): Promise<Uint8Array> {
      live();
      const { runId } = guard.scope(scope);
      const digest = refDigest(ref);
      const result = await pool.query<{ bytes: Buffer; byte_length: number }>(
        'SELECT bytes, byte_length FROM proofgate_artifacts WHERE namespace = $1 AND run_id = $2 AND digest = $3',
        [namespace, runId, digest],
      );
      const row = result.rows[0];
      if (row === undefined) throw new ProofgateError('NOT_FOUND', `artifact ${digest} is not stored for run ${runId}`, { digest, runId });
      return verifyArtifactBytes(digest, row.bytes, row.byte_length);
    },

    async has(scope: ArtifactScope, digest: Sha256Digest): Promise<boolean> {
      live();
      const { runId } = guard.scope(scope);
      const result = await pool.query('SELECT 1 FROM proofgate_artifacts WHERE namespace = $1 AND run_id = $2 AND digest = $3', [
        namespace,
        runId,
        refDigest(digest),
      ]);
      return (result.rowCount ?? 0) > 0;
    },

    async usage(scope: ArtifactScope): Promise<number> {
      live();
      return usage(guard.scope(scope).runId);
    },
  };
}
