/**
 * One HTTP request from a test, with nothing done for it: the path is sent
 * exactly as given (no normalization, so encoded dots and slashes reach the
 * server as written), no keep-alive agent, and the Host header only as the
 * caller sets it when `setHost` is false. The answer's text, and its JSON
 * when it parses (else `{}`).
 */
import { request, type IncomingHttpHeaders } from 'node:http';

export interface RawAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  readonly json: Record<string, unknown>;
}

export interface RawRequest {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** False: send no Host header but the one in `headers` (default true: node's own). */
  readonly setHost?: boolean;
}

export function rawRequest(url: string, path: string, options: RawRequest = {}): Promise<RawAnswer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname: target.hostname,
        port: target.port,
        path,
        method: options.method ?? 'GET',
        headers: options.headers ?? {},
        agent: false,
        setHost: options.setHost ?? true,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown> = {};
          try {
            const parsed = text === '' ? {} : (JSON.parse(text) as unknown);
            if (parsed !== null && typeof parsed === 'object') json = parsed as Record<string, unknown>;
          } catch {
            json = {};
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}
