import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findSecrets, redactSecrets } from '../../core/index.js';
import type { ReviewFinding, ReviewRulesConfig } from '../../contracts/index.js';
import { parseUnifiedDiff, filePath, type DiffFile } from '../diff-parse.js';
import { evidenceFileName } from '../evidence.js';
import { git } from '../git.js';
import { matchesAny } from '../glob.js';
import { semanticResult, type LaneAdapter } from './types.js';

export const DEFAULT_MAX_DIFF_BYTES = 1024 * 1024;

/**
 * The bytes of a file at the head, for files git shows as binary (their diff
 * has no added lines to scan). `bytes` is null when the blob is larger than the
 * scan limit.
 */
export interface HeadBlob {
  readonly size: number;
  readonly bytes: Buffer | null;
}

/** Head blobs by object id (the `index ..<new>` id of the diff). */
export type HeadBlobs = ReadonlyMap<string, HeadBlob>;

export interface Judgment {
  readonly findings: ReviewFinding[];
  readonly checks: string[];
}

const CONFLICT_OPEN = /^<{7}(?: |$)/;
const CONFLICT_CLOSE = /^>{7}(?: |$)/;
const CONFLICT_MIDDLE = /^={7}$/;

/** Never echo a secret: name the kind and the length only. */
function secretEvidence(description: string, length: number): string {
  return `matched a ${description} (${length} characters, not shown)`;
}

/** One finding per kind of secret in the text. */
function secretsIn(text: string, finding: (description: string, evidence: string) => ReviewFinding): ReviewFinding[] {
  const seen = new Set<string>();
  const out: ReviewFinding[] = [];
  for (const match of findSecrets(text, { reviewOnly: true })) {
    if (seen.has(match.id)) continue;
    seen.add(match.id);
    out.push(finding(match.description, secretEvidence(match.description, match.end - match.start)));
  }
  return out;
}

function lineSecretFindings(file: DiffFile): ReviewFinding[] {
  return file.added.flatMap((added) =>
    secretsIn(added.text, (description, evidence) => ({ title: `added line looks like a ${description}`, evidence, path: filePath(file), line: added.line })));
}

/** The same bytes read as one-byte text and as UTF-16 at both alignments, so ASCII and UTF-16 keys are both seen. */
function binaryTexts(bytes: Buffer): string[] {
  return [bytes.toString('latin1'), bytes.toString('utf16le'), bytes.subarray(1).toString('utf16le')];
}

function binarySecretFindings(file: DiffFile, blobs: HeadBlobs, maxBytes: number): ReviewFinding[] {
  if (!file.binary || file.newPath === null) return [];
  const path = file.newPath;
  const blob = file.newBlob === null ? undefined : blobs.get(file.newBlob);
  if (blob === undefined) {
    return [{ title: 'binary file could not be scanned for secrets', evidence: `no bytes of ${file.newBlob ?? 'an unnamed blob'} were available`, path }];
  }
  if (blob.bytes === null) {
    return [{ title: 'binary file too large to scan for secrets', evidence: `${blob.size} bytes, the limit is ${maxBytes}`, path }];
  }
  const findings = binaryTexts(blob.bytes).flatMap((text) =>
    secretsIn(text, (description, evidence) => ({ title: `binary file holds a ${description}`, evidence, path })));
  return findings.filter((finding, i) => findings.findIndex((other) => other.title === finding.title) === i);
}

function pathSecretFindings(file: DiffFile): ReviewFinding[] {
  if (file.newPath === null) return [];
  return secretsIn(file.newPath, (description, evidence) => ({ title: `file name looks like a ${description}`, evidence, path: file.newPath as string }));
}

function conflictFindings(file: DiffFile): ReviewFinding[] {
  const hasFence = file.added.some((added) => CONFLICT_OPEN.test(added.text) || CONFLICT_CLOSE.test(added.text));
  if (!hasFence) return [];
  return file.added
    .filter((added) => CONFLICT_OPEN.test(added.text) || CONFLICT_CLOSE.test(added.text) || CONFLICT_MIDDLE.test(added.text))
    .map((added) => ({ title: 'merge-conflict marker added', evidence: redactSecrets(added.text).slice(0, 80), path: filePath(file), line: added.line }));
}

/** Findings are stored and shown: a path that itself looks like a key is shown redacted. */
function redactFinding(finding: ReviewFinding): ReviewFinding {
  return finding.path === undefined ? finding : { ...finding, path: redactSecrets(finding.path) };
}

/**
 * The rules reviewer's judgment of a diff (pure): size, forbidden paths,
 * conflict markers, and secrets (the review entries of the one catalogue) in
 * added lines, in added file names, and in the head bytes of files git shows
 * as binary. A binary file whose bytes are not in `blobs` is a finding: what
 * was not scanned is not passed.
 */
export function reviewDiffByRules(diffBytes: Buffer, config: ReviewRulesConfig = {}, blobs: HeadBlobs = new Map()): Judgment {
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
        findings.push({ title: 'change touches a forbidden path', evidence: 'the path matches forbiddenPaths', path });
      }
    }
    findings.push(...conflictFindings(file), ...pathSecretFindings(file), ...lineSecretFindings(file), ...binarySecretFindings(file, blobs, maxBytes));
  }
  const binaries = files.filter((file) => file.binary && file.newPath !== null).length;
  const checks = [
    `diff size ${diffBytes.length} bytes (limit ${maxBytes})`,
    `${files.length} file(s) checked against ${forbidden.length} forbidden path pattern(s)`,
    'added lines and file names scanned for conflict markers and secrets',
    `${binaries} binary file(s) scanned for secrets at the head`,
  ];
  return { findings: findings.map(redactFinding), checks };
}

/** Read the head blobs of the binary files a diff adds or modifies (up to `maxBytes` each). */
export async function readHeadBlobs(repoDir: string, diffBytes: Buffer, maxBytes: number): Promise<Map<string, HeadBlob>> {
  const blobs = new Map<string, HeadBlob>();
  for (const file of parseUnifiedDiff(diffBytes.toString('utf8'))) {
    const oid = file.newBlob;
    if (!file.binary || file.newPath === null || oid === null || blobs.has(oid)) continue;
    const size = Number((await git(repoDir, ['cat-file', '-s', oid])).toString('utf8').trim());
    blobs.set(oid, { size, bytes: size > maxBytes ? null : await git(repoDir, ['cat-file', 'blob', oid]) });
  }
  return blobs;
}

function renderEvidence(lines: { reviewer: string; request: { head_sha: string; diff: { sha256: string } }; checks: string[]; findings: ReviewFinding[] }): string {
  const out = [`reviewer: ${lines.reviewer}`, `head: ${lines.request.head_sha}`, `diff: ${lines.request.diff.sha256}`, '', 'checks:'];
  out.push(...lines.checks.map((check) => `- ${check}`), '', `findings: ${lines.findings.length}`);
  for (const finding of lines.findings) {
    const where = finding.path === undefined ? '' : ` (${JSON.stringify(finding.path)}${finding.line === undefined ? '' : `:${finding.line}`})`;
    out.push(`- ${finding.title}${where}: ${finding.evidence}`);
  }
  return `${out.join('\n')}\n`;
}

/** Build a deterministic in-process lane: read the bound diff, judge it, write evidence, answer. */
export function deterministicLane(
  reviewer: string,
  judge: (diff: Buffer, context: Parameters<LaneAdapter>[0]) => Judgment | Promise<Judgment>,
): LaneAdapter {
  return async (context) => {
    const { request } = context;
    const diff = await readFile(request.diff.path);
    const { findings, checks } = await judge(diff, context);
    const evidencePath = join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce));
    await writeFile(evidencePath, renderEvidence({ reviewer, request, checks, findings }));
    return {
      raw: semanticResult(context, evidencePath, findings, findings.length === 0 ? 'CONFIRMED' : 'REFUTED'),
    };
  };
}

export const rulesReviewer: LaneAdapter = deterministicLane('builtin rules', async (diff, context) => {
  const config = context.review.rules;
  const blobs = await readHeadBlobs(context.repoDir, diff, config?.maxDiffBytes ?? DEFAULT_MAX_DIFF_BYTES);
  return reviewDiffByRules(diff, config, blobs);
});
