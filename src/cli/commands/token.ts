import type { Command } from 'commander';
import { ProofgateError, errorMessage } from '../../core/index.js';
import { sameLogin } from '../../contracts/repo-config.js';
import { GitRepository, defaultLocalDataDir } from '../../forge/local/index.js';
import {
  IDENTITIES_NAMESPACE,
  TOKEN_PERMISSIONS,
  identityStore,
  loginProblem,
  openIdentityStore,
  parsePermission,
  type Identity,
  type IdentityStore,
  type TokenPermission,
} from '../../service/identities.js';
import { defaultStoragePolicy } from '../../storage/policy.js';
import { createPostgresRunStorage, loadPg } from '../../storage/postgres/index.js';
import { resolveDataDir } from '../data-dir.js';
import { emit, usageError } from '../io.js';
import { untrustedText } from '../untrusted-text.js';

export interface TokenFlags {
  repo?: string;
  data?: string;
  databaseUrl?: string;
  permission?: string;
  json?: boolean;
}

/** What `token list` shows of an identity: never its token nor the token's hash. */
export interface ListedIdentity {
  readonly name: string;
  readonly permission: TokenPermission;
  readonly createdAt: string;
  readonly revokedAt: string | null;
}

const TOKEN_HELP = `
A token lets a person or an agent use 'proofgate serve' under its own name.
It is printed once, by 'token create'; the data directory keeps only its
sha256. Its permission is a ceiling: what the identity may do is the lower of
it and what the trusted branch's .proofgate.yml (maintainers) gives that name.
A name has at most one live token: revoke it to make a new one. The server
reads the tokens on every request, so a revoke takes effect at once.
`;

/** The data directory of a token command: --data, else $PROOFGATE_DATA_DIR, else the repository's (--repo, else the current directory). */
async function tokenDataDir(flags: TokenFlags): Promise<string> {
  const explicit = (flags.data !== undefined && flags.data !== '') || (process.env.PROOFGATE_DATA_DIR ?? '') !== '';
  if (explicit) return resolveDataDir(flags.data, '.');
  const repo = await GitRepository.open(flags.repo ?? process.cwd());
  return resolveDataDir(undefined, defaultLocalDataDir(repo));
}

/** The identities of a GitHub App service's PostgreSQL database (the namespace `serve --database-url` reads them from). */
async function openDatabaseIdentities(url: string): Promise<{ readonly store: IdentityStore; close(): Promise<void> }> {
  const pool = new (loadPg().Pool)({ connectionString: url, max: 1 });
  // An idle connection the server ends is an 'error' on the pool; the next query (if any) fails on its own.
  pool.on('error', () => undefined);
  try {
    const storage = await createPostgresRunStorage({ pool, namespace: IDENTITIES_NAMESPACE, policy: defaultStoragePolicy });
    return {
      store: identityStore(storage.eventStore),
      close: async () => {
        await storage.close();
        await pool.end();
      },
    };
  } catch (error) {
    await pool.end().catch(() => undefined);
    if (error instanceof ProofgateError) throw error;
    throw new ProofgateError('IO', `cannot open the identities in the database: ${errorMessage(error)}`);
  }
}

async function withIdentities<T>(flags: TokenFlags, action: (store: IdentityStore) => Promise<T>): Promise<T> {
  if (flags.databaseUrl !== undefined) {
    if (flags.repo !== undefined || flags.data !== undefined) throw usageError('--database-url cannot be combined with --repo or --data');
    const opened = await openDatabaseIdentities(flags.databaseUrl);
    try {
      return await action(opened.store);
    } finally {
      await opened.close();
    }
  }
  const opened = openIdentityStore(await tokenDataDir(flags));
  try {
    return await action(opened.store);
  } finally {
    await opened.close();
  }
}

function listed(identity: Identity): ListedIdentity {
  return { name: identity.login, permission: identity.permission, createdAt: identity.createdAt, revokedAt: identity.revokedAt };
}

/** `token create NAME`: validates everything before the store is opened, so bad input stores nothing. */
export async function createToken(name: string, flags: TokenFlags): Promise<{ readonly token: string; readonly identity: ListedIdentity }> {
  const permission = parsePermission(flags.permission ?? 'read');
  if (permission === null) throw usageError(`--permission must be one of ${TOKEN_PERMISSIONS.join(', ')}`);
  const problem = loginProblem(name);
  if (problem !== null) throw new ProofgateError(sameLogin(name, 'proofgate') ? 'RESERVED_IDENTITY' : 'INVALID_INPUT', problem, { login: name });
  const created = await withIdentities(flags, (store) => store.create(name, permission));
  return { token: created.token, identity: listed(created.identity) };
}

/** `token list`: every identity, revoked ones included, oldest first. */
export async function listTokens(flags: TokenFlags): Promise<ListedIdentity[]> {
  return withIdentities(flags, async (store) => (await store.list()).map(listed));
}

/** `token revoke NAME`. */
export async function revokeToken(name: string, flags: TokenFlags): Promise<ListedIdentity> {
  // A name that is not one (a token pasted by mistake, say) is never echoed.
  if (loginProblem(name) !== null && !sameLogin(name, 'proofgate'))
    throw new ProofgateError('NOT_FOUND', 'no live token for that identity (not a valid identity name)');
  return listed(await withIdentities(flags, (store) => store.revoke(name)));
}

function dataOptions(command: Command): Command {
  return command
    .option('--repo <dir>', 'the git repository whose data directory holds the tokens (default: the repository of the current directory)')
    .option('--data <dir>', 'state directory (default: $PROOFGATE_DATA_DIR, else .git/proofgate/ of the repository)')
    .option('--database-url <url>', 'the PostgreSQL database of a GitHub App service (`serve --database-url`) instead of a data directory');
}

/** `proofgate token create|list|revoke`: the identities of `proofgate serve`. */
export function registerTokenCommands(program: Command): void {
  const token = program.command('token').description('identities for proofgate serve: named tokens with a permission ceiling').addHelpText('after', TOKEN_HELP);

  dataOptions(
    token
      .command('create')
      .description('create a token for NAME and print it once (only its sha256 is stored)')
      .argument('<name>', "the identity's login: letters, digits, - _ . (never proofgate's own)")
      .option('--permission <level>', `the token's ceiling: ${TOKEN_PERMISSIONS.join(', ')} (default read)`)
      .option('--json', 'print {"token","identity"} as JSON'),
  ).action(async (name: string, flags: TokenFlags) => {
    const created = await createToken(name, flags);
    await emit(
      Boolean(flags.json),
      created,
      () => `${created.token}\n(identity ${untrustedText(created.identity.name)}, permission ${created.identity.permission}; this token is not shown again)`,
    );
  });

  dataOptions(
    token.command('list').description('the identities: name, permission, created, revoked (never a token)').option('--json', 'print a JSON array'),
  ).action(async (flags: TokenFlags) => {
    const identities = await listTokens(flags);
    await emit(Boolean(flags.json), identities, () =>
      identities.length === 0
        ? 'no identities'
        : identities
            .map(
              (entry) =>
                `${untrustedText(entry.name)}  ${entry.permission}  created ${entry.createdAt}${entry.revokedAt === null ? '' : `  revoked ${entry.revokedAt}`}`,
            )
            .join('\n'),
    );
  });

  dataOptions(
    token
      .command('revoke')
      .description("revoke NAME's live token (at once, also for a running server)")
      .argument('<name>', 'the identity')
      .option('--json', 'print the identity as JSON'),
  ).action(async (name: string, flags: TokenFlags) => {
    const revoked = await revokeToken(name, flags);
    await emit(Boolean(flags.json), revoked, () => `revoked the token of ${untrustedText(revoked.name)}`);
  });
}
