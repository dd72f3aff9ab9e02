import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { contractJsonSchemas, reviewLaneResultSchema, reviewRequestSchema } from '../../src/contracts/index.js';
import { parseRepoConfigYaml } from '../../src/contracts/repo-config.js';
import { configDigest, defaultAcceptanceContract, liveReviewBindings } from '../../src/review/index.js';
import { makeRepo } from './repo-fixture.js';

const schemasDir = new URL('../../schemas/', import.meta.url);

describe('published JSON Schemas', () => {
  it('equal freshly generated ones (run `npm run build && node scripts/generate-schemas.mjs` after changing a contract)', () => {
    const generated = contractJsonSchemas();
    for (const [name, schema] of Object.entries(generated)) {
      const committed = readFileSync(new URL(`${name}.json`, schemasDir), 'utf8');
      expect(committed, `schemas/${name}.json`).toBe(`${JSON.stringify(schema, null, 2)}\n`);
    }
    const files = readdirSync(schemasDir).filter((file) => file.startsWith('review'));
    expect(files.sort()).toEqual(
      Object.keys(generated)
        .filter((name) => name.startsWith('review'))
        .map((name) => `${name}.json`)
        .sort(),
    );
  });
});

const request = {
  schema: 'review-request.v1',
  subject_id: 'local:x',
  head_sha: 'a'.repeat(40),
  base_sha: 'b'.repeat(40),
  acceptance_contract: { path: '/r/contract.md', sha256: `sha256:${'1'.repeat(64)}` },
  diff: { path: '/r/change.diff', sha256: `sha256:${'2'.repeat(64)}` },
  author: { context_id: 'author', family: 'human' },
  diversity_mode: 'fresh-context',
  nonce: '0123456789abcdef0123456789abcdef',
  evidence_dir: '/r/evidence',
  read_only: true,
  deadline: '2030-01-01T00:00:00.000Z',
};

describe('review-request.v1', () => {
  it('accepts a complete request', () => {
    expect(reviewRequestSchema.safeParse(request).success).toBe(true);
  });
  it.each([
    ['short nonce (< 128 bits)', { nonce: 'abcdef' }],
    ['short head', { head_sha: 'abc' }],
    ['path without digest', { diff: { path: '/r/change.diff' } }],
    ['read_only false', { read_only: false }],
    ['unknown mode', { diversity_mode: 'solo' }],
    ['unknown field', { extra: true }],
  ])('refuses %s', (_name, patch) => {
    expect(reviewRequestSchema.safeParse({ ...request, ...patch }).success).toBe(false);
  });
});

describe('review-lane-result.v1', () => {
  const base = { schema: 'review-lane-result.v1', lane_id: 'l', family: 'f', context_id: 'c', nonce: 'n', read_only: true, findings: [] };
  it('is either a disposition or a transport failure, never both', () => {
    expect(reviewLaneResultSchema.safeParse({ ...base, evidence_path: '/e', disposition: 'CONFIRMED' }).success).toBe(true);
    expect(reviewLaneResultSchema.safeParse({ ...base, failure: { class: 'transport', reason: 'timeout' } }).success).toBe(true);
    expect(
      reviewLaneResultSchema.safeParse({ ...base, evidence_path: '/e', disposition: 'CONFIRMED', failure: { class: 'transport', reason: 'x' } }).success,
    ).toBe(false);
    expect(reviewLaneResultSchema.safeParse({ ...base, evidence_path: '/e' }).success).toBe(false);
    expect(reviewLaneResultSchema.safeParse({ ...base, failure: { class: 'semantic', reason: 'x' } }).success).toBe(false);
  });
});

describe('what a review binds stays put while the change and the rules do', () => {
  it('the default acceptance contract names the merge base, never the base tip', () => {
    const text = defaultAcceptanceContract('m'.repeat(40), 'h'.repeat(40), ['add a thing']);
    expect(text).toContain(`Change: ${'m'.repeat(40)}..${'h'.repeat(40)} (the diff from the merge base to the head).`);
    expect(text).toContain('- add a thing');
  });

  it('the config digest is of the parsed config: formatting does not change it, a setting does', () => {
    const a = configDigest(parseRepoConfigYaml('requireUpToDate: false\nchecks: []\n', 'a'));
    const b = configDigest(parseRepoConfigYaml('# same rules, other bytes\nchecks:   []\n', 'b'));
    const c = configDigest(parseRepoConfigYaml('requireUpToDate: true\n', 'c'));
    expect(a).toBe(b);
    expect(c).not.toBe(a);
  });

  it('live bindings: an unrelated base commit changes nothing; a config change on the base changes only the config digest', async () => {
    const repo = makeRepo();
    try {
      repo.commit({ '.proofgate.yml': 'requireUpToDate: false\n' }, 'config');
      repo.branch('feature');
      repo.commit({ 'src/extra.ts': 'export const x = 1;\n' }, 'extra');
      repo.switchTo('main');
      const first = await liveReviewBindings({ repoDir: repo.dir, base: 'main', head: 'feature' });
      repo.commit({ 'NOTES.md': 'unrelated\n' }, 'unrelated');
      const unrelated = await liveReviewBindings({ repoDir: repo.dir, base: 'main', head: 'feature' });
      expect(unrelated).toEqual(first);
      expect(first.paths).toEqual(['src/extra.ts']);
      repo.commit({ '.proofgate.yml': 'requireUpToDate: true\n' }, 'stricter');
      const stricter = await liveReviewBindings({ repoDir: repo.dir, base: 'main', head: 'feature' });
      expect(stricter.config).not.toBe(first.config);
      expect({ ...stricter, config: first.config }).toEqual(first);
    } finally {
      repo.remove();
    }
  });
});
