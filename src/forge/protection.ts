/**
 * Protected branches on any forge, through the port: the trusted branch's
 * config says which branches changes may target, and a change's config comes
 * from its base only while that base is protected and its head is not (the
 * rule itself is `protectedBranchRefusal` in contracts/repo-config.ts).
 */
import { ProofgateError } from '../core/index.js';
import { loadRepoConfigAt, protectedBranchRefusal, type RepoConfig } from '../contracts/repo-config.js';
import type { ChangeSnapshot, Forge } from './port.js';

export interface TrustedConfig {
  readonly branch: string;
  readonly config: RepoConfig;
}

/** `.proofgate.yml` at `ref` through the forge port, by the one trusted-config loader; `label` names the ref in errors. */
async function configAt(forge: Forge, ref: string, label: string): Promise<RepoConfig> {
  return (await loadRepoConfigAt((at, path) => forge.readFile(at, path), ref, label)).config;
}

/** The trusted branch and its config (the empty config when the branch has no `.proofgate.yml`). */
export async function readTrustedConfig(forge: Forge): Promise<TrustedConfig> {
  const branch = await forge.trustedBranch();
  return { branch, config: await configAt(forge, `refs/heads/${branch}`, branch) };
}

/**
 * Refuse (`PROTECTED_BRANCH`) a change whose base is not protected or whose
 * head is. A change whose base is the trusted branch reads the trusted config
 * at the base sha its snapshot just saw (the branch's tip a moment ago): the
 * same bytes as its base config, read once.
 */
export async function requireProtectedChange(forge: Forge, change: Pick<ChangeSnapshot, 'id' | 'base' | 'head'>): Promise<TrustedConfig> {
  const branch = await forge.trustedBranch();
  const at = change.base.ref === branch && /^[0-9a-f]{40}$/.test(change.base.sha) ? change.base.sha : `refs/heads/${branch}`;
  const trusted: TrustedConfig = { branch, config: await configAt(forge, at, branch) };
  const refusal = protectedBranchRefusal({ trustedBranch: trusted.branch, trustedConfig: trusted.config, base: change.base.ref, head: change.head.ref });
  if (refusal !== null)
    throw new ProofgateError('PROTECTED_BRANCH', `change ${change.id}: ${refusal}`, { changeId: change.id, base: change.base.ref, head: change.head.ref });
  return trusted;
}

/**
 * The config a change runs under: `.proofgate.yml` at its base sha, read only
 * after the change passed the protected-branch rule (else `PROTECTED_BRANCH`).
 */
export async function readChangeConfig(forge: Forge, snapshot: ChangeSnapshot): Promise<RepoConfig> {
  await requireProtectedChange(forge, snapshot);
  return configAt(forge, snapshot.base.sha, `${snapshot.base.ref}@${snapshot.base.sha.slice(0, 12)}`);
}

/**
 * Refuse (`PROTECTED_BRANCH`) a push anywhere but the change's own head ref,
 * and to a head ref that is protected: the guard every repair push passes.
 */
export async function requireOwnHeadPush(forge: Forge, change: Pick<ChangeSnapshot, 'id' | 'base' | 'head'>, branch: string): Promise<void> {
  const target = branch.replace(/^refs\/heads\//, '');
  if (target !== change.head.ref) {
    throw new ProofgateError('PROTECTED_BRANCH', `change ${change.id}: a repair pushes only to the change's head "${change.head.ref}", not to "${branch}"`, {
      changeId: change.id,
      branch,
    });
  }
  // The head is never protected: that is half of the rule the change must still pass.
  await requireProtectedChange(forge, change);
}
