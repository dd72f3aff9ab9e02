import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCliAsync } from '../cli/helpers.js';
import { FILES, HEAD, PLAN, SCENARIO, bundleEntries, forgeZip, sha256, type ForgeEntry } from './zip-forge.js';

/** These tests run the built binary: `npx tsc -p tsconfig.build.json` first. */

const root = mkdtempSync(join(tmpdir(), 'pg-evidence-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

const obs = join(root, 'obs');
mkdirSync(join(obs, 'gateway'), { recursive: true });
writeFileSync(join(obs, 'chat.json'), '{"reply":"hello"}');
writeFileSync(join(obs, 'gateway', 'requests.json'), '[1,2,3]');
const subject = ['--scenario', SCENARIO, '--plan-digest', PLAN, '--head', HEAD];

describe('proofgate evidence pack / verify', () => {
  it('pack writes a bundle that verify accepts, in words and as JSON, with and without the subject', async () => {
    const bundle = join(root, 'bundle.zip');
    const packed = await runCliAsync(['evidence', 'pack', obs, ...subject, '-o', bundle, '--json']);
    expect(packed.status, packed.stderr).toBe(0);
    const document = JSON.parse(packed.stdout) as { digest: string; archiveBytes: number };
    expect(document.digest).toBe(sha256(readFileSync(bundle)));

    const human = await runCliAsync(['evidence', 'verify', bundle, ...subject]);
    expect(human.status, human.stderr).toBe(0);
    expect(human.stdout).toContain(`verified ${bundle}: ${document.digest}`);
    expect(human.stdout).toMatch(/2 observations:/);
    expect(human.stdout).toContain('gateway/requests.json');

    const json = await runCliAsync(['evidence', 'verify', bundle, '--json']);
    expect(json.status).toBe(0);
    expect(lines(json.stdout)).toHaveLength(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      valid: true,
      digest: document.digest,
      archiveBytes: document.archiveBytes,
      manifest: { scenario: SCENARIO, planDigest: PLAN, headSha: HEAD, observations: [{ path: 'chat.json' }, { path: 'gateway/requests.json' }] },
    });
  });

  it('a refused bundle: exit 1, one stderr line with the reason and [EVIDENCE_INVALID]; --json carries the reason too', async () => {
    const bad = join(root, 'bad.zip');
    const entries = bundleEntries(FILES);
    (entries[1] as ForgeEntry).crc32 = 0xdeadbeef;
    writeFileSync(bad, forgeZip(entries));
    const human = await runCliAsync(['evidence', 'verify', bad]);
    expect(human.status).toBe(1);
    expect(human.stdout).toBe('');
    expect(lines(human.stderr)).toEqual([expect.stringMatching(/^proofgate: CRC_MISMATCH: entry "observations\/chat\.json" .* \[EVIDENCE_INVALID\]$/)]);

    const json = await runCliAsync(['evidence', 'verify', bad, '--json']);
    expect(json.status).toBe(1);
    expect(lines(json.stderr)).toHaveLength(1);
    expect(JSON.parse(json.stdout)).toEqual({
      valid: false,
      error: { code: 'EVIDENCE_INVALID', reason: 'CRC_MISMATCH', message: expect.stringMatching(/^CRC_MISMATCH: /) },
    });
  });

  it('a bundle for another head is SUBJECT_MISMATCH; a hostile name is shown escaped, one line', async () => {
    const bundle = join(root, 'other-head.zip');
    writeFileSync(bundle, forgeZip(bundleEntries(FILES)));
    const other = await runCliAsync(['evidence', 'verify', bundle, '--head', 'f'.repeat(40), '--json']);
    expect(other.status).toBe(1);
    expect(JSON.parse(other.stdout)).toMatchObject({ valid: false, error: { reason: 'SUBJECT_MISMATCH' } });

    const hostile = join(root, 'hostile.zip');
    const entries = bundleEntries(FILES);
    (entries[1] as ForgeEntry).name = 'a\n\x1b[31mproofgate: verified\u202e';
    writeFileSync(hostile, forgeZip(entries));
    const shown = await runCliAsync(['evidence', 'verify', hostile]);
    expect(shown.status).toBe(1);
    expect(lines(shown.stderr)).toHaveLength(1);
    expect(shown.stderr).toMatch(/^proofgate: UNSAFE_PATH: /);
    expect(shown.stderr.includes('\x1b')).toBe(false);
    expect(shown.stderr.includes('\u202e')).toBe(false);
  });

  it('pack refuses a symbolic link in DIR (exit 1, SYMLINK) and writes nothing', async () => {
    const dir = join(root, 'with-link');
    mkdirSync(dir);
    writeFileSync(join(dir, 'ok.txt'), 'ok');
    symlinkSync('/etc/passwd', join(dir, 'passwd'));
    const out = join(root, 'never.zip');
    const refused = await runCliAsync(['evidence', 'pack', dir, ...subject, '-o', out]);
    expect(refused.status).toBe(1);
    expect(lines(refused.stderr)).toEqual([expect.stringMatching(/^proofgate: SYMLINK: "passwd" is a symbolic link.* \[EVIDENCE_INVALID\]$/)]);
    expect(() => readFileSync(out)).toThrow();
  });

  it('malformed flags are usage errors (exit 2); a missing bundle is IO (exit 1); help says what is checked', async () => {
    const usage = await runCliAsync(['evidence', 'verify', join(root, 'x.zip'), '--head', 'abc']);
    expect(usage.status).toBe(2);
    expect(lines(usage.stderr)).toEqual(['proofgate: --head must be a full 40-character lowercase sha [USAGE]']);
    const packUsage = await runCliAsync([
      'evidence',
      'pack',
      obs,
      '--scenario',
      SCENARIO,
      '--plan-digest',
      'sha256:1',
      '--head',
      HEAD,
      '-o',
      join(root, 'y.zip'),
    ]);
    expect(packUsage.status).toBe(2);
    const missing = await runCliAsync(['evidence', 'verify', join(root, 'missing.zip'), '--json']);
    expect(missing.status).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({ error: { code: 'IO' } });
    const help = await runCliAsync(['evidence', 'verify', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/CRC-32/);
    const group = await runCliAsync(['evidence']);
    expect(group.status).toBe(2);
  });
});
