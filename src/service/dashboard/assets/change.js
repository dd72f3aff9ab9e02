// A change's page: its stage, its timeline in order, the verdicts per head and what each was bound to.
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
    { class: `event kind-${item.kind}`, 'data-kind': item.kind },
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

export function renderChange(root, { change, timeline, heads }) {
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
      el('h2', {}, 'Timeline'),
      el('ol', { class: 'timeline' }, timeline.map(entry)),
      el('h2', {}, 'Heads'),
      heads.length === 0 ? el('p', { class: 'muted' }, 'no review or check yet') : heads.map(head),
    ),
  );
}
