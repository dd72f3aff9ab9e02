/**
 * Secret-looking text never reaches the data dir (issue 10, attack 10): free
 * text is redacted with the one catalogue before it is hashed and stored, and
 * the CLI prints what was stored. Checked on the bytes of the files, not on
 * what the store reads back.
 */
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultStoragePolicy } from '../../src/storage/index.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { runCli } from '../cli/helpers.js';
import { makeChangeRepo } from '../forge/git-fixture.js';

// Fake keys in real shapes, assembled so that no key literal sits in the source.
const KEYS = {
  awsId: ['AKIA', 'Z7Q3MXK2P9WLR4TB'].join(''),
  awsSecret: ['q8Jd/2kLm9Zr4TpVx7nW', 'c1Ye5Hb3Gs6Fa0Ou+Nk2'].join(''),
  github: ['ghp_', 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8'].join(''),
  slack: ['xoxb-', '123456789012-1234567890123-abcdefghij'].join(''),
  stripe: ['sk_live_', '4eC39HqLyjWDarjtT1zdp7dc'].join(''),
  google: ['AIza', 'SyA-0123456789abcdefghijklmnopqrstu'].join(''),
  openai: ['sk-proj-', 'abcdefghijklmnopqrstuvwxyzABCDEF0123456789'].join(''),
  password: ['hunter', '2-but-longer'].join(''),
} as const;

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const info = lstatSync(path);
    return info.isDirectory() ? filesUnder(path) : info.isFile() ? [path] : [];
  });
}

/** The names of the keys whose bytes appear in any file under `dir`. */
function keysStoredUnder(dir: string): string[] {
  const files = filesUnder(dir).map((file) => readFileSync(file));
  return Object.entries(KEYS)
    .filter(([, key]) => files.some((bytes) => bytes.includes(Buffer.from(key))))
    .map(([name]) => name);
}

describe('the SQLite store keeps no key', () => {
  it('titles, comments and logs holding every kind of key are stored redacted, in every file of the data dir', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pg-secret-store-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const storage = createLocalRunStorage({ directory: dir, namespace: 'secrets', policy: defaultStoragePolicy });
    const data = {
      title: `rotate AWS_KEY_${KEYS.awsId} and ${KEYS.stripe}`,
      comment: `slack ${KEYS.slack}, google ${KEYS.google}, openai ${KEYS.openai}, aws_secret_access_key=${KEYS.awsSecret}`,
      log: `+ git push https://x:${KEYS.github}@example.test\nDB_PASSWORD=${KEYS.password}\n`,
    };
    await storage.eventStore.append('change-1', 0, [{ id: 'e1', type: 'change-opened', data }]);
    const [stored] = await storage.eventStore.read('change-1');
    expect(Object.entries(KEYS).filter(([, key]) => JSON.stringify(stored?.data).includes(key))).toEqual([]);
    expect(stored?.data).toMatchObject({ title: 'rotate AWS_KEY_[redacted:aws-access-key-id] and [redacted:stripe-key]' });
    expect(keysStoredUnder(dir)).toEqual([]);
    await storage.close();
    expect(keysStoredUnder(dir)).toEqual([]);
  });
});

describe('the local forge CLI stores and prints no AWS secret key', () => {
  it("from a title, a comment and a check's output", () => {
    const config = ['checks:', '  - name: leak', '    run: cat creds.env', 'maintainers:', '  - alice', ''].join('\n');
    const repo = makeChangeRepo(config);
    cleanups.push(repo.cleanup);
    repo.commit('feature', { 'creds.env': `AWS_ACCESS_KEY_ID=${KEYS.awsId}\nAWS_SECRET_ACCESS_KEY=${KEYS.awsSecret}\n` }, 'add credentials');
    const outputs: string[] = [];
    const cli = (args: string[]) => {
      const result = runCli([...args, '--repo', repo.dir]);
      outputs.push(result.stdout, result.stderr);
      return result;
    };
    expect(cli(['change', 'open', '--head', 'feature', '--base', 'main', '--title', `aws_secret_access_key ${KEYS.awsSecret}`]).status).toBe(0);
    expect(cli(['change', 'comment', '1', `the key is AWS_SECRET_ACCESS_KEY="${KEYS.awsSecret}"`, '--as', 'alice', '--json']).status).toBe(0);
    const run = cli(['checks', 'run', '1']);
    const log = cli(['checks', 'log', '1', 'leak']);
    expect(log.stdout, `checks run: ${run.stderr}`).toContain('AWS_SECRET_ACCESS_KEY=[redacted:aws-secret-access-key]');
    cli(['checks', 'log', '1', 'leak', '--json']);
    cli(['change', 'show', '1', '--json']);
    cli(['change', 'show', '1']);
    cli(['change', 'list', '--json']);
    const printed = outputs.join('\n');
    expect(printed.includes(KEYS.awsSecret), 'printed by the CLI').toBe(false);
    expect(printed.includes(KEYS.awsId), 'printed by the CLI').toBe(false);
    expect(keysStoredUnder(join(repo.dir, '.git', 'proofgate'))).toEqual([]);
  });
});
