/**
 * What the tests of GitHub's merge queue share: a base whose ruleset requires
 * the queue with one pull request on it, a loop's outcome, and proofgate's
 * status comment on that pull request.
 */
import { expect } from 'vitest';
import type { JobResult, LoopOutcome } from '../../../src/automerge/loop/index.js';
import { within } from '../../support/wait.js';
import { CONFIG, SELF, type GitHubLoop } from '../../e2e/github-support.js';

/**
 * main with the trusted config and a MERGE_QUEUE ruleset, and PR #1 from
 * `feature` (by `author`, `title`) with a pending `ci` check. An author named
 * gets read permission on the repository.
 */
export function openQueuedBase(l: GitHubLoop, options: { readonly author?: string; readonly title?: string } = {}): { head: string; runId: number } {
  const base = l.repo.commit('main', { 'README.md': '# demo\n', '.proofgate.yml': CONFIG }, 'initial');
  const head = l.repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  l.syncRemote();
  const { model } = l.server;
  model.setBranch('main', l.mirrorCommit(base));
  l.mirrorCommit(head, base);
  model.addRuleset('main', { name: 'merge queue', mergeQueue: true });
  if (options.author !== undefined) model.setCollaborator(options.author, 'read');
  const pr = model.openPullRequest({ author: options.author ?? 'casey', head: 'feature', headSha: head, title: options.title ?? 'Add feature' });
  expect(pr.number).toBe(1);
  return { head, runId: model.addCheckRun({ sha: head, name: 'ci', status: 'in_progress' }).id };
}

/** The outcome of a loop a command started (its job ran here). */
export async function outcomeOf(done: Promise<JobResult> | undefined): Promise<LoopOutcome> {
  if (done === undefined) throw new Error('no job was dispatched');
  const result = await within(done, 'the loop did not end');
  if (result.kind !== 'ran') throw new Error('job held elsewhere');
  return result.outcome;
}

/** proofgate's automerge comments on PR #1, joined. */
export const statusComment = (l: GitHubLoop): string =>
  l.server.model
    .commentsOf(1)
    .filter((c) => c.author === SELF && c.body.includes('automerge'))
    .map((c) => c.body)
    .join('\n');
