import { z } from 'zod';
import type { JsonValue } from '../core/index.js';

/**
 * Stored events of an automerge change stream (`automerge/change/<id>`),
 * version 1. Three event types: `ledger` (one ledger record: a delivered
 * comment's commands or an outcome the router recorded), `lease` (who runs
 * the change's job, until when) and `step` (what the router and the loop did).
 * The ledger store validates every event it reads against these schemas;
 * anything else is `INVALID_STORED_VALUE` naming the event and the field.
 * Steps are a log: every step has a name and a time, and the steps that
 * recovery or a decision reads (`knownStepSchema`) have a fixed shape.
 */
const name = z.string().min(1);
const text = z.string();
const time = z.string().min(1);
/** A full git object id (sha-1 or sha-256), lower case. */
const sha = z.string().regex(/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/, 'expected a full lower-case commit sha');

export const jsonValueSchema: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(jsonValueSchema), z.record(z.string(), jsonValueSchema)]),
);

export const verdictSchema = z.enum(['CONFIRMED', 'REFUTED', 'HOLD']);
export const repairKindSchema = z.enum(['rebase', 'fix-checks', 'fix-findings']);

const located = { line: z.number().int().min(1), source: text };

/** A parsed maintainer command as the ledger keeps it (`ParsedCommand`). */
export const parsedCommandSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.enum(['automerge', 'stop', 'review', 'rebase', 'status']), ...located }),
  z.strictObject({ kind: z.literal('proof'), scenarios: z.array(name), sha: name.nullable(), ...located }),
  z.strictObject({ kind: z.literal('approve'), sha: name.nullable(), ...located }),
  z.strictObject({ kind: z.literal('unknown'), text, ...located }),
  z.strictObject({
    kind: z.literal('invalid'),
    command: z.enum(['automerge', 'stop', 'review', 'rebase', 'status', 'proof', 'approve']),
    reason: text,
    text,
    ...located,
  }),
]);

export const commandDeliverySchema = z.strictObject({
  comment: z.strictObject({ id: name, author: name, updatedAt: time }),
  commands: z.array(parsedCommandSchema),
});

/** One ledger record: the commands of a delivered comment version, or an outcome. */
export const ledgerRecordSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('commands'), delivery: commandDeliverySchema }),
  z.strictObject({ type: z.literal('review-dispatched'), id: name, head: sha, at: time }),
  z.strictObject({ type: z.literal('review-finished'), id: name, head: sha, verdict: verdictSchema.nullable(), at: time }),
  z.strictObject({
    type: z.literal('repair-dispatched'),
    id: name,
    head: sha,
    repair: repairKindSchema,
    automatic: z.boolean(),
    reason: text,
    at: time,
  }),
  z.strictObject({
    type: z.literal('repair-finished'),
    id: name,
    result: z.enum(['pushed', 'no-change', 'failed']),
    newHead: sha.nullable(),
    commits: z.array(sha),
    at: time,
  }),
  z.strictObject({ type: z.literal('merge-failed'), id: name, head: sha, code: name, at: time }),
  z.strictObject({ type: z.literal('merged'), id: name, head: sha, mergeCommit: sha, at: time }),
  z.strictObject({ type: z.literal('note'), id: name, text, at: time }),
]);

/** Data of a `ledger` event. */
export const ledgerEventSchema = z.strictObject({ record: ledgerRecordSchema });

/** Data of a `lease` event. */
export const leaseEventSchema = z.strictObject({ owner: name, until: time, released: z.boolean() });

/** Data of any `step` event: its name, its time and JSON details. */
export const stepEventSchema = z.object({ step: name, at: time }).catchall(jsonValueSchema);

/** How one run of a change's automerge loop ends (`LoopOutcome.kind`; the `job-finished` step records it). */
export const LOOP_OUTCOME_KINDS = ['merged', 'stopped', 'blocked', 'waiting', 'interrupted', 'parked'] as const;
export const loopOutcomeKindSchema = z.enum(LOOP_OUTCOME_KINDS);
/** The wait windows of the loop (src/automerge/loop/waits.ts). */
export const waitWindowKindSchema = z.enum(['shepherd', 'transient', 'review']);
const instant = z.iso.datetime();

const finding = z.strictObject({ title: text, evidence: text, path: text.optional(), line: z.number().optional() });
const checksStep = <K extends string>(step: K) => z.strictObject({ step: z.literal(step), at: time, head: sha });

/**
 * The steps that recovery or a decision reads, told apart by `step`; their
 * data has exactly this shape:
 * - `repair-push`: a repair's push intent, recorded before its compare-and-swap
 *   push (recovery tells a push that landed by it);
 * - `checks-started`, `checks-finished`, `checks-recovered`: the loop started,
 *   saw finish, or ran again the checks of a head (a start without a later
 *   finish was cut short);
 * - `merge-attempt`: a merge of `head` was attempted (a merge the forge shows
 *   but the ledger lacks is recorded from it);
 * - `review-verdict`: a review's verdict and its findings (a fix-findings
 *   repair reads them);
 * - `wait-parked`: a loop run with `park` ended in an open wait window (its
 *   kind, head, opening time, deadline and poll interval, and when the change
 *   should run again); the next run takes the window back from it, so its
 *   deadline holds across runs;
 * - `job-finished`: a job ended (its owner, the outcome kind, the reason, and
 *   for `parked` the time to run it again);
 * - `proof-admitted`: a `@proofgate proof` comment was admitted: the stored
 *   decision (`proof-admission.v1`: the captured head and the scenario
 *   allowlist), which a later edit of the comment cannot widen or retarget.
 */
export const knownStepSchema = z.discriminatedUnion('step', [
  z.strictObject({
    step: z.literal('repair-push'),
    at: time,
    repair: name,
    branch: name,
    oldSha: sha.nullable(),
    newSha: sha,
    commits: z.array(sha),
  }),
  checksStep('checks-started'),
  checksStep('checks-finished'),
  checksStep('checks-recovered'),
  z.strictObject({ step: z.literal('merge-attempt'), at: time, attempt: name, head: sha }),
  z.strictObject({
    step: z.literal('review-verdict'),
    at: time,
    review: name,
    head: sha,
    verdict: verdictSchema,
    comment: name,
    reviewRef: text,
    run: name.nullable(),
    findings: z.array(finding),
  }),
  z.strictObject({
    step: z.literal('wait-parked'),
    at: time,
    window: waitWindowKindSchema,
    head: sha,
    openedAt: instant,
    deadline: instant,
    pollMs: z.number().int().min(0),
    wakeAt: instant,
    reason: text,
  }),
  z.strictObject({
    step: z.literal('job-finished'),
    at: time,
    owner: name,
    outcome: loopOutcomeKindSchema,
    reason: text,
    wakeAt: instant.optional(),
  }),
  z.strictObject({
    step: z.literal('proof-admitted'),
    at: time,
    decision: z.strictObject({
      schema: z.literal('proof-admission.v1'),
      changeId: name,
      commentId: name,
      requestedBy: name,
      headSha: sha,
      selection: z.enum(['named', 'configured']),
      allowlist: z.array(name),
      command: z.strictObject({ scenarios: z.array(name), sha: sha.nullable() }),
      admittedAt: time,
    }),
  }),
]);

/** The names of the steps `knownStepSchema` checks. */
export const AUTOMERGE_STEP_NAMES: ReadonlySet<string> = new Set(knownStepSchema.options.map((option) => option.shape.step.value));

/** Event type -> schema of its data. */
export const AUTOMERGE_EVENT_SCHEMAS = {
  ledger: ledgerEventSchema,
  lease: leaseEventSchema,
  step: stepEventSchema,
} as const;

export type AutomergeEventType = keyof typeof AUTOMERGE_EVENT_SCHEMAS;
export type StoredLedgerRecord = z.infer<typeof ledgerRecordSchema>;
export type StoredLease = z.infer<typeof leaseEventSchema>;
export type StoredStep = z.infer<typeof stepEventSchema>;
export type KnownStep = z.infer<typeof knownStepSchema>;
export type KnownStepName = KnownStep['step'];
export type KnownStepOf<K extends KnownStepName> = Extract<KnownStep, { step: K }>;

/**
 * Stored events of a merge queue stream (`automerge/queue/<base>`), version
 * 1: one stream per protected base, appended at the revision each decision
 * was made on (src/automerge/queue/). Every event read is validated against
 * these schemas; anything else is `INVALID_STORED_VALUE`.
 */
const queueFailureSchema = z.strictObject({ check: name.nullable(), conclusion: name.nullable(), log: text.nullable() });
const landedChangeSchema = z.strictObject({ change: name, head: sha, mergeCommit: sha });

export const QUEUE_EVENT_SCHEMAS = {
  'queue-enqueued': z.strictObject({ change: name, head: sha, title: text, approvedTrusted: z.array(text), at: time }),
  'queue-removed': z.strictObject({ change: name, head: sha, code: name, reason: text, at: time }),
  'queue-ejected': z.strictObject({ change: name, head: sha, reason: text, check: name.nullable(), log: text.nullable(), at: time }),
  'queue-candidate': z.strictObject({ candidate: name, changes: z.array(name), base: sha, tip: sha, tree: sha, at: time }),
  'queue-checked': z.strictObject({ candidate: name, tree: text, passed: z.boolean(), reused: z.boolean(), failure: queueFailureSchema.nullable(), at: time }),
  'queue-landed': z.strictObject({ candidate: name, base: sha, tip: sha, changes: z.array(landedChangeSchema), at: time }),
  /** The landing of `changes` left a base tree (`tip`, `tree`) that is not the tree the checks passed on (`testedTree`); `staged`: the staging commit pushed to test it. */
  'queue-untested': z.strictObject({
    candidate: name,
    changes: z.array(name),
    tip: sha,
    tree: sha,
    testedTree: sha,
    reason: text,
    staged: z.strictObject({ ref: text, sha }).nullable(),
    at: time,
  }),
  /** The checks of an untested landing's tip (`queue-untested`), run on its staging ref afterwards: `key` is `<config key>|<tree>` (the candidate's config key). */
  'queue-untested-checked': z.strictObject({
    candidate: name,
    changes: z.array(name),
    tip: sha,
    key: text,
    passed: z.boolean(),
    failure: queueFailureSchema.nullable(),
    at: time,
  }),
  'queue-bisect': z.strictObject({ changes: z.array(name), failure: queueFailureSchema, at: time }),
  'queue-flaky': z.strictObject({ changes: z.array(name), failure: queueFailureSchema, at: time }),
  'queue-paused': z.strictObject({ by: name, at: time }),
  'queue-resumed': z.strictObject({ by: name, at: time }),
  'queue-lease': leaseEventSchema,
} as const;

export type QueueEventType = keyof typeof QUEUE_EVENT_SCHEMAS;
export type QueueEventData<T extends QueueEventType> = z.infer<(typeof QUEUE_EVENT_SCHEMAS)[T]>;
