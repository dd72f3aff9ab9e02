import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SECRET_CATALOGUE, findSecrets, firstSecretKind, redactSecrets } from '../../src/core/index.js';

// Fake keys, assembled so that no key-shaped literal sits in the source.
const join = (...parts: string[]): string => parts.join('');
const KEYS = {
  awsId: join('AKIA', 'Z7Q3MXK2P9WLR4TB'),
  awsSession: join('ASIA', 'Z7Q3MXK2P9WLR4TB'),
  awsSecret: join('q8Jd/2kLm9Zr4TpVx7nW', 'c1Ye5Hb3Gs6Fa0Ou+Nk2'),
  ghp: join('ghp_', 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8'),
  gho: join('gho_', 'abcdefghijklmnopqrstuvwxyz0123'),
  ghs: join('ghs_', '0123456789abcdef0123'),
  ghu: join('ghu_', 'Zz0123456789abcdefXY'),
  ghr: join('ghr_', 'Rr0123456789abcdefXY'),
  pat: join('github_pat_', '11ABCDEFG0123456789_abcdefghijk'),
  slack: join('xoxb-', '123456789012-1234567890123-abcdefghij'),
  slackUser: join('xoxp-', '123456789012-abcdefghijkl'),
  slackHook: join('https://hooks.slack.com/', 'services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXX'),
  stripeLive: join('sk_live_', '4eC39HqLyjWDarjtT1zdp7dc'),
  stripeRestricted: join('rk_live_', '4eC39HqLyjWDarjtT1zdp7dc'),
  stripeTest: join('sk_test_', '4eC39HqLyjWDarjtT1zdp7dc'),
  google: join('AIza', 'SyA-0123456789abcdefghijklmnopqrstu'),
  openai: join('sk-', 'abcdefghijklmnopqrstuvwxyzABCDEF0123456789'),
  openaiProject: join('sk-proj-', 'abcdefghijklmnopqrstuvwxyzABCDEF0123456789'),
  jwt: join('eyJhbGciOiJIUzI1NiJ9', '.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLXZhbHVl'),
  proofgate: join('pgt_', 'Z2F0ZWtlZXBlci10b2tlbi1mb3ItdGVzdHMtMDEyMzQ'),
} as const;
const PEM_BODY = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC';
const PEM = join('-----BEGIN RSA ', 'PRIVATE KEY-----\n', PEM_BODY, '\n-----END RSA ', 'PRIVATE KEY-----');

describe('the secret catalogue', () => {
  const table: [string, string, string][] = [
    ['aws-access-key-id', `id ${KEYS.awsId} here`, KEYS.awsId],
    ['aws-access-key-id', `session ${KEYS.awsSession}`, KEYS.awsSession],
    ['aws-secret-access-key', `aws_secret_access_key = ${KEYS.awsSecret}`, KEYS.awsSecret],
    ['aws-secret-access-key', `AWS_SECRET_ACCESS_KEY="${KEYS.awsSecret}"`, KEYS.awsSecret],
    ['aws-secret-access-key', `{"SecretAccessKey": "${KEYS.awsSecret}"}`, KEYS.awsSecret],
    ['github-token', `token ${KEYS.ghp}`, KEYS.ghp],
    ['github-token', KEYS.gho, KEYS.gho],
    ['github-token', KEYS.ghs, KEYS.ghs],
    ['github-token', KEYS.ghu, KEYS.ghu],
    ['github-token', KEYS.ghr, KEYS.ghr],
    ['github-token', `pat ${KEYS.pat}`, KEYS.pat],
    ['proofgate-token', `PROOFGATE_TOKEN=${KEYS.proofgate}`, KEYS.proofgate],
    ['proofgate-token', `token ${KEYS.proofgate} here`, KEYS.proofgate],
    ['slack-token', KEYS.slack, KEYS.slack],
    ['slack-token', KEYS.slackUser, KEYS.slackUser],
    ['slack-webhook', `post to ${KEYS.slackHook}`, KEYS.slackHook],
    ['stripe-key', KEYS.stripeLive, KEYS.stripeLive],
    ['stripe-key', KEYS.stripeRestricted, KEYS.stripeRestricted],
    ['stripe-key', `key=${KEYS.stripeTest}`, KEYS.stripeTest],
    ['google-api-key', KEYS.google, KEYS.google],
    ['openai-key', KEYS.openai, KEYS.openai],
    ['openai-key', KEYS.openaiProject, KEYS.openaiProject],
    ['private-key', `a\n${PEM}\nz`, PEM_BODY],
    ['private-key', `cut ${PEM.slice(0, 40)}`, PEM_BODY.slice(0, 8)],
    ['jwt', `jwt ${KEYS.jwt}`, KEYS.jwt],
    ['bearer-token', 'Authorization: Bearer abc.def-ghi', 'abc.def-ghi'],
    ['bearer-token', 'Authorization: Bearer abc.def', 'abc.def'],
    ['bearer-token', 'curl -H "bearer 0123456789abcdef"', '0123456789abcdef'],
    ['authorization', 'Authorization: Basic dXNlcjpwYXNzd29yZA==', 'dXNlcjpwYXNzd29yZA'],
    ['assignment', 'password=hunter22', 'hunter22'],
    ['assignment', 'PASSWORD: "s3cr3t words"', 's3cr3t words'],
    ['assignment', '"client_secret": "abc123"', 'abc123'],
    ['assignment', 'https://x/y?access_token=s3cr3tvalue&a=1', 's3cr3tvalue'],
  ];
  it.each(table)('%s: %j', (kind, text, secret) => {
    expect(firstSecretKind(text)).toBe(kind);
    const out = redactSecrets(text);
    expect(out).not.toContain(secret);
    expect(out).toContain(`[redacted:${kind}]`);
    expect(redactSecrets(out)).toBe(out);
  });

  it('keeps the name in front of a redacted value', () => {
    expect(redactSecrets('url?token=abc&x=1')).toBe('url?token=[redacted:assignment]&x=1');
    expect(redactSecrets('authorization: bearer eyJhbGciOi.x-y_z')).toBe('authorization: bearer [redacted:bearer-token]');
    expect(redactSecrets(`aws_secret_access_key = ${KEYS.awsSecret}`)).toBe('aws_secret_access_key = [redacted:aws-secret-access-key]');
  });

  // Each of these slipped past a `\b` or a required context in the old tables.
  const bypasses: [string, string][] = [
    [`AWS_KEY_${KEYS.awsId}`, KEYS.awsId],
    [`key${KEYS.awsId}`, KEYS.awsId],
    [`${KEYS.awsId}X`, KEYS.awsId],
    [`MY_TOKEN_${KEYS.ghp}`, KEYS.ghp],
    [`OPENAI_KEY_${KEYS.openai}`, KEYS.openai],
    [`STRIPE_${KEYS.stripeLive}`, KEYS.stripeLive],
    [`DB_PASSWORD=hunter22`, 'hunter22'],
    [`export AWS_SECRET_ACCESS_KEY=${KEYS.awsSecret}`, KEYS.awsSecret],
    [`aws secret key is ${KEYS.awsSecret}.`, KEYS.awsSecret],
  ];
  it.each(bypasses)('catches %j', (text, secret) => {
    expect(redactSecrets(text)).not.toContain(secret);
    expect(findSecrets(text).length).toBeGreaterThan(0);
  });

  const ordinary = [
    'plain words about tokens and passwords',
    'commit 0123456789abcdef0123456789abcdef01234567 fixed the secret handling',
    'aws region us-east-1, digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
    'MoneyJsonParser.parse.result',
    'disk_test_integrationScenario and task-0123456789abcdef0123456789abcdef01',
    'review-01HZX8K2M3N4P5Q6R7S8T9V0W1 ran in 35 ms',
  ];
  it.each(ordinary)('leaves ordinary text alone: %j', (text) => {
    expect(redactSecrets(text)).toBe(text);
    expect(firstSecretKind(text)).toBeUndefined();
  });

  it('has unique ids, global expressions and a description for each entry', () => {
    expect(new Set(SECRET_CATALOGUE.map((entry) => entry.id)).size).toBe(SECRET_CATALOGUE.length);
    for (const entry of SECRET_CATALOGUE) {
      expect(entry.pattern.flags).toContain('g');
      expect(entry.description.length).toBeGreaterThan(0);
      // The scan first matches all entries joined into one case-insensitive expression: joining them must not change
      // what any entry means (no back-references or named groups to renumber, no flags beyond g and i).
      expect(entry.pattern.source).not.toMatch(/\\[1-9]|\\k<|\(\?<[A-Za-z]/);
      expect(entry.pattern.flags.replace(/[gi]/g, '')).toBe('');
    }
  });

  it('reports only credential formats to the reviewer, with offsets that cover the key', () => {
    const text = `password=hunter22 and ${KEYS.google}`;
    expect(findSecrets(text).map((m) => m.id)).toEqual(['google-api-key', 'assignment']);
    const [google] = findSecrets(text, { reviewOnly: true });
    expect(google?.id).toBe('google-api-key');
    expect(text.slice(google?.start, google?.end)).toBe(KEYS.google);
  });
});

describe('the secret catalogue, properties', () => {
  const secrets = Object.values(KEYS);
  // Anything around a key: word characters, `_`, `-`, punctuation, newlines, other keys.
  const around = fc.string({ unit: fc.constantFrom('a', 'Z', '0', '_', '-', '.', ' ', '=', ':', '"', '\n', '/', '+', '[', ']'), maxLength: 12 });

  it('a distinctive key is redacted whatever surrounds it', () => {
    const distinctive = [KEYS.awsId, KEYS.awsSession, KEYS.ghp, KEYS.pat, KEYS.slack, KEYS.slackHook, KEYS.stripeLive, KEYS.google];
    fc.assert(
      fc.property(around, fc.constantFrom(...distinctive), around, (before, key, after) => {
        const out = redactSecrets(`${before}${key}${after}`);
        expect(out).not.toContain(key);
      }),
    );
  });

  it('a short-prefix key is redacted after anything but a letter or digit', () => {
    const nonWord = fc.string({ unit: fc.constantFrom('_', '-', '.', ' ', '=', ':', '"', '\n', '/', '('), maxLength: 6 });
    fc.assert(
      fc.property(around, nonWord, fc.constantFrom(KEYS.openai, KEYS.openaiProject, KEYS.stripeTest, KEYS.jwt), (before, edge, key) => {
        expect(redactSecrets(`${before}${edge === '' ? ' ' : edge}${key}`)).not.toContain(key);
      }),
    );
  });

  it('redacting is idempotent on any text, including text built from keys and markers', () => {
    const piece = fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom(...secrets, PEM, 'password=', 'Bearer ', 'aws_secret ', '[redacted:jwt]', '"', ' '));
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const once = redactSecrets(pieces.join(''));
        expect(redactSecrets(once)).toBe(once);
      }),
      { numRuns: 500 },
    );
  });

  it('text without any catalogue match is returned unchanged', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        if (findSecrets(text).length === 0) expect(redactSecrets(text)).toBe(text);
      }),
    );
  });
});
