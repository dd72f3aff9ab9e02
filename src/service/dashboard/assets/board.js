/* global document */
// The board: changes by stage, filterable by repository.
import { el, fill, short, text, when } from './dom.js';

export const STAGES = [
  ['arriving', 'Arriving'],
  ['reviewing', 'Reviewing'],
  ['proving', 'Proving'],
  ['repairing', 'Repairing'],
  ['waiting', 'Waiting'],
  ['blocked', 'Blocked'],
  ['merged', 'Merged'],
  ['closed', 'Closed'],
];

function card(change) {
  const detail = change.stageDetail
    ? el(
        'p',
        { class: `detail detail-${change.stage}`, 'data-detail': '' },
        change.stage === 'blocked' ? 'Blocked: ' : change.stage === 'waiting' ? 'Waiting on: ' : '',
        text(change.stageDetail),
      )
    : null;
  return el(
    'li',
    { class: `card stage-${change.stage}`, 'data-change': change.id },
    el('a', { class: 'title', href: `#/change/${encodeURIComponent(change.id)}` }, el('span', { class: 'num' }, `#${change.number}`), ' ', text(change.title)),
    detail,
    el('p', { class: 'meta' }, text(change.head, 'branch'), ' → ', text(change.base, 'branch'), ' · ', el('code', {}, short(change.headSha))),
    el('p', { class: 'meta muted' }, change.repo, ' · ', when(change.updatedAt)),
  );
}

/** Render the board into `root`; `onRepo(repo)` is called when the filter changes. */
export function renderBoard(root, { changes, repos, repo }, onRepo) {
  const select = el('select', { id: 'repo-filter', 'aria-label': 'Repository' }, el('option', { value: '' }, 'All repositories'));
  for (const name of repos) select.append(el('option', { value: name, selected: name === repo }, name));
  select.addEventListener('change', () => onRepo(select.value));
  const byStage = new Map(STAGES.map(([stage]) => [stage, []]));
  for (const change of changes) (byStage.get(change.stage) ?? byStage.get('arriving')).push(change);
  const columns = el('div', { class: 'board' });
  for (const [stage, label] of STAGES) {
    const list = byStage.get(stage);
    const items = document.createDocumentFragment();
    for (const change of list) items.append(card(change));
    columns.append(
      el(
        'section',
        { class: `column column-${stage}`, 'data-stage': stage },
        el('h2', {}, label, ' ', el('span', { class: 'count' }, String(list.length))),
        list.length === 0 ? el('p', { class: 'muted empty' }, 'none') : el('ul', { class: 'cards' }, items),
      ),
    );
  }
  fill(
    root,
    el(
      'div',
      { class: 'toolbar' },
      el('label', { for: 'repo-filter' }, 'Repository '),
      select,
      el('span', { class: 'muted total' }, `${changes.length} changes`),
    ),
    columns,
  );
}
