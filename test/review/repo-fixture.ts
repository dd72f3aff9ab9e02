import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export function sh(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' } }).trim();
}

export interface TestRepo {
  readonly dir: string;
  commit(files: Record<string, string>, message: string): string;
  branch(name: string): void;
  switchTo(name: string): void;
  state(): string;
  remove(): void;
}

/** A real git repository in a fresh temp dir with `main` holding a source and a test file. */
export function makeRepo(): TestRepo {
  const dir = mkdtempSync(join(tmpdir(), 'pg-review-repo-'));
  sh(dir, ['init', '-q', '-b', 'main']);
  sh(dir, ['config', 'user.email', 'author@example.com']);
  sh(dir, ['config', 'user.name', 'Author']);
  const repo: TestRepo = {
    dir,
    commit(files, message) {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), text);
      }
      sh(dir, ['add', '-A']);
      sh(dir, ['commit', '-q', '-m', message]);
      return sh(dir, ['rev-parse', 'HEAD']);
    },
    branch(name) {
      sh(dir, ['checkout', '-q', '-b', name]);
    },
    switchTo(name) {
      sh(dir, ['checkout', '-q', name]);
    },
    /** Work tree status plus every ref and HEAD: what no reviewer may change. */
    state() {
      return [sh(dir, ['status', '--porcelain', '--untracked-files=all']), sh(dir, ['for-each-ref']), sh(dir, ['rev-parse', 'HEAD'])].join('\n--\n');
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
  repo.commit(
    { 'src/calc.ts': 'export const add = (a: number, b: number) => a + b;\n', 'test/calc.test.ts': 'add works\n', 'README.md': '# demo\n' },
    'initial',
  );
  return repo;
}

/** Write an executable script into a fresh temp dir and return its path. */
export function writeScript(name: string, text: string): { path: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'pg-review-script-'));
  const path = join(dir, name);
  writeFileSync(path, text);
  chmodSync(path, 0o755);
  return { path, dir };
}
