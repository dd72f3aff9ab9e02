import { readFile, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import picomatch from 'picomatch';
import { findSecrets, redactSecrets } from '../../core/index.js';
import type { ReviewFinding, ReviewRequestV1, ReviewRulesConfig } from '../../contracts/index.js';
import { SYMLINK_MODE } from '../diff-files.js';
import { readReviewedChange, type BlobBytes, type ReviewedFile } from '../diff-read.js';
import { evidenceFileName } from '../evidence.js';
import { matchesAny } from '../glob.js';
import { semanticResult, type LaneAdapter } from './types.js';

export const DEFAULT_MAX_DIFF_BYTES = 1024 * 1024;

/**
 * The bytes of a file at the head, for files git shows as binary (their diff
 * has no added lines to scan) and for symlinks (the target). `bytes` is null
 * when the blob is larger than the scan limit.
 */
export type HeadBlob = BlobBytes;

/** Head blobs by object id (git's `--raw` new id). */
export type HeadBlobs = ReadonlyMap<string, HeadBlob>;

export interface Judgment {
  readonly findings: ReviewFinding[];
  readonly checks: string[];
}

/** What the rules judge of one file: git's facts (`readReviewedChange`); `added` is null when the new bytes were too large to read. */
export type RulesFile = Pick<ReviewedFile, 'oldPath' | 'newPath' | 'newMode' | 'newBlob' | 'binary' | 'added'>;

/** What the rules judge of a change: the size of the bound diff, and its files. */
export interface RulesInput {
  readonly diffSize: number;
  readonly files: readonly RulesFile[];
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

function pathOf(file: RulesFile): string {
  return file.newPath ?? file.oldPath ?? '';
}

function lineSecretFindings(file: RulesFile): ReviewFinding[] {
  return (file.added ?? []).flatMap((added) =>
    secretsIn(added.text, (description, evidence) => ({ title: `added line looks like a ${description}`, evidence, path: pathOf(file), line: added.line })),
  );
}

/** The same bytes read as one-byte text and as UTF-16 at both alignments, so ASCII and UTF-16 keys are both seen. */
function binaryTexts(bytes: Buffer): string[] {
  return [bytes.toString('latin1'), bytes.toString('utf16le'), bytes.subarray(1).toString('utf16le')];
}

function binarySecretFindings(file: RulesFile, blobs: HeadBlobs, maxBytes: number): ReviewFinding[] {
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
    secretsIn(text, (description, evidence) => ({ title: `binary file holds a ${description}`, evidence, path })),
  );
  return findings.filter((finding, i) => findings.findIndex((other) => other.title === finding.title) === i);
}

/** A text file whose new bytes were larger than the limit was not scanned: what was not scanned is not passed. */
function unreadFindings(file: RulesFile, maxBytes: number): ReviewFinding[] {
  if (file.added !== null) return [];
  return [{ title: 'file too large to scan for secrets', evidence: `its new bytes are larger than the limit of ${maxBytes}`, path: pathOf(file) }];
}

function pathSecretFindings(file: RulesFile): ReviewFinding[] {
  if (file.newPath === null) return [];
  return secretsIn(file.newPath, (description, evidence) => ({ title: `file name looks like a ${description}`, evidence, path: file.newPath as string }));
}

function conflictFindings(file: RulesFile): ReviewFinding[] {
  const added = file.added ?? [];
  const hasFence = added.some((line) => CONFLICT_OPEN.test(line.text) || CONFLICT_CLOSE.test(line.text));
  if (!hasFence) return [];
  return added
    .filter((line) => CONFLICT_OPEN.test(line.text) || CONFLICT_CLOSE.test(line.text) || CONFLICT_MIDDLE.test(line.text))
    .map((line) => ({ title: 'merge-conflict marker added', evidence: redactSecrets(line.text).slice(0, 80), path: pathOf(file), line: line.line }));
}

/** The literal directory part of a glob (`secret/**` -> `secret`; `**\/*.pem` -> ''). */
function globBase(pattern: string): string {
  return picomatch.scan(pattern.endsWith('/') ? `${pattern}**` : pattern).base.replace(/\/+$/, '');
}

/**
 * A symlink the change adds or retargets gives another name to what it
 * points at: a target outside the repository (absolute, or `..` past the
 * top), or inside a forbidden path, or a directory holding one (the literal
 * part of a pattern, so `**\/*.pem` is not followed into every directory), is a
 * finding. The target is never shown. Links through other links are not
 * followed.
 */
function symlinkFindings(file: RulesFile, blobs: HeadBlobs, forbidden: readonly string[]): ReviewFinding[] {
  if (file.newMode !== SYMLINK_MODE || file.newPath === null) return [];
  const path = file.newPath;
  const bytes = file.newBlob === null ? null : (blobs.get(file.newBlob)?.bytes ?? null);
  if (bytes === null) return [{ title: 'symlink target could not be read', evidence: `no bytes of ${file.newBlob ?? 'an unnamed blob'} were available`, path }];
  const target = bytes.toString('utf8');
  const hidden = `${target.length} characters, not shown`;
  if (posix.isAbsolute(target)) return [{ title: 'symlink points outside the repository', evidence: `an absolute target (${hidden})`, path }];
  const resolved = posix.normalize(posix.join(posix.dirname(path), target)).replace(/\/+$/, '');
  if (resolved === '..' || resolved.startsWith('../'))
    return [{ title: 'symlink points outside the repository', evidence: `its target leaves the repository (${hidden})`, path }];
  const holds = (pattern: string) => {
    const base = globBase(pattern);
    return base !== '' && (resolved === '.' || base === resolved || base.startsWith(`${resolved}/`));
  };
  if (matchesAny(resolved, forbidden) || forbidden.some(holds)) {
    return [{ title: 'symlink points to a forbidden path', evidence: `its target resolves into forbiddenPaths (${hidden})`, path }];
  }
  return [];
}

/** Findings are stored and shown: a path that itself looks like a key is shown redacted. */
function redactFinding(finding: ReviewFinding): ReviewFinding {
  return finding.path === undefined ? finding : { ...finding, path: redactSecrets(finding.path) };
}

/**
 * The rules reviewer's judgment of a change (pure): size, forbidden paths,
 * conflict markers, symlinks out of the repository or into forbidden paths,
 * and secrets (the review entries of the one catalogue) in added lines, in
 * added file names, and in the head bytes of files git shows as binary. A
 * binary file whose bytes are not in `blobs`, and a file too large to read,
 * are findings: what was not scanned is not passed.
 */
export function judgeChangeByRules(change: RulesInput, config: ReviewRulesConfig = {}, blobs: HeadBlobs = new Map()): Judgment {
  const maxBytes = config.maxDiffBytes ?? DEFAULT_MAX_DIFF_BYTES;
  const forbidden = config.forbiddenPaths ?? [];
  const { files } = change;
  const findings: ReviewFinding[] = [];
  if (change.diffSize > maxBytes) {
    findings.push({ title: 'diff too large to review', evidence: `${change.diffSize} bytes, the limit is ${maxBytes}` });
  }
  for (const file of files) {
    for (const path of new Set([file.oldPath, file.newPath])) {
      if (path !== null && matchesAny(path, forbidden)) {
        findings.push({ title: 'change touches a forbidden path', evidence: 'the path matches forbiddenPaths', path });
      }
    }
    findings.push(
      ...conflictFindings(file),
      ...pathSecretFindings(file),
      ...lineSecretFindings(file),
      ...unreadFindings(file, maxBytes),
      ...binarySecretFindings(file, blobs, maxBytes),
      ...symlinkFindings(file, blobs, forbidden),
    );
  }
  const binaries = files.filter((file) => file.binary && file.newPath !== null).length;
  const symlinks = files.filter((file) => file.newMode === SYMLINK_MODE && file.newPath !== null).length;
  const checks = [
    `diff size ${change.diffSize} bytes (limit ${maxBytes})`,
    `${files.length} file(s) checked against ${forbidden.length} forbidden path pattern(s)`,
    'added lines and file names scanned for conflict markers and secrets',
    `${binaries} binary file(s) scanned for secrets at the head`,
    `${symlinks} symlink target(s) checked`,
  ];
  return { findings: findings.map(redactFinding), checks };
}

/** The head bytes of the binary files and symlinks of the change a request binds (each up to `maxBytes`), by object id. */
export async function readHeadBlobs(repoDir: string, request: Pick<ReviewRequestV1, 'base_sha' | 'head_sha' | 'diff'>, maxBytes: number): Promise<HeadBlobs> {
  return (await readReviewedChange(repoDir, request, { maxBytes, content: true })).blobs;
}

function renderEvidence(lines: {
  reviewer: string;
  request: { head_sha: string; diff: { sha256: string } };
  checks: string[];
  findings: ReviewFinding[];
}): string {
  const out = [`reviewer: ${lines.reviewer}`, `head: ${lines.request.head_sha}`, `diff: ${lines.request.diff.sha256}`, '', 'checks:'];
  out.push(...lines.checks.map((check) => `- ${check}`), '', `findings: ${lines.findings.length}`);
  for (const finding of lines.findings) {
    const where = finding.path === undefined ? '' : ` (${JSON.stringify(finding.path)}${finding.line === undefined ? '' : `:${finding.line}`})`;
    out.push(`- ${finding.title}${where}: ${finding.evidence}`);
  }
  return `${out.join('\n')}\n`;
}

/** Build a deterministic in-process lane: read the bound diff, judge it, write evidence, answer. */
export function deterministicLane(reviewer: string, judge: (diff: Buffer, context: Parameters<LaneAdapter>[0]) => Judgment | Promise<Judgment>): LaneAdapter {
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

/**
 * The rules lane: git's facts about the change the request binds (merge base
 * of its base and head, checked against the bound diff digest), judged by
 * `judgeChangeByRules`. A git failure is the lane's transport failure.
 */
export const rulesReviewer: LaneAdapter = deterministicLane('builtin rules', async (diff, context) => {
  const config = context.review.rules ?? {};
  const maxBytes = config.maxDiffBytes ?? DEFAULT_MAX_DIFF_BYTES;
  const change = await readReviewedChange(context.repoDir, context.request, { maxBytes, content: true, timeoutMs: context.lane.timeoutMs });
  return judgeChangeByRules({ diffSize: diff.length, files: change.files }, config, change.blobs);
});
