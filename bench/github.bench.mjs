// GitHub API requests per snapshot and per action of the GitHub forge adapter,
// counted by the GitHub API test server. The server is TypeScript test
// support, so this runs test/forge/github/request-counts.test.ts through
// vitest and reads the one line of figures it prints. Target (issue 5): a
// snapshot of a pull request with up to 100 checks and 100 comments takes 1
// GraphQL request.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const TEST = 'test/forge/github/request-counts.test.ts';
const ONE_PAGE = 'snapshot (100 checks, 100 comments)';

function requestCounts() {
  const run = spawnSync(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', TEST], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
  const match = /github requests per call: (\{.*\})$/m.exec(`${run.stdout}${run.stderr}`);
  if (match === null) throw new Error(`${TEST} printed no request counts (exit ${run.status})`);
  if (run.status !== 0) throw new Error(`${TEST} failed (exit ${run.status})`);
  return JSON.parse(match[1]);
}

export default async function (report) {
  const counts = requestCounts();
  for (const [call, count] of Object.entries(counts)) {
    const parts = [`${count.graphql} GraphQL + ${count.rest} REST`, count.operations.join(', ')];
    if (call === ONE_PAGE) parts.push(`target 1 GraphQL request ${count.graphql === 1 ? 'met' : 'MISSED'}`);
    report({ name: `GitHub requests: ${call}`, value: count.graphql + count.rest, unit: 'requests', note: parts.join('; ') });
  }
}
