/**
 * Scrubs credentials from text that may end up in an error message or a log
 * line: Authorization header values, GitHub tokens, JWTs, private keys and
 * token query parameters.
 */
const PATTERNS: readonly [RegExp, string][] = [
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g, '[REDACTED PRIVATE KEY]'],
  [/(authorization["']?\s*[:=]\s*["']?)[^"'\n,}]+/gi, '$1[REDACTED]'],
  [/\b(bearer|token)\s+[A-Za-z0-9._~+/=-]{8,}/gi, '$1 [REDACTED]'],
  [/\b(gh[opsur]_|github_pat_)[A-Za-z0-9_]{8,}/g, '[REDACTED]'],
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g, '[REDACTED JWT]'],
  [/([?&](access_token|client_secret|token)=)[^&\s]+/gi, '$1[REDACTED]'],
];

export function redactSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
  return out;
}
