/**
 * A GitHub adapter talking real HTTP to the test server, with retry and
 * throttle delays shortened so tests stay fast, and a logger whose lines the
 * test can read.
 */
import pino from 'pino';
import { createGitHubForge, type GitHubForgeOptions } from '../../../src/forge/github/index.js';
import type { Forge } from '../../../src/forge/port.js';
import { startGitHubServer, type GitHubTestServer, type GitHubTestServerOptions } from '../../support/github-server/index.js';

export const TOKEN = 'test-token';
export const SELF = 'proofgate-bot';

export const FAST = {
  retry: { retries: 2, baseDelayMs: 1 },
  throttle: { secondMs: 1, writeIntervalMs: 0, notificationIntervalMs: 0, maxRetries: 2 },
} as const;

export interface Harness {
  readonly server: GitHubTestServer;
  readonly forge: Forge;
  readonly logLines: string[];
  /** Closes the server; fails when any REST answer broke its published schema. */
  close(): Promise<void>;
}

export function collectingLogger(lines: string[]): pino.Logger {
  return pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
}

export async function startHarness(options: { server?: GitHubTestServerOptions; forge?: Partial<GitHubForgeOptions> } = {}): Promise<Harness> {
  const server = await startGitHubServer(options.server);
  const logLines: string[] = [];
  const forge = createGitHubForge({
    auth: { kind: 'token', token: TOKEN },
    baseUrl: server.baseUrl,
    owner: server.model.owner,
    repo: server.model.repo,
    selfLogin: SELF,
    logger: collectingLogger(logLines),
    ...FAST,
    ...options.forge,
  } as GitHubForgeOptions);
  return {
    server,
    forge,
    logLines,
    async close() {
      await server.close();
      const broken = server.schemaChecks.filter((c) => c.violations.length > 0);
      if (broken.length > 0) throw new Error(`REST answers broke the published schema: ${JSON.stringify(broken.slice(0, 3))}`);
    },
  };
}

/** Requests of one kind: 'graphql' for any GraphQL query, else an operation id. */
export function countRequests(server: GitHubTestServer, kind: string): number {
  return server.requests.filter((r) => (kind === 'graphql' ? r.operation.startsWith('graphql') : r.operation === kind)).length;
}
