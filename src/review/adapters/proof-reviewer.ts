import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ReviewFinding } from '../../contracts/index.js';
import { readReviewedChange } from '../diff-read.js';
import { evidenceFileName } from '../evidence.js';
import type { LaneToolResult } from '../tools/port.js';
import { DEFAULT_MAX_DIFF_BYTES } from './rules-reviewer.js';
import { semanticResult, transportFailure, type LaneAdapter, type LaneRun } from './types.js';

/**
 * The builtin `proof` reviewer: deterministic, for tests, the demo and as a
 * model of what a reviewer does with live proof. Offered no tools (no proof
 * was asked for), it has nothing to judge and confirms, saying so. Offered
 * tools, it asks each for one plan, `{"paths": [...]}` (the files the change
 * touches, at most 200), and judges what comes back:
 *
 * - verified evidence must hold `expectations.json`, a JSON array of
 *   `{"name", "expected", "actual"}`: every `actual` equal to its `expected`
 *   (as JSON) confirms, any other is a finding (REFUTED). Evidence without
 *   it shows that something ran, not how the change behaves: the lane fails
 *   in transport (the review holds), it never confirms on a run alone;
 * - an inconclusive or rejected answer is not a judgment either: the lane
 *   fails in transport with the reason, and the review holds.
 *
 * Observation text is untrusted: it is parsed as data, never followed.
 */

export const EXPECTATIONS_FILE = 'expectations.json';
const MAX_PATHS = 200;

interface Expectation {
  readonly name: string;
  readonly expected: unknown;
  readonly actual: unknown;
}

function parseExpectations(text: string): readonly Expectation[] | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(value) || value.length === 0) return null;
  const out: Expectation[] = [];
  for (const item of value) {
    if (item === null || typeof item !== 'object' || typeof (item as { name?: unknown }).name !== 'string') return null;
    if (!('expected' in item) || !('actual' in item)) return null;
    const entry = item as { name: string; expected: unknown; actual: unknown };
    out.push({ name: entry.name.slice(0, 200), expected: entry.expected, actual: entry.actual });
  }
  return out;
}

function expectationsOf(result: LaneToolResult): readonly Expectation[] | null {
  const observations = (result.data as { observations?: readonly { path?: unknown; text?: unknown }[] } | null)?.observations ?? [];
  const file = observations.find((observation) => observation.path === EXPECTATIONS_FILE);
  return typeof file?.text === 'string' ? parseExpectations(file.text) : null;
}

function show(value: unknown): string {
  return JSON.stringify(value)?.slice(0, 200) ?? 'undefined';
}

export const proofReviewer: LaneAdapter = async (context): Promise<LaneRun> => {
  const { request } = context;
  const evidencePath = join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce));
  const lines = ['reviewer: builtin proof', `head: ${request.head_sha}`, `diff: ${request.diff.sha256}`, ''];
  const tools = context.tools;
  if (tools === undefined) {
    lines.push('this review is not proof-focused: nothing to prove', '', 'findings: 0');
    await writeFile(evidencePath, `${lines.join('\n')}\n`);
    return { raw: semanticResult(context, evidencePath, [], 'CONFIRMED') };
  }
  if (tools.tools.length === 0) {
    // Proof was asked for and none can be run: that is not a pass. The instructions name every gap.
    const gaps = (tools.gaps ?? []).map((gap) => `Not offered: ${gap}`).join('; ');
    return { raw: transportFailure(context, `proof was asked for, but no proof tool could be offered${gaps === '' ? '' : ` (${gaps})`}`.slice(0, 500)) };
  }
  const change = await readReviewedChange(context.repoDir, request, { maxBytes: DEFAULT_MAX_DIFF_BYTES, content: false, timeoutMs: context.lane.timeoutMs });
  const paths = [...new Set(change.files.map((file) => file.newPath ?? file.oldPath ?? ''))]
    .filter((path) => path !== '')
    .sort()
    .slice(0, MAX_PATHS);
  const findings: ReviewFinding[] = [];
  const failures: string[] = [];
  for (const tool of tools.tools) {
    const result = await tools.call({ name: tool.name, arguments: { plan: { paths } } });
    lines.push(`tool ${tool.name} with plan {"paths": [${paths.length} path(s)]}:`, result.text, '');
    if (result.status !== 'verified') {
      failures.push(`${tool.name}: proof ${result.status}`);
      continue;
    }
    const expectations = expectationsOf(result);
    if (expectations === null) {
      failures.push(`${tool.name}: the verified evidence holds no readable ${EXPECTATIONS_FILE}; a run alone is not proof`);
      continue;
    }
    for (const item of expectations) {
      const same = JSON.stringify(item.expected) === JSON.stringify(item.actual);
      lines.push(`- ${item.name}: expected ${show(item.expected)}, observed ${show(item.actual)}: ${same ? 'as expected' : 'DIFFERENT'}`);
      if (!same)
        findings.push({
          title: `proof ${tool.name}: ${item.name} behaves differently`,
          evidence: `expected ${show(item.expected)}, observed ${show(item.actual)}`,
        });
    }
  }
  lines.push('', `findings: ${findings.length}`);
  await writeFile(evidencePath, `${lines.join('\n')}\n`);
  if (findings.length > 0) return { raw: semanticResult(context, evidencePath, findings, 'REFUTED') };
  if (failures.length > 0) return { raw: { ...transportFailure(context, failures.join('; ').slice(0, 500)) } };
  return { raw: semanticResult(context, evidencePath, [], 'CONFIRMED') };
};
