import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ReviewFinding, ReviewRulesConfig } from '../../contracts/index.js';
import { parseUnifiedDiff, filePath, type DiffFile } from '../diff-parse.js';
import { evidenceFileName } from '../evidence.js';
import { matchesAny } from '../glob.js';
import { semanticResult, type LaneAdapter } from './types.js';

export const DEFAULT_MAX_DIFF_BYTES = 1024 * 1024;

/** Patterns of secrets that must never be added to a repository. */
export const SECRET_PATTERNS: readonly { readonly name: string; readonly pattern: RegExp }[] = [
  { name: 'PEM private key', pattern: /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----/ },
  { name: 'AWS access key id', pattern: /\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b/ },
  { name: 'AWS secret access key', pattern: /aws_?secret_?access_?key\W{0,4}[:=]\W{0,4}[A-Za-z0-9/+=]{40}\b/i },
  { name: 'GitHub token', pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/ },
  { name: 'Slack token', pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/ },
  { name: 'Google API key', pattern: /\bAIza[0-9A-Za-z_-]{35}\b/ },
  { name: 'Stripe secret key', pattern: /\b[rs]k_live_[0-9A-Za-z]{20,}\b/ },
  { name: 'OpenAI-style API key', pattern: /\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}\b/ },
];

const CONFLICT_OPEN = /^<{7}(?: |$)/;
const CONFLICT_CLOSE = /^>{7}(?: |$)/;
const CONFLICT_MIDDLE = /^={7}$/;

/** Never echo a secret: keep its first four characters and its length. */
function redact(match: string): string {
  return `${match.slice(0, 4)}... (${match.length} characters, redacted)`;
}

function secretFindings(file: DiffFile): ReviewFinding[] {
  const out: ReviewFinding[] = [];
  for (const added of file.added) {
    for (const { name, pattern } of SECRET_PATTERNS) {
      const match = added.text.match(pattern);
      if (match) {
        out.push({ title: `added line looks like a ${name}`, evidence: `matched ${redact(match[0])}`, path: filePath(file), line: added.line });
      }
    }
  }
  return out;
}

function conflictFindings(file: DiffFile): ReviewFinding[] {
  const hasFence = file.added.some((added) => CONFLICT_OPEN.test(added.text) || CONFLICT_CLOSE.test(added.text));
  if (!hasFence) return [];
  return file.added
    .filter((added) => CONFLICT_OPEN.test(added.text) || CONFLICT_CLOSE.test(added.text) || CONFLICT_MIDDLE.test(added.text))
    .map((added) => ({ title: 'merge-conflict marker added', evidence: added.text.slice(0, 80), path: filePath(file), line: added.line }));
}

/** The rules reviewer's judgment of a diff (pure). */
export function reviewDiffByRules(diffBytes: Buffer, config: ReviewRulesConfig = {}): { findings: ReviewFinding[]; checks: string[] } {
  const maxBytes = config.maxDiffBytes ?? DEFAULT_MAX_DIFF_BYTES;
  const forbidden = config.forbiddenPaths ?? [];
  const files = parseUnifiedDiff(diffBytes.toString('utf8'));
  const findings: ReviewFinding[] = [];
  if (diffBytes.length > maxBytes) {
    findings.push({ title: 'diff too large to review', evidence: `${diffBytes.length} bytes, the limit is ${maxBytes}` });
  }
  for (const file of files) {
    for (const path of new Set([file.oldPath, file.newPath])) {
      if (path !== null && matchesAny(path, forbidden)) {
        findings.push({ title: 'change touches a forbidden path', evidence: `${path} matches forbiddenPaths`, path });
      }
    }
    findings.push(...conflictFindings(file), ...secretFindings(file));
  }
  const checks = [
    `diff size ${diffBytes.length} bytes (limit ${maxBytes})`,
    `${files.length} file(s) checked against ${forbidden.length} forbidden path pattern(s)`,
    `added lines scanned for conflict markers and ${SECRET_PATTERNS.length} secret patterns`,
  ];
  return { findings, checks };
}

function renderEvidence(lines: { reviewer: string; request: { head_sha: string; diff: { sha256: string } }; checks: string[]; findings: ReviewFinding[] }): string {
  const out = [`reviewer: ${lines.reviewer}`, `head: ${lines.request.head_sha}`, `diff: ${lines.request.diff.sha256}`, '', 'checks:'];
  out.push(...lines.checks.map((check) => `- ${check}`), '', `findings: ${lines.findings.length}`);
  for (const finding of lines.findings) {
    const where = finding.path === undefined ? '' : ` (${finding.path}${finding.line === undefined ? '' : `:${finding.line}`})`;
    out.push(`- ${finding.title}${where}: ${finding.evidence}`);
  }
  return `${out.join('\n')}\n`;
}

/** Build a deterministic in-process lane: read the bound diff, judge it, write evidence, answer. */
export function deterministicLane(
  reviewer: string,
  judge: (diff: Buffer, context: Parameters<LaneAdapter>[0]) => { findings: ReviewFinding[]; checks: string[] },
): LaneAdapter {
  return async (context) => {
    const { request } = context;
    const diff = await readFile(request.diff.path);
    const { findings, checks } = judge(diff, context);
    const evidencePath = join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce));
    await writeFile(evidencePath, renderEvidence({ reviewer, request, checks, findings }));
    return {
      raw: semanticResult(context, evidencePath, findings, findings.length === 0 ? 'CONFIRMED' : 'REFUTED'),
    };
  };
}

export const rulesReviewer: LaneAdapter = deterministicLane('builtin rules', (diff, context) => reviewDiffByRules(diff, context.review.rules));
