/**
 * Issue 10, attack 11 (the smaller ones): a failed `change open` that still
 * registers the change, a data dir whose database is a directory, and a
 * webhook whose signature covers other bytes than the ones received. Posting
 * as proofgate in any letter case, and a copy of its status comment, are
 * test/cli/identity.test.ts's.
 */
import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryDeliveryLedger, parseWebhookDelivery } from '../../src/forge/github/index.js';
import { attackFixture, cleanupFixtures, expectOneLineFailure, runCli, scratchDir, trustedConfig } from './support.js';

afterEach(cleanupFixtures);

describe('attack 11: smaller', () => {
  it('change open that fails on a bad base config registers nothing; the next good open gets change 1', () => {
    const fx = attackFixture({ '.proofgate.yml': 'checks: 5\n' });
    fx.commit('feature', [{ path: 'a.txt', content: 'a\n' }]);
    expectOneLineFailure(fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']), 'CONFIG');
    const listed = fx.cli(['change', 'list', '--json']);
    expect(listed.status, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([]);
    fx.repo.commit('main', { '.proofgate.yml': trustedConfig({ checks: 'checks: []' }) }, 'fix config');
    const opened = fx.cli(['change', 'open', '--head', 'feature', '--as', 'mallory']);
    expect(opened.stdout).toMatch(/^opened change 1:/);
  });

  it('a data dir whose proofgate.sqlite is a directory is one clear DATA_DIR line, not internal error: EISDIR', () => {
    const fx = attackFixture({ '.proofgate.yml': trustedConfig({ checks: 'checks: []' }) });
    fx.commit('feature', [{ path: 'a.txt', content: 'a\n' }]);
    const data = scratchDir(fx, 'data');
    mkdirSync(join(data, 'proofgate.sqlite'));
    for (const args of [
      ['change', 'list'],
      ['change', 'open', '--head', 'feature'],
      ['automerge', '1'],
      ['review', '--base', 'main', '--head', 'feature'],
    ]) {
      const result = runCli([...args, '--repo', fx.repo.dir, '--data', data]);
      expect(result.stderr).not.toMatch(/EISDIR|internal error/);
      expectOneLineFailure(result, 'DATA_DIR');
    }
  });

  it('a webhook body with a BOM whose signature covers the body without it is refused (WEBHOOK_SIGNATURE)', async () => {
    const secret = 'webhook-secret-for-the-attack-test';
    const json = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1, repository: { name: 'r', owner: { login: 'o' }, default_branch: 'main' } });
    const signature = `sha256=${createHmac('sha256', secret).update(json).digest('hex')}`;
    const body = new Uint8Array(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]));
    const headers = { 'x-hub-signature-256': signature, 'x-github-delivery': 'd-1', 'x-github-event': 'ping' };
    await expect(parseWebhookDelivery({ headers, body, secret, deliveries: memoryDeliveryLedger() })).rejects.toMatchObject({ code: 'WEBHOOK_SIGNATURE' });
  });
});
