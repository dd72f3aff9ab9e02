/**
 * Secret-looking fragments inside free text. Each rule names a kind; a match
 * is replaced by the fixed text `[redacted:<kind>]` (for assignments and
 * bearer headers the name before the value is kept). Replacing is idempotent:
 * redacting already redacted text changes nothing.
 */
export interface FreeTextRule {
  readonly kind: string;
  readonly pattern: RegExp;
  readonly replace: (match: string, ...groups: string[]) => string;
}

const marker = (kind: string): string => `[redacted:${kind}]`;

export const FREE_TEXT_RULES: readonly FreeTextRule[] = [
  {
    kind: 'private-key',
    pattern: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*$)/g,
    replace: () => marker('private-key'),
  },
  {
    kind: 'aws-access-key-id',
    pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
    replace: () => marker('aws-access-key-id'),
  },
  {
    kind: 'github-token',
    pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g,
    replace: () => marker('github-token'),
  },
  {
    kind: 'bearer-token',
    pattern: /\b(Authorization\s*:\s*Bearer\s+)(?!\[redacted:)[A-Za-z0-9\-._~+/]+=*/gi,
    replace: (_match, prefix = '') => `${prefix}${marker('bearer-token')}`,
  },
  {
    kind: 'assignment',
    pattern: /\b((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?token|client[_-]?secret)\s*[=:]\s*)(?!\[redacted:)("[^"]*"|'[^']*'|[^\s"'&;,]+)/gi,
    replace: (_match, prefix = '') => `${prefix}${marker('assignment')}`,
  },
];

const QUICK_CHECK = /PRIVATE KEY|AKIA|ASIA|gh[pousr]_|github_pat_|bearer|password|passwd|pwd|secret|token|api[_-]?key/i;

/** The kind of the first secret-looking fragment in the text, or undefined. */
export function findFreeTextSecret(text: string): string | undefined {
  if (!QUICK_CHECK.test(text)) return undefined;
  for (const rule of FREE_TEXT_RULES) {
    rule.pattern.lastIndex = 0;
    const found = rule.pattern.test(text);
    rule.pattern.lastIndex = 0;
    if (found) return rule.kind;
  }
  return undefined;
}

/** The text with every secret-looking fragment replaced by `[redacted:<kind>]`. */
export function redactFreeText(text: string): string {
  if (!QUICK_CHECK.test(text)) return text;
  let out = text;
  for (const rule of FREE_TEXT_RULES) {
    out = out.replace(rule.pattern, rule.replace as (match: string, ...rest: unknown[]) => string);
  }
  return out;
}
