/* global document, location, performance, addEventListener, URLSearchParams */
// The observer dashboard: hash routes (#/ board, #/change/ID, #/charts),
// each view polled every few seconds so it updates without a reload.
// Nothing here changes state: every request is a GET of the read API.
import { allChanges, changeTimeline, getJson, summary } from './api.js';
import { renderBoard } from './board.js';
import { renderChange } from './change.js';
import { renderCharts } from './charts.js';
import { el, fill } from './dom.js';

const POLL_MS = 3000;
const main = document.getElementById('main');
const status = document.getElementById('status');
let timer = null;
let generation = 0;
let lastText = '';

function route() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const change = /^\/change\/([^/?]+)$/.exec(hash);
  if (change) {
    // A link may carry a malformed escape: it names no change (404), and the page goes on working.
    let id = change[1];
    try {
      id = decodeURIComponent(id);
    } catch {
      // kept as written
    }
    return { view: 'change', id };
  }
  if (hash === '/charts') return { view: 'charts' };
  const query = new URLSearchParams(hash.includes('?') ? hash.slice(hash.indexOf('?') + 1) : '');
  return { view: 'board', repo: query.get('repo') ?? '' };
}

async function load(at) {
  switch (at.view) {
    case 'change':
      return changeTimeline(at.id);
    case 'charts':
      return summary();
    default: {
      const [changes, repos] = await Promise.all([allChanges(at.repo), getJson('/api/changes?limit=1').then((body) => body.repos ?? [])]);
      return { changes, repos, repo: at.repo };
    }
  }
}

function draw(at, data) {
  for (const link of document.querySelectorAll('[data-nav]')) link.classList.toggle('active', link.dataset.nav === at.view);
  if (at.view === 'change') renderChange(main, data);
  else if (at.view === 'charts') renderCharts(main, data);
  else renderBoard(main, data, (repo) => (location.hash = repo ? `#/?repo=${encodeURIComponent(repo)}` : '#/'));
  document.body.dataset.view = at.view;
  document.body.dataset.ready = 'true';
  // The first draw of this page load (read by bench/dashboard.bench.mjs: navigation to the board rendered).
  if (performance.getEntriesByName('proofgate:drawn').length === 0) performance.mark('proofgate:drawn');
}

async function tick(mine) {
  const at = route();
  try {
    const data = await load(at);
    if (mine !== generation) return;
    const text = JSON.stringify(data);
    // Charts update in place; other views are drawn again only when their data changed.
    if (text !== lastText || at.view === 'charts') draw(at, data);
    lastText = text;
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.classList.remove('error');
  } catch (error) {
    if (mine !== generation) return;
    status.textContent = `cannot read the API (${error.message}); retrying`;
    status.classList.add('error');
    if (error.status === 404 && at.view === 'change') fill(main, el('p', {}, 'No such change. '), el('a', { href: '#/' }, 'Back to the board'));
  }
  if (mine === generation) timer = setTimeout(() => tick(mine), POLL_MS);
}

function start() {
  generation += 1;
  lastText = '';
  clearTimeout(timer);
  document.body.dataset.ready = 'false';
  if (route().view !== 'charts') main.querySelector('.charts')?.remove();
  void tick(generation);
}

addEventListener('hashchange', start);
start();
