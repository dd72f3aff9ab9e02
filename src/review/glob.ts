import picomatch from 'picomatch';

/**
 * Path globs for review settings, matched by picomatch (POSIX paths): `*` and
 * `?` stay inside one path segment, `**` crosses segments, and a pattern
 * ending in `/` matches everything below it. Dot files match like any other
 * file, and so does any character a git path may hold, newlines included
 * (`secret/**` matches `secret/\nx`): the `s` flag lets picomatch's `.` match
 * a newline.
 */
const OPTIONS = { dot: true, flags: 's', windows: false } as const;

const compiled = new Map<string, (path: string) => boolean>();

function matcher(pattern: string): (path: string) => boolean {
  const known = compiled.get(pattern);
  if (known !== undefined) return known;
  const match = picomatch(pattern.endsWith('/') ? `${pattern}**` : pattern, OPTIONS);
  compiled.set(pattern, match);
  return match;
}

export function matchesAny(path: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => matcher(pattern)(path));
}
