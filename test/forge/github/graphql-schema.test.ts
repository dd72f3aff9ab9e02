/**
 * Every GraphQL document proofgate sends is checked against GitHub's
 * published schema (`@octokit/graphql-schema`, a devDependency): a field
 * GitHub does not have, a wrong argument or a fragment on the wrong type
 * would otherwise only show on a live GitHub, where the test server (which
 * models only what proofgate reads) cannot catch it.
 */
import { schema as published } from '@octokit/graphql-schema';
import { buildSchema, parse, validate, type GraphQLSchema } from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEQUEUE_MUTATION, ENQUEUE_MUTATION, MERGE_GROUP_QUERY, PULL_REQUEST_ID_QUERY, SNAPSHOT_QUERY } from '../../../src/forge/github/snapshot-query.js';

let schema: GraphQLSchema;

beforeAll(() => {
  schema = buildSchema(published.idl, { assumeValidSDL: true });
});

const problems = (document: string): string[] => validate(schema, parse(document)).map((error) => error.message);

describe("proofgate's GraphQL documents against GitHub's published schema", () => {
  it('the pull request snapshot query (with the base ref protection rule and ruleset rules) is valid', () => {
    expect(problems(SNAPSHOT_QUERY)).toEqual([]);
  });

  it("the merge queue's documents are valid: the snapshot's MERGE_QUEUE rule, queue entry and latest removal, the merge group's checks, the node id query, enqueue and dequeue", () => {
    for (const field of ['... on MergeQueueParameters { mergeMethod }', 'mergeQueueEntry { position state enqueuedAt }', '... on RemovedFromMergeQueueEvent']) {
      expect(SNAPSHOT_QUERY).toContain(field);
    }
    expect(problems(PULL_REQUEST_ID_QUERY)).toEqual([]);
    expect(problems(MERGE_GROUP_QUERY)).toEqual([]);
    expect(problems(ENQUEUE_MUTATION)).toEqual([]);
    expect(problems(DEQUEUE_MUTATION)).toEqual([]);
    // The enqueue is pinned to the reviewed head: its input type carries expectedHeadOid, and the document passes the input whole.
    expect(ENQUEUE_MUTATION).toContain('enqueuePullRequest(input: $input)');
    expect(problems(ENQUEUE_MUTATION.replace('EnqueuePullRequestInput!', 'DequeuePullRequestInput!')).join('\n')).toMatch(/DequeuePullRequestInput/);
  });

  it('the check can fail: a field GitHub does not have, and a fragment on a type the union lacks', () => {
    const unknownField = SNAPSHOT_QUERY.replace('requiresStatusChecks', 'requiresStatusChecksPlease');
    expect(problems(unknownField).join('\n')).toMatch(/Cannot query field "requiresStatusChecksPlease" on type "BranchProtectionRule"/);
    const wrongFragment = SNAPSHOT_QUERY.replace('... on RequiredStatusChecksParameters', '... on PullRequest');
    expect(problems(wrongFragment).join('\n')).toMatch(/Fragment cannot be spread here/);
    const unknownItem = SNAPSHOT_QUERY.replace('REMOVED_FROM_MERGE_QUEUE_EVENT', 'REMOVED_FROM_THE_QUEUE_EVENT');
    expect(problems(unknownItem).join('\n')).toMatch(/REMOVED_FROM_THE_QUEUE_EVENT/);
    expect(problems(ENQUEUE_MUTATION.replace('mergeQueueEntry {', 'queueEntry {')).join('\n')).toMatch(/Cannot query field "queueEntry"/);
  });
});
