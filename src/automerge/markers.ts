/**
 * Hidden, signed markers in proofgate's own comments:
 *
 *   <!-- proofgate:marker v3 {"at":"…","body":"…","change":"42","config":"sha256:…","head":"…","kind":"review-verdict",…,"mac":"…"} -->
 *
 * The JSON names what the marker is about (kind, change, head, verdict …) and
 * `body`, the sha256 of the comment's visible text (the body with every marker
 * removed, CRLF as LF, outer whitespace trimmed). `mac` is HMAC-SHA256 with the
 * server secret over the canonical JSON (RFC 8785) of every other field. A marker
 * is trusted only when the comment's author is proofgate's own identity AND the
 * HMAC verifies; a marker copied to another change or head, or into a comment
 * whose text was edited, is rejected with the reason.
 *
 * A review verdict also signs the review dispatch id (`review`) and the time
 * the verdict was made (`at`). `collectVerdicts` orders verdicts by that signed
 * time (never by a comment's timestamps, which anyone who can edit a comment
 * moves), and a verdict marker that shows up in more than one place (same review
 * id or same signature) counts once: the copy in the earliest-created comment is
 * kept, every other copy is rejected as `replayed`.
 *
 * A review verdict binds everything it was judged on: the head, and the
 * digests of the diff (`diff`), the acceptance contract (`contract`) and the
 * parsed trusted config (`config`), plus the review run whose accepted-result
 * record holds the verdict (`run`, null when the reviewer keeps no record).
 * The marker is the forge-visible copy of that record. Markers of an older
 * format (v1, v2: without these bindings) are `malformed`, never trusted.
 *
 * A reply to a maintainer command carries a `command-reply` marker naming the
 * comment version and the command's line it answers (`answeredCommandLines`).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { canonicalJson, ProofgateError, sha256Hex } from '../core/index.js';
import type { ForgeComment } from '../forge/port.js';

export type Verdict = 'CONFIRMED' | 'REFUTED' | 'HOLD';

export interface ReviewVerdictFields {
  readonly kind: 'review-verdict';
  readonly change: string;
  readonly head: string;
  readonly verdict: Verdict;
  /** Actionable findings behind a REFUTED verdict (0 otherwise). */
  readonly findings: number;
  /** The review dispatch that produced this verdict (ties it to the ledger; one verdict per review). */
  readonly review: string;
  /** When the verdict was made (ISO 8601 UTC, signed): verdicts are ordered by this time. */
  readonly at: string;
  /** `sha256:` digest of the reviewed diff (merge base to head). */
  readonly diff: string;
  /** `sha256:` digest of the acceptance contract the review judged against. */
  readonly contract: string;
  /** `sha256:` digest of the parsed trusted config the review ran under. */
  readonly config: string;
  /** The review run holding the accepted-result record of this verdict (null: none is kept). */
  readonly run: string | null;
}

/** The digests a verdict is bound to besides its head (`sha256:` strings). */
export type VerdictBindings = Pick<ReviewVerdictFields, 'diff' | 'contract' | 'config'>;

export interface StatusFields {
  readonly kind: 'automerge-status';
  readonly change: string;
  /** The head the status text describes. */
  readonly head: string;
  /** The status family (e.g. `automerge`): one comment per change and intent. */
  readonly intent: string;
}

/**
 * A reply to one maintainer command: the comment version whose command it
 * answers (the comment id, or a replay's id, and its `updated_at`) and the
 * command's line in that comment (one command per line). The router reads
 * these back so that a command whose route was cut short gets its reply once.
 */
export interface CommandReplyFields {
  readonly kind: 'command-reply';
  readonly change: string;
  /** The change's head when the reply was written. */
  readonly head: string;
  /** The comment (or replay) whose command this answers. */
  readonly comment: string;
  /** That comment version's `updated_at`, as the forge gave it. */
  readonly updatedAt: string;
  /** The command's 1-based line in the comment. */
  readonly line: number;
}

export type MarkerFields = ReviewVerdictFields | StatusFields | CommandReplyFields;

export type MarkerSecret = string | Uint8Array;

export type MarkerRejection = 'not-self' | 'malformed' | 'bad-mac' | 'replayed' | 'edited';

declare const trusted: unique symbol;

/** A marker that passed every check. Only `readMarkers` makes these. */
export type TrustedMarker<F extends MarkerFields = MarkerFields> = {
  readonly fields: F;
  readonly commentId: string;
  readonly commentUpdatedAt: string;
  readonly commentCreatedAt: string;
  /** The marker's HMAC (hex): the same signature in two places is a replay. */
  readonly signature: string;
  /** Position of the marker in the comment. */
  readonly index: number;
} & { readonly [trusted]: true };

export interface RejectedMarker {
  readonly commentId: string;
  readonly index: number;
  readonly reason: MarkerRejection;
  /** One line for the log. */
  readonly detail: string;
  /** The fields when they could be read (never trusted). */
  readonly fields: MarkerFields | null;
}

export interface MarkerReadOptions {
  readonly selfLogin: string;
  readonly secret: MarkerSecret;
  /** The change being read: a marker naming another change is a replay. */
  readonly changeId?: string;
  /** When set, a marker naming another head is a replay too (leave unset to see stale heads). */
  readonly headSha?: string;
}

export interface MarkerReadResult {
  readonly trusted: readonly TrustedMarker[];
  readonly rejected: readonly RejectedMarker[];
}

/** Anything that looks like a marker (bounded, so a body full of unclosed openers stays linear). */
const MARKER_ANY = /<!--\s*proofgate:marker\b[\s\S]{0,4096}?-->/g;
/** The marker format version, in the tag and in the signed JSON (`v`). */
export const MARKER_VERSION = 3;
const MARKER_LINE = /^<!-- proofgate:marker v(\d{1,6}) (\{[^\n]*\}) -->$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** A signed time: ISO 8601 in UTC, as `Date.prototype.toISOString` writes it (seconds fraction optional). */
const SIGNED_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/;
const CHANGE_ID = /^[A-Za-z0-9._:#/+@-]{1,128}$/;
const HEAD_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const REVIEW_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const INTENT = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const MAC_HEX = /^[0-9a-f]{64}$/;
/** A comment id or a replay id (`<comment id>:replay-<n>`). */
const COMMENT_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** A forge's `updated_at` (ISO 8601 as forges write it; bounded, no spaces). */
const FORGE_TIME = /^[0-9A-Za-z:.+-]{1,64}$/;
const MAX_LINE = 1_000_000;
const VERDICTS: readonly string[] = ['CONFIRMED', 'REFUTED', 'HOLD'];
const MAX_FINDINGS = 100_000;

function secretBytes(secret: MarkerSecret): Uint8Array {
  const bytes = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret;
  if (bytes.byteLength < 16) throw new ProofgateError('CONFIG', 'marker secret must be at least 16 bytes');
  return bytes;
}

/** The part of a comment a marker binds: the body without markers, CRLF as LF, trimmed. */
export function visibleText(body: string): string {
  return body.replace(MARKER_ANY, '').replace(/\r\n?/g, '\n').trim();
}

/** Why `fields` cannot be a marker, or null when they can. */
function fieldProblem(fields: Record<string, unknown>): string | null {
  if (typeof fields.change !== 'string' || !CHANGE_ID.test(fields.change)) return 'change id';
  if (typeof fields.head !== 'string' || !HEAD_SHA.test(fields.head)) return 'head sha (40 or 64 lowercase hex)';
  if (fields.kind === 'review-verdict') {
    const keys = Object.keys(fields).sort().join(',');
    if (keys !== 'at,change,config,contract,diff,findings,head,kind,review,run,verdict') return `review-verdict fields (${keys})`;
    if (typeof fields.verdict !== 'string' || !VERDICTS.includes(fields.verdict)) return 'verdict';
    const findings = fields.findings;
    if (typeof findings !== 'number' || !Number.isInteger(findings) || findings < 0 || findings > MAX_FINDINGS) return 'findings';
    if (typeof fields.review !== 'string' || !REVIEW_ID.test(fields.review)) return 'review id';
    if (typeof fields.at !== 'string' || !SIGNED_TIME.test(fields.at) || Number.isNaN(Date.parse(fields.at))) return 'verdict time (at)';
    for (const name of ['diff', 'contract', 'config'] as const) {
      const value = fields[name];
      if (typeof value !== 'string' || !DIGEST.test(value)) return `${name} digest (sha256:<64 hex>)`;
    }
    if (fields.run !== null && (typeof fields.run !== 'string' || !RUN_ID.test(fields.run))) return 'review run id';
    return null;
  }
  if (fields.kind === 'automerge-status') {
    const keys = Object.keys(fields).sort().join(',');
    if (keys !== 'change,head,intent,kind') return `automerge-status fields (${keys})`;
    if (typeof fields.intent !== 'string' || !INTENT.test(fields.intent)) return 'intent';
    return null;
  }
  if (fields.kind === 'command-reply') {
    const keys = Object.keys(fields).sort().join(',');
    if (keys !== 'change,comment,head,kind,line,updatedAt') return `command-reply fields (${keys})`;
    if (typeof fields.comment !== 'string' || !COMMENT_ID.test(fields.comment)) return 'comment id';
    if (typeof fields.updatedAt !== 'string' || !FORGE_TIME.test(fields.updatedAt)) return 'comment time (updatedAt)';
    const line = fields.line;
    if (typeof line !== 'number' || !Number.isInteger(line) || line < 1 || line > MAX_LINE) return 'command line';
    return null;
  }
  return 'kind';
}

function mac(signed: Record<string, unknown>, secret: Uint8Array): string {
  return createHmac('sha256', secret).update(canonicalJson(signed)).digest('hex');
}

/**
 * One marker (an HTML comment line) for `fields`, bound to the comment's visible
 * text (`''` when the comment holds nothing but markers).
 */
export function createMarker(fields: MarkerFields, secret: MarkerSecret, visible = ''): string {
  const key = secretBytes(secret);
  const plain: Record<string, unknown> = { ...fields };
  const problem = fieldProblem(plain);
  if (problem !== null) throw new ProofgateError('INVALID_INPUT', `marker: bad ${problem}`);
  const signed = { ...plain, v: MARKER_VERSION, body: sha256Hex(visibleText(visible)) };
  return `<!-- proofgate:marker v${MARKER_VERSION} ${canonicalJson({ ...signed, mac: mac(signed, key) })} -->`;
}

/** A comment body: the visible text, then one marker line per entry of `markers`. */
export function composeMarkedBody(visible: string, markers: readonly MarkerFields[], secret: MarkerSecret): string {
  const text = visibleText(visible);
  const lines = markers.map((fields) => createMarker(fields, secret, text));
  return lines.length === 0 ? text : `${text}\n\n${lines.join('\n')}\n`;
}

type Parsed = { ok: true; fields: MarkerFields; body: string; mac: string } | { ok: false; detail: string; fields: MarkerFields | null };

function parseMarker(text: string): Parsed {
  const match = MARKER_LINE.exec(text);
  if (match?.[1] === undefined || match[2] === undefined) return { ok: false, detail: `not a v${MARKER_VERSION} marker line`, fields: null };
  if (Number(match[1]) !== MARKER_VERSION) {
    return { ok: false, detail: `marker format v${match[1]} is not read any more (current: v${MARKER_VERSION})`, fields: null };
  }
  let value: unknown;
  try {
    value = JSON.parse(match[2]);
  } catch {
    return { ok: false, detail: 'marker JSON does not parse', fields: null };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { ok: false, detail: 'marker JSON is not an object', fields: null };
  const { v, body, mac: macHex, ...rest } = value as Record<string, unknown>;
  if (v !== MARKER_VERSION) return { ok: false, detail: `marker version is not ${MARKER_VERSION}`, fields: null };
  if (typeof body !== 'string' || !MAC_HEX.test(body)) return { ok: false, detail: 'marker body digest missing', fields: null };
  if (typeof macHex !== 'string' || !MAC_HEX.test(macHex)) return { ok: false, detail: 'marker mac missing', fields: null };
  const problem = fieldProblem(rest);
  if (problem !== null) return { ok: false, detail: `marker has a bad ${problem}`, fields: null };
  return { ok: true, fields: rest as unknown as MarkerFields, body, mac: macHex };
}

/** Every marker in one comment, sorted into trusted and rejected (with reasons). */
export function readMarkers(comment: ForgeComment, options: MarkerReadOptions): MarkerReadResult {
  const key = secretBytes(options.secret);
  const found = comment.body.match(MARKER_ANY) ?? [];
  if (found.length === 0) return { trusted: [], rejected: [] };
  const trustedOut: TrustedMarker[] = [];
  const rejected: RejectedMarker[] = [];
  const fromSelf = comment.author.toLowerCase() === options.selfLogin.toLowerCase();
  const bodyDigest = sha256Hex(visibleText(comment.body));
  found.forEach((text, index) => {
    const parsed = parseMarker(text);
    const reject = (reason: MarkerRejection, detail: string, fields: MarkerFields | null): void => {
      rejected.push({ commentId: comment.id, index, reason, detail, fields });
    };
    if (!fromSelf) {
      reject('not-self', `comment ${comment.id} is by ${comment.author}, not ${options.selfLogin}`, parsed.ok ? parsed.fields : null);
      return;
    }
    if (!parsed.ok) {
      reject('malformed', parsed.detail, null);
      return;
    }
    const { body, mac: given, fields } = parsed;
    const expected = Buffer.from(mac({ ...fields, v: MARKER_VERSION, body }, key), 'hex');
    if (!timingSafeEqual(expected, Buffer.from(given, 'hex'))) {
      reject('bad-mac', 'HMAC does not verify (forged or altered marker)', fields);
      return;
    }
    if (options.changeId !== undefined && fields.change !== options.changeId) {
      reject('replayed', `marker names change ${fields.change}, read on change ${options.changeId}`, fields);
      return;
    }
    if (options.headSha !== undefined && fields.head !== options.headSha) {
      reject('replayed', `marker names head ${fields.head}, expected ${options.headSha}`, fields);
      return;
    }
    if (!timingSafeEqual(Buffer.from(body, 'hex'), Buffer.from(bodyDigest, 'hex'))) {
      reject('edited', `the text of comment ${comment.id} changed after proofgate signed it`, fields);
      return;
    }
    trustedOut.push({
      fields,
      commentId: comment.id,
      commentUpdatedAt: comment.updatedAt,
      commentCreatedAt: comment.createdAt,
      signature: given,
      index,
    } as TrustedMarker);
  });
  return { trusted: trustedOut, rejected };
}

export type TrustedVerdict = TrustedMarker<ReviewVerdictFields>;

export function isTrustedVerdict(marker: TrustedMarker): marker is TrustedVerdict {
  return marker.fields.kind === 'review-verdict';
}

function timeOf(iso: string): number {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? Number.NEGATIVE_INFINITY : t;
}

interface Located {
  readonly marker: TrustedVerdict;
  /** Position of the comment in the list given. */
  readonly order: number;
}

/** Where a marker copy sits: earliest-created comment first, then list order, then position. */
function byPlace(a: Located, b: Located): number {
  return timeOf(a.marker.commentCreatedAt) - timeOf(b.marker.commentCreatedAt) || a.order - b.order || a.marker.index - b.marker.index;
}

/**
 * The trusted review verdicts of a change across its comments, oldest first by
 * their signed time (`at`; ties: earlier-created comment, list order, position),
 * plus every rejected marker. A verdict whose review id or signature was already
 * seen in an earlier-created comment (or earlier in the same comment) is a
 * replay: only the first copy counts, the others are rejected as `replayed`.
 */
export function collectVerdicts(
  comments: readonly ForgeComment[],
  options: MarkerReadOptions & { readonly changeId: string },
): { readonly verdicts: readonly TrustedVerdict[]; readonly rejected: readonly RejectedMarker[] } {
  const found: Located[] = [];
  const rejected: RejectedMarker[] = [];
  comments.forEach((comment, order) => {
    const result = readMarkers(comment, options);
    rejected.push(...result.rejected);
    for (const marker of result.trusted) if (isTrustedVerdict(marker)) found.push({ marker, order });
  });
  const kept: Located[] = [];
  const firstByReview = new Map<string, TrustedVerdict>();
  const firstBySignature = new Map<string, TrustedVerdict>();
  for (const entry of [...found].sort(byPlace)) {
    const { marker } = entry;
    const original = firstBySignature.get(marker.signature) ?? firstByReview.get(marker.fields.review);
    if (original !== undefined) {
      rejected.push({
        commentId: marker.commentId,
        index: marker.index,
        reason: 'replayed',
        detail: `verdict of review ${marker.fields.review} already counted from comment ${original.commentId}; this copy is ignored`,
        fields: marker.fields,
      });
      continue;
    }
    firstBySignature.set(marker.signature, marker);
    firstByReview.set(marker.fields.review, marker);
    kept.push(entry);
  }
  kept.sort((a, b) => timeOf(a.marker.fields.at) - timeOf(b.marker.fields.at) || byPlace(a, b));
  return { verdicts: kept.map((entry) => entry.marker), rejected };
}

/*
 * proofgate's own comments that it keeps one of and edits in place (the
 * status comment, the review comment): a comment counts only when
 * proofgate's own identity wrote it AND it holds a marker that verifies for
 * this change and is of the kind asked for; a comment by anyone else (the
 * change's author, say) that copies a marker, even byte for byte, is never
 * found, so it is never read as ours nor edited.
 */
export interface OwnCommentQuery {
  readonly selfLogin: string;
  readonly secret: MarkerSecret;
  readonly changeId: string;
}

export interface OwnComment<F extends MarkerFields = MarkerFields> {
  readonly comment: ForgeComment;
  /** The comment's last trusted marker that `accepts` took. */
  readonly marker: TrustedMarker<F>;
}

function sameLogin(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

/**
 * The last comment (in forge order) written by `selfLogin` (any letter case)
 * that holds a trusted marker for `changeId` which `accepts`, with that
 * marker; null when there is none.
 */
export function findOwnComment<F extends MarkerFields>(
  comments: readonly ForgeComment[],
  query: OwnCommentQuery,
  accepts: (marker: TrustedMarker) => marker is TrustedMarker<F>,
): OwnComment<F> | null;
export function findOwnComment(comments: readonly ForgeComment[], query: OwnCommentQuery, accepts: (marker: TrustedMarker) => boolean): OwnComment | null;
export function findOwnComment(comments: readonly ForgeComment[], query: OwnCommentQuery, accepts: (marker: TrustedMarker) => boolean): OwnComment | null {
  let found: OwnComment | null = null;
  for (const comment of comments) {
    if (!sameLogin(comment.author, query.selfLogin)) continue;
    const marker = readMarkers(comment, query).trusted.filter(accepts).pop();
    if (marker !== undefined) found = { comment, marker };
  }
  return found;
}

/**
 * The lines of a comment version's commands that proofgate has answered
 * (pure): every comment written by `selfLogin` holding a marker of kind
 * `command-reply` for `changeId`, `comment` and `updatedAt` whose HMAC
 * verifies. A marker in anyone else's comment never counts, even a byte for
 * byte copy. A reply of proofgate's whose text was edited afterwards (its
 * marker is `edited`, the signature still good) counts too: proofgate did
 * write it, and a second one would be a duplicate.
 */
export function answeredCommandLines(
  comments: readonly ForgeComment[],
  query: OwnCommentQuery,
  version: { readonly comment: string; readonly updatedAt: string },
): ReadonlySet<number> {
  const lines = new Set<number>();
  for (const comment of comments) {
    if (!sameLogin(comment.author, query.selfLogin)) continue;
    const { trusted: found, rejected } = readMarkers(comment, query);
    const signed = [...found.map((marker) => marker.fields), ...rejected.filter((marker) => marker.reason === 'edited').map((marker) => marker.fields)];
    for (const fields of signed) {
      if (fields?.kind !== 'command-reply') continue;
      if (fields.comment === version.comment && fields.updatedAt === version.updatedAt) lines.add(fields.line);
    }
  }
  return lines;
}
