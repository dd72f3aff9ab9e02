// decideAutomerge on a realistic snapshot (30 check runs, 20 comments of which 9
// carry signed verdict markers, a ledger with a stop, a restart, reviews and
// repairs). Baseline: JSON.stringify of the same snapshot, i.e. the cost of just
// serializing the input once; the ratio says how many stringify-equivalents one
// decision costs. A second line adds the marker verification (collectVerdicts
// over all 20 comments: HMAC-SHA256 + sha256 of each comment's text), which is
// what a router pays per wake-up. A third line compares decideAutomerge with
// `previousDecide` below, the decision as it was before decisions carried a
// reason code, measured in the same run in alternating rounds (target: at
// least 0.9x its throughput).
import {
  automergeActive,
  collectVerdicts,
  composeMarkedBody,
  decideAutomerge,
  defaultAutomergePolicy,
  foldLedger,
  parseCommands,
  summarizeChecks,
} from '../dist/automerge/index.js';

const SECRET = 'bench-secret-0123456789abcdef';
const SELF = 'proofgate[bot]';
const HEAD = 'a'.repeat(40);
const hex = (i) => i.toString(16).padStart(2, '0').repeat(20).slice(0, 40);

function makeChecks() {
  const checks = [];
  const names = ['build', 'lint', 'typecheck', 'unit', 'e2e', 'docs', 'coverage', 'bundle-size', 'license', 'codeql', 'Labeler', 'Stale'];
  for (let i = 0; i < 30; i += 1) {
    const name = names[i % names.length];
    const attempt = Math.floor(i / names.length);
    const started = new Date(Date.UTC(2024, 4, 1, 10, attempt * 10 + (i % 7))).toISOString();
    checks.push({
      kind: i % 5 === 0 ? 'status' : 'check_run',
      name,
      workflow: i % 5 === 0 ? null : 'CI',
      status: 'completed',
      conclusion: attempt === 0 && name === 'unit' ? 'failure' : 'success',
      startedAt: started,
      completedAt: new Date(Date.parse(started) + 120_000).toISOString(),
      url: `https://ci.example.test/run/${i}`,
      headSha: HEAD,
    });
  }
  return checks;
}

/** The digests every verdict is bound to, equal to the live ones the loop would read. */
const BINDINGS = { diff: `sha256:${'1'.repeat(64)}`, contract: `sha256:${'2'.repeat(64)}`, config: `sha256:${'3'.repeat(64)}` };
const FACTS = { live: BINDINGS, records: {}, touchesTrusted: [], approval: null };

function makeComments() {
  const comments = [];
  for (let i = 0; i < 20; i += 1) {
    const at = new Date(Date.UTC(2024, 4, 1, 9, i)).toISOString();
    if (i % 2 === 0 && i < 18) {
      const head = i === 16 ? HEAD : hex(i + 1);
      const fields = {
        kind: 'review-verdict',
        change: '42',
        head,
        verdict: i === 16 ? 'CONFIRMED' : 'REFUTED',
        findings: i === 16 ? 0 : 2,
        review: `rev_${i}`,
        at,
        ...BINDINGS,
        run: null,
      };
      const text = `## proofgate review\n\nVerdict **${fields.verdict}** for \`${head}\`.\n\n${'- a finding with some explanation text\n'.repeat(6)}`;
      comments.push({ id: `c${i}`, author: SELF, authorType: 'Bot', body: composeMarkedBody(text, [fields], SECRET), createdAt: at, updatedAt: at });
    } else {
      const body = i === 1 ? '/proofgate automerge' : `Looks reasonable, one question about line ${i}.\n\n> quoted earlier text\n\n\`\`\`\ncode sample\n\`\`\``;
      comments.push({ id: `c${i}`, author: `user${i}`, authorType: 'User', body, createdAt: at, updatedAt: at });
    }
  }
  return comments;
}

function makeLedger() {
  const cmd = (id, body, at) => ({ type: 'commands', delivery: { comment: { id, author: 'maintainer', updatedAt: at }, commands: parseCommands(body) } });
  return foldLedger('42', [
    cmd('c1', '/proofgate automerge', '2024-05-01T09:01:00Z'),
    { type: 'review-dispatched', id: 'rev_14', head: hex(15), at: '2024-05-01T09:10:00Z' },
    { type: 'review-finished', id: 'rev_14', head: hex(15), verdict: 'REFUTED', at: '2024-05-01T09:14:00Z' },
    {
      type: 'repair-dispatched',
      id: 'p1',
      head: hex(15),
      repair: 'fix-findings',
      automatic: true,
      reason: 'REFUTED with 2 findings',
      at: '2024-05-01T09:15:00Z',
    },
    { type: 'repair-finished', id: 'p1', result: 'pushed', newHead: HEAD, commits: [HEAD], at: '2024-05-01T09:15:30Z' },
    cmd('c3', '/proofgate stop', '2024-05-01T09:15:40Z'),
    cmd('c5', '/proofgate automerge', '2024-05-01T09:15:50Z'),
    { type: 'review-dispatched', id: 'rev_16', head: HEAD, at: '2024-05-01T09:16:00Z' },
  ]);
}

// The decision before reason codes (prose only), kept here as the throughput reference.
const PREVIOUS_BOUND = [
  ['config', 'config'],
  ['contract', 'acceptance contract'],
  ['diff', 'diff'],
];
const short = (sha) => sha.slice(0, 12);
function previousStanding(verdict, facts) {
  const { review } = verdict.fields;
  const { live } = facts;
  if ('problem' in live) return { ok: false, cause: 'unverified', reason: `the bindings of review ${review} cannot be checked: ${live.problem}` };
  const changed = PREVIOUS_BOUND.filter(([field]) => verdict.fields[field] !== live[field]).map(([, name]) => name);
  if (changed.length > 0) return { ok: false, cause: 'changed', reason: `${changed.join(', ')} changed since review ${review}` };
  if (verdict.fields.run === null) return { ok: true };
  const record = facts.records[review];
  if (record === undefined) return { ok: false, cause: 'unverified', reason: `the stored record of review ${review} was not checked` };
  if (record.kind !== 'accepted') return { ok: false, cause: 'unverified', reason: `the stored record of review ${review} does not hold: ${record.reason}` };
  return { ok: true };
}
function previousVerdictFor(verdicts, changeId, head, facts) {
  const forHead = verdicts.filter((marker) => marker.fields.kind === 'review-verdict' && marker.fields.change === changeId && marker.fields.head === head);
  const stale = [];
  for (let i = forHead.length - 1; i >= 0; i -= 1) {
    const standing = previousStanding(forHead[i], facts);
    if (standing.ok) return { verdict: forHead[i], stale };
    stale.push({ review: forHead[i].fields.review, standing });
  }
  return { verdict: null, stale };
}
function previousRepairOrBlock(repair, reason, head, ledger, policy) {
  const automatic = ledger.repairs.filter((r) => r.automatic);
  const onHead = automatic.filter((r) => r.head === head).length;
  if (automatic.length >= policy.maxRepairsPerChange)
    return { kind: 'block', reason: `${reason}; repair cap reached: ${automatic.length} automatic repairs on this change (max ${policy.maxRepairsPerChange})` };
  if (onHead >= policy.maxRepairsPerHead)
    return { kind: 'block', reason: `${reason}; repair cap reached: ${onHead} automatic repairs from head ${short(head)} (max ${policy.maxRepairsPerHead})` };
  return { kind: 'repair', repair, head, reason };
}
function previousDecide(snapshot, ledger, policy, verdicts, facts) {
  const head = snapshot.head.sha;
  if (snapshot.state === 'merged')
    return { kind: 'stop', reason: `change is merged${snapshot.mergeCommitSha === null ? '' : ` (${short(snapshot.mergeCommitSha)})`}` };
  if (snapshot.state === 'closed') return { kind: 'stop', reason: 'change is closed' };
  if (ledger.merged !== null) return { kind: 'stop', reason: `already merged head ${short(ledger.merged.head)} as ${short(ledger.merged.mergeCommit)}` };
  if (ledger.automerge === null) return { kind: 'stop', reason: 'automerge was not requested' };
  if (!automergeActive(ledger) && ledger.stop !== null)
    return { kind: 'stop', reason: `stopped by ${ledger.stop.actor} (comment ${ledger.stop.commentId} at ${ledger.stop.at})` };
  if (snapshot.draft) return { kind: 'wait', reason: 'change is a draft' };
  const activeRepair = ledger.repairs.find((r) => r.status === 'dispatched' && r.head === head);
  if (activeRepair !== undefined) return { kind: 'wait', reason: `repair ${activeRepair.id} (${activeRepair.repair}) of head ${short(head)} in progress` };
  const { verdict, stale } = previousVerdictFor(verdicts, snapshot.id, head, facts);
  if (verdict?.fields.verdict === 'HOLD')
    return { kind: 'block', reason: `review of head ${short(head)} is HOLD: a human must review (comment ${verdict.commentId})` };
  if (snapshot.mergeable === 'CONFLICTING' || snapshot.mergeStateStatus === 'DIRTY') {
    return previousRepairOrBlock(
      'rebase',
      `head ${short(head)} conflicts with ${snapshot.base.ref} (${snapshot.mergeable}/${snapshot.mergeStateStatus})`,
      head,
      ledger,
      policy,
    );
  }
  if (snapshot.mergeStateStatus === 'BEHIND' && policy.requireUpToDate)
    return previousRepairOrBlock('rebase', `head ${short(head)} is behind ${snapshot.base.ref}, which must be up to date`, head, ledger, policy);
  const checks = summarizeChecks(
    snapshot.checks.filter((c) => c.headSha === head),
    policy.checks,
  );
  const failed = checks.terminalBlockers.filter((b) => b.repairable);
  if (failed.length > 0)
    return previousRepairOrBlock(
      'fix-checks',
      `failed checks on ${short(head)}: ${failed.map((b) => `${b.label} (${b.conclusion})`).join(', ')}`,
      head,
      ledger,
      policy,
    );
  const inFlight = ledger.reviews.find(
    (r) => r.head === head && r.status === 'dispatched' && !verdicts.some((v) => v.fields.review === r.id && v.fields.head === head),
  );
  if (inFlight !== undefined) return { kind: 'wait', reason: `review ${inFlight.id} of head ${short(head)} in progress; checks: ${checks.text}` };
  if (verdict === null) {
    const latestStale = stale[0];
    if (latestStale !== undefined && 'problem' in facts.live) return { kind: 'wait', reason: latestStale.standing.reason };
    const outdated = new Set(stale.filter((entry) => entry.standing.cause === 'changed').map((entry) => entry.review));
    const tried = ledger.reviews.filter((r) => r.head === head && !outdated.has(r.id)).length;
    if (tried >= policy.maxReviewsPerHead) {
      return {
        kind: 'block',
        reason: `${tried} reviews of head ${short(head)} ended without a verdict that holds (max ${policy.maxReviewsPerHead})${latestStale === undefined ? '' : `; last: ${latestStale.standing.reason}`}`,
      };
    }
    if (latestStale !== undefined) return { kind: 'review', head, reason: `head ${short(head)} needs a re-review: ${latestStale.standing.reason}` };
    const older = verdicts.filter((v) => v.fields.change === snapshot.id && v.fields.head !== head);
    const why = older.length > 0 ? `verdicts name older heads (${[...new Set(older.map((v) => short(v.fields.head)))].join(', ')})` : 'no verdict yet';
    return { kind: 'review', head, reason: `head ${short(head)} needs an exact-head review: ${why}` };
  }
  if (verdict.fields.verdict === 'REFUTED') {
    if (verdict.fields.findings > 0)
      return previousRepairOrBlock('fix-findings', `review of head ${short(head)} is REFUTED with ${verdict.fields.findings} finding(s)`, head, ledger, policy);
    return { kind: 'block', reason: `review of head ${short(head)} is REFUTED without actionable findings: a human must review` };
  }
  if (facts.touchesTrusted.length > 0 && facts.approval === null) {
    const shown = facts.touchesTrusted.slice(0, 5).join(', ');
    const paths = facts.touchesTrusted.length > 5 ? `${shown} and ${facts.touchesTrusted.length - 5} more` : shown;
    return { kind: 'wait', reason: `needs a maintainer's approval: touches ${paths} (a maintainer comments \`/proofgate approve\` for head ${short(head)})` };
  }
  const rerun = checks.terminalBlockers.filter((b) => !b.repairable);
  if (rerun.length > 0)
    return { kind: 'block', reason: `checks not green on ${short(head)} and need a re-run: ${rerun.map((b) => `${b.label} (${b.conclusion})`).join(', ')}` };
  if (checks.hasPending) return { kind: 'wait', reason: `checks pending on ${short(head)}: ${checks.text}` };
  const refused = ledger.mergeFailures.filter((f) => f.head === head);
  if (refused.length >= policy.maxMergeAttemptsPerHead)
    return { kind: 'block', reason: `merge of head ${short(head)} refused ${refused.length} times (last: ${refused[refused.length - 1]?.code ?? 'unknown'})` };
  const readyState =
    snapshot.mergeStateStatus === 'CLEAN' || snapshot.mergeStateStatus === 'HAS_HOOKS' || (snapshot.mergeStateStatus === 'BEHIND' && !policy.requireUpToDate);
  if (snapshot.mergeable !== 'MERGEABLE' || !readyState)
    return { kind: 'wait', reason: `mergeability not ready on ${short(head)}: ${snapshot.mergeable}/${snapshot.mergeStateStatus}` };
  const approved = facts.touchesTrusted.length > 0 && facts.approval !== null ? `, trust change approved by ${facts.approval.by}` : '';
  return {
    kind: 'merge',
    head,
    reason: `head ${short(head)} CONFIRMED (comment ${verdict.commentId}), checks green${approved}, ${snapshot.mergeable}/${snapshot.mergeStateStatus}`,
  };
}

function rate(fn, minMs) {
  for (let i = 0; i < 200; i += 1) fn();
  let runs = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < minMs) {
    for (let i = 0; i < 50; i += 1) fn();
    runs += 50;
    elapsed = Number(process.hrtime.bigint() - start) / 1e6;
  }
  return runs / (elapsed / 1000);
}

export default async function run(report) {
  const snapshot = {
    id: '42',
    number: 42,
    title: 'Add the thing',
    state: 'open',
    draft: false,
    base: { ref: 'main', sha: 'c'.repeat(40) },
    head: { ref: 'feature', sha: HEAD },
    author: { login: 'contributor', permission: 'read' },
    mergeable: 'MERGEABLE',
    mergeStateStatus: 'CLEAN',
    labels: ['proofgate:automerge'],
    checks: makeChecks(),
    comments: makeComments(),
    mergeCommitSha: null,
    url: null,
  };
  const ledger = makeLedger();
  const policy = defaultAutomergePolicy;
  const read = { selfLogin: SELF, secret: SECRET, changeId: '42' };
  const { verdicts } = collectVerdicts(snapshot.comments, read);
  const decision = decideAutomerge(snapshot, ledger, policy, verdicts, FACTS);
  if (decision.kind !== 'merge' || decision.code !== 'ready' || verdicts.length !== 9)
    throw new Error(`bench fixture is not the intended merge case: ${JSON.stringify(decision)}`);
  const previous = previousDecide(snapshot, ledger, policy, verdicts, FACTS);
  if (previous.kind !== decision.kind || previous.reason !== decision.reason) throw new Error(`the reference decision differs: ${JSON.stringify(previous)}`);

  let sink = 0;
  const baseline = rate(() => {
    sink += JSON.stringify(snapshot).length;
  }, 800);
  const decide = rate(() => {
    sink += decideAutomerge(snapshot, ledger, policy, verdicts, FACTS).kind.length;
  }, 800);
  const full = rate(() => {
    sink += decideAutomerge(snapshot, ledger, policy, collectVerdicts(snapshot.comments, read).verdicts, FACTS).kind.length;
  }, 800);
  // Alternating rounds of the current and the previous decision; the medians are compared.
  const current = [];
  const before = [];
  for (let round = 0; round < 7; round += 1) {
    current.push(
      rate(() => {
        sink += decideAutomerge(snapshot, ledger, policy, verdicts, FACTS).kind.length;
      }, 300),
    );
    before.push(
      rate(() => {
        sink += previousDecide(snapshot, ledger, policy, verdicts, FACTS).kind.length;
      }, 300),
    );
  }
  const median = (values) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)];
  if (sink === 0) throw new Error('unreachable');
  report({
    name: 'decideAutomerge (30 checks, 20 comments, verified markers given)',
    value: decide,
    unit: 'decisions/s',
    baseline,
    baselineUnit: 'JSON.stringify(snapshot)/s',
    ratio: decide / baseline,
    target: { min: 1 },
  });
  report({
    name: 'collectVerdicts + decideAutomerge (HMAC of 9 markers per decision)',
    value: full,
    unit: 'decisions/s',
    baseline,
    baselineUnit: 'JSON.stringify(snapshot)/s',
    ratio: full / baseline,
    note: 'informational: marker verification dominates',
  });
  report({
    name: 'decideAutomerge with reason codes vs the decision before them (same run, alternating rounds)',
    value: median(current),
    unit: 'decisions/s',
    baseline: median(before),
    baselineUnit: 'decisions/s before',
    ratio: median(current) / median(before),
    target: { min: 0.9 },
  });
}
