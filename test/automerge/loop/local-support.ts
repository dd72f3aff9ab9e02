/**
 * A real git repository with a trusted `.proofgate.yml` on main, a local
 * forge and the local automerge wiring on a temp data directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLocalForge, type LocalForge } from '../../../src/forge/local/index.js';
import { openLocalAutomerge, type JobResult, type LocalAutomerge, type LocalAutomergeOptions, type LoopProgress } from '../../../src/automerge/loop/index.js';
import { makeSeededRepo, type TempRepo } from '../../forge/git-fixture.js';

export const MAINTAINER = 'Tess Tester';

/** The outcome of a dispatched job that this process ran (fails the test otherwise). */
export async function finished(done: Promise<JobResult> | undefined) {
  if (done === undefined) throw new Error('no job was dispatched');
  const result = await done;
  if (result.kind !== 'ran') throw new Error(`job held elsewhere by ${result.holder.owner}`);
  return result.outcome;
}

export function repoConfig(extra = ''): string {
  return [
    'maintainers:',
    `  - login: ${MAINTAINER}`,
    '    permission: admin',
    'checks:',
    '  - name: test',
    '    run: node check.mjs',
    'review:',
    '  lanes:',
    '    - id: rules',
    '      builtin: rules',
    '    - id: tests',
    '      builtin: tests',
    extra,
  ].join('\n');
}

/** The check every fixture repository runs: fails when `broken.txt` exists. */
export const CHECK_SCRIPT =
  "import { existsSync } from 'node:fs';\nif (existsSync('broken.txt')) { console.error('broken.txt is present'); process.exit(1); }\nconsole.log('ok');\n";

export interface LoopFixture {
  readonly repo: TempRepo;
  readonly forge: LocalForge;
  readonly automerge: LocalAutomerge;
  readonly dataDir: string;
  readonly progress: LoopProgress[];
  /** Open a change from `branch` (created from main with `files`). */
  openChange(branch: string, files: Record<string, string | null>, title?: string): Promise<string>;
  /** Post a comment as `author` (default the maintainer) and route it. */
  command(changeId: string, body: string, author?: string): ReturnType<LocalAutomerge['router']['handleComment']>;
  cleanup(): Promise<void>;
}

export async function loopFixture(options: { config?: string; automerge?: Partial<LocalAutomergeOptions> } = {}): Promise<LoopFixture> {
  const repo = makeSeededRepo('proofgate-automerge-', {
    'README.md': '# demo\n',
    'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n',
    'check.mjs': CHECK_SCRIPT,
    '.proofgate.yml': options.config ?? repoConfig(),
  });
  const dataDir = mkdtempSync(join(tmpdir(), 'proofgate-automerge-data-'));
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir });
  const progress: LoopProgress[] = [];
  const automerge = await openLocalAutomerge({
    forge: opened.forge,
    dataDir,
    waits: { transientPollMs: 200, shepherdPollMs: 200 },
    onProgress: (line) => progress.push(line),
    ...options.automerge,
  });
  return {
    repo,
    forge: opened.forge,
    automerge,
    dataDir,
    progress,
    async openChange(branch, files, title) {
      repo.commit(branch, files, title ?? `change ${branch}`, 'main');
      const snapshot = await opened.forge.openChange({ head: branch, base: 'main', author: 'Casey Contributor', ...(title === undefined ? {} : { title }) });
      return snapshot.id;
    },
    async command(changeId, body, author = MAINTAINER) {
      const comment = await opened.forge.commentAs(changeId, body, author);
      return automerge.router.handleComment(changeId, comment);
    },
    async cleanup() {
      await automerge.close();
      await opened.close();
      repo.cleanup();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
