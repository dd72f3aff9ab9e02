// A change's page: its stage, its place in the merge queue, its timeline in order, the verdicts per head and what each was bound to.
import { el, fill, short, text, when } from './dom.js';

function bindings(binding) {
  if (!binding) return el('p', { class: 'muted' }, 'bindings not known (no signed verdict found)');
  return el(
    'dl',
    { class: 'bindings' },
    el('dt', {}, 'head'),
    el('dd', {}, el('code', {}, binding.head)),
    el('dt', {}, 'diff'),
    el('dd', {}, el('code', {}, binding.diff)),
    el('dt', {}, 'contract'),
    el('dd', {}, el('code', {}, binding.contract)),
    el('dt', {}, 'config'),
    el('dd', {}, el('code', {}, binding.config)),
  );
}

function entry(item) {
  return el(
    'li',
    { class: `event kind-${item.kind}`, 'data-kind': item.kind, 'data-queue-event': item.queueEvent },
    el('time', { datetime: item.at }, when(item.at)),
    el('span', { class: 'kind' }, item.kind),
    el(
      'span',
      { class: 'text' },
      item.actor ? el('strong', {}, text(item.actor), ': ') : null,
      text(item.text),
      item.head && !item.text.includes(short(item.head)) ? el('code', { class: 'sha' }, ` ${short(item.head)}`) : null,
      item.commit ? el('code', { class: 'sha' }, ` commit ${short(item.commit)}`) : null,
    ),
    item.kind === 'verdict' ? el('div', { class: 'bound' }, bindings(item.bindings)) : null,
  );
}

function head(record) {
  return el(
    'section',
    { class: 'head', 'data-head': record.head },
    el('h3', {}, 'Head ', el('code', {}, record.head)),
    record.verdicts.length === 0
      ? el('p', { class: 'muted' }, 'no review')
      : el(
          'ul',
          { class: 'verdicts' },
          record.verdicts.map((verdict) =>
            el(
              'li',
              {},
              el('strong', { class: `verdict v-${verdict.verdict ?? 'none'}` }, verdict.verdict ?? 'no verdict'),
              ' ',
              when(verdict.at),
              bindings(verdict.bindings),
            ),
          ),
        ),
    record.checks.length === 0
      ? null
      : el(
          'ul',
          { class: 'checks' },
          record.checks.map((check) =>
            el('li', {}, el('span', { class: `conclusion c-${check.conclusion ?? 'pending'}` }, check.conclusion ?? 'pending'), ' ', text(check.name)),
          ),
        ),
  );
}

/** Where the change stands in its base's merge queue (null: never queued there). */
function queueSection(queue) {
  if (!queue) return null;
  const place =
    queue.status === 'waiting'
      ? ['Position ', el('strong', { 'data-queue-position': '' }, `${queue.position} of ${queue.of}`), ' in the merge queue of ', text(queue.base, 'branch')]
      : ['Left the merge queue of ', text(queue.base, 'branch'), ': ', el('strong', { 'data-queue-status': '' }, queue.status)];
  const candidate = queue.candidate
    ? el(
        'p',
        { 'data-queue-candidate': queue.candidate.candidate },
        'In candidate ',
        el('code', {}, text(queue.candidate.candidate)),
        ` (${queue.candidate.index} of ${queue.candidate.size}), tip `,
        el('code', {}, short(queue.candidate.tip)),
        ' · checks ',
        el('span', { class: `conclusion c-${queue.candidate.checks}`, 'data-candidate-checks': '' }, queue.candidate.checks),
        queue.candidate.failure ? [': ', text(queue.candidate.failure.check ?? 'a check')] : null,
      )
    : null;
  return el(
    'section',
    { class: 'queue', 'data-queue': queue.status },
    el('h2', {}, 'Merge queue'),
    el('p', {}, ...place, queue.paused ? ' (the queue is paused)' : '', ' · head ', el('code', {}, short(queue.head))),
    candidate,
  );
}

export function renderChange(root, { change, timeline, heads, queue }) {
  const reason =
    change.stage === 'blocked'
      ? el('p', { class: 'why blocked', 'data-why': '' }, 'Blocked: ', text(change.stageDetail ?? 'no reason recorded'))
      : change.stageDetail
        ? el('p', { class: 'why' }, change.stage === 'waiting' ? 'Waiting on: ' : '', text(change.stageDetail))
        : null;
  fill(
    root,
    el('p', {}, el('a', { href: '#/' }, '← Board')),
    el(
      'article',
      { class: 'change', 'data-change-page': change.id },
      el('h1', {}, el('span', { class: 'num' }, `#${change.number}`), ' ', text(change.title)),
      el(
        'p',
        { class: 'meta' },
        el('span', { class: `badge stage-${change.stage}` }, change.stage),
        ' ',
        text(change.head, 'branch'),
        ' → ',
        text(change.base, 'branch'),
        ' · head ',
        el('code', {}, short(change.headSha)),
        ' · by ',
        text(change.author),
        change.mergeCommit ? el('span', {}, ' · merge commit ', el('code', { 'data-merge-commit': '' }, change.mergeCommit)) : null,
      ),
      reason,
      queueSection(queue),
      el('h2', {}, 'Timeline'),
      el('ol', { class: 'timeline' }, timeline.map(entry)),
      el('h2', {}, 'Heads'),
      heads.length === 0 ? el('p', { class: 'muted' }, 'no review or check yet') : heads.map(head),
    ),
  );
}
