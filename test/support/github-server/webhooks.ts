/**
 * Signed webhook deliveries built from real GitHub payloads: the examples in
 * @octokit/webhooks-examples (a devDependency; api.github.com/index.json).
 */
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The events proofgate maps today; webhookFixtures() returns their examples unless asked for others. */
export const MAPPED_EVENTS = ['pull_request', 'issue_comment', 'check_run', 'check_suite', 'status', 'pull_request_review', 'push'] as const;

/**
 * The package lists examples without names. For the mapped events it lists first the
 * example from GitHub's documentation (named here `<action>.docs.payload.json`, or
 * `docs.payload.json` without an action), then the files of the octokit/webhooks
 * repository (payload-examples/api.github.com/<event>/) in name order: these names.
 */
const REPOSITORY_NAMES: Readonly<Record<(typeof MAPPED_EVENTS)[number], readonly string[]>> = {
  pull_request: [
    'assigned.payload.json',
    'assigned.with-organization.payload.json',
    'closed.payload.json',
    'closed.with-organization.payload.json',
    'converted_to_draft.payload.json',
    'converted_to_draft.with-installation.payload.json',
    'converted_to_draft.with-organization.payload.json',
    'labeled.payload.json',
    'labeled.with-organization.payload.json',
    'locked.payload.json',
    'locked.with-organization.payload.json',
    'opened.payload.json',
    'opened.with-null-body.json',
    'opened.with-organization.payload.json',
    'ready_for_review.payload.json',
    'ready_for_review.with-installation.payload.json',
    'ready_for_review.with-organization.payload.json',
    'reopened.payload.json',
    'reopened.with-organization.payload.json',
    'review_request_removed.payload.json',
    'review_requested.payload.json',
    'synchronize.payload.json',
    'unassigned.payload.json',
    'unassigned.with-organization.payload.json',
    'unlabeled.payload.json',
    'unlabeled.with-organization.payload.json',
    'unlocked.payload.json',
    'unlocked.with-organization.payload.json',
  ],
  issue_comment: [
    'created.1.payload.json',
    'created.payload.json',
    'created.with-installation.payload.json',
    'created.with-organization.payload.json',
    'deleted.payload.json',
    'deleted.with-organization.payload.json',
    'edited.payload.json',
    'edited.with-organization.payload.json',
  ],
  check_run: [
    'completed.1.payload.json',
    'completed.payload.json',
    'completed.with-organization.payload.json',
    'created.payload.json',
    'created.with-organization.payload.json',
    'requested_action.payload.json',
    'rerequested.payload.json',
    'rerequested.with-organization.payload.json',
  ],
  check_suite: [
    'completed.1.payload.json',
    'completed.payload.json',
    'completed.with-organization.payload.json',
    'requested.payload.json',
    'requested.payload.with-email-with-special-characters.json',
    'requested.with-organization.payload.json',
    'rerequested.payload.json',
    'rerequested.with-organization.payload.json',
  ],
  status: ['payload.json', 'with-author-committer-null.payload.json', 'with-installation.payload.json'],
  pull_request_review: ['dismissed.payload.json', 'submitted.payload.json', 'submitted.with-organization.payload.json'],
  push: [
    '1.payload.json',
    'payload.json',
    'with-installation.payload.json',
    'with-new-branch.payload.json',
    'with-no-username-committer.payload.json',
    'with-organization.payload.json',
  ],
};

export interface FixtureFile {
  readonly eventName: string;
  readonly file: string;
  readonly payload: Record<string, unknown>;
}

interface EventDefinition {
  readonly name: string;
  readonly examples: readonly Record<string, unknown>[];
}

let catalog: Map<string, Map<string, Record<string, unknown>>> | null = null;

/** Every example of every event, by event and name. */
function examples(): Map<string, Map<string, Record<string, unknown>>> {
  if (catalog !== null) return catalog;
  const file = createRequire(import.meta.url).resolve('@octokit/webhooks-examples/api.github.com/index.json');
  const definitions = JSON.parse(readFileSync(file, 'utf8')) as EventDefinition[];
  catalog = new Map(definitions.map((definition) => [definition.name, nameExamples(definition)]));
  return catalog;
}

function nameExamples({ name, examples: list }: EventDefinition): Map<string, Record<string, unknown>> {
  const action = (payload: Record<string, unknown>) => (typeof payload.action === 'string' ? payload.action : undefined);
  const repositoryNames = (REPOSITORY_NAMES as Readonly<Record<string, readonly string[]>>)[name];
  if (repositoryNames !== undefined) {
    const [docs, ...rest] = list;
    const named = rest.map((payload, i) => [repositoryNames[i], payload] as const);
    // A newer package that adds, drops or reorders examples must not hand a test the wrong payload.
    const misnamed = named.filter(([file, payload]) => file === undefined || (action(payload) !== undefined && !file.startsWith(`${action(payload)}.`)));
    if (docs === undefined || rest.length !== repositoryNames.length || misnamed.length > 0) {
      throw new Error(`@octokit/webhooks-examples: the ${name} examples no longer match REPOSITORY_NAMES in ${import.meta.url}`);
    }
    const docsAction = action(docs);
    return new Map([
      [docsAction === undefined ? 'docs.payload.json' : `${docsAction}.docs.payload.json`, docs],
      ...(named as [string, Record<string, unknown>][]),
    ]);
  }
  // Other events: named by action (`event` without one), numbered from the second of a kind.
  const seen = new Map<string, number>();
  return new Map(
    list.map((payload) => {
      const base = action(payload) ?? 'event';
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      return [n === 0 ? `${base}.payload.json` : `${base}.${n}.payload.json`, payload];
    }),
  );
}

/** Every example payload of the given events (the mapped ones by default), each a fresh copy. */
export function webhookFixtures(eventNames: readonly string[] = MAPPED_EVENTS): FixtureFile[] {
  return eventNames.flatMap((eventName) =>
    [...(examples().get(eventName) ?? new Map<string, Record<string, unknown>>())]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([file, payload]) => ({ eventName, file, payload: structuredClone(payload) })),
  );
}

/** One example payload by event and name (e.g. 'pull_request', 'opened.payload.json'), a fresh copy the caller may change. */
export function fixture(eventName: string, file: string): Record<string, unknown> {
  const payload = examples().get(eventName)?.get(file);
  if (payload === undefined) throw new Error(`no webhook example ${eventName}/${file} in @octokit/webhooks-examples`);
  return structuredClone(payload);
}

export interface SignedDelivery {
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly deliveryId: string;
}

export function signDelivery(eventName: string, payload: unknown, secret: string, deliveryId: string = randomUUID()): SignedDelivery {
  const body = JSON.stringify(payload);
  return {
    body,
    deliveryId,
    headers: {
      'content-type': 'application/json',
      'x-github-event': eventName,
      'x-github-delivery': deliveryId,
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
      'user-agent': 'GitHub-Hookshot/test',
    },
  };
}
