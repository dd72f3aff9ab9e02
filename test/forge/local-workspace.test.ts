/**
 * The local forge's change workspace: the repository itself, and publishing
 * a new head as one compare-and-swap of the change's branch.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ForgeEvent } from '../../src/forge/port.js';
import { localFixture, rejectionOf, type LocalFixture } from './local-support.js';

let fixture: LocalFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});

const PROTECTED = 'protectedBranches:\n  - main\n';

describe('local forge: change workspace', () => {
  it('prepares the repository itself, and refuses a change whose commits it lacks', async () => {
    fixture = await localFixture(PROTECTED);
    const { forge } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    expect(await forge.workspace.prepare(change)).toBe(forge.repo.root);
    const missing = { ...change, head: { ...change.head, sha: 'f'.repeat(40) } };
    expect(await rejectionOf(forge.workspace.prepare(missing))).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('publishes a new head with compare-and-swap: a head moved by someone else between prepare and publish is HEAD_MOVED, nothing changes', async () => {
    fixture = await localFixture(PROTECTED);
    const { forge, repo } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const dir = await forge.workspace.prepare(change);
    // The repair's result: a commit on top of the head it started from.
    const repaired = repo.git(['commit-tree', `${change.head.sha}^{tree}`, '-p', change.head.sha, '-m', 'repair']);
    // Meanwhile an attacker pushes their own commit to the change's branch.
    const attacker = repo.commit('feature', { 'feature.txt': 'the attacker was here\n' }, 'attacker');
    const events: ForgeEvent[] = [];
    const stop = forge.onEvent((event) => events.push(event));
    const refused = await rejectionOf(forge.workspace.publish(dir, { branch: 'feature', newSha: repaired, expectedOldSha: change.head.sha }));
    stop();
    expect(refused.code).toBe('HEAD_MOVED');
    expect(repo.sha('feature')).toBe(attacker);
    expect((await forge.snapshot(change.id)).head.sha).toBe(attacker);
    expect(events).toEqual([]);
  });

  it('publishes over the expected head, records the push, and refuses other directories and protected branches', async () => {
    fixture = await localFixture(PROTECTED);
    const { forge, repo } = fixture;
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const dir = await forge.workspace.prepare(change);
    const repaired = repo.git(['commit-tree', `${change.head.sha}^{tree}`, '-p', change.head.sha, '-m', 'repair']);
    expect(
      await rejectionOf(forge.workspace.publish(`${dir}/elsewhere`, { branch: 'feature', newSha: repaired, expectedOldSha: change.head.sha })),
    ).toMatchObject({ code: 'INVALID_INPUT' });
    expect(await rejectionOf(forge.workspace.publish(dir, { branch: 'main', newSha: repaired, expectedOldSha: change.base.sha }))).toMatchObject({
      code: 'PROTECTED_BRANCH',
    });
    expect(repo.sha('main')).toBe(change.base.sha);
    const events: ForgeEvent[] = [];
    const stop = forge.onEvent((event) => events.push(event));
    await forge.workspace.publish(dir, { branch: 'feature', newSha: repaired, expectedOldSha: change.head.sha });
    stop();
    expect(repo.sha('feature')).toBe(repaired);
    expect(events).toEqual([{ kind: 'change-synchronized', changeId: change.id, headSha: repaired, deliveryId: expect.any(String) }]);
  });
});
