/**
 * The environment a child process may see. proofgate never hands its own
 * environment to a program it starts: it copies an allow-list of harmless
 * variables, so tokens, cloud credentials and proofgate's settings stay behind.
 */

/** Locale, time zone and search path: what any program needs to behave the same. */
export const PORTABLE_ENV = ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ'] as const;

/** Who runs the program and where it may write: the login session's plain facts. */
export const SESSION_ENV = ['HOME', 'USER', 'LOGNAME', 'SHELL', 'TERM', 'TMPDIR'] as const;

/** What a trusted build or test command (a configured check) may also see. */
export const TOOLCHAIN_ENV = [...PORTABLE_ENV, ...SESSION_ENV, 'CI'] as const;

/** A name that looks like it holds a credential never passes, even when allow-listed. */
export const CREDENTIAL_NAME = /TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH|SESSION|COOKIE/i;

const FALLBACK_PATH = '/usr/local/bin:/usr/bin:/bin';

/**
 * Copy only `names` from `parent` (a name that looks like a credential is
 * skipped even when listed; PATH is always set), then lay `extra` on top.
 */
export function allowListedEnv(
  parent: Readonly<Record<string, string | undefined>>,
  names: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of names) {
    const value = parent[name];
    if (value !== undefined && !CREDENTIAL_NAME.test(name)) env[name] = value;
  }
  env.PATH ??= FALLBACK_PATH;
  return Object.assign(env, extra);
}
