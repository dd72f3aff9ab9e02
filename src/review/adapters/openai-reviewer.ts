import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { canonicalJson } from '../../core/index.js';
import { reviewFindingSchema } from '../../contracts/index.js';
import { evidenceFileName } from '../evidence.js';
import { semanticResult, transportFailure, type LaneAdapter, type LaneRun, type LaneRunContext } from './types.js';

/** Largest reply body accepted from the endpoint. */
export const DEFAULT_REPLY_LIMIT = 4 * 1024 * 1024;
/** Largest diff sent to the model; a larger diff is a transport failure (the model could not see it all). */
export const DEFAULT_PROMPT_DIFF_LIMIT = 512 * 1024;

export const VERDICT_FENCE = 'proofgate-verdict';

const verdictSchema = z
  .object({
    disposition: z.enum(['CONFIRMED', 'REFUTED']),
    findings: z.array(reviewFindingSchema),
  })
  .strict();

export type ParsedVerdict = { ok: true; verdict: z.infer<typeof verdictSchema> } | { ok: false; reason: string };

/** Find exactly one ```proofgate-verdict fenced block in a reply and parse it strictly. */
export function parseVerdictBlock(content: string): ParsedVerdict {
  const blocks = [...content.matchAll(/^```proofgate-verdict[ \t]*\r?\n([\s\S]*?)\r?\n```[ \t]*$/gm)];
  if (blocks.length === 0) return { ok: false, reason: 'missing verdict marker' };
  if (blocks.length > 1) return { ok: false, reason: 'more than one verdict block' };
  let value: unknown;
  try {
    value = JSON.parse(blocks[0]?.[1] ?? '');
  } catch {
    return { ok: false, reason: 'malformed verdict block: not JSON' };
  }
  const parsed = verdictSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, reason: `malformed verdict block: ${issue?.path.join('.') || 'verdict'}: ${issue?.message ?? 'invalid'}` };
  }
  return { ok: true, verdict: parsed.data };
}

const SYSTEM_PROMPT = [
  'You are an independent code reviewer. You did not write this change and you must not fix it.',
  'Judge whether the diff satisfies the acceptance contract. Cite file and line for every finding.',
  `End your reply with exactly one fenced block labelled ${VERDICT_FENCE} holding JSON:`,
  `\`\`\`${VERDICT_FENCE}`,
  '{"disposition":"CONFIRMED"|"REFUTED","findings":[{"title":"...","evidence":"...","path":"...","line":1}]}',
  '```',
  'REFUTED needs at least one finding. Nothing after the block.',
].join('\n');

async function readCapped(response: Response, limit: number): Promise<string | undefined> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    total += chunk.length;
    if (total > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function callModel(
  context: LaneRunContext,
  messages: { role: string; content: string }[],
  limit: number,
): Promise<{ content: string } | { failure: string }> {
  const settings = context.lane.config.openai;
  if (settings === undefined) return { failure: 'lane has no openai settings' };
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (settings.apiKeyEnv !== undefined) {
    const key = context.env[settings.apiKeyEnv];
    if (key === undefined || key === '') return { failure: `API key variable ${settings.apiKeyEnv} is not set` };
    headers.authorization = `Bearer ${key}`;
  }
  const url = `${settings.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: settings.model, messages, temperature: 0 }),
      signal: AbortSignal.timeout(context.lane.timeoutMs),
    });
  } catch (error) {
    const name = error instanceof Error ? error.name : '';
    if (name === 'TimeoutError' || name === 'AbortError') return { failure: `timed out after ${Math.round(context.lane.timeoutMs / 1000)}s` };
    return { failure: `cannot reach ${url}` };
  }
  const body = await readCapped(response, limit).catch(() => undefined);
  if (body === undefined) return { failure: `reply too large or interrupted (limit ${limit} bytes)` };
  if (!response.ok) return { failure: `endpoint answered HTTP ${response.status}` };
  let content: unknown;
  try {
    content = (JSON.parse(body) as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
  } catch {
    return { failure: 'endpoint reply is not JSON' };
  }
  if (typeof content !== 'string') return { failure: 'endpoint reply has no message content' };
  return { content };
}

/**
 * The `openai-compatible` adapter: one chat completion (a fresh conversation is
 * a fresh context) with the request, the contract and the diff; the reply must
 * end in a strict verdict block. The reply is the lane's evidence.
 */
export function openaiReviewer(options: { replyLimit?: number; promptDiffLimit?: number } = {}): LaneAdapter {
  return async (context): Promise<LaneRun> => {
    const { request } = context;
    const [diff, contract] = await Promise.all([readFile(request.diff.path), readFile(request.acceptance_contract.path, 'utf8')]);
    const diffLimit = options.promptDiffLimit ?? DEFAULT_PROMPT_DIFF_LIMIT;
    if (diff.length > diffLimit) return { raw: transportFailure(context, `diff too large for the model prompt (${diff.length} > ${diffLimit} bytes)`) };
    const user = ['Review request:', canonicalJson(request), '', 'Acceptance contract:', contract, '', 'Diff:', diff.toString('utf8')].join('\n');
    const messages = [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: user },
    ];
    const reply = await callModel(context, messages, options.replyLimit ?? DEFAULT_REPLY_LIMIT);
    if ('failure' in reply) return { raw: transportFailure(context, reply.failure) };
    const evidencePath = join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce));
    const settings = context.lane.config.openai;
    await writeFile(evidencePath, `model: ${settings?.model ?? ''}\nendpoint: ${settings?.baseUrl ?? ''}\n\n${reply.content}\n`);
    const parsed = parseVerdictBlock(reply.content);
    if (!parsed.ok) return { raw: { ...transportFailure(context, parsed.reason), evidence_path: evidencePath } };
    return {
      raw: semanticResult(context, evidencePath, parsed.verdict.findings, parsed.verdict.disposition),
    };
  };
}
