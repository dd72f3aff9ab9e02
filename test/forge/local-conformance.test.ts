import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLocalForge } from '../../src/forge/local/index.js';
import { forgeConformance } from './conformance.js';
import { makeChangeRepo } from './git-fixture.js';

const CONFIG = ['maintainers:', '  - login: alice', '    permission: admin', '  - bob', ''].join('\n');

forgeConformance('local', async () => {
  const repo = makeChangeRepo(CONFIG);
  const dataDir = mkdtempSync(join(tmpdir(), 'proofgate-forge-data-'));
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir });
  const change = await opened.forge.openChange({ head: 'feature', base: 'main', author: 'carol' });
  return {
    forge: opened.forge,
    changeId: change.id,
    moveHead: async () => repo.commit('feature', { 'feature.txt': 'new feature, take two\n' }, 'second take'),
    makeUnmergeable: async () => {
      repo.commit('main', { 'feature.txt': 'a different feature on main\n' }, 'conflicting base commit');
    },
    baseSha: async () => repo.sha('refs/heads/main'),
    maintainer: { login: 'alice', permission: 'admin' },
    outsider: 'mallory',
    cleanup: async () => {
      await opened.close();
      repo.cleanup();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
