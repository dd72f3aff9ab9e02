import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HELP_TEXT, LABELS } from '../../../src/automerge/loop/index.js';
import { finished, loopFixture, MAINTAINER, type LoopFixture } from './local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

function seen(f: LoopFixture, prefix: string, timeoutMs = 20_000): Promise<void> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      if (f.progress.some((p) => p.text.startsWith(prefix))) {
        clearInterval(timer);
        resolve();
      } else if (Date.now() - started > timeoutMs) {
        clearInterval(timer);
        reject(new Error(`no progress line "${prefix}" in ${timeoutMs} ms`));
      }
    }, 10);
  });
}

const POLL_MS = 5_000;

/** A config whose one check runs until `release` exists (at most 20 s). */
function slowCheckConfig(release: string): string {
  const script = `const fs = require('node:fs'); const end = Date.now() + 20000; const t = setInterval(() => { if (fs.existsSync(${JSON.stringify(release)}) || Date.now() > end) { clearInterval(t); } }, 20);`;
  return [
    'maintainers:',
    `  - login: ${MAINTAINER}`,
    '    permission: admin',
    'checks:',
    '  - name: slow',
    `    run: [node, -e, ${JSON.stringify(script)}]`,
    'review:',
    '  lanes:',
    '    - id: rules',
    '      builtin: rules',
  ].join('\n');
}

describe('commands on the local forge', () => {
  it('a stop that arrives while the loop waits for checks wakes it and it stops at once (well under the poll interval)', async () => {
    const gate = mkdtempSync(join(tmpdir(), 'proofgate-release-'));
    const release = join(gate, 'release-check');
    const f = (fixture = await loopFixture({ config: slowCheckConfig(release), automerge: { waits: { transientPollMs: POLL_MS, shepherdPollMs: POLL_MS } } }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const base = f.repo.sha('main');
    const routed = await f.command(id, '/proofgate automerge');
    await seen(f, 'wait: checks pending');
    // Without a prompt stop the test still ends: the check is released after 3 s.
    const releaser = setTimeout(() => writeFileSync(release, 'go'), 3_000);
    try {
      const asked = Date.now();
      const stop = await f.command(id, '/proofgate stop');
      expect(stop.ran.map((c) => c.kind)).toEqual(['stop']);
      const outcome = await finished(routed.dispatch?.done);
      const timeToStop = Date.now() - asked;
      console.info(`time to stop while waiting for checks: ${timeToStop} ms (poll interval ${POLL_MS} ms)`);
      expect(outcome.kind).toBe('stopped');
      expect(timeToStop).toBeLessThan(1_500);
      expect(existsSync(release)).toBe(false);
    } finally {
      clearTimeout(releaser);
      writeFileSync(release, 'go');
    }
    await f.automerge.close();
    rmSync(gate, { recursive: true, force: true });
    expect(f.repo.sha('main')).toBe(base);
    const snapshot = await f.forge.snapshot(id);
    expect(snapshot.state).toBe('open');
    expect(snapshot.labels).not.toContain(LABELS.automerge);
    const status = snapshot.comments.filter((c) => c.author === 'proofgate' && c.body.includes('"kind":"automerge-status"'));
    expect(status).toHaveLength(1);
    expect(status[0]?.body).toContain(`stopped by ${MAINTAINER}`);
  });

  it('a stop cancels the check the loop started (recorded cancelled, the job ends at once); a later automerge runs it again', async () => {
    const gate = mkdtempSync(join(tmpdir(), 'proofgate-release-'));
    const release = join(gate, 'release-check');
    const f = (fixture = await loopFixture({ config: slowCheckConfig(release), automerge: { waits: { transientPollMs: POLL_MS, shepherdPollMs: POLL_MS } } }));
    try {
      const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
      const routed = await f.command(id, '/proofgate automerge');
      await seen(f, 'wait: checks pending');
      await f.command(id, '/proofgate stop');
      expect((await finished(routed.dispatch?.done)).kind).toBe('stopped');
      const stoppedAt = Date.now();
      // Nothing is left running: close returns once the check's process is killed, not when the check ends (20 s).
      await f.automerge.jobs.close();
      expect(Date.now() - stoppedAt).toBeLessThan(4_000);
      const after = await f.forge.snapshot(id);
      expect(after.checks.map((check) => [check.name, check.status, check.conclusion])).toEqual([['slow', 'completed', 'cancelled']]);
      expect(f.progress.some((p) => p.text.startsWith('cancelling the checks running on'))).toBe(true);
      // Automerge again: the cancelled run does not count as a failure, the check runs again and the change merges.
      writeFileSync(release, 'go');
      const again = await f.command(id, '/proofgate automerge');
      const outcome = await finished(again.dispatch?.done);
      expect(outcome.kind, outcome.reason).toBe('merged');
      // The snapshot shows the newest run of each check: the new, passing one.
      expect((await f.forge.snapshot(id)).checks.map((check) => [check.name, check.conclusion])).toEqual([['slow', 'success']]);
      expect(f.progress.filter((p) => p.text.startsWith('running 1 check(s)'))).toHaveLength(2);
    } finally {
      writeFileSync(release, 'go');
      rmSync(gate, { recursive: true, force: true });
    }
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
