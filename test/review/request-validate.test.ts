import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import type { ReviewRequestV1 } from '../../src/contracts/index.js';
import {
  checkBeforeDispatch,
  createLaneRequest,
  evidenceFileName,
  prepareReviewInputs,
  validateLaneResult,
  type ReviewInputs,
} from '../../src/review/index.js';
import { makeRepo, sh, type TestRepo } from './repo-fixture.js';

let repo: TestRepo;
let work: string;
let inputs: ReviewInputs;

beforeAll(async () => {
  repo = makeRepo();
  repo.branch('feature');
  repo.commit({ 'src/calc.ts': 'export const add = (a: number, b: number) => a + b + 0;\n' }, 'tweak add');
  repo.switchTo('main');
  repo.commit({ 'docs/other.md': 'later on main\n' }, 'main moves on');
  work = mkdtempSync(join(tmpdir(), 'pg-review-work-'));
  inputs = await prepareReviewInputs({ repoDir: repo.dir, base: 'main', head: 'feature', reviewDir: join(work, 'r1'), mode: 'fresh-context' });
});

afterAll(() => {
  repo.remove();
  rmSync(work, { recursive: true, force: true });
});

function semantic(request: ReviewRequestV1, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schema: 'review-lane-result.v1',
    lane_id: 'lane-a',
    family: 'fam',
    context_id: 'ctx-reviewer',
    nonce: request.nonce,
    read_only: true,
    evidence_path: join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce)),
    findings: [],
    disposition: 'CONFIRMED',
    ...extra,
  };
}

async function freshRequest(laneId: string): Promise<ReviewRequestV1> {
  const request = await createLaneRequest(inputs, laneId, 60_000);
  writeFileSync(join(request.evidence_dir, evidenceFileName(request.subject_id, request.head_sha, request.nonce)), 'looked at src/calc.ts\n');
  return request;
}

describe('review requests', () => {
  it('binds the merge-base diff (base...head) and the contract by the digests of their bytes', async () => {
    const expected = sh(repo.dir, ['diff', '--binary', '--full-index', '--no-renames', 'main...feature']);
    const diff = readFileSync(inputs.diff.path, 'utf8');
    expect(diff.trim()).toBe(expected);
    expect(diff).not.toContain('docs/other.md');
    expect(inputs.headSha).toBe(sh(repo.dir, ['rev-parse', 'feature']));
    expect(inputs.diff.sha256).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(readFileSync(inputs.contract.path, 'utf8')).toContain('tweak add');
    expect(inputs.author).toEqual({ context_id: 'git-author:author@example.com', family: 'human' });
  });

  it('gives each lane a fresh nonce of at least 128 bits, its own evidence dir and a deadline', async () => {
    const a = await createLaneRequest(inputs, 'a', 60_000);
    const b = await createLaneRequest(inputs, 'b', 60_000);
    expect(a.nonce).toMatch(/^[0-9a-f]{32,}$/);
    expect(a.nonce).not.toBe(b.nonce);
    expect(a.evidence_dir).not.toBe(b.evidence_dir);
    expect(a.read_only).toBe(true);
    expect(Date.parse(a.deadline)).toBeGreaterThan(Date.now());
  });

  it('names evidence by the first 8 bytes of sha256(subject NUL head NUL nonce)', () => {
    expect(evidenceFileName('subject-1', 'a'.repeat(40), 'nonce-0')).toBe('review-evidence-e2a649d7cea99003.txt');
  });

  it('refuses to dispatch when the diff bytes changed (MUTABLE_INPUT)', async () => {
    const own = await prepareReviewInputs({ repoDir: repo.dir, base: 'main', head: 'feature', reviewDir: join(work, 'r2'), mode: 'fresh-context' });
    const request = await createLaneRequest(own, 'x', 60_000);
    await expect(checkBeforeDispatch(request, 'ctx-1')).resolves.toBeUndefined();
    chmodSync(own.diff.path, 0o644);
    writeFileSync(own.diff.path, `${readFileSync(own.diff.path, 'utf8')}+sneaky\n`);
    const error = await checkBeforeDispatch(request, 'ctx-1').catch((caught: unknown) => caught);
    expect(isProofgateError(error, 'MUTABLE_INPUT')).toBe(true);
  });

  it('refuses to dispatch when the contract changed (MUTABLE_INPUT)', async () => {
    const own = await prepareReviewInputs({ repoDir: repo.dir, base: 'main', head: 'feature', reviewDir: join(work, 'r3'), mode: 'fresh-context' });
    const request = await createLaneRequest(own, 'x', 60_000);
    chmodSync(own.contract.path, 0o644);
    writeFileSync(own.contract.path, 'anything goes\n');
    await expect(checkBeforeDispatch(request, 'ctx-1')).rejects.toMatchObject({ code: 'MUTABLE_INPUT' });
  });

  it("refuses a reviewer whose context is the author's (SELF_REVIEW)", async () => {
    const request = await createLaneRequest(inputs, 'self', 60_000);
    await expect(checkBeforeDispatch(request, request.author.context_id)).rejects.toMatchObject({ code: 'SELF_REVIEW' });
  });
});

describe('validateLaneResult', () => {
  it('accepts a well-formed CONFIRMED with contained evidence', async () => {
    const request = await freshRequest('ok');
    expect(await validateLaneResult(semantic(request), request)).toEqual({ valid: true });
  });

  it('accepts a REFUTED with findings and a transport failure with a reason', async () => {
    const request = await freshRequest('ok2');
    const refuted = semantic(request, { disposition: 'REFUTED', findings: [{ title: 't', evidence: 'e', path: 'src/calc.ts', line: 1 }] });
    expect(await validateLaneResult(refuted, request)).toEqual({ valid: true });
    const { evidence_path: _e, disposition: _d, ...rest } = semantic(request);
    expect(await validateLaneResult({ ...rest, failure: { class: 'transport', reason: 'timeout' } }, request)).toEqual({ valid: true });
  });

  const rules: { name: string; code: string; mutate: (request: ReviewRequestV1, result: Record<string, unknown>) => unknown }[] = [
    { name: 'not an object', code: 'MALFORMED', mutate: () => 'CONFIRMED' },
    { name: 'unknown field', code: 'MALFORMED', mutate: (_q, r) => ({ ...r, extra: 1 }) },
    { name: 'both disposition and failure', code: 'AMBIGUOUS_OUTCOME', mutate: (_q, r) => ({ ...r, failure: { class: 'transport', reason: 'x' } }) },
    { name: 'neither disposition nor failure', code: 'MISSING_OUTCOME', mutate: (_q, r) => ({ ...r, disposition: undefined }) },
    {
      name: 'transport failure without a reason',
      code: 'FAILURE_WITHOUT_REASON',
      mutate: (_q, r) => ({ ...r, disposition: undefined, failure: { class: 'transport', reason: ' ' } }),
    },
    { name: 'wrong nonce', code: 'NONCE_MISMATCH', mutate: (_q, r) => ({ ...r, nonce: 'f'.repeat(32) }) },
    { name: "author's context", code: 'SELF_REVIEW', mutate: (q, r) => ({ ...r, context_id: q.author.context_id }) },
    { name: 'no read-only attestation', code: 'NOT_READ_ONLY', mutate: (_q, r) => ({ ...r, read_only: false }) },
    { name: 'REFUTED without findings', code: 'REFUTED_WITHOUT_FINDINGS', mutate: (_q, r) => ({ ...r, disposition: 'REFUTED' }) },
    { name: 'evidence with another name', code: 'EVIDENCE_NAME', mutate: (q, r) => ({ ...r, evidence_path: join(q.evidence_dir, 'notes.txt') }) },
    {
      name: 'evidence missing',
      code: 'EVIDENCE_MISSING',
      mutate: (q, r) => {
        rmSync(r.evidence_path as string);
        return r;
      },
    },
    {
      name: 'evidence empty',
      code: 'EVIDENCE_EMPTY',
      mutate: (_q, r) => {
        writeFileSync(r.evidence_path as string, '');
        return r;
      },
    },
    {
      name: 'evidence is a directory',
      code: 'EVIDENCE_NOT_REGULAR',
      mutate: (_q, r) => {
        rmSync(r.evidence_path as string);
        mkdirSync(r.evidence_path as string);
        return r;
      },
    },
    {
      name: 'evidence is a symlink pointing outside',
      code: 'EVIDENCE_OUTSIDE',
      mutate: (_q, r) => {
        const outside = join(work, `outside-${Math.random()}.txt`);
        writeFileSync(outside, 'not yours\n');
        rmSync(r.evidence_path as string);
        symlinkSync(outside, r.evidence_path as string);
        return r;
      },
    },
    {
      name: 'evidence path escaping with ..',
      code: 'EVIDENCE_OUTSIDE',
      mutate: (q, r) => {
        const name = evidenceFileName(q.subject_id, q.head_sha, q.nonce);
        writeFileSync(join(q.evidence_dir, '..', name), 'beside, not inside\n');
        return { ...r, evidence_path: join(q.evidence_dir, '..', name) };
      },
    },
    {
      name: 'diff changed after the request',
      code: 'MUTABLE_INPUT',
      mutate: (q, r) => ({ ...r, __request: { ...q, diff: { ...q.diff, sha256: `sha256:${'0'.repeat(64)}` } } }),
    },
  ];

  it.each(rules)('refuses: $name ($code)', async ({ code, mutate }) => {
    const request = await freshRequest(`lane-${code.toLowerCase()}-${Math.random().toString(16).slice(2)}`);
    const mutated = mutate(request, semantic(request)) as Record<string, unknown> | string;
    let against = request;
    let result: unknown = mutated;
    if (typeof mutated === 'object' && mutated.__request) {
      against = mutated.__request as ReviewRequestV1;
      const { __request: _r, ...rest } = mutated;
      result = rest;
    }
    if (typeof result === 'object' && result !== null) result = JSON.parse(JSON.stringify(result));
    const outcome = await validateLaneResult(result, against);
    expect(outcome).toMatchObject({ valid: false, code });
  });

  it('accepts a symlink inside the evidence dir that resolves inside it', async () => {
    const request = await freshRequest('inner-link');
    const result = semantic(request);
    const real = join(request.evidence_dir, 'real.txt');
    writeFileSync(real, 'evidence\n');
    rmSync(result.evidence_path as string);
    symlinkSync(real, result.evidence_path as string);
    expect(await validateLaneResult(result, request)).toEqual({ valid: true });
  });

  it('binds the lane and context when the caller names them', async () => {
    const request = await freshRequest('bound');
    expect(await validateLaneResult(semantic(request), request, { laneId: 'other' })).toMatchObject({ code: 'LANE_MISMATCH' });
    expect(await validateLaneResult(semantic(request), request, { contextId: 'ctx-other' })).toMatchObject({ code: 'LANE_MISMATCH' });
  });
});
