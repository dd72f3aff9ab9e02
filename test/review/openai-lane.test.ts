import { createServer, type IncomingMessage, type Server } from 'node:http';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseVerdictBlock, runReview, type ReviewOutcome } from '../../src/review/index.js';
import { makeRepo, writeScript, type TestRepo } from './repo-fixture.js';

const API_KEY = 'sk-test-key-never-logged-0123456789abcdef';
let repo: TestRepo;
let server: Server;
let baseUrl: string;
let scratch: { dir: string };
const seen: { auth: string | undefined; body: { model: string; messages: { role: string; content: string }[] } }[] = [];
let nextReply: (body: unknown) => { status: number; text: string } = () => ({ status: 500, text: '' });

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => resolve(text));
  });
}

const reply = (content: string) => ({ status: 200, text: JSON.stringify({ choices: [{ message: { role: 'assistant', content } }] }) });

beforeAll(async () => {
  repo = makeRepo();
  repo.branch('feature');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => a - b;\n' }, 'break add');
  repo.switchTo('main');
  scratch = writeScript('placeholder.txt', 'x');
  server = createServer((request, response) => {
    void readBody(request).then((text) => {
      if (request.url !== '/v1/chat/completions' || request.method !== 'POST') {
        response.writeHead(404).end();
        return;
      }
      const body = JSON.parse(text) as (typeof seen)[number]['body'];
      seen.push({ auth: request.headers.authorization, body });
      const { status, text: out } = nextReply(body);
      if (status === 0) return; // never answer
      response.writeHead(status, { 'content-type': 'application/json' }).end(out);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  baseUrl = `http://127.0.0.1:${address.port}/v1`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  repo.remove();
  rmSync(scratch.dir, { recursive: true, force: true });
});

async function review(timeoutSeconds = 10): Promise<ReviewOutcome> {
  const config = join(scratch.dir, `c-${Math.random().toString(16).slice(2)}.yml`);
  writeFileSync(
    config,
    `review:\n  lanes:\n    - id: model\n      openai: { baseUrl: "${baseUrl}", model: test-model, apiKeyEnv: TEST_REVIEW_KEY }\n      timeoutSeconds: ${timeoutSeconds}\n`,
  );
  return runReview({ repoDir: repo.dir, base: 'main', head: 'feature', configFile: config, env: { TEST_REVIEW_KEY: API_KEY } });
}

function failureOf(outcome: ReviewOutcome): string {
  const result = outcome.lanes[0]?.result;
  return result && 'failure' in result ? result.failure.reason : '';
}

describe('openai-compatible lane', () => {
  it('sends request, contract and diff with the key, and reads a strict verdict block', async () => {
    nextReply = () =>
      reply(
        'The change turns addition into subtraction.\n```proofgate-verdict\n{"disposition":"REFUTED","findings":[{"title":"add subtracts","evidence":"a - b","path":"src/calc.ts","line":1}]}\n```\n',
      );
    const outcome = await review();
    expect(outcome.verdict).toBe('REFUTED');
    expect(outcome.lanes[0]?.validation).toEqual({ valid: true });
    expect(outcome.lanes[0]?.family).toBe('openai:test-model');
    const call = seen.at(-1);
    expect(call?.auth).toBe(`Bearer ${API_KEY}`);
    expect(call?.body.model).toBe('test-model');
    // Without tools in the run context the request carries no tools.
    expect(Object.keys(call?.body ?? {}).sort()).toEqual(['messages', 'model', 'temperature']);
    expect(call?.body.messages.map((message) => message.role)).toEqual(['system', 'user']);
    const user = call?.body.messages.find((message) => message.role === 'user')?.content ?? '';
    expect(user).toContain('a - b');
    expect(user).toContain('Acceptance contract');
    expect(user).toContain(outcome.lanes[0]?.request.nonce ?? 'nonce');
    const evidence = readFileSync(outcome.lanes[0]?.result?.evidence_path ?? '', 'utf8');
    expect(evidence).toContain('turns addition into subtraction');
    expect(evidence).not.toContain(API_KEY);
    expect(readFileSync(join(outcome.dir, 'review.json'), 'utf8')).not.toContain(API_KEY);
  });

  it('a reply without the verdict marker is a transport failure, not a refutation', async () => {
    nextReply = () => reply('Looks fine to me, REFUTED maybe?');
    const outcome = await review();
    expect(failureOf(outcome)).toBe('missing verdict marker');
    expect(outcome.verdict).toBe('HOLD');
  });

  it('a malformed verdict block is a transport failure', async () => {
    nextReply = () => reply('```proofgate-verdict\n{"disposition":"MAYBE","findings":[]}\n```');
    expect(failureOf(await review())).toMatch(/^malformed verdict block: disposition/);
  });

  it('an HTTP error is a transport failure', async () => {
    nextReply = () => ({ status: 503, text: 'overloaded' });
    expect(failureOf(await review())).toBe('endpoint answered HTTP 503');
  });

  it('an endpoint that never answers times out as a transport failure', async () => {
    nextReply = () => ({ status: 0, text: '' });
    const outcome = await review(1);
    expect(failureOf(outcome)).toBe('timed out after 1s');
    expect(outcome.verdict).toBe('HOLD');
  });

  it('a missing API key variable is a transport failure that names the variable only', async () => {
    const config = join(scratch.dir, 'nokey.yml');
    writeFileSync(config, `review:\n  lanes:\n    - id: model\n      openai: { baseUrl: "${baseUrl}", model: m, apiKeyEnv: ABSENT_KEY_VAR }\n`);
    const outcome = await runReview({ repoDir: repo.dir, base: 'main', head: 'feature', configFile: config, env: {} });
    expect(failureOf(outcome)).toBe('API key variable ABSENT_KEY_VAR is not set');
  });
});

describe('parseVerdictBlock', () => {
  it.each([
    ['no block', 'LGTM', 'missing verdict marker'],
    ['other fence label', '```json\n{"disposition":"CONFIRMED","findings":[]}\n```', 'missing verdict marker'],
    [
      'two blocks',
      '```proofgate-verdict\n{"disposition":"CONFIRMED","findings":[]}\n```\n```proofgate-verdict\n{"disposition":"CONFIRMED","findings":[]}\n```',
      'more than one verdict block',
    ],
    ['not JSON', '```proofgate-verdict\nCONFIRMED\n```', 'malformed verdict block: not JSON'],
    ['extra key', '```proofgate-verdict\n{"disposition":"CONFIRMED","findings":[],"score":9}\n```', 'malformed verdict block'],
  ])('%s', (_name, content, reason) => {
    const parsed = parseVerdictBlock(content);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason.startsWith(reason)).toBe(true);
  });

  it('accepts one strict block', () => {
    expect(parseVerdictBlock('ok\n```proofgate-verdict\n{"disposition":"CONFIRMED","findings":[]}\n```')).toEqual({
      ok: true,
      verdict: { disposition: 'CONFIRMED', findings: [] },
    });
  });
});
