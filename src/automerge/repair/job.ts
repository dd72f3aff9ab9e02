import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportCommit, prepareJobDir } from '../../host/index.js';

/**
 * A repair job: an export of one exact commit (no `.git`, nothing pointing
 * back at the repository) that an untrusted command (agent-fix, the gate)
 * runs in. `jobDir` is the command's only writable tree: the exported `tree`
 * (its working directory), a scratch `home` and `tmp`. What proofgate keeps
 * for itself (the index it commits the result through) lives in `private`,
 * beside the job dir and never inside it. `dispose()` removes it all and never
 * throws, so it can run in a `finally`.
 */
export interface RepairJob {
  readonly jobDir: string;
  readonly tree: string;
  readonly home: string;
  readonly tmp: string;
  readonly private: string;
  dispose(): Promise<void>;
}

export async function openJob(repoDir: string, sha: string): Promise<RepairJob> {
  const root = await mkdtemp(join(tmpdir(), 'proofgate-repair-job-'));
  const dispose = () => rm(root, { recursive: true, force: true }).catch(() => undefined);
  try {
    // bubblewrap runs as the jail's uid and must reach the job dir to mount it.
    await chmod(root, 0o711);
    const jobDir = join(root, 'job');
    const privateDir = join(root, 'private');
    const tree = join(jobDir, 'tree');
    const home = join(jobDir, 'home');
    const tmp = join(jobDir, 'tmp');
    await mkdir(privateDir, { mode: 0o700 });
    await mkdir(jobDir, { mode: 0o700 });
    await Promise.all([mkdir(home), mkdir(tmp)]);
    await exportCommit(repoDir, sha, tree);
    await prepareJobDir(jobDir);
    return { jobDir, tree, home, tmp, private: privateDir, dispose };
  } catch (error) {
    await dispose();
    throw error;
  }
}
