/**
 * The pure rules of identities: token shape, hashing and constant-time
 * comparison, login validation, the permission order and the
 * effective-permission rule, the Authorization header, folding the stored
 * events; and the Host rule of the HTTP front.
 */
import { describe, expect, it } from 'vitest';
import type { RepoPermission } from '../../src/forge/port.js';
import { hostProblem, isLoopbackAddress } from '../../src/service/http.js';
import {
  TOKEN_PERMISSIONS,
  bearerToken,
  effectivePermission,
  findByToken,
  foldIdentities,
  isTokenShape,
  loginProblem,
  newToken,
  parsePermission,
  permits,
  tokenHash,
  tokenMatches,
  type TokenPermission,
} from '../../src/service/identities.js';

describe('tokens', () => {
  it('are pgt_ and 32 random bytes in base64url, and differ each time', () => {
    const token = newToken();
    expect(token).toMatch(/^pgt_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(token.slice(4), 'base64url')).toHaveLength(32);
    expect(newToken()).not.toBe(token);
    expect(newToken(() => Buffer.alloc(32, 0xff))).toBe(`pgt_${'_'.repeat(42)}8`);
  });

  it.each([
    [newToken(), true],
    ['pgt_' + 'A'.repeat(43), true],
    ['pgt_' + 'A'.repeat(42), false],
    ['pgt_' + 'A'.repeat(44), false],
    ['pgx_' + 'A'.repeat(43), false],
    ['pgt_' + 'A'.repeat(42) + '=', false],
    ['pgt_' + 'A'.repeat(42) + '+', false],
    ['', false],
  ])('shape of %j is %s', (text, shaped) => {
    expect(isTokenShape(text)).toBe(shaped);
  });

  it('hash as sha256:<hex> and match only their own hash', () => {
    const token = newToken();
    const hash = tokenHash(token);
    expect(hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(hash).not.toContain(token.slice(4));
    expect(tokenMatches(token, hash)).toBe(true);
    expect(tokenMatches(newToken(), hash)).toBe(false);
    expect(tokenMatches(token, hash.toUpperCase())).toBe(false);
    expect(tokenMatches(token, hash.slice(0, -1))).toBe(false);
    expect(tokenMatches(token, token)).toBe(false);
  });
});

describe('permissions', () => {
  it.each([
    ['read', 'read'],
    ['admin', 'admin'],
    ['write', 'write'],
    ['Write', null],
    ['none', null],
    ['owner', null],
    ['', null],
  ])('parsePermission(%j) is %j', (text, parsed) => {
    expect(parsePermission(text)).toBe(parsed);
  });

  const cases: Array<[TokenPermission, RepoPermission, RepoPermission]> = [
    ['admin', 'read', 'read'],
    ['read', 'admin', 'read'],
    ['write', 'maintain', 'write'],
    ['maintain', 'write', 'write'],
    ['triage', 'triage', 'triage'],
    ['admin', 'none', 'none'],
    ['write', 'admin', 'write'],
  ];
  it.each(cases)('a %s token for a %s identity is %s', (token, config, effective) => {
    expect(effectivePermission(token, config)).toBe(effective);
  });

  it('rank as read < triage < write < maintain < admin, with none below all', () => {
    for (const [index, held] of TOKEN_PERMISSIONS.entries()) {
      for (const [other, needed] of TOKEN_PERMISSIONS.entries()) expect(permits(held, needed)).toBe(index >= other);
      expect(permits('none', held)).toBe(false);
      expect(permits(held, 'none')).toBe(true);
    }
  });
});

describe('logins', () => {
  it.each([
    ['agent-1', null],
    ['Tess.Tester_2', null],
    ['a', null],
    ['a'.repeat(39), null],
    ['a'.repeat(40), 'letters'],
    ['', 'needs a name'],
    ['-agent', 'letters'],
    ['two words', 'letters'],
    ['agent[bot]', 'letters'],
    ['ägent', 'letters'],
    ['agent\n', 'letters'],
    ['proofgate', "proofgate's own"],
    ['ProofGate', "proofgate's own"],
  ])('%j: %j', (name, problem) => {
    const found = loginProblem(name);
    if (problem === null) expect(found).toBeNull();
    else expect(found).toContain(problem);
  });

  it("refuse the forge's own login when it is another", () => {
    expect(loginProblem('merge-bot', 'Merge-Bot')).toContain("proofgate's own");
    expect(loginProblem('proofgate', 'merge-bot')).toBeNull();
  });
});

describe('the Authorization header', () => {
  it.each([
    [undefined, { token: null }],
    ['Bearer pgt_x', { token: 'pgt_x' }],
    ['bearer  pgt_x', { token: 'pgt_x' }],
    ['Basic dXNlcjpwYXNz', { problem: 'the Authorization header is not "Bearer <token>"' }],
    ['Bearer', { problem: 'the Authorization header is not "Bearer <token>"' }],
    ['Bearer a b', { problem: 'the Authorization header is not "Bearer <token>"' }],
    [['Bearer a', 'Bearer b'], { problem: 'more than one Authorization header' }],
  ])('%j is %j', (header, parsed) => {
    expect(bearerToken(header)).toEqual(parsed);
  });
});

describe('the stored identities', () => {
  const a = newToken();
  const b = newToken();
  const created = (login: string, token: string, permission = 'read') => ({
    type: 'token-created',
    data: { login, permission, tokenHash: tokenHash(token), createdAt: '2026-01-01T00:00:00.000Z' },
  });
  const revoked = (login: string) => ({ type: 'token-revoked', data: { login, revokedAt: '2026-01-02T00:00:00.000Z' } });

  it('fold created and revoked tokens, a revoke ending the live one only', () => {
    const identities = foldIdentities([created('agent', a, 'write'), revoked('AGENT'), created('agent', b)]);
    expect(identities.map((entry) => [entry.login, entry.permission, entry.revokedAt])).toEqual([
      ['agent', 'write', '2026-01-02T00:00:00.000Z'],
      ['agent', 'read', null],
    ]);
    expect(findByToken(identities, a)).toBeNull();
    expect(findByToken(identities, b)?.permission).toBe('read');
    expect(findByToken(identities, newToken())).toBeNull();
    expect(findByToken(identities, tokenHash(b))).toBeNull();
  });

  it.each([
    [{ type: 'token-created', data: { login: 'agent', permission: 'root', tokenHash: 'sha256:00', createdAt: 'x' } }],
    [{ type: 'token-created', data: { permission: 'read' } }],
    [{ type: 'token-revoked', data: { login: 'agent' } }],
    [{ type: 'something-else', data: { login: 'agent' } }],
    [{ type: 'token-created', data: 'agent' }],
  ])('refuse a malformed event %j', (event) => {
    expect(() => foldIdentities([event])).toThrow(expect.objectContaining({ code: 'INVALID_STORED_VALUE' }));
  });
});

describe('the Host header', () => {
  const v4 = { address: '127.0.0.1', family: 'IPv4', port: 8080 };
  const v6 = { address: '::1', family: 'IPv6', port: 8080 };
  const lan = { address: '192.0.2.2', family: 'IPv4', port: 8080 };
  const any = { address: '0.0.0.0', family: 'IPv4', port: 8080 };
  const web = { address: '127.0.0.1', family: 'IPv4', port: 80 };
  it.each([
    [v4, '127.0.0.1:8080', true],
    [v4, 'localhost:8080', true],
    [v4, 'LOCALHOST:8080', true],
    [v4, 'evil.example:8080', false],
    [v4, '127.0.0.1:8081', false],
    [v4, '127.0.0.1', false],
    [v4, undefined, false],
    [v4, '', false],
    [v6, '[::1]:8080', true],
    [v6, 'localhost:8080', true],
    [v6, '::1:8080', false],
    [lan, '192.0.2.2:8080', true],
    [lan, 'localhost:8080', false],
    [any, 'build.example:8080', true],
    [any, '[fd00::2]:8080', true],
    [any, 'build.example:9090', false],
    [any, 'build.example', false],
    [web, '127.0.0.1', true],
    [web, 'localhost:80', true],
    [web, 'attacker.example', false],
  ])('bound to %j, Host %j is accepted: %s', (bound, host, accepted) => {
    expect(hostProblem(host, bound) === null).toBe(accepted);
  });

  it.each([
    ['127.0.0.1', true],
    ['127.4.5.6', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['192.0.2.2', false],
    ['1270.0.0.1', false],
  ])('%s is loopback: %s', (address, loopback) => {
    expect(isLoopbackAddress(address)).toBe(loopback);
  });
});
