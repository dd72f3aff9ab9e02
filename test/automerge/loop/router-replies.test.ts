/**
 * The router's replies are written exactly once, also when a route is cut
 * short: a reply the forge refuses fails the route, which records how far it
 * got (`commands-interrupted`); the next delivery of the same comment version
 * (a retried job), which the ledger skips as applied, finishes the rest and
 * writes only the replies whose signed `command-reply` marker is not yet among
 * proofgate's own comments. A redelivery after a route that finished writes
 * nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ProofgateError } from '../../../src/core/index.js';
import type { ForgeComment } from '../../../src/forge/port.js';
import { LABELS } from '../../../src/automerge/loop/index.js';
import { answeredCommandLines, composeMarkedBody, createMarker, readMarkers, type CommandReplyFields } from '../../../src/automerge/markers.js';
import { finished, loopFixture, MAINTAINER, repoConfig, type LoopFixture } from './local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

const SECRET = 'router-replies-test-secret-0123456789';
const HEAD = 'a'.repeat(40);

/**
 * Make proofgate's `skip + 1`-th next comment creation fail once, as a forge
 * answering 500 would; `landed`: the comment is created all the same before
 * the failure (the forge wrote it, then the answer was lost).
 */
function failCreateOnce(f: LoopFixture, options: { readonly skip?: number; readonly landed?: boolean } = {}): { readonly failed: () => boolean } {
  const forge = f.forge;
  const original = forge.createComment.bind(forge);
  let skip = options.skip ?? 0;
  let armed = true;
  forge.createComment = async (changeId: string, body: string): Promise<ForgeComment> => {
    if (!armed) return original(changeId, body);
    if (skip > 0) {
      skip -= 1;
      return original(changeId, body);
    }
    armed = false;
    if (options.landed === true) await original(changeId, body);
    throw new ProofgateError('FORGE_API', 'the forge answered 500 to creating a comment');
  };
  return { failed: () => !armed };
}

/** proofgate's comments on a change other than its status comment. */
async function replies(f: LoopFixture, id: string): Promise<ForgeComment[]> {
  const { comments } = await f.forge.snapshot(id);
  return comments.filter((c) => c.author === 'proofgate' && !c.body.includes('"kind":"automerge-status"'));
}

async function stepsNamed(f: LoopFixture, id: string, name: string) {
  return (await f.automerge.env.store.load(id)).steps.filter((step) => step.step === name);
}

async function route(f: LoopFixture, id: string, comment: ForgeComment) {
  return f.automerge.router.handleComment(id, comment);
}

async function failedRoute(f: LoopFixture, id: string, comment: ForgeComment): Promise<unknown> {
  try {
    await route(f, id, comment);
  } catch (error) {
    return error;
  }
  throw new Error('the route did not fail');
}

describe('a reply the forge refuses once', () => {
  it('a /proofgate status whose reply fails is answered, once, by the next delivery of that comment; a later redelivery writes nothing', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const broken = failCreateOnce(f);
    const comment = await f.forge.commentAs(id, '/proofgate status', MAINTAINER);
    const error = await failedRoute(f, id, comment);
    expect(error).toBeInstanceOf(ProofgateError);
    expect(broken.failed()).toBe(true);
    expect(await replies(f, id)).toHaveLength(0);
    expect(await stepsNamed(f, id, 'commands-interrupted')).toMatchObject([{ comment: comment.id, updatedAt: comment.updatedAt, lines: [1], done: [] }]);

    const retried = await route(f, id, comment);
    expect(retried.skipped).toBe('redelivery');
    expect(retried.ran).toEqual([]);
    expect(retried.resumed.map((c) => c.kind)).toEqual(['status']);
    const answered = await replies(f, id);
    expect(answered).toHaveLength(1);
    expect(answered[0]?.body).toMatch(/^proofgate status \(asked by /);
    const markers = readMarkers(answered[0] as ForgeComment, { selfLogin: 'proofgate', secret: f.automerge.env.secret, changeId: id });
    expect(markers.trusted.map((m) => m.fields)).toEqual([
      { kind: 'command-reply', change: id, head: f.repo.sha('feature'), comment: comment.id, updatedAt: comment.updatedAt, line: 1 },
    ]);

    const again = await route(f, id, comment);
    expect(again.skipped).toBe('redelivery');
    expect(again.resumed).toEqual([]);
    expect(await replies(f, id)).toHaveLength(1);
    expect(await stepsNamed(f, id, 'commands-resumed')).toHaveLength(1);
  });

  it('a reply the forge wrote before failing is not written again', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    failCreateOnce(f, { landed: true });
    const comment = await f.forge.commentAs(id, '/proofgate frobnicate', MAINTAINER);
    await failedRoute(f, id, comment);
    expect(await replies(f, id)).toHaveLength(1);
    const retried = await route(f, id, comment);
    expect(retried.resumed.map((c) => c.kind)).toEqual(['unknown']);
    expect(await replies(f, id)).toHaveLength(1);
    expect(f.progress.some((p) => p.text.includes('the reply to line 1 was already written'))).toBe(true);
  });

  it('several commands: the ones answered before the failure are not answered again, the rest are, across two failures', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const comment = await f.forge.commentAs(id, ['/proofgate status', '/proofgate frobnicate', '@proofgate proof'].join('\n'), MAINTAINER);
    // The first route answers line 1 and fails on line 2.
    failCreateOnce(f, { skip: 1 });
    await failedRoute(f, id, comment);
    expect((await replies(f, id)).map((c) => c.body.split('\n')[0])).toEqual([expect.stringMatching(/^proofgate status/)]);
    // The second answers line 2 and fails on line 3 (the forge wrote it all the same).
    failCreateOnce(f, { skip: 1, landed: true });
    await failedRoute(f, id, comment);
    expect(await replies(f, id)).toHaveLength(3);
    const interrupted = await stepsNamed(f, id, 'commands-interrupted');
    expect(interrupted.map((step) => step.done)).toEqual([[1], [1, 2]]);
    // The third finds line 3's reply and writes nothing more.
    const third = await route(f, id, comment);
    expect(third.resumed.map((c) => c.line)).toEqual([3]);
    const written = await replies(f, id);
    expect(written).toHaveLength(3);
    const lines = written.flatMap((c) => readMarkers(c, { selfLogin: 'proofgate', secret: f.automerge.env.secret, changeId: id }).trusted.map((m) => m.fields));
    expect(lines.map((fields) => (fields as CommandReplyFields).line)).toEqual([1, 2, 3]);
    expect((await route(f, id, comment)).resumed).toEqual([]);
    expect(await replies(f, id)).toHaveLength(3);
  });

  it("a marker copied into someone else's comment does not stand for proofgate's reply", async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    failCreateOnce(f);
    const comment = await f.forge.commentAs(id, '/proofgate status', MAINTAINER);
    await failedRoute(f, id, comment);
    // A marker for exactly this reply, signed with the real secret (as if copied from a reply), in the change author's comment.
    const fields: CommandReplyFields = {
      kind: 'command-reply',
      change: id,
      head: f.repo.sha('feature'),
      comment: comment.id,
      updatedAt: comment.updatedAt,
      line: 1,
    };
    await f.forge.commentAs(id, composeMarkedBody('proofgate status: all good', [fields], f.automerge.env.secret), 'Casey Contributor');
    const retried = await route(f, id, comment);
    expect(retried.resumed.map((c) => c.kind)).toEqual(['status']);
    expect(await replies(f, id)).toHaveLength(1);
  });

  it('a redelivery whose snapshot was read before the failure leaves the rest to a later one (its snapshot may miss a reply)', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const comment = await f.forge.commentAs(id, '/proofgate status', MAINTAINER);
    // A second delivery reads its snapshot first and is held there while the first route runs.
    const snapshotOf = f.forge.snapshot.bind(f.forge);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let read: () => void = () => undefined;
    const wasRead = new Promise<void>((resolve) => (read = resolve));
    let hold = true;
    f.forge.snapshot = async (changeId: string) => {
      const snapshot = await snapshotOf(changeId);
      if (hold) {
        hold = false;
        read();
        await gate;
      }
      return snapshot;
    };
    const second = route(f, id, comment);
    await wasRead;
    // The first route: the forge writes the reply, then fails.
    failCreateOnce(f, { landed: true });
    await failedRoute(f, id, comment);
    release();
    const late = await second;
    expect(late.skipped).toBe('redelivery');
    expect(late.resumed).toEqual([]);
    expect(await replies(f, id)).toHaveLength(1);
    // A later delivery reads a snapshot that shows the reply: it finishes the route and writes nothing.
    const later = await route(f, id, comment);
    expect(later.resumed.map((c) => c.kind)).toEqual(['status']);
    expect(await replies(f, id)).toHaveLength(1);
  });

  it('two deliveries after the failure at once: one finishes the route, the reply is written once', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    failCreateOnce(f);
    const comment = await f.forge.commentAs(id, '/proofgate frobnicate', MAINTAINER);
    await failedRoute(f, id, comment);
    const both = await Promise.all([route(f, id, comment), route(f, id, comment)]);
    expect(both.map((r) => r.resumed.length).sort()).toEqual([0, 1]);
    expect(await replies(f, id)).toHaveLength(1);
  });
});

describe('what a finished route of the other commands redoes', () => {
  it('an automerge after a refused help reply is carried out by the next delivery: labels, status comment, the job, the merge', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    failCreateOnce(f);
    const comment = await f.forge.commentAs(id, '/proofgate frobnicate\n/proofgate automerge', MAINTAINER);
    await failedRoute(f, id, comment);
    expect((await f.forge.snapshot(id)).labels).not.toContain(LABELS.automerge);
    const retried = await route(f, id, comment);
    expect(retried.resumed.map((c) => c.kind)).toEqual(['unknown', 'automerge']);
    const outcome = await finished(retried.dispatch?.done);
    expect(outcome.kind).toBe('merged');
    expect((await replies(f, id)).filter((c) => c.body.includes('is not a proofgate command'))).toHaveLength(1);
  });

  it('a stop on a change automerge never ran on, whose reply could not be written, is answered once by the next delivery; no status comment', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    failCreateOnce(f);
    const comment = await f.forge.commentAs(id, '/proofgate stop', MAINTAINER);
    await failedRoute(f, id, comment);
    const retried = await route(f, id, comment);
    expect(retried.resumed.map((c) => c.kind)).toEqual(['stop']);
    expect(retried.dispatch).toBeNull();
    const own = (await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate');
    expect(own.filter((c) => c.body.includes('"kind":"automerge-status"'))).toEqual([]);
    expect(own.map((c) => c.body.split('\n')[0])).toEqual([
      `proofgate (asked by ${MAINTAINER}): automerge was never requested for this change; \`/proofgate stop\` does nothing.`,
    ]);
    await route(f, id, comment);
    expect((await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate')).toHaveLength(1);
  });

  it('a stop cut short is not shown when a later automerge has turned automerge on again', async () => {
    // No repair module and a failing check: the later automerge ends blocked, with automerge still on.
    const f = (fixture = await loopFixture({ automerge: { repair: null } }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n', 'broken.txt': 'breaks the check\n' });
    failCreateOnce(f);
    const stop = await f.forge.commentAs(id, '/proofgate stop', MAINTAINER);
    await failedRoute(f, id, stop);
    const on = await f.command(id, '/proofgate automerge');
    expect((await finished(on.dispatch?.done)).kind).toBe('blocked');
    const retried = await route(f, id, stop);
    expect(retried.resumed.map((c) => c.kind)).toEqual(['stop']);
    const status = (await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate' && c.body.includes('"kind":"automerge-status"'));
    expect(status.every((c) => !c.body.includes(`stopped by ${MAINTAINER}`))).toBe(true);
  });

  it('an approval whose reply failed is answered once', async () => {
    const config = repoConfig('requiredApprovals: 1\n');
    const f = (fixture = await loopFixture({ config }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    failCreateOnce(f);
    const comment = await f.forge.commentAs(id, '/proofgate approve', MAINTAINER);
    await failedRoute(f, id, comment);
    expect(await stepsNamed(f, id, 'approval-recorded')).toHaveLength(1);
    const retried = await route(f, id, comment);
    expect(retried.resumed.map((c) => c.kind)).toEqual(['approve']);
    const written = await replies(f, id);
    expect(written).toHaveLength(1);
    expect(written[0]?.body).toContain(`${MAINTAINER} approved head`);
    expect((await route(f, id, comment)).resumed).toEqual([]);
    expect(await replies(f, id)).toHaveLength(1);
  });
});

describe('answeredCommandLines (pure)', () => {
  const version = { comment: '4711', updatedAt: '2024-05-01T10:00:00Z' };
  const fields = (line: number, over: Partial<CommandReplyFields> = {}): CommandReplyFields => ({
    kind: 'command-reply',
    change: '7',
    head: HEAD,
    comment: version.comment,
    updatedAt: version.updatedAt,
    line,
    ...over,
  });
  const comment = (id: string, author: string, body: string): ForgeComment => ({
    id,
    author,
    authorType: author === 'proofgate' ? 'Bot' : 'User',
    body,
    createdAt: '2024-05-01T10:00:01Z',
    updatedAt: '2024-05-01T10:00:01Z',
  });
  const query = { selfLogin: 'proofgate', secret: SECRET, changeId: '7' };

  it("counts proofgate's own signed replies for that comment version only", () => {
    const comments = [
      comment('1', 'proofgate', composeMarkedBody('reply one', [fields(1)], SECRET)),
      comment('2', 'Proofgate', composeMarkedBody('reply three', [fields(3)], SECRET)),
      // Another version, another comment, another change: not these.
      comment('3', 'proofgate', composeMarkedBody('older', [fields(2, { updatedAt: '2024-04-01T00:00:00Z' })], SECRET)),
      comment('4', 'proofgate', composeMarkedBody('other', [fields(2, { comment: '4712' })], SECRET)),
      comment('5', 'proofgate', composeMarkedBody('elsewhere', [fields(2, { change: '8' })], SECRET)),
    ];
    expect([...answeredCommandLines(comments, query, version)].sort()).toEqual([1, 3]);
  });

  it("ignores a copy in anyone else's comment, a marker signed with another secret, and counts proofgate's reply whose text was edited", () => {
    const copied = comment('1', 'mallory', composeMarkedBody('reply one', [fields(1)], SECRET));
    const forged = comment('2', 'proofgate', composeMarkedBody('reply two', [fields(2)], 'another-secret-of-enough-bytes'));
    const edited = comment('3', 'proofgate', `edited text\n\n${createMarker(fields(3), SECRET, 'original text')}\n`);
    expect([...answeredCommandLines([copied, forged, edited], query, version)]).toEqual([3]);
  });

  it('a command-reply marker has exactly its fields, and a bad one is refused', () => {
    const marker = createMarker(fields(2), SECRET, 'text');
    expect(marker).toMatch(/^<!-- proofgate:marker v3 \{.*"kind":"command-reply".*"line":2.*\} -->$/);
    expect(() => createMarker(fields(0), SECRET)).toThrow(/command line/);
    expect(() => createMarker(fields(1, { comment: 'a b' }), SECRET)).toThrow(/comment id/);
    expect(() => createMarker(fields(1, { updatedAt: '' }), SECRET)).toThrow(/updatedAt/);
    expect(() => createMarker({ ...fields(1), extra: 1 } as unknown as CommandReplyFields, SECRET)).toThrow(/command-reply fields/);
  });
});
