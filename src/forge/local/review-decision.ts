/**
 * The local forge's review decision. A trusted config that asks for
 * `requiredApprovals: N` makes a change need N maintainers' approvals of its
 * current head. The approvals themselves are the approval records the
 * automerge layer keeps for `/proofgate approve` (one record kind for every
 * use); it hands the forge a reader of them (`useApprovals`), and the forge
 * counts: distinct approvers with write permission or more under the trusted
 * branch's config, the change's author never among them. Without a reader no
 * approval can be read, so the change stays REVIEW_REQUIRED.
 */
import { sameLogin, type RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, RepoPermission, ReviewDecision } from '../port.js';

/** One approval that binds the snapshot's current head (the reader checks the binding). */
export interface HeadApproval {
  readonly login: string;
}

/**
 * Reads the approvals of exactly the snapshot's current head under `config`
 * (the base's trusted config); an approval of another head is not returned.
 */
export type ApprovalReader = (snapshot: ChangeSnapshot, config: RepoConfig) => Promise<readonly HeadApproval[]>;

const APPROVER_PERMISSIONS: readonly RepoPermission[] = ['admin', 'maintain', 'write'];

/**
 * The review decision of an open change (pure but for the reader): null
 * when its base's config requires no approval; APPROVED when `required`
 * distinct approvers who may approve (write or more, by `permission`) and
 * are not the author approved its head; REVIEW_REQUIRED otherwise.
 */
export async function localReviewDecision(
  snapshot: ChangeSnapshot,
  config: RepoConfig,
  permission: (login: string) => RepoPermission,
  reader: ApprovalReader | null,
): Promise<ReviewDecision | null> {
  const required = config.requiredApprovals ?? 0;
  if (required === 0 || snapshot.state !== 'open') return null;
  if (reader === null) return 'REVIEW_REQUIRED';
  const approvers: string[] = [];
  for (const approval of await reader(snapshot, config)) {
    if (sameLogin(approval.login, snapshot.author.login)) continue;
    if (!APPROVER_PERMISSIONS.includes(permission(approval.login))) continue;
    if (approvers.some((login) => sameLogin(login, approval.login))) continue;
    approvers.push(approval.login);
  }
  return approvers.length >= required ? 'APPROVED' : 'REVIEW_REQUIRED';
}
