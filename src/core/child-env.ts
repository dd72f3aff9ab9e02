/**
 * The environment a child process may see. proofgate never hands its own
 * environment to a program it starts: it copies an allow-list of harmless
 * variables, so tokens, cloud credentials and proofgate's settings stay behind.
 */

/** Locale, time zone and search path: what any program needs to behave the same. */
export const PORTABLE_ENV = ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ'] as const;

/** What a trusted build or test command (a configured check) may also see. */
export const TOOLCHAIN_ENV = [...PORTABLE_ENV, 'HOME', 'USER', 'LOGNAME', 'SHELL', 'TERM', 'TMPDIR', 'CI'] as const;

const FALLBACK_PATH = '/usr/local/bin:/usr/bin:/bin';

/** Copy only `names` from `parent` (PATH always set), then lay `extra` on top. */
export function allowListedEnv(
  parent: NodeJS.ProcessEnv,
  names: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of names) {
    const value = parent[name];
    if (value !== undefined) env[name] = value;
  }
  env.PATH ??= FALLBACK_PATH;
  return Object.assign(env, extra);
}
