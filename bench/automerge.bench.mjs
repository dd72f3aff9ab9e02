// decideAutomerge on a realistic snapshot (30 check runs, 20 comments of which 9
// carry signed verdict markers, a ledger with a stop, a restart, reviews and
// repairs). Baseline: JSON.stringify of the same snapshot, i.e. the cost of just
// serializing the input once; the ratio says how many stringify-equivalents one
// decision costs. A second line adds the marker verification (collectVerdicts
// over all 20 comments: HMAC-SHA256 + sha256 of each comment's text), which is
// what a router pays per wake-up.
import { collectVerdicts, composeMarkedBody, decideAutomerge, defaultAutomergePolicy, foldLedger, parseCommands } from '../dist/automerge/index.js';

const SECRET = 'bench-secret-0123456789abcdef';
const SELF = 'proofgate[bot]';
const HEAD = 'a'.repeat(40);
const hex = (i) => (i.toString(16).padStart(2, '0').repeat(20)).slice(0, 40);

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
      const fields = { kind: 'review-verdict', change: '42', head, verdict: i === 16 ? 'CONFIRMED' : 'REFUTED', findings: i === 16 ? 0 : 2, review: `rev_${i}`, at, ...BINDINGS, run: null };
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
    { type: 'repair-dispatched', id: 'p1', head: hex(15), repair: 'fix-findings', automatic: true, reason: 'REFUTED with 2 findings', at: '2024-05-01T09:15:00Z' },
    { type: 'repair-finished', id: 'p1', result: 'pushed', newHead: HEAD, commits: [HEAD], at: '2024-05-01T09:15:30Z' },
    cmd('c3', '/proofgate stop', '2024-05-01T09:15:40Z'),
    cmd('c5', '/proofgate automerge', '2024-05-01T09:15:50Z'),
    { type: 'review-dispatched', id: 'rev_16', head: HEAD, at: '2024-05-01T09:16:00Z' },
  ]);
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
    id: '42', number: 42, title: 'Add the thing', state: 'open', draft: false,
    base: { ref: 'main', sha: 'c'.repeat(40) }, head: { ref: 'feature', sha: HEAD },
    author: { login: 'contributor', permission: 'read' }, mergeable: 'MERGEABLE', mergeStateStatus: 'CLEAN',
    labels: ['proofgate:automerge'], checks: makeChecks(), comments: makeComments(), mergeCommitSha: null, url: null,
  };
  const ledger = makeLedger();
  const policy = defaultAutomergePolicy;
  const read = { selfLogin: SELF, secret: SECRET, changeId: '42' };
  const { verdicts } = collectVerdicts(snapshot.comments, read);
  const decision = decideAutomerge(snapshot, ledger, policy, verdicts, FACTS);
  if (decision.kind !== 'merge' || verdicts.length !== 9) throw new Error(`bench fixture is not the intended merge case: ${JSON.stringify(decision)}`);

  let sink = 0;
  const baseline = rate(() => { sink += JSON.stringify(snapshot).length; }, 800);
  const decide = rate(() => { sink += decideAutomerge(snapshot, ledger, policy, verdicts, FACTS).kind.length; }, 800);
  const full = rate(() => { sink += decideAutomerge(snapshot, ledger, policy, collectVerdicts(snapshot.comments, read).verdicts, FACTS).kind.length; }, 800);
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
}
