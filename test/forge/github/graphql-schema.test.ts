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
import { SNAPSHOT_QUERY } from '../../../src/forge/github/snapshot-query.js';

let schema: GraphQLSchema;

beforeAll(() => {
  schema = buildSchema(published.idl, { assumeValidSDL: true });
});

const problems = (document: string): string[] => validate(schema, parse(document)).map((error) => error.message);

describe("proofgate's GraphQL documents against GitHub's published schema", () => {
  it('the pull request snapshot query (with the base ref protection rule and ruleset rules) is valid', () => {
    expect(problems(SNAPSHOT_QUERY)).toEqual([]);
  });

  it('the check can fail: a field GitHub does not have, and a fragment on a type the union lacks', () => {
    const unknownField = SNAPSHOT_QUERY.replace('requiresStatusChecks', 'requiresStatusChecksPlease');
    expect(problems(unknownField).join('\n')).toMatch(/Cannot query field "requiresStatusChecksPlease" on type "BranchProtectionRule"/);
    const wrongFragment = SNAPSHOT_QUERY.replace('... on RequiredStatusChecksParameters', '... on PullRequest');
    expect(problems(wrongFragment).join('\n')).toMatch(/Fragment cannot be spread here/);
  });
});
