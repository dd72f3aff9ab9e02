import { generateKeyPairSync } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isProofgateError, type ErrorCode } from '../../src/core/index.js';
import { serveOptionsFrom, serviceSettingsFrom, type Environment, type ServeFlags } from '../../src/service/index.js';
import { testKeyPair } from '../support/keys.js';

// Real keys, made once: an RSA key as GitHub issues them (PKCS#1), and keys GitHub never issues.
const rsa = testKeyPair();
const RSA_PEM = rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
const RSA_PKCS8_PEM = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const PUBLIC_PEM = rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString();
const EC_PEM = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const ENCRYPTED_PEM = rsa.privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'correct horse' }).toString();
/** A line of the key's body: no message may ever contain it. */
const KEY_BODY_LINE = RSA_PEM.split('\n')[5] as string;
const TRUNCATED_PEM = RSA_PEM.split('\n').slice(0, 8).join('\n') + '\n-----END RSA PRIVATE KEY-----\n';

const WEBHOOK_SECRET = 'whsec-the-deliveries-are-signed-with-this';
const DB_PASSWORD = 'pg-pass-never-shown';
const MARKER_HEX = 'ab'.repeat(32);

const dir = mkdtempSync(join(tmpdir(), 'proofgate-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const APP = {
  PROOFGATE_GITHUB_APP_ID: '123456',
  PROOFGATE_GITHUB_PRIVATE_KEY: RSA_PEM,
  PROOFGATE_GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET,
} as const;

function failure(run: () => unknown): { code: ErrorCode; message: string } {
  try {
    run();
  } catch (error) {
    if (!isProofgateError(error)) throw error;
    return { code: error.code, message: error.message };
  }
  throw new Error('expected a ProofgateError, nothing was thrown');
}

/** The error is one line, names `name`, and quotes none of the secrets it was given. */
function expectOneLine(error: { message: string }, name: string): void {
  expect(error.message).not.toMatch(/[\r\n]/);
  expect(error.message).toContain(name);
  for (const secret of [KEY_BODY_LINE, WEBHOOK_SECRET, DB_PASSWORD, MARKER_HEX, 'correct horse', 'BEGIN RSA PRIVATE KEY-----\n']) {
    expect(error.message).not.toContain(secret);
  }
}

describe('serviceSettingsFrom: GitHub on or off', () => {
  it('no GitHub variable at all: GitHub is off (local repositories only), and nothing else is required', () => {
    const settings = serviceSettingsFrom({ PATH: '/usr/bin', HOME: '/home/someone', GITHUB_TOKEN: 'not ours' });
    expect(settings).toEqual({ github: null, databaseUrl: null, markerSecret: null, dataDir: null });
  });

  it('an empty environment object is the same', () => {
    expect(serviceSettingsFrom({}).github).toBeNull();
  });

  it('app id, PEM key and webhook secret: the GitHub App, on https://api.github.com by default', () => {
    const settings = serviceSettingsFrom({ ...APP });
    expect(settings.github).toEqual({
      appId: 123456,
      privateKey: RSA_PEM,
      privateKeySource: { kind: 'env' },
      webhookSecret: WEBHOOK_SECRET,
      apiUrl: 'https://api.github.com',
    });
  });

  it('a PKCS#8 RSA key is accepted too', () => {
    expect(serviceSettingsFrom({ ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: RSA_PKCS8_PEM }).github?.privateKey).toBe(RSA_PKCS8_PEM);
  });

  it('a key written on one line with literal \\n sequences (an env file) is read with real line breaks', () => {
    const oneLine = RSA_PEM.trimEnd().split('\n').join('\\n');
    expect(oneLine).not.toContain('\n');
    expect(serviceSettingsFrom({ ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: oneLine }).github?.privateKey).toBe(RSA_PEM.trimEnd());
  });

  it('GitHub Enterprise Server: PROOFGATE_GITHUB_API_URL, trailing slash dropped', () => {
    const settings = serviceSettingsFrom({ ...APP, PROOFGATE_GITHUB_API_URL: 'https://ghe.example.com/api/v3/' });
    expect(settings.github?.apiUrl).toBe('https://ghe.example.com/api/v3');
  });

  it('the key from PROOFGATE_GITHUB_PRIVATE_KEY_FILE: the file is read and checked', () => {
    const path = join(dir, 'app.pem');
    writeFileSync(path, RSA_PEM, { mode: 0o600 });
    const { PROOFGATE_GITHUB_PRIVATE_KEY: _unused, ...rest } = APP;
    const settings = serviceSettingsFrom({ ...rest, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: path });
    expect(settings.github?.privateKey).toBe(RSA_PEM);
    expect(settings.github?.privateKeySource).toEqual({ kind: 'file', path });
  });

  it('reading the key file is the one effect, and a caller may supply it', () => {
    const read: string[] = [];
    const { PROOFGATE_GITHUB_PRIVATE_KEY: _unused, ...rest } = APP;
    const settings = serviceSettingsFrom(
      { ...rest, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: '/keys/app.pem' },
      {
        readKeyFile: (path) => {
          read.push(path);
          return RSA_PEM;
        },
      },
    );
    expect(read).toEqual(['/keys/app.pem']);
    expect(settings.github?.appId).toBe(123456);
  });

  it('database URL, marker secret and data dir', () => {
    const settings = serviceSettingsFrom({
      PROOFGATE_DATABASE_URL: `postgresql://proofgate:${DB_PASSWORD}@db.internal:5432/proofgate`,
      PROOFGATE_MARKER_SECRET: MARKER_HEX,
      PROOFGATE_DATA_DIR: '/var/lib/proofgate',
    });
    expect(settings.databaseUrl).toBe(`postgresql://proofgate:${DB_PASSWORD}@db.internal:5432/proofgate`);
    expect(settings.markerSecret).toEqual(new Uint8Array(32).fill(0xab));
    expect(settings.dataDir).toBe('/var/lib/proofgate');
    expect(serviceSettingsFrom({ PROOFGATE_DATABASE_URL: 'postgres://localhost/pg' }).databaseUrl).toBe('postgres://localhost/pg');
  });
});

describe('serviceSettingsFrom: some GitHub settings but not all names the first missing one', () => {
  const { PROOFGATE_GITHUB_APP_ID: appId, PROOFGATE_GITHUB_PRIVATE_KEY: key, PROOFGATE_GITHUB_WEBHOOK_SECRET: secret } = APP;
  const cases: Array<[string, Environment, string]> = [
    ['only the webhook secret', { PROOFGATE_GITHUB_WEBHOOK_SECRET: secret }, 'PROOFGATE_GITHUB_APP_ID'],
    ['only the key', { PROOFGATE_GITHUB_PRIVATE_KEY: key }, 'PROOFGATE_GITHUB_APP_ID'],
    ['only the key file', { PROOFGATE_GITHUB_PRIVATE_KEY_FILE: '/keys/app.pem' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['only the API URL', { PROOFGATE_GITHUB_API_URL: 'https://ghe.example.com/api/v3' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['only the app id', { PROOFGATE_GITHUB_APP_ID: appId }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['app id and webhook secret', { PROOFGATE_GITHUB_APP_ID: appId, PROOFGATE_GITHUB_WEBHOOK_SECRET: secret }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['app id and key', { PROOFGATE_GITHUB_APP_ID: appId, PROOFGATE_GITHUB_PRIVATE_KEY: key }, 'PROOFGATE_GITHUB_WEBHOOK_SECRET'],
  ];
  it.each(cases)('%s: CONFIG naming %s', (_label, env, name) => {
    const error = failure(() => serviceSettingsFrom(env));
    expect(error.code).toBe('CONFIG');
    expect(error.message.startsWith(`${name} is not set`)).toBe(true);
    expectOneLine(error, name);
  });
});

describe('serviceSettingsFrom: every malformed setting is one CONFIG line naming it, without its value', () => {
  const keyPath = join(dir, 'bad.pem');
  writeFileSync(keyPath, 'this is not a key, but it names a secret: ' + WEBHOOK_SECRET);
  const keyDir = join(dir, 'a-directory.pem');
  mkdirSync(keyDir, { recursive: true });
  const { PROOFGATE_GITHUB_PRIVATE_KEY: _key, ...withoutKey } = APP;

  const cases: Array<[string, Environment, string]> = [
    ['app id not a number', { ...APP, PROOFGATE_GITHUB_APP_ID: 'abc' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['app id zero', { ...APP, PROOFGATE_GITHUB_APP_ID: '0' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['app id negative', { ...APP, PROOFGATE_GITHUB_APP_ID: '-4' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['app id a fraction', { ...APP, PROOFGATE_GITHUB_APP_ID: '1.5' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['app id too large', { ...APP, PROOFGATE_GITHUB_APP_ID: '99999999999999999999' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['app id holding the key by mistake', { ...APP, PROOFGATE_GITHUB_APP_ID: RSA_PEM }, 'PROOFGATE_GITHUB_APP_ID'],
    ['app id empty', { ...APP, PROOFGATE_GITHUB_APP_ID: '' }, 'PROOFGATE_GITHUB_APP_ID'],
    ['key not PEM', { ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: 'just-a-string-' + WEBHOOK_SECRET }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['key empty', { ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: '' }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['key a public key', { ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: PUBLIC_PEM }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['key an EC key', { ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: EC_PEM }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['key encrypted', { ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: ENCRYPTED_PEM }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['key truncated', { ...APP, PROOFGATE_GITHUB_PRIVATE_KEY: TRUNCATED_PEM }, 'PROOFGATE_GITHUB_PRIVATE_KEY'],
    ['key and key file both set', { ...APP, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: join(dir, 'app.pem') }, 'PROOFGATE_GITHUB_PRIVATE_KEY_FILE'],
    ['key file missing', { ...withoutKey, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: join(dir, 'nowhere.pem') }, 'PROOFGATE_GITHUB_PRIVATE_KEY_FILE'],
    ['key file a directory', { ...withoutKey, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: keyDir }, 'PROOFGATE_GITHUB_PRIVATE_KEY_FILE'],
    ['key file not a key', { ...withoutKey, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: keyPath }, 'PROOFGATE_GITHUB_PRIVATE_KEY_FILE'],
    ['key file empty path', { ...withoutKey, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: '' }, 'PROOFGATE_GITHUB_PRIVATE_KEY_FILE'],
    ['webhook secret empty', { ...APP, PROOFGATE_GITHUB_WEBHOOK_SECRET: '' }, 'PROOFGATE_GITHUB_WEBHOOK_SECRET'],
    ['webhook secret blank', { ...APP, PROOFGATE_GITHUB_WEBHOOK_SECRET: '   ' }, 'PROOFGATE_GITHUB_WEBHOOK_SECRET'],
    ['API URL not http', { ...APP, PROOFGATE_GITHUB_API_URL: 'ftp://ghe.example.com/api/v3' }, 'PROOFGATE_GITHUB_API_URL'],
    ['API URL not a URL', { ...APP, PROOFGATE_GITHUB_API_URL: 'ghe.example.com' }, 'PROOFGATE_GITHUB_API_URL'],
    ['API URL with credentials', { ...APP, PROOFGATE_GITHUB_API_URL: `https://x:${DB_PASSWORD}@ghe.example.com/api/v3` }, 'PROOFGATE_GITHUB_API_URL'],
    ['API URL with a query', { ...APP, PROOFGATE_GITHUB_API_URL: 'https://ghe.example.com/api/v3?token=1' }, 'PROOFGATE_GITHUB_API_URL'],
    ['database URL of another database', { PROOFGATE_DATABASE_URL: `mysql://u:${DB_PASSWORD}@db/x` }, 'PROOFGATE_DATABASE_URL'],
    ['database URL without a scheme', { PROOFGATE_DATABASE_URL: `u:${DB_PASSWORD}@db/x` }, 'PROOFGATE_DATABASE_URL'],
    ['database URL unparsable', { PROOFGATE_DATABASE_URL: `postgres://u:${DB_PASSWORD}@db:port/x` }, 'PROOFGATE_DATABASE_URL'],
    ['database URL empty', { PROOFGATE_DATABASE_URL: '' }, 'PROOFGATE_DATABASE_URL'],
    ['marker secret not hex', { PROOFGATE_MARKER_SECRET: 'z'.repeat(64) }, 'PROOFGATE_MARKER_SECRET'],
    ['marker secret 31 bytes', { PROOFGATE_MARKER_SECRET: MARKER_HEX.slice(0, 62) }, 'PROOFGATE_MARKER_SECRET'],
    ['marker secret odd digits', { PROOFGATE_MARKER_SECRET: MARKER_HEX + 'a' }, 'PROOFGATE_MARKER_SECRET'],
    ['marker secret empty', { PROOFGATE_MARKER_SECRET: '' }, 'PROOFGATE_MARKER_SECRET'],
  ];
  it.each(cases)('%s: names %s', (_label, env, name) => {
    const error = failure(() => serviceSettingsFrom(env));
    expect(error.code).toBe('CONFIG');
    expectOneLine(error, name);
  });

  it('the both-set error names both variables', () => {
    const error = failure(() => serviceSettingsFrom({ ...APP, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: '/keys/app.pem' }));
    expect(error.message).toContain('PROOFGATE_GITHUB_PRIVATE_KEY and PROOFGATE_GITHUB_PRIVATE_KEY_FILE are both set');
  });

  it('a missing key file says so without quoting the path (a key pasted there by mistake would be printed)', () => {
    const path = join(dir, 'nowhere.pem');
    const error = failure(() => serviceSettingsFrom({ ...withoutKey, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: path }));
    expect(error.message).toBe('PROOFGATE_GITHUB_PRIVATE_KEY_FILE: the file it names cannot be used: no such file');
  });

  it('a FIFO, a device or a huge file named as the key file is refused at once, never read (no hang, no endless read)', () => {
    const fifo = join(dir, 'key.fifo');
    execFileSync('mkfifo', [fifo]);
    const big = join(dir, 'big.pem');
    writeFileSync(big, 'x'.repeat(65 * 1024));
    const cases: [string, string][] = [
      [fifo, 'it is not a regular file'],
      ['/dev/zero', 'it is not a regular file'],
      [dir, 'it is a directory'],
      [big, 'it is larger than 64 KiB'],
    ];
    for (const [path, why] of cases) {
      const error = failure(() => serviceSettingsFrom({ ...withoutKey, PROOFGATE_GITHUB_PRIVATE_KEY_FILE: path }));
      expect(error.message).toBe(`PROOFGATE_GITHUB_PRIVATE_KEY_FILE: the file it names cannot be used: ${why}`);
    }
  });

  it('the error carries the setting as data, for callers that branch on it', () => {
    try {
      serviceSettingsFrom({ ...APP, PROOFGATE_GITHUB_APP_ID: 'abc' });
      expect.unreachable();
    } catch (error) {
      expect(isProofgateError(error, 'CONFIG') && error.details).toEqual({ setting: 'PROOFGATE_GITHUB_APP_ID' });
    }
  });
});

describe('serveOptionsFrom: the flags of proofgate serve with the environment', () => {
  function usageOf(flags: ServeFlags, env: Environment = {}): { code: ErrorCode; message: string } {
    return failure(() => serveOptionsFrom(flags, env));
  }

  it('defaults: 127.0.0.1:8080, one worker, HTTP on, the embedded store in the default directory, GitHub off', () => {
    const options = serveOptionsFrom({}, {});
    expect(options).toEqual({
      port: 8080,
      host: '127.0.0.1',
      http: true,
      workers: 1,
      storage: { kind: 'sqlite', dataDir: null },
      repo: null,
      settings: { github: null, databaseUrl: null, markerSecret: null, dataDir: null },
    });
  });

  it('every flag given', () => {
    expect(serveOptionsFrom({ port: '0' }, {}).port).toBe(0);
    const options = serveOptionsFrom({ port: '9000', host: '0.0.0.0', workers: '64', http: false, data: '/srv/pg', repo: '/src/project' }, { ...APP });
    expect(options).toMatchObject({
      port: 9000,
      host: '0.0.0.0',
      workers: 64,
      http: false,
      storage: { kind: 'sqlite', dataDir: '/srv/pg' },
      repo: '/src/project',
    });
    expect(options.settings.github?.appId).toBe(123456);
  });

  it('hosts: names and IP addresses', () => {
    for (const host of ['localhost', '::1', '::', '10.0.0.7', 'proofgate.internal.example.com']) expect(serveOptionsFrom({ host }, {}).host).toBe(host);
  });

  it.each([
    [{ port: '65536' }, '--port'],
    [{ port: '80a' }, '--port'],
    [{ port: '' }, '--port'],
    [{ port: '-1' }, '--port'],
    [{ workers: '0' }, '--workers'],
    [{ workers: '65' }, '--workers'],
    [{ workers: '2.5' }, '--workers'],
    [{ host: 'not a host' }, '--host'],
    [{ host: '' }, '--host'],
    [{ host: 'http://example.com' }, '--host'],
    [{ data: '' }, '--data'],
    [{ repo: '' }, '--repo'],
    [{ data: '/srv/pg', databaseUrl: 'postgres://db/pg' }, '--data'],
    [{ databaseUrl: `mysql://u:${DB_PASSWORD}@db/x` }, '--database-url'],
  ] as Array<[ServeFlags, string]>)('%o: one USAGE line naming %s', (flags, flag) => {
    const error = usageOf(flags);
    expect(error.code).toBe('USAGE');
    expectOneLine(error, flag);
  });

  it('--data and --database-url together: the error names both', () => {
    expect(usageOf({ data: '/srv/pg', databaseUrl: 'postgres://db/pg' }).message).toContain('--data and --database-url');
  });

  it('the port and worker bounds are allowed', () => {
    expect(serveOptionsFrom({ port: '1', workers: '1' }, {})).toMatchObject({ port: 1, workers: 1 });
    expect(serveOptionsFrom({ port: '65535', workers: '64' }, {})).toMatchObject({ port: 65535, workers: 64 });
  });

  it('PROOFGATE_DATABASE_URL selects PostgreSQL', () => {
    expect(serveOptionsFrom({}, { PROOFGATE_DATABASE_URL: 'postgres://db/env' }).storage).toEqual({ kind: 'postgres', url: 'postgres://db/env', from: 'env' });
  });

  it('--database-url wins over PROOFGATE_DATABASE_URL', () => {
    const options = serveOptionsFrom({ databaseUrl: 'postgresql://db/flag' }, { PROOFGATE_DATABASE_URL: 'postgres://db/env' });
    expect(options.storage).toEqual({ kind: 'postgres', url: 'postgresql://db/flag', from: 'flag' });
  });

  it('--data asks for the embedded store even when PROOFGATE_DATABASE_URL is set', () => {
    expect(serveOptionsFrom({ data: '/srv/pg' }, { PROOFGATE_DATABASE_URL: 'postgres://db/env' }).storage).toEqual({ kind: 'sqlite', dataDir: '/srv/pg' });
  });

  it('without flags the embedded store lives in PROOFGATE_DATA_DIR', () => {
    expect(serveOptionsFrom({}, { PROOFGATE_DATA_DIR: '/var/lib/pg' }).storage).toEqual({ kind: 'sqlite', dataDir: '/var/lib/pg' });
  });

  it('flag errors (USAGE, exit 2) come before the environment (CONFIG, exit 1)', () => {
    expect(usageOf({ port: '70000' }, { PROOFGATE_GITHUB_APP_ID: 'abc' }).code).toBe('USAGE');
    expect(usageOf({ port: '8080' }, { PROOFGATE_GITHUB_APP_ID: 'abc' })).toMatchObject({ code: 'CONFIG' });
  });

  it('a malformed PROOFGATE_DATABASE_URL is an error even when a flag overrides it', () => {
    const error = usageOf({ databaseUrl: 'postgres://db/flag' }, { PROOFGATE_DATABASE_URL: `mysql://u:${DB_PASSWORD}@db/x` });
    expect(error.code).toBe('CONFIG');
    expectOneLine(error, 'PROOFGATE_DATABASE_URL');
  });
});
