/**
 * The artifact storage the test server's artifact downloads redirect to: a
 * second HTTP server on 127.0.0.1 (its own port, so another origin than the
 * API), serving an artifact's bytes at a URL signed with the artifact's token,
 * as GitHub's blob storage does. It records every request with its headers,
 * so a test can see whether a caller sent its GitHub token along.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ActionsModel } from './actions-model.js';

export interface StorageRequest {
  readonly method: string;
  /** Path and query. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly status: number;
}

export interface ArtifactStorage {
  readonly url: string;
  readonly requests: StorageRequest[];
  close(): Promise<void>;
}

export async function startArtifactStorage(actions: ActionsModel): Promise<ArtifactStorage> {
  const requests: StorageRequest[] = [];
  let base = '';
  const server = createServer((req, res) => {
    const target = new URL(req.url ?? '/', base);
    const reply = (status: number, headers: Record<string, string>, body?: Uint8Array | string) => {
      requests.push({ method: req.method ?? 'GET', url: req.url ?? '/', headers: { ...req.headers }, status });
      res.writeHead(status, headers);
      res.end(body);
    };
    const m = /^\/artifacts\/(\d+)\/zip$/.exec(target.pathname);
    const artifact = m === null ? null : actions.artifact(Number(m[1]));
    if (req.method !== 'GET' || artifact === null) return reply(404, { 'content-type': 'text/plain' }, 'BlobNotFound');
    if (target.searchParams.get('sig') !== artifact.storageToken) return reply(403, { 'content-type': 'text/plain' }, 'AuthenticationFailed');
    if (artifact.redirectAgain) return reply(302, { location: `${base}${target.pathname}${target.search}` });
    const bytes = Buffer.from(artifact.bytes);
    if (!artifact.chunked) return reply(200, { 'content-type': 'application/zip', 'content-length': String(bytes.length) }, bytes);
    requests.push({ method: req.method, url: req.url ?? '/', headers: { ...req.headers }, status: 200 });
    res.writeHead(200, { 'content-type': 'application/zip' });
    // Several writes without a length: the body arrives chunked, its size known only at the end.
    const step = Math.max(1, Math.ceil(bytes.length / 8));
    for (let at = 0; at < bytes.length; at += step) res.write(bytes.subarray(at, at + step));
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    requests,
    close(): Promise<void> {
      server.closeAllConnections();
      return new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
