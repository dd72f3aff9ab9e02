import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HELP_TEXT, LABELS } from '../../../src/automerge/loop/index.js';
import { sandboxForTests } from '../../support/jail.js';
import { finished, loopFixture, MAINTAINER, type LoopFixture } from './local-support.js';
import { runningWith, until, within } from '../../support/wait.js';

let fixture: LoopFixture | null = null;
const scratch: string[] = [];
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});

// Jailed where bubblewrap works (always under CI=true); unjailed, saying so, elsewhere.
const sandbox = await sandboxForTests();

function seen(f: LoopFixture, prefix: string): Promise<void> {
  return until(() => f.progress.some((p) => p.text.startsWith(prefix)), `no progress line "${prefix}"`);
}

/** Longer than any test: the loop can only move on because something woke it. */
const NEVER_MS = 3_600_000;
const WAIT_FOREVER = { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS };

/**
 * A check that runs until the test writes `release` into the trusted config's `cacheDir`: the one host folder a
 * jailed check shares with the test (bound writable at its own path, searchable by the jail's uid). It never ends on
 * its own, so only a cancel or the release ends it.
 */
function slowCheck(): { config: string; release: string } {
  const cache = mkdtempSync(join(tmpdir(), 'proofgate-check-cache-'));
  scratch.push(cache);
  chmodSync(cache, 0o777);
  const release = join(cache, 'release-check');
  const config = [
    `sandbox: ${sandbox}`,
    `cacheDir: ${cache}`,
    'maintainers:',
    `  - login: ${MAINTAINER}`,
    '    permission: admin',
    'checks:',
    '  - name: slow',
    `    run: ${JSON.stringify(`while [ ! -e ${release} ]; do sleep 0.05; done`)}`,
    'review:',
    '  lanes:',
    '    - id: rules',
    '      builtin: rules',
  ].join('\n');
  return { config, release };
}

describe('commands on the local forge', () => {
  it('a stop that arrives while the loop waits for checks wakes it and it stops at once (its next poll is an hour away)', async () => {
    const { config, release } = slowCheck();
    const f = (fixture = await loopFixture({ config, automerge: { waits: WAIT_FOREVER } }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const base = f.repo.sha('main');
    const routed = await f.command(id, '/proofgate automerge');
    await seen(f, 'wait: checks pending');
    const stop = await f.command(id, '/proofgate stop');
    expect(stop.ran.map((c) => c.kind)).toEqual(['stop']);
    // The check never ends on its own and the loop would next look in an hour: only the stop's wake-up ends the wait.
    const outcome = await within(finished(routed.dispatch?.done), 'the stop did not wake the loop waiting for checks');
    expect(outcome.kind).toBe('stopped');
    expect(existsSync(release)).toBe(false);
    const decisions = (await f.automerge.env.store.load(id)).steps.filter((step) => step.step === 'decision').map((step) => step.kind);
    expect(decisions.slice(-2)).toEqual(['wait', 'stop']);
    await f.automerge.close();
    expect(f.repo.sha('main')).toBe(base);
    const snapshot = await f.forge.snapshot(id);
    expect(snapshot.state).toBe('open');
    expect(snapshot.labels).not.toContain(LABELS.automerge);
    const status = snapshot.comments.filter((c) => c.author === 'proofgate' && c.body.includes('"kind":"automerge-status"'));
    expect(status).toHaveLength(1);
    expect(status[0]?.body).toContain(`stopped by ${MAINTAINER}`);
  });

  it('a stop cancels the check the loop started (recorded cancelled, its process killed); a later automerge runs it again', async () => {
    const { config, release } = slowCheck();
    const f = (fixture = await loopFixture({ config, automerge: { waits: WAIT_FOREVER } }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const routed = await f.command(id, '/proofgate automerge');
    await seen(f, 'wait: checks pending');
    // The loop starts its checks in the background: wait until the check's process runs.
    await until(() => runningWith(release).length > 0, 'the check never started');
    await f.command(id, '/proofgate stop');
    expect((await within(finished(routed.dispatch?.done), 'the stop did not end the loop')).kind).toBe('stopped');
    // Nothing is left running: close returns once the check's process is killed (the check would never end by itself).
    await within(f.automerge.jobs.close(), 'closing the jobs waited for a check that never ends');
    expect(runningWith(release)).toEqual([]);
    const after = await f.forge.snapshot(id);
    expect(after.checks.map((check) => [check.name, check.status, check.conclusion])).toEqual([['slow', 'completed', 'cancelled']]);
    expect(f.progress.some((p) => p.text.startsWith('cancelling the checks running on'))).toBe(true);
    // Automerge again: the cancelled run does not count as a failure, the check runs again and the change merges.
    writeFileSync(release, 'go');
    const again = await f.command(id, '/proofgate automerge');
    const outcome = await within(finished(again.dispatch?.done), 'the second automerge did not end');
    expect(outcome.kind, outcome.reason).toBe('merged');
    // The snapshot shows the newest run of each check: the new, passing one.
    expect((await f.forge.snapshot(id)).checks.map((check) => [check.name, check.conclusion])).toEqual([['slow', 'success']]);
    expect(f.progress.filter((p) => p.text.startsWith('running 1 check(s)'))).toHaveLength(2);
  });

  it('/proofgate status gets a short reply while automerge is off, and after a stop', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const first = await f.command(id, '/proofgate status');
    expect(first.ran.map((c) => c.kind)).toEqual(['status']);
    expect(first.dispatch).toBeNull();
    let replies = (await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate');
    expect(replies).toHaveLength(1);
    expect(replies[0]?.body).toContain('automerge is off: automerge was never requested');
    expect(replies[0]?.body).toContain('/proofgate automerge');
    await f.command(id, '/proofgate stop');
    const stopReply = (await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate').at(-1);
    expect(stopReply?.body).toContain('automerge was never requested for this change; `/proofgate stop` does nothing.');
    // The change's author may only ask for a re-review: a status from them is ignored (no reply).
    const fromAuthor = await f.command(id, '/proofgate status', 'Casey Contributor');
    expect(fromAuthor.refused).toHaveLength(1);
    const again = await f.command(id, '/proofgate status');
    expect(again.refused).toHaveLength(0);
    replies = (await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate' && c.body.startsWith('proofgate status'));
    expect(replies).toHaveLength(2);
    expect(replies[1]?.body).toContain(`asked by ${MAINTAINER}`);
  });

  it('/proofgate status after a merge replies with the merge', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind).toBe('merged');
    // Merged: automerge is over, so status is a short reply naming the merge.
    await f.command(id, '/proofgate status');
    const reply = (await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate' && c.body.startsWith('proofgate status'));
    expect(reply).toHaveLength(1);
    expect(reply[0]?.body).toContain(`as \`${(outcome.mergeCommit ?? '').slice(0, 12)}\``);
  });

  it('an unknown command gets the help reply and runs nothing', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const routed = await f.command(id, '/proofgate merge-now');
    expect(routed.dispatch).toBeNull();
    const replies = (await f.forge.snapshot(id)).comments.filter((c) => c.author === 'proofgate');
    expect(replies).toHaveLength(1);
    expect(replies[0]?.body).toContain('is not a proofgate command');
    expect(replies[0]?.body).toContain(HELP_TEXT);
    const { state } = await f.automerge.env.store.load(id);
    expect(state.automerge).toBeNull();
  });
});
