import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { localFixture, type LocalFixture } from './local-support.js';

let fixture: LocalFixture | undefined;
const scratch: string[] = [];
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Plant hooks and an fsmonitor command in the repository's git dir; each appends its environment to the returned marker. */
function plant(repoDir: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'pg-hook-marker-'));
  scratch.push(dir);
  const marker = join(dir, 'ran.txt');
  const gitDir = join(repoDir, '.git');
  for (const hook of ['post-checkout', 'reference-transaction', 'post-index-change', 'post-merge', 'post-commit']) {
    writeFileSync(join(gitDir, 'hooks', hook), `#!/bin/sh\necho ${hook} >> ${marker}\nenv >> ${marker}\n`);
    chmodSync(join(gitDir, 'hooks', hook), 0o755);
  }
  const config = readFileSync(join(gitDir, 'config'), 'utf8');
  writeFileSync(join(gitDir, 'config'), `${config}[core]\n\tfsmonitor = "env >> ${marker}; false #"\n`);
  return marker;
}

const observed = (marker: string) => (existsSync(marker) ? readFileSync(marker, 'utf8') : 'absent');

describe('local forge: a planted hook or fsmonitor never runs', () => {
  it('checks run (git worktree add) and change merge (update-ref) run no hook', async () => {
    fixture = await localFixture('checks:\n  - name: ok\n    run: "true"\n');
    const { forge, repo } = fixture;
    const marker = plant(repo.dir);
    process.env.GITHUB_TOKEN = 'ghp_hooktokenhooktokenhooktoken012345';
    try {
      const change = await forge.openChange({ head: 'feature', base: 'main' });
      const { results } = await forge.runChecks(change.id);
      expect(results.map((result) => result.conclusion)).toEqual(['success']);
      expect(observed(marker)).toBe('absent');
      const merged = await forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'merge', message: '' });
      expect(merged.merged).toBe(true);
    } finally {
      delete process.env.GITHUB_TOKEN;
    }
    expect(observed(marker)).toBe('absent');
  });
});
