/**
 * The one catalogue of secret-looking text. Storage redaction (free text in
 * events), the GitHub adapter's log and error scrubbing, check output and the
 * builtin rules reviewer all read this table; nothing else in proofgate
 * decides what a secret looks like.
 *
 * Each entry has an id (also the kind in the redaction marker), a description,
 * a global regular expression and how a match is redacted: the whole match
 * becomes `[redacted:<id>]`, or, for `keep: 'prefix'`, the first group (the
 * name before the value, e.g. `password=`) stays and only the value is
 * replaced. Redacting is idempotent: a marker is never matched again.
 *
 * `review: true` entries are credential formats the rules reviewer refutes a
 * change for (a distinctive key format, or an AWS secret key next to its
 * name). The other entries (`password=` assignments, Authorization and bearer
 * values, JWTs) are redacted wherever text is stored or logged, but are too
 * common in code and test fixtures to refuse a change for.
 *
 * Boundaries: a distinctive prefix (`AKIA`, `ghp_`, `github_pat_`, `xoxb-`,
 * `AIza`, `sk_live_`, `-----BEGIN`) needs no boundary before it, so
 * `AWS_KEY_AKIA...` or `tokenghp_...` are caught (`\b` fails after `_`). A
 * short prefix that occurs inside ordinary words (`sk-`, `sk_test_`, `eyJ`)
 * must not follow a letter or digit; `_`, `-`, `.` and any punctuation still
 * count as a boundary. A match is not cut at its end either: the characters
 * that make a key are replaced even when more follow.
 *
 * Why not secretlint: measured here (Node 20, 2 shared cores under load,
 * 1 MB of log lines holding 4 keys, median of 21 runs, three runs), the
 * Node 20 line `@secretlint/core` + `secretlint-rule-preset-recommend` 11.7.1
 * (13.x needs Node 22; 38 packages, 11 MB) took 12-25 ms to scan the 1 MB
 * through its asynchronous `lintSource` and reported 2 of the 4 keys; this
 * table took 6-10 ms to find all 4 (`findSecrets`) and 24-35 ms to redact
 * (`redactSecrets`, most of it rebuilding the 1 MB string). On 100 short
 * comments, the common case of a store append, secretlint took 60-110 ms and
 * this table 0.3-0.5 ms. Its preset also does not report a bare AWS access key
 * id (the `AWS_KEY_AKIA...` case), a Stripe or `sk-proj-` key, `password=` or
 * a bearer value, only reports ranges (redaction would stay ours) and is
 * asynchronous while the storage guard redacts synchronously inside every
 * append. So proofgate keeps this table and used secretlint's rule list as a
 * checklist for it.
 */

export interface SecretPattern {
  /** Stable id; also the kind in `[redacted:<id>]`. */
  readonly id: string;
  readonly description: string;
  /** Global (`g`) expression. With `keep: 'prefix'` its first group is the name kept in front of the marker. */
  readonly pattern: RegExp;
  readonly keep: 'none' | 'prefix';
  /** The rules reviewer refutes a change that adds text matching this entry. */
  readonly review: boolean;
}

/** A value that already is a redaction marker (quoted or not) is never matched again. */
const NOT_REDACTED = '(?!["\']?\\[redacted:)';
/** A short prefix must not continue a word (letters and digits; `_` and `-` count as boundaries). */
const WORD_START = '(?<![A-Za-z0-9])';

export const SECRET_CATALOGUE: readonly SecretPattern[] = [
  {
    id: 'private-key',
    description: 'PEM private key',
    pattern: /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)/g,
    keep: 'none',
    review: true,
  },
  {
    id: 'aws-access-key-id',
    description: 'AWS access key id',
    pattern: /(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}/g,
    keep: 'none',
    review: true,
  },
  {
    id: 'aws-secret-access-key',
    description: 'AWS secret access key',
    // 40 base64 characters on the same line, at most 40 characters after "aws" or "secret"
    // (outside a marker); 40 hex digits (a git or SHA-1 id) are not a key.
    pattern:
      /((?<!\[redacted:[a-z0-9-]{0,40})(?:aws|secret)[^\n]{0,40}?)(?<![A-Za-z0-9/+])(?![0-9a-fA-F]{40}(?![A-Za-z0-9/+=]))([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])/gi,
    keep: 'prefix',
    review: true,
  },
  {
    id: 'github-token',
    description: 'GitHub token',
    pattern: /(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})/g,
    keep: 'none',
    review: true,
  },
  {
    id: 'proofgate-token',
    description: 'proofgate identity token (`proofgate token create`)',
    pattern: new RegExp(`${WORD_START}pgt_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])`, 'g'),
    keep: 'none',
    review: true,
  },
  {
    id: 'slack-token',
    description: 'Slack token',
    pattern: /(?:xox[abeposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})/g,
    keep: 'none',
    review: true,
  },
  {
    id: 'slack-webhook',
    description: 'Slack webhook URL',
    pattern: /https:\/\/hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9_/-]{8,}/g,
    keep: 'none',
    review: true,
  },
  {
    id: 'stripe-key',
    description: 'Stripe secret or restricted key',
    pattern: new RegExp(`(?:[rs]k_live_|${WORD_START}[rs]k_test_)[0-9A-Za-z]{16,}`, 'g'),
    keep: 'none',
    review: true,
  },
  {
    id: 'google-api-key',
    description: 'Google API key',
    pattern: /AIza[0-9A-Za-z_-]{35}/g,
    keep: 'none',
    review: true,
  },
  {
    id: 'openai-key',
    description: 'OpenAI-style API key',
    pattern: new RegExp(`${WORD_START}sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}`, 'g'),
    keep: 'none',
    review: true,
  },
  {
    id: 'jwt',
    description: 'JSON web token',
    pattern: new RegExp(`${WORD_START}eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]*`, 'g'),
    keep: 'none',
    review: false,
  },
  {
    id: 'bearer-token',
    description: 'bearer token',
    // Any value after `Authorization: Bearer`; elsewhere, a value of 8 or more characters after `bearer`.
    pattern: new RegExp(
      `(authorization["']?\\s*[:=]\\s*["']?bearer\\s+|(?<![A-Za-z])bearer\\s+(?=[A-Za-z0-9\\-._~+/]{8}))${NOT_REDACTED}[A-Za-z0-9\\-._~+/]+=*`,
      'gi',
    ),
    keep: 'prefix',
    review: false,
  },
  {
    id: 'authorization',
    description: 'Authorization header value',
    pattern: new RegExp(
      `(authorization["']?\\s*[:=]\\s*["']?(?:(?:basic|token|digest|negotiate)\\s+)?)${NOT_REDACTED}(?!(?:bearer|basic|token|digest|negotiate)\\s)[^\\s"',;}]+`,
      'gi',
    ),
    keep: 'prefix',
    review: false,
  },
  {
    id: 'assignment',
    description: 'password, secret, token or API key assignment',
    pattern: new RegExp(
      `((?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)["']?\\s*(?:=>|:=|[=:])\\s*)${NOT_REDACTED}("[^"\\n]*"|'[^'\\n]*'|[^\\s"'&;,]+)`,
      'gi',
    ),
    keep: 'prefix',
    review: false,
  },
];

/** One secret-looking fragment: which entry, and where (UTF-16 offsets into the text; a kept name is outside). */
export interface SecretMatch {
  readonly id: string;
  readonly description: string;
  readonly start: number;
  readonly end: number;
}

const marker = (id: string): string => `[redacted:${id}]`;

interface RankedMatch extends SecretMatch {
  readonly rank: number;
}

/**
 * Every entry at once, case-insensitively, matched once: a superset of what
 * the entries match (an expression matches no less without case), so text it
 * does not match holds nothing to find, and the entries need not run one by
 * one. Most text proofgate stores or prints holds no secret, and one pass of
 * this is over thirty times cheaper than thirteen (measured on GitHub's
 * webhook examples). No entry uses a back-reference or a named group, which
 * joining them would renumber.
 */
const ANY_ENTRY = new RegExp(SECRET_CATALOGUE.map((entry) => `(?:${entry.pattern.source})`).join('|'), 'i');

function scan(text: string, reviewOnly: boolean): RankedMatch[] {
  const out: RankedMatch[] = [];
  if (!ANY_ENTRY.test(text)) return out;
  SECRET_CATALOGUE.forEach((entry, rank) => {
    if (reviewOnly && !entry.review) return;
    entry.pattern.lastIndex = 0; // matchAll starts where a caller's exec or test left the shared expression
    for (const match of text.matchAll(entry.pattern)) {
      const kept = entry.keep === 'prefix' ? (match[1] ?? '').length : 0;
      const start = match.index + kept;
      const end = match.index + match[0].length;
      if (end > start) out.push({ id: entry.id, description: entry.description, start, end, rank });
    }
  });
  return out;
}

/** Every match of every entry (of the `review` entries only, when asked), in catalogue order. */
export function findSecrets(text: string, options: { readonly reviewOnly?: boolean } = {}): SecretMatch[] {
  return scan(text, options.reviewOnly === true).map(({ id, description, start, end }) => ({ id, description, start, end }));
}

/** The id of the first catalogue entry the text matches, or undefined. */
export function firstSecretKind(text: string): string | undefined {
  if (!ANY_ENTRY.test(text)) return undefined;
  for (const entry of SECRET_CATALOGUE) {
    entry.pattern.lastIndex = 0;
    const found = entry.pattern.test(text);
    entry.pattern.lastIndex = 0;
    if (found) return entry.id;
  }
  return undefined;
}

/** Replace the union of the matched ranges; overlapping ranges become one marker named by the earliest entry. */
function replaceRanges(text: string, found: RankedMatch[]): string {
  const sorted = [...found].sort((a, b) => a.start - b.start || a.rank - b.rank);
  const parts: string[] = [];
  let last = 0;
  let i = 0;
  while (i < sorted.length) {
    const first = sorted[i] as RankedMatch;
    let { end, rank, id } = first;
    for (i += 1; i < sorted.length && (sorted[i] as RankedMatch).start < end; i += 1) {
      const next = sorted[i] as RankedMatch;
      end = Math.max(end, next.end);
      if (next.rank < rank) ({ rank, id } = next);
    }
    parts.push(text.slice(last, first.start), marker(id));
    last = end;
  }
  parts.push(text.slice(last));
  return parts.join('');
}

/** More passes than redaction ever needs: a pass only repeats when removing a key exposed a new boundary. */
const MAX_PASSES = 4;

/**
 * The text with every secret-looking fragment replaced by `[redacted:<id>]`
 * (a kept name stays in front). All entries are matched on the same text and
 * the string is rebuilt once per pass (rebuilding a large string per entry
 * was the main cost); passes repeat until nothing matches, so redacting is
 * idempotent by construction.
 */
export function redactSecrets(text: string): string {
  let out = text;
  for (let pass = 0; pass < MAX_PASSES; pass += 1) {
    const found = scan(out, false);
    if (found.length === 0) return out;
    out = replaceRanges(out, found);
  }
  return out;
}
