import { forgeConformance } from '../conformance.js';
import { startHarness } from './harness.js';

forgeConformance('github (API test server)', async () => {
  const harness = await startHarness();
  const { model } = harness.server;
  model.setCollaborator('maintainer-mia', 'maintain');
  model.user('outsider-olaf');
  const pr = model.openPullRequest({ author: 'contributor-carl', title: 'Add a feature' });
  return {
    forge: harness.forge,
    changeId: String(pr.number),
    async moveHead() {
      return model.pushHead(pr.number);
    },
    async makeUnmergeable() {
      model.setBranch(pr.baseRef, model.commit({ parent: model.baseSha(pr.number), files: { [`change-${pr.number}.txt`]: 'conflict\n' } }));
      model.setMergeable(pr.number, 'CONFLICTING');
    },
    async baseSha() {
      return model.baseSha(pr.number);
    },
    maintainer: { login: 'maintainer-mia', permission: 'maintain' },
    outsider: 'outsider-olaf',
    cleanup: () => harness.close(),
  };
});
