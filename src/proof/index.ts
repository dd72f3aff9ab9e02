/**
 * Live proof: scenarios from the trusted config, admission of a proof
 * command (pure), plans and their digests, the review's proof budget and
 * deadlines (pure), and evidence bundles (pack and verify). See docs/proof.md.
 */
export * from './scenarios.js';
export * from './plan.js';
export * from './admission.js';
export * from './budget.js';
export * from './evidence/index.js';
export * from './session.js';
export * from './producers/types.js';
export { localProducer, type LocalProducerOptions } from './producers/local.js';
export { githubWorkflowProducer, proofRunName, BUNDLE_ENTRY_NAME, type GitHubWorkflowProducerOptions } from './producers/github-workflow.js';
