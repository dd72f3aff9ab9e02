/**
 * Fencing a job's forge writes by its lease. A worker can be paused (not
 * killed) past its lease while another process takes the lease over and runs
 * the change; when the paused one resumes, it must stop before its next
 * effect. `fencedForge` wraps the forge for one change and one lease owner:
 * every write (a comment created or edited, labels added or removed, a merge
 * or an entry in or out of the forge's merge queue,
 * a branch push or deletion, the workspace's publish of a repair) first reads the
 * change's lease afresh and goes on only while `owner` still holds it, else
 * it is `LEASE_LOST` and the forge is not called. Reads pass through.
 *
 * What this cannot close: a write already sent when the lease is taken (the
 * check and the forge call are two steps, and a pause can fall between them)
 * still lands. The forge's own compare-and-swap bounds what it can do: a
 * merge names the exact head it was decided on, a push names the head it
 * replaces, and the status and review comments are found again by their
 * signed markers before one is created, so a late write edits the comment the
 * new holder also edits rather than adding another.
 */
import { ProofgateError } from '../../core/index.js';
import type { ChangeSnapshot, DeleteBranchRequest, Forge, MergeRequest, PushRequest } from '../../forge/port.js';
import type { LedgerStore } from './ledger-store.js';

/**
 * The forge as one job of `changeId` sees it: its writes are made only while
 * `owner` holds the change's lease in `store` (`LEASE_LOST` otherwise, before
 * the forge is called). A write naming another change is refused
 * (`INTERNAL`): a job writes to its own change only.
 */
export function fencedForge(forge: Forge, store: LedgerStore, changeId: string, owner: string): Forge {
  const guard = async (target: string | null): Promise<void> => {
    if (target !== null && target !== changeId) {
      throw new ProofgateError('INTERNAL', `the job of change ${changeId} may not write to change ${target}`, { changeId, target });
    }
    await store.requireLease(changeId, owner);
  };
  return {
    kind: forge.kind,
    selfLogin: forge.selfLogin,
    snapshot: (id: string) => forge.snapshot(id),
    readFile: (ref: string, path: string) => forge.readFile(ref, path),
    permission: (login: string) => forge.permission(login),
    trustedBranch: () => forge.trustedBranch(),
    // The merge queue fences its own effects by the base's queue lease (src/automerge/queue/).
    ...(forge.mergeQueue === undefined ? {} : { mergeQueue: forge.mergeQueue }),
    async createComment(id: string, body: string) {
      await guard(id);
      return forge.createComment(id, body);
    },
    async editComment(id: string, commentId: string, body: string) {
      await guard(id);
      return forge.editComment(id, commentId, body);
    },
    async addLabels(id: string, labels: readonly string[]) {
      await guard(id);
      return forge.addLabels(id, labels);
    },
    async removeLabel(id: string, label: string) {
      await guard(id);
      return forge.removeLabel(id, label);
    },
    async merge(id: string, request: MergeRequest) {
      await guard(id);
      return forge.merge(id, request);
    },
    async pushBranch(request: PushRequest) {
      await guard(null);
      return forge.pushBranch(request);
    },
    ...(forge.enqueue === undefined
      ? {}
      : {
          async enqueue(id: string, request: { readonly expectedHeadSha: string }) {
            await guard(id);
            return (forge.enqueue as NonNullable<Forge['enqueue']>).call(forge, id, request);
          },
        }),
    ...(forge.dequeue === undefined
      ? {}
      : {
          async dequeue(id: string) {
            await guard(id);
            return (forge.dequeue as NonNullable<Forge['dequeue']>).call(forge, id);
          },
        }),
    ...(forge.deleteBranch === undefined
      ? {}
      : {
          async deleteBranch(request: DeleteBranchRequest) {
            await guard(null);
            return forge.deleteBranch?.(request);
          },
        }),
    workspace: {
      prepare: (snapshot: ChangeSnapshot) => forge.workspace.prepare(snapshot),
      async publish(dir: string, request: PushRequest) {
        await guard(null);
        return forge.workspace.publish(dir, request);
      },
    },
  };
}
