/**
 * The git fixture reads a branch's tip from its loose ref file instead of
 * starting git (test/forge/git-fixture.ts, `looseBranchTip`). Each case here
 * sets up a repository where a file read could answer otherwise than git
 * (a ref that shadows the branch, a packed ref, a symbolic ref, a name that
 * is not a branch) and checks that `sha` and `commit` answer exactly as
 * `git rev-parse --verify <ref>^{commit}` does.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeChangeRepo, type TempRepo } from './git-fixture.js';

const repos: TempRepo[] = [];
afterEach(() => {
  for (const repo of repos.splice(0)) repo.cleanup();
});

/** A repository with `main` and `feature` (one commit apart). */
function repoUnderTest(): TempRepo & { baseSha: string; headSha: string } {
  const repo = makeChangeRepo();
  repos.push(repo);
  return repo;
}

/** git's own answer, or null when git finds no commit. */
function gitAnswer(repo: TempRepo, ref: string): string | null {
  try {
    return execFileSync('git', ['-C', repo.dir, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { encoding: 'utf8', stdio: 'pipe' }).trim();
  } catch {
    return null;
  }
}

/** What the fixture answers, or null when it throws. */
function fixtureAnswer(repo: TempRepo, ref: string): string | null {
  try {
    return repo.sha(ref);
  } catch {
    return null;
  }
}

describe('the git fixture reads branches as git does', () => {
  it('a plain branch, by short and full name, and names that are not branches', () => {
    const repo = repoUnderTest();
    repo.git(['branch', 'team/topic', 'feature']);
    for (const ref of ['main', 'refs/heads/main', 'feature', 'team/topic', 'refs/heads/team/topic', 'HEAD', 'main~0', 'feature~1', repo.headSha]) {
      expect(fixtureAnswer(repo, ref), ref).toBe(gitAnswer(repo, ref));
      expect(fixtureAnswer(repo, ref), ref).not.toBeNull();
    }
    expect(fixtureAnswer(repo, 'feature~1')).toBe(repo.baseSha);
    for (const ref of ['missing', 'refs/heads/missing', 'team', 'team/topic/deeper', '../config', 'refs/heads/../../HEAD', '.hidden']) {
      expect(gitAnswer(repo, ref), ref).toBeNull();
      expect(() => repo.sha(ref), ref).toThrow();
    }
  });

  it('a tag, a ref under refs/ and a file in the git directory of the same name win over the branch, as in git', () => {
    const repo = repoUnderTest();
    for (const name of ['tagged', 'toplevel', 'infile']) repo.git(['branch', name, 'feature']);
    repo.git(['tag', 'tagged', 'main']);
    repo.git(['update-ref', 'refs/toplevel', 'main']);
    writeFileSync(join(repo.dir, '.git', 'infile'), `${repo.baseSha}\n`);
    for (const name of ['tagged', 'toplevel', 'infile']) {
      expect(gitAnswer(repo, name), name).toBe(repo.baseSha);
      expect(fixtureAnswer(repo, name), name).toBe(repo.baseSha);
      // By its full name, the branch itself.
      expect(fixtureAnswer(repo, `refs/heads/${name}`), name).toBe(repo.headSha);
    }
    // A commit made on top of an ambiguous name starts where git says the name points.
    const made = repo.commit('from-tagged', { 'x.txt': 'x\n' }, 'on tagged', 'tagged');
    expect(repo.git(['rev-parse', `${made}^`])).toBe(repo.baseSha);
  });

  it('a tag only in packed-refs still wins over a loose branch of the same name', () => {
    const repo = repoUnderTest();
    repo.git(['tag', 'packedname', 'main']);
    repo.git(['pack-refs']);
    repo.git(['branch', 'packedname', 'feature']);
    expect(gitAnswer(repo, 'packedname')).toBe(repo.baseSha);
    expect(fixtureAnswer(repo, 'packedname')).toBe(repo.baseSha);
    expect(fixtureAnswer(repo, 'refs/heads/packedname')).toBe(repo.headSha);
  });

  it('a packed branch, a symbolic ref and a branch moved by git after a read', () => {
    const repo = repoUnderTest();
    repo.git(['pack-refs', '--all']);
    // A commit on a branch that is only packed builds on its tip.
    const onMain = repo.commit('main', { 'z.txt': 'z\n' });
    expect(repo.git(['rev-parse', `${onMain}^`])).toBe(repo.baseSha);
    repo.git(['update-ref', 'refs/heads/main', repo.baseSha]);
    expect(fixtureAnswer(repo, 'refs/heads/feature')).toBe(gitAnswer(repo, 'refs/heads/feature'));
    expect(fixtureAnswer(repo, 'feature')).toBe(repo.headSha);
    repo.git(['symbolic-ref', 'refs/heads/alias', 'refs/heads/feature']);
    expect(fixtureAnswer(repo, 'refs/heads/alias')).toBe(repo.headSha);
    repo.git(['update-ref', 'refs/heads/feature', repo.baseSha]);
    expect(fixtureAnswer(repo, 'refs/heads/feature')).toBe(repo.baseSha);
    expect(fixtureAnswer(repo, 'refs/heads/alias')).toBe(repo.baseSha);
    const next = repo.commit('feature', { 'y.txt': 'y\n' });
    expect(fixtureAnswer(repo, 'refs/heads/feature')).toBe(next);
    expect(gitAnswer(repo, 'feature')).toBe(next);
  });

  it('a commit on a branch that does not exist yet starts from `from`, or has no parent', () => {
    const repo = repoUnderTest();
    const rooted = repo.commit('fresh-root', { 'a.txt': 'a\n' });
    expect(repo.git(['rev-list', '--count', rooted])).toBe('1');
    const onFeature = repo.commit('fresh/child', { 'b.txt': 'b\n' }, 'child', 'feature');
    expect(repo.git(['rev-parse', `${onFeature}^`])).toBe(repo.headSha);
    expect(repo.sha('refs/heads/fresh/child')).toBe(onFeature);
    expect(() => repo.sha('refs/heads/never-made')).toThrow();
  });
});
