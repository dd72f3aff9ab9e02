/**
 * The forge conformance suite: the same tests for every `Forge` adapter.
 *
 *   forgeConformance('local', async () => ({ forge, changeId, moveHead, makeUnmergeable, baseSha, maintainer, outsider, cleanup }));
 *
 * `setup` is called once per test and must return a FRESH open change that is
 * mergeable as it stands (no conflicts, nothing blocking a merge):
 *
 * - `forge`: the adapter under test.
 * - `changeId`: the id of that change (what `snapshot(changeId)` takes).
 * - `moveHead()`: push one more commit to the change's head branch from
 *   OUTSIDE the forge (like a contributor would); resolves to the new head sha.
 * - `makeUnmergeable()`: make the change conflict with its base (e.g. a
 *   conflicting commit on the base branch); afterwards a snapshot must say
 *   `mergeable: 'CONFLICTING'`.
 * - `baseSha()`: the base branch sha right now, read outside the forge, so
 *   the suite can prove a refused merge changed nothing.
 * - `maintainer`: a login the repository grants `permission` (at least
 *   `write`); `outsider`: a login with no grant (`read` or `none` expected).
 * - `cleanup()` (optional): release what setup made.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import type { Forge, RepoPermission } from '../../src/forge/port.js';

export interface ForgeConformanceSetup {
  readonly forge: Forge;
  readonly changeId: string;
  moveHead(): Promise<string>;
  makeUnmergeable(): Promise<void>;
  baseSha(): Promise<string>;
  readonly maintainer: { readonly login: string; readonly permission: RepoPermission };
  readonly outsider: string;
  cleanup?(): Promise<void>;
}

const SHA = /^[0-9a-f]{40}$/;

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject');
}

export function forgeConformance(name: string, setup: () => Promise<ForgeConformanceSetup>): void {
  describe(`forge conformance: ${name}`, () => {
    let current: ForgeConformanceSetup | undefined;
    const open = async (): Promise<ForgeConformanceSetup> => {
      current = await setup();
      return current;
    };
    afterEach(async () => {
      await current?.cleanup?.();
      current = undefined;
    });

    it('reads a snapshot of an open change in one call', async () => {
      const { forge, changeId, baseSha } = await open();
      const snapshot = await forge.snapshot(changeId);
      expect(snapshot.id).toBe(changeId);
      expect(snapshot.state).toBe('open');
      expect(snapshot.number).toBeGreaterThan(0);
      expect(snapshot.base.ref).not.toBe('');
      expect(snapshot.head.ref).not.toBe('');
      expect(snapshot.base.sha).toMatch(SHA);
      expect(snapshot.head.sha).toMatch(SHA);
      expect(snapshot.base.sha).toBe(await baseSha());
      expect(snapshot.head.sha).not.toBe(snapshot.base.sha);
      expect(snapshot.author.login).not.toBe('');
      expect(snapshot.mergeable).toBe('MERGEABLE');
      expect(snapshot.mergeCommitSha).toBeNull();
      expect(Array.isArray(snapshot.labels)).toBe(true);
      expect(Array.isArray(snapshot.comments)).toBe(true);
      for (const check of snapshot.checks) expect(check.headSha).toBe(snapshot.head.sha);
    });

    it('creates a comment and edits it in place', async () => {
      const { forge, changeId } = await open();
      const created = await forge.createComment(changeId, 'first words');
      expect(created.body).toBe('first words');
      expect(created.author).toBe(forge.selfLogin);
      const edited = await forge.editComment(changeId, created.id, 'second words');
      expect(edited.id).toBe(created.id);
      expect(edited.body).toBe('second words');
      expect(edited.createdAt).toBe(created.createdAt);
      const snapshot = await forge.snapshot(changeId);
      const mine = snapshot.comments.filter((comment) => comment.id === created.id);
      expect(mine).toHaveLength(1);
      expect(mine[0]?.body).toBe('second words');
      expect(mine[0]?.author).toBe(forge.selfLogin);
    });

    it('adds and removes labels', async () => {
      const { forge, changeId } = await open();
      await forge.addLabels(changeId, ['conformance-a', 'conformance-b']);
      await forge.addLabels(changeId, ['conformance-b']);
      let labels = (await forge.snapshot(changeId)).labels;
      expect(labels.filter((label) => label === 'conformance-a')).toHaveLength(1);
      expect(labels.filter((label) => label === 'conformance-b')).toHaveLength(1);
      await forge.removeLabel(changeId, 'conformance-a');
      labels = (await forge.snapshot(changeId)).labels;
      expect(labels).not.toContain('conformance-a');
      expect(labels).toContain('conformance-b');
    });

    it('squash-merges at exactly the expected head', async () => {
      const { forge, changeId, baseSha } = await open();
      const before = await forge.snapshot(changeId);
      const result = await forge.merge(changeId, { expectedHeadSha: before.head.sha, title: 'Conformance merge', message: 'merged by the suite' });
      expect(result.merged).toBe(true);
      expect(result.sha).toMatch(SHA);
      expect(result.sha).not.toBe(before.base.sha);
      const after = await forge.snapshot(changeId);
      expect(after.state).toBe('merged');
      expect(after.mergeCommitSha).toBe(result.sha);
      expect(await baseSha()).toBe(result.sha);
    });

    it('refuses a merge when the head moved (HEAD_MOVED) and changes nothing', async () => {
      const { forge, changeId, moveHead, baseSha } = await open();
      const reviewed = await forge.snapshot(changeId);
      const newHead = await moveHead();
      expect(newHead).not.toBe(reviewed.head.sha);
      const error = await rejection(forge.merge(changeId, { expectedHeadSha: reviewed.head.sha, title: 'stale', message: '' }));
      expect(isProofgateError(error, 'HEAD_MOVED')).toBe(true);
      const after = await forge.snapshot(changeId);
      expect(after.state).toBe('open');
      expect(after.head.sha).toBe(newHead);
      expect(after.mergeCommitSha).toBeNull();
      expect(await baseSha()).toBe(reviewed.base.sha);
    });

    it('refuses a merge when the change is not mergeable (NOT_MERGEABLE) and changes nothing', async () => {
      const { forge, changeId, makeUnmergeable, baseSha } = await open();
      await makeUnmergeable();
      const snapshot = await forge.snapshot(changeId);
      expect(snapshot.mergeable).toBe('CONFLICTING');
      const baseBefore = await baseSha();
      const error = await rejection(forge.merge(changeId, { expectedHeadSha: snapshot.head.sha, title: 'conflict', message: '' }));
      expect(isProofgateError(error, 'NOT_MERGEABLE')).toBe(true);
      const after = await forge.snapshot(changeId);
      expect(after.state).toBe('open');
      expect(after.mergeCommitSha).toBeNull();
      expect(await baseSha()).toBe(baseBefore);
    });

    it('looks up repository permissions', async () => {
      const { forge, maintainer, outsider } = await open();
      expect(await forge.permission(maintainer.login)).toBe(maintainer.permission);
      expect(['read', 'none']).toContain(await forge.permission(outsider));
    });
  });
}
