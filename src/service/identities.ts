/**
 * Identities of `proofgate serve`: named bearer tokens, each with a
 * permission that is a ceiling.
 *
 * Pure rules first (token shape, hashing and constant-time comparison, login
 * validation, permission order and the effective-permission rule, folding the
 * stored events), then the one effect: the `identities` event stream in the
 * data directory's store (SQLite, through the storage layer), which holds a
 * token's sha256 and never the token.
 *
 * A token is `pgt_` and 32 random bytes in base64url (43 characters). It is
 * printed once, when created; what is stored is `sha256:<hex>` of its UTF-8
 * bytes. A lookup hashes the presented token and compares it with every live
 * identity's hash in constant time (no early exit on the first match).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ProofgateError, newId, type JsonValue } from '../core/index.js';
import { sameLogin } from '../contracts/repo-config.js';
import { lowerPermission, permissionRank, type RepoPermission } from '../forge/port.js';
import { checkDataDir, dataDirFailure } from '../forge/local/data-dir.js';
import { defaultStoragePolicy } from '../storage/policy.js';
import type { RunStorage } from '../storage/policy-types.js';
import type { EventStore, StoredEvent } from '../storage/ports.js';
import { createLocalRunStorage } from '../storage/sqlite/index.js';

/** Every token starts with this, so a leaked one is recognisable. */
export const TOKEN_PREFIX = 'pgt_';
/** Random bytes in a token. */
export const TOKEN_BYTES = 32;
const TOKEN_PATTERN = /^pgt_[A-Za-z0-9_-]{43}$/;
const HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** The storage namespace (in the data directory's database) of the identities. */
export const IDENTITIES_NAMESPACE = 'identities';
/** The one stream of token events. */
export const IDENTITIES_STREAM = 'identities';

/** The permissions a token may carry, lowest first (GitHub's repository roles). */
export const TOKEN_PERMISSIONS = ['read', 'triage', 'write', 'maintain', 'admin'] as const;
export type TokenPermission = (typeof TOKEN_PERMISSIONS)[number];

// ---------------------------------------------------------------- pure rules

/** A new token (`random` is a test seam; it must return `TOKEN_BYTES` fresh random bytes). */
export function newToken(random: (size: number) => Buffer = randomBytes): string {
  const bytes = random(TOKEN_BYTES);
  if (bytes.length !== TOKEN_BYTES) throw new ProofgateError('INTERNAL', `a token needs ${TOKEN_BYTES} random bytes`);
  return `${TOKEN_PREFIX}${bytes.toString('base64url')}`;
}

/** Whether `text` has the shape of a token (prefix, 43 base64url characters). Pure. */
export function isTokenShape(text: string): boolean {
  return TOKEN_PATTERN.test(text);
}

/** What is stored for a token: `sha256:<hex>` of its UTF-8 bytes. Pure. */
export function tokenHash(token: string): string {
  return `sha256:${createHash('sha256').update(token, 'utf8').digest('hex')}`;
}

/** Whether `token` hashes to `storedHash`, compared in constant time; false for a malformed hash. Pure. */
export function tokenMatches(token: string, storedHash: string): boolean {
  if (!HASH_PATTERN.test(storedHash)) return false;
  const presented = Buffer.from(tokenHash(token), 'utf8');
  const stored = Buffer.from(storedHash, 'utf8');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}

/** The permission named by `text`, or null when it is not one a token may carry. Pure. */
export function parsePermission(text: string): TokenPermission | null {
  return (TOKEN_PERMISSIONS as readonly string[]).includes(text) ? (text as TokenPermission) : null;
}

/**
 * The effective permission of a token's identity: the lower of the token's
 * permission (a ceiling) and the one the trusted config gives that login
 * (`read` for one it does not list, on the local forge). Pure.
 */
export function effectivePermission(tokenPermission: TokenPermission, configPermission: RepoPermission): RepoPermission {
  return lowerPermission(tokenPermission, configPermission);
}

/** Whether `held` is at least `needed`. Pure. */
export function permits(held: RepoPermission, needed: RepoPermission): boolean {
  return permissionRank(held) >= permissionRank(needed);
}

/**
 * Why `name` cannot be an identity's login, or null when it can. A login is 1
 * to 39 letters, digits, `-`, `_` and `.`, starting with a letter or digit
 * (no spaces, no `[bot]`), and never proofgate's own (`selfLogin`, in any
 * letter case: the local forge refuses to act as it). Pure.
 */
export function loginProblem(name: string, selfLogin = 'proofgate'): string | null {
  if (name === '') return 'an identity needs a name';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,38}$/.test(name)) {
    return 'an identity name is 1 to 39 letters, digits, "-", "_" or ".", starting with a letter or digit';
  }
  if (sameLogin(name, selfLogin)) return `"${name}" is proofgate's own identity`;
  return null;
}

/** A stored identity (never its token). */
export interface Identity {
  readonly login: string;
  readonly permission: TokenPermission;
  readonly createdAt: string;
  /** When it was revoked, or null while it is live. */
  readonly revokedAt: string | null;
  /** `sha256:<hex>` of the token. */
  readonly tokenHash: string;
}

interface CreatedData {
  readonly login: string;
  readonly permission: TokenPermission;
  readonly tokenHash: string;
  readonly createdAt: string;
}

interface RevokedData {
  readonly login: string;
  readonly revokedAt: string;
}

function record(value: JsonValue): Record<string, JsonValue> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : null;
}

/**
 * Fold the token events (in revision order) into identities, newest token of
 * each login last: a login has at most one live token. Events of another
 * shape are refused (`INVALID_STORED_VALUE`): the stream is proofgate's own. Pure.
 */
export function foldIdentities(events: readonly Pick<StoredEvent, 'type' | 'data'>[]): Identity[] {
  const all: Identity[] = [];
  for (const event of events) {
    const data = record(event.data);
    const login = data?.login;
    if (data === null || typeof login !== 'string') throw new ProofgateError('INVALID_STORED_VALUE', `identity event ${event.type} has no login`);
    if (event.type === 'token-created') {
      const permission = typeof data.permission === 'string' ? parsePermission(data.permission) : null;
      if (permission === null || typeof data.tokenHash !== 'string' || typeof data.createdAt !== 'string') {
        throw new ProofgateError('INVALID_STORED_VALUE', `token-created event of "${login}" is malformed`);
      }
      all.push({ login, permission, tokenHash: data.tokenHash, createdAt: data.createdAt, revokedAt: null });
    } else if (event.type === 'token-revoked') {
      if (typeof data.revokedAt !== 'string') throw new ProofgateError('INVALID_STORED_VALUE', `token-revoked event of "${login}" is malformed`);
      const index = all.findIndex((entry) => entry.revokedAt === null && sameLogin(entry.login, login));
      if (index >= 0) all[index] = { ...(all[index] as Identity), revokedAt: data.revokedAt };
    } else {
      throw new ProofgateError('INVALID_STORED_VALUE', `unknown identity event ${event.type}`);
    }
  }
  return all;
}

/**
 * The live identity whose token is `token`, or null (unknown, revoked, or not
 * a token's shape). Every live hash is compared, whatever matches first. Pure.
 */
export function findByToken(identities: readonly Identity[], token: string): Identity | null {
  if (!isTokenShape(token)) return null;
  let found: Identity | null = null;
  for (const identity of identities) {
    if (tokenMatches(token, identity.tokenHash) && identity.revokedAt === null && found === null) found = identity;
  }
  return found;
}

/** The bearer token of an Authorization header: `{ token }`, `{ token: null }` when absent, or `{ problem }`. Pure. */
export function bearerToken(header: string | readonly string[] | undefined): { readonly token: string | null } | { readonly problem: string } {
  if (header === undefined) return { token: null };
  if (typeof header !== 'string') return { problem: 'more than one Authorization header' };
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (match === null) return { problem: 'the Authorization header is not "Bearer <token>"' };
  return { token: match[1] as string };
}

// ---------------------------------------------------------------- the store

/** The identities of one data directory. */
export interface IdentityStore {
  list(): Promise<Identity[]>;
  /** Create a token for `login`; returns it (the only time it exists outside the caller's hands). */
  create(login: string, permission: TokenPermission): Promise<{ readonly token: string; readonly identity: Identity }>;
  /** Revoke `login`'s live token (`NOT_FOUND` when it has none). */
  revoke(login: string): Promise<Identity>;
  /** The live identity of `token`, or null. */
  authenticate(token: string): Promise<Identity | null>;
}

export interface IdentityStoreOptions {
  readonly now?: () => Date;
  /** proofgate's own login (default `proofgate`): never an identity. */
  readonly selfLogin?: string;
  readonly random?: (size: number) => Buffer;
}

const MAX_ATTEMPTS = 20;

/** The identities kept in `events` (stream `identities`). */
export function identityStore(events: EventStore, options: IdentityStoreOptions = {}): IdentityStore {
  const now = options.now ?? (() => new Date());
  const selfLogin = options.selfLogin ?? 'proofgate';
  const read = async (): Promise<{ identities: Identity[]; revision: number }> => {
    const stored = await events.read(IDENTITIES_STREAM);
    return { identities: foldIdentities(stored), revision: stored[stored.length - 1]?.revision ?? 0 };
  };
  /** Append one event decided on fresh state, retrying when another process wrote first. */
  const appendWith = async <T>(decide: (identities: Identity[]) => { type: string; data: JsonValue; result: T }): Promise<T> => {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const { identities, revision } = await read();
      const { type, data, result } = decide(identities);
      try {
        await events.append(IDENTITIES_STREAM, revision, [{ id: newId('idn'), type, data }]);
        return result;
      } catch (error) {
        if (error instanceof ProofgateError && error.code === 'REVISION_CONFLICT') continue;
        throw error;
      }
    }
    throw new ProofgateError('REVISION_CONFLICT', `the identities kept changing; gave up after ${MAX_ATTEMPTS} attempts`);
  };
  return {
    list: async () => (await read()).identities,
    async create(login, permission) {
      const problem = loginProblem(login, selfLogin);
      if (problem !== null) throw new ProofgateError(sameLogin(login, selfLogin) ? 'RESERVED_IDENTITY' : 'INVALID_INPUT', problem, { login });
      if (parsePermission(permission) === null) throw new ProofgateError('INVALID_INPUT', `not a permission: ${permission}`);
      const token = newToken(options.random);
      return appendWith((identities) => {
        if (identities.some((entry) => entry.revokedAt === null && sameLogin(entry.login, login))) {
          throw new ProofgateError('INVALID_INPUT', `identity "${login}" already has a token; revoke it first`, { login });
        }
        const data: CreatedData = { login, permission, tokenHash: tokenHash(token), createdAt: now().toISOString() };
        const identity: Identity = { ...data, revokedAt: null };
        return { type: 'token-created', data: { ...data }, result: { token, identity } };
      });
    },
    revoke(login) {
      return appendWith((identities) => {
        const live = identities.find((entry) => entry.revokedAt === null && sameLogin(entry.login, login));
        if (live === undefined) throw new ProofgateError('NOT_FOUND', `no live token for identity "${login}"`, { login });
        const data: RevokedData = { login: live.login, revokedAt: now().toISOString() };
        return { type: 'token-revoked', data: { ...data }, result: { ...live, revokedAt: data.revokedAt } };
      });
    },
    authenticate: async (token) => (isTokenShape(token) ? findByToken((await read()).identities, token) : null),
  };
}

/** Open the identities of a data directory (the embedded SQLite store, namespace `identities`). */
export function openIdentityStore(dataDir: string, options: IdentityStoreOptions = {}): { readonly store: IdentityStore; close(): Promise<void> } {
  checkDataDir(dataDir);
  let storage: RunStorage;
  try {
    storage = createLocalRunStorage({ directory: dataDir, namespace: IDENTITIES_NAMESPACE, policy: defaultStoragePolicy });
  } catch (error) {
    throw dataDirFailure(dataDir, error);
  }
  return { store: identityStore(storage.eventStore, options), close: () => storage.close() };
}
