import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isProofgateError, type ErrorCode } from '../../../src/core/index.js';
import { memoryDeliveryLedger, parseWebhookDelivery, storeDeliveryLedger, type DeliveryLedger, type WebhookResult } from '../../../src/forge/github/index.js';
import { defaultStoragePolicy } from '../../../src/storage/index.js';
import { createLocalRunStorage } from '../../../src/storage/sqlite/index.js';
import { fixture, signDelivery, webhookFixtures } from '../../support/github-server/index.js';
import { collectingLogger } from './harness.js';

const SECRET = 'webhook-secret-for-tests';
const signDeliveryBody = (body: string | Uint8Array) => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
const code = (want: ErrorCode) => (e: unknown) => isProofgateError(e, want);
/** A new ledger for each call: for tests that send the same bytes on purpose to exercise another rule. */
const fresh = (): DeliveryLedger => memoryDeliveryLedger();

async function deliver(eventName: string, payload: unknown, extra: { baseBranches?: string[] } = {}): Promise<Exclude<WebhookResult, { kind: 'duplicate' }>> {
  const signed = signDelivery(eventName, payload, SECRET);
  const result = await parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: SECRET, deliveries: fresh(), ...extra });
  expect(result.deliveryId).toBe(signed.deliveryId);
  if (result.kind === 'duplicate') throw new Error('a fresh ledger answered duplicate');
  return result;
}

/** What each fixture must become: an event kind, or ignored. */
function expectedKind(eventName: string, file: string): string {
  const action = file.split('.')[0];
  switch (eventName) {
    case 'pull_request':
      return (
        ({ opened: 'change-opened', reopened: 'change-opened', synchronize: 'change-synchronized', closed: 'change-closed' } as Record<string, string>)[
          action ?? ''
        ] ?? 'ignored'
      );
    case 'issue_comment':
      return 'ignored'; // none of the fixture comments is on a pull request
    case 'check_run':
    case 'check_suite':
      return action === 'completed' ? 'check-completed' : 'ignored';
    case 'status':
      return 'check-completed';
    case 'pull_request_review':
      return action === 'submitted' ? 'review-submitted' : 'ignored';
    case 'push':
      return file.startsWith('with-new-branch') || file.startsWith('with-no-username-committer') ? 'base-pushed' : 'ignored';
    default:
      return 'ignored';
  }
}

describe('GitHub webhook deliveries', () => {
  const fixtures = webhookFixtures();

  it('reads the fixture folders', () => {
    expect(new Set(fixtures.map((f) => f.eventName))).toEqual(
      new Set(['pull_request', 'issue_comment', 'check_run', 'check_suite', 'status', 'pull_request_review', 'push']),
    );
  });

  it.each(fixtures.map((f) => [`${f.eventName}/${f.file}`, f] as const))('maps %s', async (_name, f) => {
    const result = await deliver(f.eventName, f.payload);
    expect(result.kind).toBe(expectedKind(f.eventName, f.file));
    if (result.kind === 'ignored') {
      expect(result.reason).not.toBe('');
      return;
    }
    const repo = f.payload.repository as { name: string; owner: { login: string } };
    expect(result.repository).toEqual({ owner: repo.owner.login, repo: repo.name });
    expect(result.eventName).toBe(f.eventName);
  });

  it('maps the fields of each kind of event', async () => {
    const openedPayload = fixture('pull_request', 'opened.payload.json');
    const opened = await deliver('pull_request', openedPayload);
    expect(opened).toMatchObject({
      kind: 'change-opened',
      changeId: '2',
      headSha: 'ec26c3e57ca3a959ca5aad62de7213c562f8c821',
      installationId: (openedPayload.installation as { id: number }).id,
    });
    const { installation: _installation, ...noInstallation } = openedPayload;
    expect(await deliver('pull_request', noInstallation)).toMatchObject({ kind: 'change-opened', installationId: null });
    const closed = await deliver('pull_request', fixture('pull_request', 'closed.payload.json'));
    expect(closed).toMatchObject({ kind: 'change-closed', changeId: '2', merged: false });
    const run = await deliver('check_run', fixture('check_run', 'completed.payload.json'));
    expect(run).toMatchObject({
      kind: 'check-completed',
      changeIds: ['2'],
      headSha: 'ec26c3e57ca3a959ca5aad62de7213c562f8c821',
      check: { kind: 'check_run', name: 'Octocoders-linter', status: 'completed', conclusion: 'success' },
    });
    const status = await deliver('status', fixture('status', 'payload.json'));
    expect(status).toMatchObject({
      kind: 'check-completed',
      changeIds: [],
      headSha: '6113728f27ae82c7b1a177c8d03f9e96e0adf246',
      check: { kind: 'status', name: 'default', status: 'completed', conclusion: 'success', workflow: null },
    });
    const review = await deliver('pull_request_review', fixture('pull_request_review', 'submitted.payload.json'));
    expect(review).toMatchObject({
      kind: 'review-submitted',
      changeId: '2',
      reviewer: 'Codertocat',
      state: 'commented',
      headSha: 'ec26c3e57ca3a959ca5aad62de7213c562f8c821',
    });
    const push = await deliver('push', fixture('push', 'with-new-branch.payload.json'));
    expect(push).toMatchObject({ kind: 'base-pushed', ref: 'master' });
    const installed = await deliver('pull_request', fixture('pull_request', 'converted_to_draft.with-installation.payload.json'));
    expect(installed.kind).toBe('ignored');
  });

  it('maps comments on pull requests (issue.pull_request present)', async () => {
    for (const [file, kind] of [
      ['created.payload.json', 'comment-created'],
      ['edited.payload.json', 'comment-edited'],
    ] as const) {
      const payload = fixture('issue_comment', file);
      const issue = payload.issue as Record<string, unknown>;
      issue.pull_request = { url: 'https://api.github.com/repos/Codertocat/Hello-World/pulls/1' };
      const comment = payload.comment as { id: number; body: string; user: { login: string } };
      const result = await deliver('issue_comment', payload);
      expect(result).toMatchObject({
        kind,
        changeId: String(issue.number),
        comment: { id: String(comment.id), author: comment.user.login, authorType: 'User', body: comment.body },
      });
    }
    const deleted = fixture('issue_comment', 'deleted.payload.json');
    (deleted.issue as Record<string, unknown>).pull_request = {};
    expect((await deliver('issue_comment', deleted)).kind).toBe('ignored');
  });

  it('treats pushes to configured base branches only as base pushes', async () => {
    const payload = fixture('push', 'with-new-branch.payload.json');
    expect((await deliver('push', payload, { baseBranches: ['main'] })).kind).toBe('ignored');
    expect((await deliver('push', { ...payload, ref: 'refs/heads/main' }, { baseBranches: ['main'] })).kind).toBe('base-pushed');
    expect((await deliver('push', { ...payload, deleted: true })).kind).toBe('ignored');
  });

  it('ignores unknown event types with a debug log line', async () => {
    const lines: string[] = [];
    const signed = signDelivery('ping', { zen: 'Keep it logically awesome.', hook_id: 1 }, SECRET);
    const result = await parseWebhookDelivery({
      headers: signed.headers,
      body: signed.body,
      secret: SECRET,
      deliveries: fresh(),
      logger: collectingLogger(lines),
    });
    expect(result).toEqual({ kind: 'ignored', reason: "event 'ping' is not used", eventName: 'ping', deliveryId: signed.deliveryId });
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0] as string) as { level: number; msg: string; deliveryId: string };
    expect(line).toMatchObject({ level: 20, msg: 'webhook delivery ignored', deliveryId: signed.deliveryId });
    expect(lines[0]).not.toContain(SECRET);
  });

  it('rejects a missing or wrong signature before reading the body', async () => {
    const signed = signDelivery('pull_request', fixture('pull_request', 'opened.payload.json'), SECRET);
    const { 'x-hub-signature-256': _signature, ...unsigned } = signed.headers;
    await expect(parseWebhookDelivery({ headers: unsigned, body: signed.body, secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    await expect(parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: 'another-secret', deliveries: fresh() })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    await expect(parseWebhookDelivery({ headers: signed.headers, body: `${signed.body} `, secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    await expect(
      parseWebhookDelivery({ headers: { ...signed.headers, 'x-hub-signature-256': 'sha256=00' }, body: signed.body, secret: SECRET, deliveries: fresh() }),
    ).rejects.toSatisfy(code('WEBHOOK_SIGNATURE'));
    // A wrongly signed body that is not even JSON still fails on the signature, not the parse.
    await expect(parseWebhookDelivery({ headers: signed.headers, body: 'not json', secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
  });

  it('accepts the right signature over raw bytes, any header case, and a previous secret', async () => {
    const signed = signDelivery('pull_request', fixture('pull_request', 'synchronize.payload.json'), 'old-secret');
    const upper = Object.fromEntries(Object.entries(signed.headers).map(([k, v]) => [k.toUpperCase(), v]));
    const result = await parseWebhookDelivery({
      headers: upper,
      body: new TextEncoder().encode(signed.body),
      secret: SECRET,
      deliveries: fresh(),
      previousSecrets: ['old-secret'],
    });
    expect(result).toMatchObject({ kind: 'change-synchronized', changeId: '2', deliveryId: signed.deliveryId });
  });

  it('rejects a signed delivery without a delivery id or event name, or with a body that is not UTF-8', async () => {
    const signed = signDelivery('pull_request', fixture('pull_request', 'opened.payload.json'), SECRET);
    const { 'x-github-delivery': _id, ...noId } = signed.headers;
    await expect(parseWebhookDelivery({ headers: noId, body: signed.body, secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(code('INVALID_INPUT'));
    const { 'x-github-event': _event, ...noEvent } = signed.headers;
    await expect(parseWebhookDelivery({ headers: noEvent, body: signed.body, secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(code('INVALID_INPUT'));
    const notUtf8 = new Uint8Array([0xff, 0xfe]);
    await expect(parseWebhookDelivery({ headers: signed.headers, body: notUtf8, secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    const signedNotUtf8 = { ...signed.headers, 'x-hub-signature-256': signDeliveryBody(notUtf8) };
    await expect(parseWebhookDelivery({ headers: signedNotUtf8, body: notUtf8, secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(code('INVALID_INPUT'));
    const notJson = signDelivery('pull_request', 'x', SECRET);
    await expect(parseWebhookDelivery({ headers: notJson.headers, body: '{"unterminated', secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    const signedGarbage = { ...notJson.headers, 'x-hub-signature-256': signDeliveryBody('{"unterminated') };
    await expect(parseWebhookDelivery({ headers: signedGarbage, body: '{"unterminated', secret: SECRET, deliveries: fresh() })).rejects.toSatisfy(
      code('INVALID_JSON'),
    );
  });

  it('rejects a signed payload that lacks a field the mapping needs', async () => {
    const payload = fixture('pull_request', 'opened.payload.json');
    delete (payload.pull_request as Record<string, unknown>).head;
    await expect(deliver('pull_request', payload)).rejects.toSatisfy(code('INVALID_INPUT'));
  });
});

describe('webhook signatures cover the exact bytes received', () => {
  const json = JSON.stringify(fixture('pull_request', 'opened.payload.json'));
  const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
  const headersFor = (signature: string, deliveryId = 'bom-1') => ({
    'x-hub-signature-256': signature,
    'x-github-delivery': deliveryId,
    'x-github-event': 'pull_request',
  });

  it('refuses a body with a BOM whose signature was made before the BOM was added (sign, then strip or prepend)', async () => {
    const body = new Uint8Array(Buffer.concat([BOM, Buffer.from(json)]));
    const deliveries = memoryDeliveryLedger();
    await expect(parseWebhookDelivery({ headers: headersFor(signDeliveryBody(json)), body, secret: SECRET, deliveries })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    // The same as a string holding U+FEFF: the signature is over its UTF-8 bytes, BOM included.
    await expect(parseWebhookDelivery({ headers: headersFor(signDeliveryBody(json)), body: `\uFEFF${json}`, secret: SECRET, deliveries })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    // And the other way round: signed with the BOM, delivered without it.
    await expect(parseWebhookDelivery({ headers: headersFor(signDeliveryBody(body)), body: json, secret: SECRET, deliveries })).rejects.toSatisfy(
      code('WEBHOOK_SIGNATURE'),
    );
    // Refused deliveries leave nothing in the ledger: the genuine delivery with that id is still taken.
    const genuine = await parseWebhookDelivery({ headers: headersFor(signDeliveryBody(json)), body: json, secret: SECRET, deliveries });
    expect(genuine).toMatchObject({ kind: 'change-opened', deliveryId: 'bom-1' });
  });

  it('accepts a BOM that the signature covers (only the parser skips it, after the check)', async () => {
    const body = new Uint8Array(Buffer.concat([BOM, Buffer.from(json)]));
    const result = await parseWebhookDelivery({ headers: headersFor(signDeliveryBody(body)), body, secret: SECRET, deliveries: fresh() });
    expect(result.kind).toBe('change-opened');
  });
});

describe('a delivery is taken once', () => {
  const payload = fixture('pull_request', 'opened.payload.json');

  it('answers a redelivery (same id, same bytes) duplicate, and takes nothing from it', async () => {
    const deliveries = memoryDeliveryLedger();
    const signed = signDelivery('pull_request', payload, SECRET);
    const first = await parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: SECRET, deliveries });
    expect(first.kind).toBe('change-opened');
    for (let again = 0; again < 2; again += 1) {
      const replay = await parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: SECRET, deliveries });
      expect(replay).toEqual({
        kind: 'duplicate',
        reason: expect.stringContaining('taken before') as unknown,
        eventName: 'pull_request',
        deliveryId: signed.deliveryId,
      });
    }
  });

  it('catches a replay under a new delivery id (the id header is not signed) and a new body under a used id', async () => {
    const deliveries = memoryDeliveryLedger();
    const signed = signDelivery('pull_request', payload, SECRET);
    expect((await parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: SECRET, deliveries })).kind).toBe('change-opened');
    const renamed = { ...signed.headers, 'x-github-delivery': 'a-fresh-id-chosen-by-the-replayer' };
    expect((await parseWebhookDelivery({ headers: renamed, body: signed.body, secret: SECRET, deliveries })).kind).toBe('duplicate');
    const other = signDelivery('pull_request', { ...payload, number: 99 }, SECRET, signed.deliveryId);
    expect((await parseWebhookDelivery({ headers: other.headers, body: other.body, secret: SECRET, deliveries })).kind).toBe('duplicate');
    const next = signDelivery('pull_request', { ...payload, number: 100 }, SECRET);
    expect((await parseWebhookDelivery({ headers: next.headers, body: next.body, secret: SECRET, deliveries })).kind).toBe('change-opened');
  });

  it('remembers deliveries in the event store across processes (two openings of one SQLite data dir)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pg-webhook-ledger-'));
    try {
      const open = () => createLocalRunStorage({ directory: dir, namespace: 'github', policy: defaultStoragePolicy });
      const signed = signDelivery('pull_request', payload, SECRET);
      const one = open();
      const first = await parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: SECRET, deliveries: storeDeliveryLedger(one.eventStore) });
      expect(first.kind).toBe('change-opened');
      const two = open();
      const again = await Promise.all(
        [0, 1].map(() => parseWebhookDelivery({ headers: signed.headers, body: signed.body, secret: SECRET, deliveries: storeDeliveryLedger(two.eventStore) })),
      );
      expect(again.map((result) => result.kind)).toEqual(['duplicate', 'duplicate']);
      await one.close();
      await two.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
