import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  collectVerdicts,
  composeMarkedBody,
  createMarker,
  readMarkers,
  visibleText,
  type MarkerFields,
  type MarkerRejection,
} from '../../src/automerge/index.js';
import { canonicalJson, isProofgateError } from '../../src/core/index.js';
import { CHANGE, HEAD, OLD_HEAD, SECRET, SELF, comment, verdictComment, verdictFields } from './builders.js';

const OPTIONS = { selfLogin: SELF, secret: SECRET, changeId: CHANGE };

/** A marker line with arbitrary JSON, signed correctly over everything but `mac`. */
function signedRaw(payload: Record<string, unknown>, secret = SECRET): string {
  const mac = createHmac('sha256', secret).update(canonicalJson(payload)).digest('hex');
  return `<!-- proofgate:marker v3 ${canonicalJson({ ...payload, mac })} -->`;
}

function markerJson(body: string): Record<string, unknown> {
  const match = /<!-- proofgate:marker v3 (\{.*\}) -->/.exec(body);
  if (match?.[1] === undefined) throw new Error('no marker');
  return JSON.parse(match[1]) as Record<string, unknown>;
}

describe('markers: trusted', () => {
  it('round-trips a review verdict marker', () => {
    const c = verdictComment({ verdict: 'REFUTED', findings: 2, review: 'rev_1' });
    const { trusted, rejected } = readMarkers(c, OPTIONS);
    expect(rejected).toEqual([]);
    expect(trusted.map((m) => [m.fields, m.commentId, m.index])).toEqual([[verdictFields({ verdict: 'REFUTED', findings: 2, review: 'rev_1' }), c.id, 0]]);
  });

  const rows: [string, (body: string) => string, Partial<Parameters<typeof comment>[1]>][] = [
    ['CRLF line ends', (b) => b.replace(/\n/g, '\r\n'), {}],
    ['extra whitespace around the body', (b) => `\n\n  ${b}\n\n`, {}],
    ['self login in another case', (b) => b, { author: 'ProofGate[BOT]' }],
  ];
  it.each(rows)('still trusted with %s', (_name, change, overrides) => {
    const c = verdictComment();
    const { trusted, rejected } = readMarkers({ ...c, ...overrides, body: change(c.body) }, OPTIONS);
    expect(rejected).toEqual([]);
    expect(trusted).toHaveLength(1);
  });

  it('reads several markers from one comment, in order', () => {
    const fields: MarkerFields[] = [
      verdictFields({ head: OLD_HEAD, verdict: 'REFUTED', findings: 1 }),
      verdictFields(),
      { kind: 'automerge-status', change: CHANGE, head: HEAD, intent: 'automerge' },
    ];
    const c = comment(composeMarkedBody('text', fields, SECRET));
    expect(readMarkers(c, OPTIONS).trusted.map((m) => m.fields)).toEqual(fields);
  });

  it('finds nothing in a comment without markers', () => {
    expect(readMarkers(comment('just text'), OPTIONS)).toEqual({ trusted: [], rejected: [] });
  });

  it('marker text never contains the secret', () => {
    const c = verdictComment();
    expect(c.body).not.toContain(SECRET);
    expect(c.body).toMatch(/^Review of a{40}: CONFIRMED\n\n<!-- proofgate:marker v3 \{.*\} -->\n$/);
  });

  it('visibleText strips markers and normalizes line ends', () => {
    expect(visibleText('a\r\nb\n\n<!-- proofgate:marker v2 {} -->\n')).toBe('a\nb');
  });
});

describe('markers: rejected', () => {
  const genuine = verdictComment();
  const payload = markerJson(genuine.body);
  const { mac: _mac, ...unsigned } = payload;
  const { body: _body, ...withoutBody } = unsigned;
  const { at: _at, v: _v, ...withoutAtAndV } = unsigned;
  const { diff: _diff, contract: _contract, config: _config, run: _run, ...withoutBindings } = unsigned;
  const withLine = (line: string): string => `Review\n\n${line}`;
  const forgedVerdict = genuine.body.replace('"verdict":"CONFIRMED"', '"verdict":"HOLD"').replace('CONFIRMED\n', 'HOLD\n');

  const rows: [string, () => ReturnType<typeof comment>, MarkerRejection, Record<string, unknown>][] = [
    ['written by a human', () => ({ ...genuine, author: 'mallory', authorType: 'User' }), 'not-self', {}],
    ['written by another bot', () => ({ ...genuine, author: 'other[bot]' }), 'not-self', {}],
    ['verdict field changed', () => ({ ...genuine, body: forgedVerdict }), 'bad-mac', {}],
    ['head field changed', () => ({ ...genuine, body: genuine.body.replace(`"head":"${HEAD}"`, `"head":"${OLD_HEAD}"`) }), 'bad-mac', {}],
    ['signed with another secret', () => comment(composeMarkedBody('Review', [verdictFields()], 'another-secret-0123456789')), 'bad-mac', {}],
    [
      'mac digit flipped',
      () => ({ ...genuine, body: genuine.body.replace(/"mac":"(.)/, (_m, d: string) => `"mac":"${d === '0' ? '1' : '0'}`) }),
      'bad-mac',
      {},
    ],
    ['signed without the body digest', () => comment(withLine(signedRaw(withoutBody))), 'malformed', {}],
    ['JSON does not parse', () => comment(withLine('<!-- proofgate:marker v3 {"kind": -->')), 'malformed', {}],
    [
      'version tag 4',
      () =>
        comment(
          withLine(
            genuine.body
              .split('\n')
              .find((l) => l.startsWith('<!--'))
              ?.replace(' v3 ', ' v4 ') ?? '',
          ),
        ),
      'malformed',
      {},
    ],
    ['older v1 format, correctly signed', () => comment(withLine(signedRaw({ ...withoutAtAndV, v: 1 }).replace(' v3 ', ' v1 '))), 'malformed', {}],
    ['v1 fields under the v3 tag, correctly signed', () => comment(withLine(signedRaw({ ...withoutAtAndV, v: 3 }))), 'malformed', {}],
    [
      'older v2 format (no bindings), correctly signed',
      () => comment(withLine(signedRaw({ ...withoutBindings, v: 2 }).replace(' v3 ', ' v2 '))),
      'malformed',
      {},
    ],
    ['v2 fields (no bindings) under the v3 tag, correctly signed', () => comment(withLine(signedRaw({ ...withoutBindings, v: 3 }))), 'malformed', {}],
    ['config binding changed', () => ({ ...genuine, body: genuine.body.replace('"config":"sha256:3', '"config":"sha256:4') }), 'bad-mac', {}],
    ['diff binding not a digest, correctly signed', () => comment(withLine(signedRaw({ ...unsigned, diff: 'abc' }))), 'malformed', {}],
    ['config binding missing its prefix, correctly signed', () => comment(withLine(signedRaw({ ...unsigned, config: '3'.repeat(64) }))), 'malformed', {}],
    ['review run id with a space, correctly signed', () => comment(withLine(signedRaw({ ...unsigned, run: 'run 1' }))), 'malformed', {}],
    ['verdict without a review id, correctly signed', () => comment(withLine(signedRaw({ ...unsigned, review: null }))), 'malformed', {}],
    ['verdict time not ISO UTC, correctly signed', () => comment(withLine(signedRaw({ ...unsigned, at: '2024-05-01 10:00' }))), 'malformed', {}],
    ['verdict time impossible, correctly signed', () => comment(withLine(signedRaw({ ...unsigned, at: '2024-13-45T10:00:00Z' }))), 'malformed', {}],
    ['unknown kind', () => comment(withLine(signedRaw({ ...unsigned, kind: 'merge-now' }))), 'malformed', {}],
    ['short head', () => comment(withLine(signedRaw({ ...unsigned, head: 'abc1234' }))), 'malformed', {}],
    ['extra field', () => comment(withLine(signedRaw({ ...unsigned, admin: true }))), 'malformed', {}],
    ['verdict not a known one', () => comment(withLine(signedRaw({ ...unsigned, verdict: 'PASS' }))), 'malformed', {}],
    ['negative findings', () => comment(withLine(signedRaw({ ...unsigned, findings: -1 }))), 'malformed', {}],
    ['mac not hex', () => comment(withLine(`<!-- proofgate:marker v3 ${canonicalJson({ ...unsigned, mac: 'zz' })} -->`)), 'malformed', {}],
    ['JSON is an array', () => comment(withLine('<!-- proofgate:marker v3 [1] -->')), 'malformed', {}],
    ['marker spread over lines', () => comment(withLine(genuine.body.slice(genuine.body.indexOf('<!--')).replace(' v3 ', '\nv3 '))), 'malformed', {}],
    ['visible text edited', () => ({ ...genuine, body: genuine.body.replace('Review of', 'Reviewed by a human:') }), 'edited', {}],
    ['marker copied into another proofgate comment', () => comment(`Status\n\n${genuine.body.slice(genuine.body.indexOf('<!--'))}`), 'edited', {}],
    ['copied onto another change', () => ({ ...genuine }), 'replayed', { changeId: '43' }],
    ['read against another head', () => ({ ...genuine }), 'replayed', { headSha: OLD_HEAD }],
  ];
  it.each(rows)('%s', (_name, make, reason, extra) => {
    const c = make();
    const { trusted, rejected } = readMarkers(c, { ...OPTIONS, ...extra });
    expect(trusted).toEqual([]);
    expect(rejected.map((r) => r.reason)).toEqual([reason]);
    expect(rejected[0]?.commentId).toBe(c.id);
    expect(rejected[0]?.detail).not.toMatch(/\n/);
  });

  it('a forged marker appended to a proofgate comment is rejected and the genuine one kept', () => {
    const forged = `${genuine.body}\n<!-- proofgate:marker v3 ${canonicalJson({ ...payload, verdict: 'HOLD' })} -->`;
    const { trusted, rejected } = readMarkers({ ...genuine, body: forged }, OPTIONS);
    expect(trusted.map((m) => m.fields)).toEqual([verdictFields()]);
    expect(rejected.map((r) => [r.reason, r.index])).toEqual([['bad-mac', 1]]);
  });
});

describe('createMarker: bad input', () => {
  const rows: [string, MarkerFields, string, string][] = [
    ['head not hex', verdictFields({ head: 'z'.repeat(40) }), SECRET, 'INVALID_INPUT'],
    ['head abbreviated', verdictFields({ head: 'abc1234' }), SECRET, 'INVALID_INPUT'],
    ['change id with spaces', verdictFields({ change: 'a b' }), SECRET, 'INVALID_INPUT'],
    ['change id closing the comment', verdictFields({ change: '-->' }), SECRET, 'INVALID_INPUT'],
    ['negative findings', verdictFields({ findings: -1 }), SECRET, 'INVALID_INPUT'],
    ['fractional findings', verdictFields({ findings: 1.5 }), SECRET, 'INVALID_INPUT'],
    ['review id with spaces', verdictFields({ review: 'a b' }), SECRET, 'INVALID_INPUT'],
    ['verdict time missing the zone', verdictFields({ at: '2024-05-01T10:00:00' }), SECRET, 'INVALID_INPUT'],
    ['verdict time not a date', verdictFields({ at: 'yesterday' }), SECRET, 'INVALID_INPUT'],
    ['bad intent', { kind: 'automerge-status', change: CHANGE, head: HEAD, intent: 'Auto Merge' }, SECRET, 'INVALID_INPUT'],
    ['short secret', verdictFields(), 'short', 'CONFIG'],
    ['empty secret bytes', verdictFields(), '', 'CONFIG'],
  ];
  it.each(rows)('%s', (_name, fields, secret, code) => {
    let caught: unknown;
    try {
      createMarker(fields, secret);
    } catch (error) {
      caught = error;
    }
    expect(isProofgateError(caught, code as 'INVALID_INPUT' | 'CONFIG')).toBe(true);
  });

  it('accepts a secret given as bytes', () => {
    const secret = new Uint8Array(32).fill(7);
    const c = comment(composeMarkedBody('x', [verdictFields()], secret));
    expect(readMarkers(c, { ...OPTIONS, secret }).trusted).toHaveLength(1);
  });
});

describe('collectVerdicts', () => {
  it('orders verdicts by their signed time and skips status markers and rejected ones', () => {
    const late = verdictComment({ verdict: 'REFUTED', findings: 1, review: 'rvw_late', at: '2024-05-02T00:00:00.000Z' });
    const early = verdictComment({ verdict: 'CONFIRMED', review: 'rvw_early', at: '2024-05-01T00:00:00.500Z' });
    const status = comment(composeMarkedBody('status', [{ kind: 'automerge-status', change: CHANGE, head: HEAD, intent: 'automerge' }], SECRET));
    const foreign = { ...verdictComment(), author: 'mallory' };
    const result = collectVerdicts([late, status, foreign, early], OPTIONS);
    expect(result.verdicts.map((v) => v.fields.verdict)).toEqual(['CONFIRMED', 'REFUTED']);
    expect(result.rejected.map((r) => r.reason)).toEqual(['not-self']);
  });
});

describe('collectVerdicts: replayed markers', () => {
  const T1 = '2024-05-01T10:00:00.000Z';
  const T2 = '2024-05-01T11:00:00.000Z';
  const T3 = '2024-05-01T12:00:00.000Z';
  const c1 = verdictComment({ verdict: 'CONFIRMED', review: 'rvw_1', at: T1 }, { id: 'c1', createdAt: T1, updatedAt: T1 });
  const c2 = verdictComment({ verdict: 'REFUTED', findings: 2, review: 'rvw_2', at: T2 }, { id: 'c2', createdAt: T2, updatedAt: T2 });

  it('a proofgate comment edited to an earlier verdict body does not override a later verdict', () => {
    // c3: proofgate's own status comment, created after c1, later edited to c1's exact body.
    const c3 = comment(c1.body, { id: 'c3', createdAt: '2024-05-01T10:30:00Z', updatedAt: T3 });
    const { verdicts, rejected } = collectVerdicts([c1, c2, c3], OPTIONS);
    expect(verdicts.map((v) => [v.commentId, v.fields.verdict])).toEqual([
      ['c1', 'CONFIRMED'],
      ['c2', 'REFUTED'],
    ]);
    expect(rejected.map((r) => [r.commentId, r.reason])).toEqual([['c3', 'replayed']]);
    expect(rejected[0]?.detail).toMatch(/review rvw_1 already counted from comment c1/);
  });

  it('the copy is rejected even when its comment is older, and order still follows the signed time', () => {
    // The status comment existed before the review comment and was edited to carry the verdict.
    const c0 = comment(c1.body, { id: 'c0', createdAt: '2024-05-01T09:00:00Z', updatedAt: T3 });
    const { verdicts, rejected } = collectVerdicts([c0, c1, c2], OPTIONS);
    expect(verdicts.map((v) => [v.commentId, v.fields.verdict])).toEqual([
      ['c0', 'CONFIRMED'],
      ['c2', 'REFUTED'],
    ]);
    expect(rejected.map((r) => [r.commentId, r.reason])).toEqual([['c1', 'replayed']]);
  });

  it('comment timestamps cannot reorder verdicts: a later edit of the older verdict comment changes nothing', () => {
    const touched = { ...c1, updatedAt: T3 };
    expect(collectVerdicts([touched, c2], OPTIONS).verdicts.map((v) => v.fields.verdict)).toEqual(['CONFIRMED', 'REFUTED']);
  });

  it('the same marker twice in one comment counts once', () => {
    const line = c1.body.slice(c1.body.indexOf('<!--')).trim();
    const doubled = comment(`${c1.body.trim()}\n${line}\n`, { id: 'c9' });
    const { verdicts, rejected } = collectVerdicts([doubled], OPTIONS);
    expect(verdicts).toHaveLength(1);
    expect(rejected.map((r) => [r.reason, r.index])).toEqual([['replayed', 1]]);
  });

  it('a second, differently signed verdict for a review id already seen is a replay', () => {
    const again = verdictComment({ verdict: 'CONFIRMED', review: 'rvw_2', at: T3 }, { id: 'c4', createdAt: T3, updatedAt: T3 });
    const { verdicts, rejected } = collectVerdicts([c2, again], OPTIONS);
    expect(verdicts.map((v) => v.commentId)).toEqual(['c2']);
    expect(rejected.map((r) => [r.commentId, r.reason])).toEqual([['c4', 'replayed']]);
  });
});

describe('readMarkers: hostile bodies', () => {
  // What keeps a hostile body cheap is that the scan looks only a bounded distance past each opener for its
  // `-->`: the work is then linear in the body's length. That bound is asserted as behaviour, not timed.
  it('looks only a bounded distance past an opener for its end: a "-->" far away closes no marker', () => {
    const near = `<!-- proofgate:marker v3 ${'x'.repeat(100)} -->`;
    expect(readMarkers(comment(`text\n${near}`), OPTIONS).rejected.map((r) => r.reason)).toEqual(['malformed']);
    // A real marker line is well under 1 KB; one whose end is 100 KB away is not a marker at all, and stays visible.
    const far = `<!-- proofgate:marker v3 ${'x'.repeat(100_000)} -->`;
    expect(readMarkers(comment(`text\n${far}`), OPTIONS)).toEqual({ trusted: [], rejected: [] });
    expect(visibleText(`text\n${far}`)).toBe(`text\n${far}`);
  });

  it('a body full of unclosed marker openers holds no marker; one closer at its end makes one malformed marker, not thousands', () => {
    const body = '<!-- proofgate:marker v1 '.repeat(2600);
    expect(readMarkers(comment(body), OPTIONS)).toEqual({ trusted: [], rejected: [] });
    const closed = readMarkers(comment(`${body}-->`), OPTIONS);
    expect(closed.trusted).toEqual([]);
    expect(closed.rejected.map((r) => r.reason)).toEqual(['malformed']);
  });
});
